package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/operatorservice/v1"
	"go.temporal.io/sdk/client"
	temporallog "go.temporal.io/sdk/log"
	sdkworker "go.temporal.io/sdk/worker"

	"github.com/op-stack/executor/api"
	"github.com/op-stack/executor/app"
	"github.com/op-stack/executor/config"
	"github.com/op-stack/executor/llm"
	"github.com/op-stack/executor/models"
	"github.com/op-stack/executor/store"
	"github.com/op-stack/executor/telemetry"
)

// role selects which parts of the service a process runs.
// role is what a process runs; dev marks `executor dev`.
type role struct{ api, worker, dev bool }

func parseRole(s string) (role, error) {
	switch s {
	case "all":
		return role{api: true, worker: true}, nil
	case "api":
		return role{api: true}, nil
	case "worker":
		return role{worker: true}, nil
	}
	return role{}, fmt.Errorf("--role: want all, api or worker, got %q", s)
}

// dbPool is the connection pool DB_MAX_OPEN_CONNS, DB_MAX_IDLE_CONNS and
// DB_CONN_MAX_LIFETIME ask for.
func dbPool(cfg config.Config) store.Option {
	return store.WithPool(store.Pool{MaxOpen: cfg.DBMaxOpenConns, MaxIdle: cfg.DBMaxIdleConns, MaxLifetime: cfg.DBConnMaxLifetime})
}

func openStore(ctx context.Context, cfg config.Config, log *slog.Logger) (*store.Store, error) {
	st, err := store.Open(cfg.DatabaseURL, cfg.SQLitePath(), dbPool(cfg))
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
	log.Info("database ready", "database", where, "max_open_conns", cfg.DBMaxOpenConns)
	return st, nil
}

