package client_test

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"

	tclient "go.temporal.io/sdk/client"
	temporallog "go.temporal.io/sdk/log"

	"github.com/op-stack/executor/app"
	"github.com/op-stack/executor/config"
	"github.com/op-stack/executor/models"
	"github.com/op-stack/executor/store"
)

// baseURL is the API the examples call: an executor that TestMain runs in
// this process (API and worker, SQLite, the offline model, access control
// off, as `make run` does) on a Temporal dev server. Yours is where
// `make run` serves it, http://127.0.0.1:8080, or EXECUTOR_URL.
var baseURL string

// TestMain starts the executor the examples run against when they are to
// run. With -short (`make test-short`, no Temporal dev server) only the
// tests run.
func TestMain(m *testing.M) {
	flag.Parse()
	run := flag.Lookup("test.run").Value.String()
	if testing.Short() {
		if run == "" {
			fmt.Println("client: examples skipped in -short mode (they need a Temporal dev server)")
			flag.Set("test.run", "^Test")
		}
		os.Exit(m.Run())
	}
	if run != "" && !strings.Contains(run, "Example") {
		os.Exit(m.Run())
	}
	stop, err := startExecutor()
	if err != nil {
		fmt.Fprintln(os.Stderr, "client examples:", err)
		os.Exit(1)
	}
	code := m.Run()
	stop()
	os.Exit(code)
}

// startExecutor runs a Temporal dev server from the temporal CLI at
// TEMPORAL_CLI (default ../bin/temporal, which `make temporal-cli` builds)
// and the executor's API and worker on it, and sets baseURL.
func startExecutor() (stop func(), err error) {
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	cli := os.Getenv("TEMPORAL_CLI")
	if cli == "" {
		cli = "../bin/temporal"
	}
	if cli, err = filepath.Abs(cli); err != nil {
		return nil, err
	}
	if _, err := os.Stat(cli); err != nil {
		return nil, fmt.Errorf("temporal CLI not found at %s (run `make temporal-cli`, or go test -short): %w", cli, err)
	}
	dir, err := os.MkdirTemp("", "client-examples-")
	if err != nil {
		return nil, err
	}
	var stops []func()
	stop = func() {
		for i := len(stops) - 1; i >= 0; i-- {
			stops[i]()
		}
		os.RemoveAll(dir)
	}
	defer func() {
		if err != nil {
			stop()
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	dev, err := testsuite.StartDevServer(ctx, testsuite.DevServerOptions{
		ExistingPath:  cli,
		ClientOptions: &tclient.Options{Logger: temporallog.NewStructuredLogger(quiet)},
		LogLevel:      "error",
		SearchAttributes: temporal.NewSearchAttributes(
			models.SearchHierarchyID.ValueSet(""), models.SearchRunStatus.ValueSet(""), models.SearchHierarchyName.ValueSet(""),
			models.SearchTenantID.ValueSet(""), models.SearchTotalTokens.ValueSet(0), models.SearchCostUSD.ValueSet(0), models.SearchForkedFrom.ValueSet(""),
		),
		Stdout: io.Discard,
		Stderr: io.Discard,
	})
	if err != nil {
		return nil, fmt.Errorf("start the Temporal dev server: %w", err)
	}
	stops = append(stops, func() { dev.Stop() })

	cfg, err := config.Load()
	if err != nil {
		return nil, err
	}
	cfg.TemporalAddress = dev.FrontendHostPort()
	cfg.TaskQueue = "client-examples"
	cfg.DataDir = dir
	cfg.DatabaseURL = ""
	// The offline model answers every agent, whatever the environment
	// holds: the examples' output is the same everywhere.
	cfg.OpenAIAPIKey, cfg.OpenRouterAPIKey, cfg.CompatibleBaseURL, cfg.LLMModels, cfg.LLMDefaultProvider = "", "", "", "", ""
	cfg.OfflineTokenDelay = 0
	cfg.AuthMode, cfg.HTTPAddr, cfg.LLMOfflineFallback = "", "", ""
	cfg.ResolveCommandDefaults(true)

	st, err := store.Open("", cfg.SQLitePath())
	if err != nil {
		return nil, err
	}
	stops = append(stops, func() { st.Close() })
	if _, err := st.Migrate(context.Background(), nil); err != nil {
		return nil, err
	}
	tc, err := tclient.Dial(tclient.Options{HostPort: cfg.TemporalAddress, Logger: temporallog.NewStructuredLogger(quiet)})
	if err != nil {
		return nil, err
	}
	stops = append(stops, tc.Close)
	notes, err := app.NewNotifications(context.Background(), cfg, quiet, st, true, true)
	if err != nil {
		return nil, err
	}
	stops = append(stops, notes.Close)
	router, err := app.NewLLM(cfg)
	if err != nil {
		return nil, err
	}
	w := app.NewWorker(cfg, quiet, st, tc, router, app.WithNotifications(notes))
	if err := w.Start(); err != nil {
		return nil, err
	}
	stops = append(stops, w.Stop)
	api := app.NewAPI(cfg, quiet, st, tc, router, app.WithNotifications(notes))
	srv := httptest.NewServer(api.Handler())
	stops = append(stops, srv.Close)
	baseURL = srv.URL
	return stop, nil
}
