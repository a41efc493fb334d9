package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"go.temporal.io/sdk/client"
	temporallog "go.temporal.io/sdk/log"
	"go.temporal.io/sdk/testsuite"

	"github.com/op-stack/executor/api"
	"github.com/op-stack/executor/app"
	"github.com/op-stack/executor/config"
	"github.com/op-stack/executor/store"
)

// role selects which parts of the service a process runs.
type role struct{ api, worker bool }

func parseRole(s string) (role, error) {
	switch s {
	case "all":
		return role{api: true, worker: true}, nil
	case "api":
		return role{api: true}, nil
	case "worker":
		return role{worker: true}, nil
	}
	return role{}, fmt.Errorf("-role: want all, api or worker, got %q", s)
}

func openStore(ctx context.Context, cfg config.Config, log *slog.Logger) (*store.Store, error) {
	st, err := store.Open(cfg.DatabaseURL, cfg.SQLitePath())
	if err != nil {
		return nil, err
	}
	if _, err := st.Migrate(ctx, log); err != nil {
		st.Close()
		return nil, err
	}
	where := "sqlite " + cfg.SQLitePath()
	if cfg.DatabaseURL != "" {
		where = "postgres"
	}
	log.Info("database ready", "database", where)
	return st, nil
}

func migrate(ctx context.Context, cfg config.Config, log *slog.Logger) error {
	st, err := store.Open(cfg.DatabaseURL, cfg.SQLitePath())
	if err != nil {
		return err
	}
	defer st.Close()
	applied, err := st.Migrate(ctx, log)
	if err != nil {
		return err
	}
	log.Info("migrations done", "applied", len(applied))
	return nil
}

func dialTemporal(ctx context.Context, cfg config.Config, log *slog.Logger) (client.Client, error) {
	c, err := client.DialContext(ctx, client.Options{
		HostPort:  cfg.TemporalAddress,
		Namespace: cfg.TemporalNamespace,
		Logger:    temporallog.NewStructuredLogger(log.With("component", "temporal")),
	})
	if err != nil {
		return nil, fmt.Errorf("connect to Temporal at %s: %w", cfg.TemporalAddress, err)
	}
	return c, nil
}

// serve runs the selected roles until ctx is cancelled, then shuts down
// gracefully within cfg.ShutdownTimeout.
func serve(ctx context.Context, cfg config.Config, log *slog.Logger, r role) error {
	st, err := openStore(ctx, cfg, log)
	if err != nil {
		return err
	}
	defer st.Close()
	tc, err := dialTemporal(ctx, cfg, log)
	if err != nil {
		return err
	}
	defer tc.Close()

	errc := make(chan error, 2)
	router, err := app.NewLLM(cfg)
	if err != nil {
		return err
	}
	log.Info("LLM providers", "routing", router.Describe())
	if r.worker {
		w := app.NewWorker(cfg, log, st, tc, router)
		if err := w.Start(); err != nil {
			return fmt.Errorf("start Temporal worker: %w", err)
		}
		// Stop returns once running activities have finished or
		// SHUTDOWN_TIMEOUT passed; unfinished ones are retried elsewhere.
		defer w.Stop()
		log.Info("Temporal worker started", "task_queue", cfg.TaskQueue, "namespace", cfg.TemporalNamespace)
	}
	var (
		httpServer *http.Server
		apiServer  *api.Server
	)
	if r.api {
		srv := app.NewAPI(cfg, log, st, tc, router)
		apiServer = srv
		ln, err := net.Listen("tcp", cfg.HTTPAddr)
		if err != nil {
			return fmt.Errorf("listen on %s: %w", cfg.HTTPAddr, err)
		}
		// No WriteTimeout: event streams stay open for the length of a run.
		httpServer = &http.Server{Handler: srv.Handler(), ReadHeaderTimeout: 10 * time.Second}
		log.Info("HTTP API listening", "addr", ln.Addr().String())
		go func() { errc <- httpServer.Serve(ln) }()
	}

	select {
	case <-ctx.Done():
		log.Info("shutting down")
	case err := <-errc:
		if !errors.Is(err, http.ErrServerClosed) {
			return err
		}
	}
	shutdownCtx, cancel := context.WithTimeout(context.Background(), cfg.ShutdownTimeout)
	defer cancel()
	if httpServer != nil {
		// Open event streams end with a reconnect hint; their clients
		// resume with Last-Event-ID, on this replica's successor or another.
		apiServer.CloseStreams()
		if err := httpServer.Shutdown(shutdownCtx); err != nil {
			log.Warn("HTTP shutdown", "error", err)
		}
	}
	return nil
}