func migrate(ctx context.Context, cfg config.Config, log *slog.Logger) error {
	st, err := store.Open(cfg.DatabaseURL, cfg.SQLitePath(), dbPool(cfg))
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

func dialTemporal(ctx context.Context, cfg config.Config, log *slog.Logger, tel *telemetry.Telemetry) (client.Client, error) {
	opts := client.Options{
		HostPort:  cfg.TemporalAddress,
		Namespace: cfg.TemporalNamespace,
		Logger:    temporallog.NewStructuredLogger(slog.New(sdkLogHandler{log.Handler()}).With("component", "temporal")),
		// TEMPORAL_GRPC_COMPRESSION: none on loopback by default.
		ConnectionOptions: client.ConnectionOptions{GrpcCompression: app.TemporalCompression(cfg)},
	}
	// The SDK's metrics (temporal_*) go to the same registry as the
	// service's; with tracing on, the SDK's tracing interceptor traces the
	// client's calls and, through the client, the worker's workflows and
	// activities.
	tel.ClientOptions(&opts)
	c, err := client.DialContext(ctx, opts)
	if err != nil {
		return nil, fmt.Errorf("connect to Temporal at %s: %w", cfg.TemporalAddress, err)
	}
	return c, nil
}

// metricsPlacement decides where /metrics is served (see METRICS_ADDR):
// on the API's address (onAPI), on a listener of its own at listen, or
// nowhere. required says the listener was asked for, so failing to open
// it is an error; the worker's default address only warns, since several
// worker processes may share a host.
func metricsPlacement(addr string, r role) (listen string, onAPI, required bool) {
	switch addr {
	case config.MetricsOff:
		return "", false, false
	case "":
		if r.api {
			return "", true, false
		}
		return config.DefaultWorkerMetricsAddr, false, false
	}
	return addr, false, true
}

// checkMetricsTenantLabel refuses METRICS_TENANT_LABEL=true where /metrics
// is served on the API's address: that address is reachable by every
// client and /metrics needs no key, so per-tenant series would tell any
// caller the other tenants' names and spend. A listener of its own
// (METRICS_ADDR, or a worker's default) is the operator's to protect.
func checkMetricsTenantLabel(cfg config.Config, r role) error {
	if !cfg.MetricsTenantLabel {
		return nil
	}
	if _, onAPI, _ := metricsPlacement(cfg.MetricsAddr, r); onAPI {
		return errors.New("METRICS_TENANT_LABEL=true needs /metrics off the API's address: set METRICS_ADDR to an operator-only host:port (or off)")
	}
	return nil
}

// serve runs the selected roles until ctx is cancelled, then shuts down
// gracefully within cfg.ShutdownTimeout (see shutdown).
func serve(ctx context.Context, cfg config.Config, log *slog.Logger, r role) error {
	if err := checkMetricsTenantLabel(cfg, r); err != nil {
		return err
	}
	tel, err := telemetry.Setup(ctx, telemetry.Options{Log: log, Metrics: telemetry.MetricsOptions{TenantLabel: cfg.MetricsTenantLabel}})
	if err != nil {
		return fmt.Errorf("telemetry: %w", err)
	}
	if tel.TracerProvider != nil {
		log.Info("tracing on", "exporters", tel.Exporters)
	}
	// Buffered spans are flushed last, after the connections are closed,
	// by the end of the shutdown budget once shutdown has begun, or within
	// the flush reserve after a failed start.
	var stop stopping
	defer func() {
		flushBy := stop.deadline
		if flushBy.IsZero() {
			flushBy = time.Now().Add(cfg.ShutdownTimeout - app.DrainTimeout(cfg.ShutdownTimeout))
		}
		fctx, cancel := context.WithDeadline(context.Background(), flushBy)
		defer cancel()
		if err := tel.Shutdown(fctx); err != nil {
			log.Warn("telemetry shutdown", "error", err)
		}
		if !stop.start.IsZero() {
			log.Info("shutdown complete", "took", time.Since(stop.start).Round(time.Millisecond))
		}
	}()

	st, err := openStore(ctx, cfg, log)
	if err != nil {
		return err
	}
	defer st.Close()
	tc, err := dialTemporal(ctx, cfg, log, tel)
	if err != nil {
		return err
	}
	defer tc.Close()

	metricsListen, metricsOnAPI, metricsRequired := metricsPlacement(cfg.MetricsAddr, r)
	var apiMetrics http.Handler
	if metricsOnAPI {
		apiMetrics = tel.MetricsHandler()
	}
	// Before the worker starts, so that its activities' first events are
	// announced; closed after the API has stopped (defers run in reverse).
	notes, err := app.NewNotifications(ctx, cfg, log, st, r.worker, r.api)
	if err != nil {
		return fmt.Errorf("SSE_NOTIFY: %w", err)
	}
	defer notes.Close()
	log.Info("event notifications", "mode", notes.Mode())
	opts := []app.Option{app.WithMetrics(tel.Metrics, apiMetrics), app.WithTracing(tel.Tracing()), app.WithNotifications(notes)}

	errc := make(chan error, 3)
	var parts running
	router, err := app.NewLLM(cfg)
	if err != nil {
		return err
	}
	log.Info("LLM providers", "routing", router.Describe())
	switch router.DefaultProvider() {
	case "":
		// Runs are refused at start rather than answered with stand-in
		// text; say so once, where an operator looks first.
		log.Warn("no LLM provider is configured: runs whose models need one are refused with MISSING_API_KEY; " + llm.NoProviderHint)
	case llm.OfflineProvider:
		log.Info("models without a provider are answered by the built-in offline model (placeholder text; results say offline)")
	}
	if r.worker {
		// Only the processes that call models check their keys.
		if err := app.CheckKeysAtStart(ctx, cfg, router, log); err != nil {
			return err
		}
	}
	// Key files are reread every LLM_KEY_FILE_POLL and on SIGHUP, which
	// no longer ends the process.
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	go app.WatchKeys(ctx, cfg, router, hup, log)
	if metricsListen != "" {
		ready := api.Readiness{Database: api.HealthCheckFunc(st.Ping), Temporal: api.TemporalHealth(tc), Info: app.CircuitInfo(router.Breaker())}
		srv, addr, err := listenAndServe(metricsListen, api.OpsHandler(tel.MetricsHandler(), ready), errc)
		switch {
		case err != nil && metricsRequired:
			return fmt.Errorf("METRICS_ADDR: %w", err)
		case err != nil:
			log.Warn("metrics not served: the default address is taken (set METRICS_ADDR, or off)", "error", err)
		default:
			parts.ops = srv
			log.Info("metrics listening", "addr", addr, "paths", "/metrics /healthz /readyz")
		}
	}
	if r.worker {
		w := app.NewWorker(cfg, log, st, tc, router, opts...)
		if err := w.Start(); err != nil {
			stop = shutdown(log, cfg.ShutdownTimeout, parts)
			return fmt.Errorf("start Temporal worker: %w", err)
		}
		parts.worker = w
		log.Info("Temporal worker started", "task_queue", cfg.TaskQueue, "namespace", cfg.TemporalNamespace)
		// Finished runs past their retention period are deleted
		// (RUN_RETENTION); off by default.
		go app.SweepRetention(ctx, cfg, log, st, tc)
		// Queued runs are admitted at every run's end; this sweep is the
		// safety net (docs/queue.md).
		go app.SweepQueue(ctx, cfg, log, st, tc)
	}
	if r.api {
		tokens, err := app.NewTokenVerifier(ctx, cfg)
		if err != nil {
			stop = shutdown(log, cfg.ShutdownTimeout, parts)
			return err
		}
		if tokens != nil {
			opts = append(opts, app.WithTokens(tokens))
		}
		srv := app.NewAPI(cfg, log, st, tc, router, opts...)
		// No WriteTimeout: event streams stay open for the length of a run.
		httpServer, addr, err := listenAndServe(cfg.HTTPAddr, srv.Handler(), errc)
		if err != nil {
			stop = shutdown(log, cfg.ShutdownTimeout, parts)
			return fmt.Errorf("HTTP_ADDR: %w", err)
		}
		parts.api, parts.http = srv, httpServer
		log.Info("HTTP API listening", "addr", addr, "metrics", metricsOnAPI, "auth_mode", cfg.AuthMode, "oidc", tokens != nil)
		logAccess(log, cfg, addr, r.dev)
		// Runs whose workflows ended without them (terminated, timed out)
		// are marked failed even when nobody reads them.
		go srv.ReconcileEvery(ctx, cfg.ReconcileInterval)
	}

	var runErr error
	select {
	case <-ctx.Done():
		log.Info("shutting down", "timeout", cfg.ShutdownTimeout)
	case err := <-errc:
		runErr = err
		log.Error("server failed; shutting down", "error", err, "timeout", cfg.ShutdownTimeout)
	}
	stop = shutdown(log, cfg.ShutdownTimeout, parts)
	return runErr
}

// listenAndServe serves h on addr in the background; errors of Serve other
// than a shutdown go to errc.
func listenAndServe(addr string, h http.Handler, errc chan<- error) (*http.Server, string, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, "", fmt.Errorf("listen on %s: %w", addr, err)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
			errc <- err
		}
	}()
	return srv, ln.Addr().String(), nil
}

// running are the parts of the process that shutdown stops; nil ones do
// not run.
type running struct {
	api    *api.Server
	http   *http.Server
	worker sdkworker.Worker
	ops    *http.Server
}

// stopping is when shutdown began and by when it must end.
type stopping struct{ start, deadline time.Time }

// shutdown stops the running parts within budget (SHUTDOWN_TIMEOUT) and
// returns the deadline left for flushing telemetry. The HTTP API and the
// worker drain at once, for app.DrainTimeout(budget): open event streams
// end with a reconnect hint (their clients resume with Last-Event-ID on
// another replica), in-flight requests finish, and running activities
// finish or are abandoned, to be retried on another worker. Whatever has
// not stopped by then is left behind, so that the rest of the budget is
// there to stop the metrics listener and flush the buffered spans.
func shutdown(log *slog.Logger, budget time.Duration, p running) stopping {
	start := time.Now()
	flushBy := start.Add(budget)
	drainCtx, cancel := context.WithTimeout(context.Background(), app.DrainTimeout(budget))
	defer cancel()
	var wg sync.WaitGroup
	if p.http != nil {
		wg.Go(func() {
			p.api.CloseStreams()
			if err := p.http.Shutdown(drainCtx); err != nil {
				// Cut the connections still open at the deadline.
				p.http.Close()
				log.Warn("HTTP API stopped before its requests finished", "error", err)
				return
			}
			log.Info("HTTP API stopped")
		})
	}
	if p.worker != nil {
		wg.Go(func() {
			// Stop waits for running activities up to the worker's stop
			// timeout, which app.NewWorker sets to the same drain time.
			p.worker.Stop()
			log.Info("Temporal worker stopped")
		})
	}
	drained := make(chan struct{})
	go func() { wg.Wait(); close(drained) }()
	select {
	case <-drained:
	case <-drainCtx.Done():
		log.Warn("shutdown: not everything stopped in time; going on", "waited", time.Since(start))
	}
	if p.ops != nil {
		octx, cancel := context.WithDeadline(context.Background(), flushBy)
		if err := p.ops.Shutdown(octx); err != nil {
			p.ops.Close()
		}
		cancel()
	}
	return stopping{start: start, deadline: flushBy}
}