// dev runs the whole service on embedded defaults: when TEMPORAL_ADDRESS is
// unset it starts the Temporal dev server (with its Web UI) from the pinned
// temporal CLI and stops it on exit.
func dev(ctx context.Context, cfg config.Config, log *slog.Logger) error {
	if cfg.TemporalAddress == "" {
		ds, err := startDevServer(ctx, cfg, log)
		if err != nil {
			return err
		}
		defer func() {
			log.Info("stopping Temporal dev server")
			if err := ds.Stop(); err != nil {
				log.Warn("dev server stop", "error", err)
			}
		}()
		cfg.TemporalAddress = ds.FrontendHostPort()
	}
	return serve(ctx, cfg, log, role{api: true, worker: true})
}

func startDevServer(ctx context.Context, cfg config.Config, log *slog.Logger) (*testsuite.DevServer, error) {
	dbFile := filepath.Join(cfg.DataDir, "temporal.db")
	if err := mkdirAll(cfg.DataDir); err != nil {
		return nil, err
	}
	hostPort := net.JoinHostPort("127.0.0.1", strconv.Itoa(cfg.DevServerPort))
	log.Info("starting Temporal dev server", "cli", cfg.TemporalCLI, "address", hostPort, "db", dbFile)
	var extra []string
	if cfg.DevServerTuned {
		extra = devServerTuning
	}
	startCtx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	ds, err := testsuite.StartDevServer(startCtx, testsuite.DevServerOptions{
		ExistingPath: cfg.TemporalCLI,
		ClientOptions: &client.Options{
			HostPort:  hostPort,
			Namespace: cfg.TemporalNamespace,
			Logger:    temporallog.NewStructuredLogger(log.With("component", "devserver")),
		},
		DBFilename: dbFile,
		EnableUI:   true,
		UIPort:     strconv.Itoa(cfg.DevServerUIPort),
		LogLevel:   "warn",
		ExtraArgs:  extra,
	})
	if err != nil {
		return nil, fmt.Errorf("start Temporal dev server with %s (run `make run`, which builds it): %w", cfg.TemporalCLI, err)
	}
	ds.Client().Close()
	log.Info("Temporal dev server ready", "address", hostPort, "web_ui", fmt.Sprintf("http://localhost:%d", cfg.DevServerUIPort))
	return ds, nil
}

// devServerTuning removes the dev server's ~100 ms per activity: its single
// history shard rate-limits transfer-queue reads to 20/s by default (see
// ../shared/notes and the README's "Latency" section). These are dev-server
// settings; production clusters have many shards and keep their defaults.
var devServerTuning = []string{
	"--sqlite-pragma", "journal_mode=wal",
	"--sqlite-pragma", "synchronous=normal",
	"--dynamic-config-value", "history.transferProcessorMaxPollRPS=1000",
	"--dynamic-config-value", "matching.numTaskqueueReadPartitions=1",
	"--dynamic-config-value", "matching.numTaskqueueWritePartitions=1",
	"--dynamic-config-value", "system.enableActivityEagerExecution=true",
}

func mkdirAll(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("create %s: %w", dir, err)
	}
	return nil
}