// dev runs the whole service on embedded defaults: when TEMPORAL_ADDRESS is
// unset it starts the Temporal dev server (with its Web UI) from the pinned
// temporal CLI and stops it on exit. Its ports (TEMPORAL_DEV_PORT,
// TEMPORAL_UI_PORT, and HTTP_ADDR) must be free: it exits with an error
// naming the port otherwise, and never uses a server it did not start
// unless TEMPORAL_ADDRESS names it.
func dev(ctx context.Context, cfg config.Config, log *slog.Logger) error {
	if cfg.TemporalAddress == "" {
		// Fail at once, naming the port, rather than start a dev server
		// that cannot bind or end up using whatever listens there.
		if err := checkPortsFree(devPorts(cfg)); err != nil {
			return err
		}
		var (
			ds  *devServer
			err error
		)
		withoutEnv("OTEL_", func() { ds, err = startDevServer(ctx, cfg, log) })
		if err != nil {
			return err
		}
		// From the moment shutdown begins the server's output is noise.
		go func() {
			<-ctx.Done()
			ds.Mute()
		}()
		defer func() {
			ds.Mute()
			log.Info("stopping Temporal dev server")
			if err := ds.Stop(); err != nil {
				log.Warn("dev server stop", "error", err)
			}
		}()
		cfg.TemporalAddress = ds.FrontendHostPort()
	}
	return serve(ctx, cfg, log, role{api: true, worker: true, dev: true})
}

// logAccess says at start when access control is off: for `executor dev`
// on this machine only, as information; otherwise as a warning.
func logAccess(log *slog.Logger, cfg config.Config, addr string, dev bool) {
	if cfg.AuthMode != config.AuthOff {
		return
	}
	host, _, _ := net.SplitHostPort(addr)
	if ip := net.ParseIP(host); dev && ip != nil && ip.IsLoopback() {
		log.Info("access control is off (AUTH_MODE=off): every request acts as the default tenant with every scope; the API listens on this machine only", "addr", addr)
		return
	}
	log.Warn("access control is off (AUTH_MODE=off): anyone who reaches the API can read every run and spend the model keys; set AUTH_MODE=required and create keys with `executor apikeys create`", "addr", addr)
}

// withoutEnv runs f with the environment variables named prefix… unset,
// and sets them again afterwards. The dev server is a Temporal server,
// which reads the OTEL_* variables too: it would send its own spans as
// this service's, and it refuses OTEL_TRACES_EXPORTER=console outright.
// Its process inherits the environment when it starts, within f; the
// service reads the variables after that (telemetry.Setup in serve).
func withoutEnv(prefix string, f func()) {
	saved := map[string]string{}
	for _, kv := range os.Environ() {
		if k, v, _ := strings.Cut(kv, "="); strings.HasPrefix(k, prefix) {
			saved[k] = v
			os.Unsetenv(k)
		}
	}
	defer func() {
		for k, v := range saved {
			os.Setenv(k, v)
		}
	}()
	f()
}

// devServerTuning removes the dev server's ~100 ms per activity: its single
// history shard rate-limits transfer-queue reads to 20/s by default (see
// ../shared/notes and docs/performance.md). These are dev-server
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

// addSearchAttributes registers the runs' custom search attributes that the
// namespace lacks.
func addSearchAttributes(ctx context.Context, c client.Client, namespace string) error {
	resp, err := c.OperatorService().ListSearchAttributes(ctx, &operatorservice.ListSearchAttributesRequest{Namespace: namespace})
	if err != nil {
		return err
	}
	missing := map[string]enumspb.IndexedValueType{}
	for name, typ := range models.SearchAttributeTypes() {
		if _, ok := resp.GetCustomAttributes()[name]; ok {
			continue
		}
		t := enumspb.INDEXED_VALUE_TYPE_KEYWORD
		switch typ {
		case "Text":
			t = enumspb.INDEXED_VALUE_TYPE_TEXT
		case "Int":
			t = enumspb.INDEXED_VALUE_TYPE_INT
		case "Double":
			t = enumspb.INDEXED_VALUE_TYPE_DOUBLE
		}
		missing[name] = t
	}
	if len(missing) == 0 {
		return nil
	}
	_, err = c.OperatorService().AddSearchAttributes(ctx, &operatorservice.AddSearchAttributesRequest{Namespace: namespace, SearchAttributes: missing})
	return err
}
