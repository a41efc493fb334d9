// Package e2e tests the service end to end: the real HTTP API and Temporal
// worker (wired by package app, as the binary wires them) against a
// Temporal dev server, a real database and the fake OpenAI-compatible
// server over HTTP, so go-openai's real client code runs.
package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.temporal.io/sdk/client"
	temporallog "go.temporal.io/sdk/log"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"

	"github.com/op-stack/executor/api"
	"github.com/op-stack/executor/app"
	"github.com/op-stack/executor/config"
	"github.com/op-stack/executor/llm/llmfake"
	"github.com/op-stack/executor/models"
	"github.com/op-stack/executor/store"
	"github.com/op-stack/executor/store/storetest"
	"github.com/op-stack/executor/telemetry"
)

var (
	devServer   *testsuite.DevServer
	temporalCLI string
	executorBin string
	quietLog    = slog.New(slog.NewTextHandler(io.Discard, nil))
)

func TestMain(m *testing.M) {
	flag.Parse()
	if testing.Short() {
		fmt.Println("e2e: skipped in -short mode (needs a Temporal dev server)")
		os.Exit(0)
	}
	code, err := runWithDevServer(m)
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		os.Exit(1)
	}
	os.Exit(code)
}

func runWithDevServer(m *testing.M) (int, error) {
	cli := os.Getenv("TEMPORAL_CLI")
	if cli == "" {
		cli = "../bin/temporal"
	}
	var err error
	if temporalCLI, err = filepath.Abs(cli); err != nil {
		return 0, err
	}
	if _, err := os.Stat(temporalCLI); err != nil {
		return 0, fmt.Errorf("temporal CLI not found at %s (run `make temporal-cli`): %w", temporalCLI, err)
	}
	tmp, err := os.MkdirTemp("", "executor-e2e-")
	if err != nil {
		return 0, err
	}
	defer os.RemoveAll(tmp)
	executorBin = filepath.Join(tmp, "executor")
	if out, err := exec.Command("go", "build", "-o", executorBin, "../cmd/executor").CombinedOutput(); err != nil {
		return 0, fmt.Errorf("build executor: %v\n%s", err, out)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	devServer, err = testsuite.StartDevServer(ctx, testsuite.DevServerOptions{
		ExistingPath:  temporalCLI,
		ClientOptions: &client.Options{Logger: temporallog.NewStructuredLogger(quietLog)},
		LogLevel:      "error",
		SearchAttributes: temporal.NewSearchAttributes(
			models.SearchHierarchyID.ValueSet(""), models.SearchRunStatus.ValueSet(""), models.SearchHierarchyName.ValueSet(""),
			models.SearchTenantID.ValueSet(""), models.SearchTotalTokens.ValueSet(0), models.SearchCostUSD.ValueSet(0), models.SearchForkedFrom.ValueSet(""),
		),
		ExtraArgs: []string{
			"--dynamic-config-value", "history.transferProcessorMaxPollRPS=1000",
			"--dynamic-config-value", "matching.numTaskqueueReadPartitions=1",
			"--dynamic-config-value", "matching.numTaskqueueWritePartitions=1",
			"--dynamic-config-value", "system.enableActivityEagerExecution=true",
		},
		Stdout: io.Discard,
		Stderr: io.Discard,
	})
	if err != nil {
		return 0, fmt.Errorf("start dev server: %w", err)
	}
	defer devServer.Stop()
	defer func() {
		// The benchmarks' untuned server, when one was started.
		if defaultDevServer != nil {
			defaultDevServer.Stop()
		}
	}()
	code := m.Run()
	// Every exchange the tests had with the API must conform to the
	// OpenAPI document.
	report, conform := exchanges.validate()
	fmt.Println(report)
	if !conform && code == 0 {
		code = 1
	}
	return code, nil
}

// testEnv is one test's service: its own task queue, database and fake
// LLM server, the API over HTTP, and (unless asked not to) a worker.
type testEnv struct {
	t             testing.TB
	cfg           config.Config
	store         *store.Store
	workerMetrics bool
	notes         *app.Notifications
	metrics       *telemetry.Metrics // shared by the API and, withWorkerMetrics, the worker
	dbURL         string             // PostgreSQL URL of store, "" on SQLite
	dataDir       string             // SQLite directory of store
	fake          *llmfake.Server
	temporal      client.Client
	api           *api.Server
	apiURL        string
	server        *httptest.Server // serves api; tests may cut its connections
	log           *slog.Logger     // the API's and worker's logger (quietLog unless withLogs)
}

// envOptions adjust a testEnv before it starts.
type envOptions struct {
	noWorker      bool
	databaseURL   string
	tweak         []func(*config.Config)
	metrics       *prometheus.Registry
	workerMetrics bool // the worker records into metrics too (its circuits)
	log           *slog.Logger
}

// withLogs sends the in-process service's logs (API, worker,
// notifications) to w as text, at debug level, for tests that read them.
func withLogs(w io.Writer) envOption {
	return func(o *envOptions) {
		o.log = slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
}

// withAPIMetrics makes the API record its metrics into reg and serve them
// at GET /metrics, as `executor serve` does.
func withAPIMetrics(reg *prometheus.Registry) envOption {
	return func(o *envOptions) { o.metrics = reg }
}

// withDatabase runs the env on the PostgreSQL database at url.
// withWorkerMetrics makes the in-process worker record into the API's
// metrics (withAPIMetrics) too, as `executor serve -role all` does.
func withWorkerMetrics(o *envOptions) { o.workerMetrics = true }

func withDatabase(url string) envOption {
	return func(o *envOptions) { o.databaseURL = url }
}

type envOption func(*envOptions)

// withoutWorker starts no in-process worker: the test runs its own.
func withoutWorker(o *envOptions) { o.noWorker = true }

// withConfig changes the env's configuration.
func withConfig(f func(*config.Config)) envOption {
	return func(o *envOptions) { o.tweak = append(o.tweak, f) }
}

func newEnv(t testing.TB, rules []llmfake.Rule, opts ...envOption) *testEnv {
	t.Helper()
	var o envOptions
	for _, f := range opts {
		f(&o)
	}
	e := &testEnv{t: t, fake: llmfake.New(t, rules...), dataDir: t.TempDir(), log: quietLog}
	if o.log != nil {
		e.log = o.log
	}
	cfg, err := config.Load()
	if err != nil {
		t.Fatal(err)
	}
	cfg.TemporalAddress = devServer.FrontendHostPort()
	cfg.TaskQueue = "e2e-" + models.NewID()
	cfg.DataDir = e.dataDir
	cfg.OpenAIAPIKey = "sk-test-e2e-secret"
	cfg.OpenAIBaseURL = e.fake.URL()
	cfg.OpenRouterAPIKey, cfg.CompatibleBaseURL, cfg.LLMModels, cfg.LLMDefaultProvider = "", "", "", ""
	cfg.LLMDefaultModel = "test-model"
	cfg.LLMHeartbeatTimeout = 3 * time.Second
	cfg.LLMRetryInitial = 100 * time.Millisecond
	cfg.LLMRetryMax = time.Second
	cfg.LLMMaxAttempts = 4
	cfg.LLMCallTimeout = time.Minute
	cfg.ShutdownTimeout = 5 * time.Second
	for _, f := range o.tweak {
		f(&cfg)
	}
	e.cfg = cfg
	switch {
	case o.databaseURL != "":
		e.dbURL = o.databaseURL
		e.cfg.DatabaseURL = e.dbURL
	case os.Getenv(storetest.EnvDatabaseURL) != "" || os.Getenv("CI") == "true":
		e.dbURL = storetest.PostgresURL(t)
		e.cfg.DatabaseURL = e.dbURL
	}
	e.store, err = store.Open(e.cfg.DatabaseURL, e.cfg.SQLitePath())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.store.Close() })
	if _, err := e.store.Migrate(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	// The Temporal SDK's own logs (the worker's activity failures among
	// them) go with the service's.
	e.temporal, err = client.Dial(client.Options{HostPort: cfg.TemporalAddress, Logger: temporallog.NewStructuredLogger(e.log),
		ConnectionOptions: client.ConnectionOptions{GrpcCompression: app.TemporalCompression(cfg)}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.temporal.Close)
	// As `serve -role all` wires them: the worker's activities wake the
	// API's stream pollers (in process, and through PostgreSQL when the
	// store is PostgreSQL, which a worker process of the test reaches too).
	e.notes, err = app.NewNotifications(context.Background(), e.cfg, e.log, e.store, !o.noWorker, true)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.notes.Close)
	if o.metrics != nil {
		e.metrics = telemetry.NewMetrics(o.metrics)
	}
	e.workerMetrics = o.workerMetrics
	if !o.noWorker {
		e.startWorker()
	}
	router, err := app.NewLLM(e.cfg)
	if err != nil {
		t.Fatal(err)
	}
	apiOpts := []app.Option{app.WithNotifications(e.notes)}
	if o.metrics != nil {
		apiOpts = append(apiOpts, app.WithMetrics(e.metrics, telemetry.Handler(o.metrics)))
	}
	// As `executor serve` wires them: the identity provider's tokens when
	// OIDC_* are set.
	tokens, err := app.NewTokenVerifier(context.Background(), e.cfg)
	if err != nil {
		t.Fatal(err)
	}
	if tokens != nil {
		apiOpts = append(apiOpts, app.WithTokens(tokens))
	}
	e.api = app.NewAPI(e.cfg, e.log, e.store, e.temporal, router, apiOpts...)
	srv := httptest.NewServer(exchanges.wrap(e.api.Handler()))
	t.Cleanup(srv.Close)
	e.server = srv
	e.apiURL = srv.URL + "/api/executor/v1"
	return e
}

// startWorker starts an in-process worker on the env's task queue.
func (e *testEnv) startWorker() {
	e.t.Helper()
	router, err := app.NewLLM(e.cfg)
	if err != nil {
		e.t.Fatal(err)
	}
	opts := []app.Option{app.WithNotifications(e.notes)}
	if e.workerMetrics {
		opts = append(opts, app.WithMetrics(e.metrics, nil))
	}
	w := app.NewWorker(e.cfg, e.log, e.store, e.temporal, router, opts...)
	if err := w.Start(); err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(w.Stop)
}

// workerProcess starts `executor serve -role worker` on the env's task
// queue and database, as a separate process that a test can kill; extra
// environment variables (NAME=value) override the env's.
func (e *testEnv) workerProcess(extra ...string) *exec.Cmd {
	e.t.Helper()
	return e.serveProcess("worker", extra...)
}

// serveProcess starts `executor serve -role <role>` as workerProcess does
// (with role api or all, set HTTP_ADDR in extra).
func (e *testEnv) serveProcess(role string, extra ...string) *exec.Cmd {
	e.t.Helper()
	cmd := exec.Command(executorBin, "serve", "-role", role)
	cmd.Env = append(os.Environ(),
		"TEMPORAL_ADDRESS="+e.cfg.TemporalAddress,
		"TEMPORAL_TASK_QUEUE="+e.cfg.TaskQueue,
		"DATABASE_URL="+e.cfg.DatabaseURL,
		"DATA_DIR="+e.cfg.DataDir,
		"OPENAI_API_KEY="+e.cfg.OpenAIAPIKey,
		"OPENAI_BASE_URL="+e.cfg.OpenAIBaseURL,
		"LLM_DEFAULT_MODEL="+e.cfg.LLMDefaultModel,
		"LLM_HEARTBEAT_TIMEOUT="+e.cfg.LLMHeartbeatTimeout.String(),
		"LOG_LEVEL=warn",
	)
	cmd.Env = append(cmd.Env, extra...)
	var logs bytes.Buffer
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
		if e.t.Failed() {
			e.t.Logf("worker process %d output:\n%s", cmd.Process.Pid, logs.String())
		}
	})
	return cmd
}

type envelope struct {
	Code      int             `json:"code"`
	Message   string          `json:"message"`
	ErrorCode string          `json:"error_code"`
	Data      json.RawMessage `json:"data"`
}

// post calls the executor API and returns the HTTP status and envelope.
func (e *testEnv) post(path string, body any) (int, envelope) {
	e.t.Helper()
	raw, _ := json.Marshal(body)
	resp, err := http.Post(e.apiURL+path, "application/json", bytes.NewReader(raw))
	if err != nil {
		e.t.Fatalf("POST %s: %v", path, err)
	}
	defer resp.Body.Close()
	var env envelope
	if err := json.NewDecoder(resp.Body).Decode(&env); err != nil {
		e.t.Fatalf("POST %s: %v", path, err)
	}
	return resp.StatusCode, env
}

func (e *testEnv) mustPost(path string, body, out any) {
	e.t.Helper()
	status, env := e.post(path, body)
	if status != http.StatusOK || env.Code != 0 {
		e.t.Fatalf("POST %s: status %d code %d: %s", path, status, env.Code, env.Message)
	}
	if out != nil {
		if err := json.Unmarshal(env.Data, out); err != nil {
			e.t.Fatal(err)
		}
	}
}

func (e *testEnv) createHierarchy(body map[string]any) string {
	e.t.Helper()
	var out struct {
		ID string `json:"hierarchy_id"`
	}
	e.mustPost("/hierarchies/create", body, &out)
	return out.ID
}

func (e *testEnv) startRun(hierarchyID, task string) string {
	e.t.Helper()
	var out struct {
		ID string `json:"id"`
	}
	e.mustPost("/runs/start", map[string]any{"hierarchy_id": hierarchyID, "task": task}, &out)
	return out.ID
}

type runView struct {
	ID          string            `json:"id"`
	Status      string            `json:"status"`
	Task        string            `json:"task"`
	HierarchyID string            `json:"hierarchy_id"`
	Result      *models.RunResult `json:"result"`
	FinalAnswer string            `json:"final_answer"`
	Error       string            `json:"error"`
	StartedAt   *time.Time        `json:"started_at"`
	CompletedAt *time.Time        `json:"completed_at"`
	Progress    struct {
		CurrentTeam    string   `json:"current_team"`
		CurrentWorker  string   `json:"current_worker"`
		CompletedTeams []string `json:"completed_teams"`
		TotalTeams     int      `json:"total_teams"`
	} `json:"progress"`
}

func (e *testEnv) getRun(id string) runView {
	e.t.Helper()
	var v runView
	e.mustPost("/runs/get", map[string]any{"id": id}, &v)
	return v
}

// waitRun polls runs/get until the run is in a terminal status.
func (e *testEnv) waitRun(id string, timeout time.Duration) runView {
	e.t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		v := e.getRun(id)
		if models.IsTerminal(v.Status) {
			return v
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("run %s still %s after %v (progress %+v)", id, v.Status, timeout, v.Progress)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// waitFor polls cond until it holds.
func waitFor(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// decision is a supervisor's JSON answer.
func decision(action, target, instruction string) string {
	raw, _ := json.Marshal(map[string]string{"action": action, "target": target, "instruction": instruction, "reason": "scripted"})
	return string(raw)
}

func contentResponses(contents ...string) []llmfake.Response {
	out := make([]llmfake.Response, 0, len(contents))
	for _, c := range contents {
		out = append(out, llmfake.Response{Content: c})
	}
	return out
}

// callsMatching returns the fake's calls whose system prompt contains s.
func callsMatching(calls []llmfake.Call, s string) []llmfake.Call {
	var out []llmfake.Call
	for _, c := range calls {
		for _, m := range c.Messages {
			if m.Role == "system" && strings.Contains(m.Content, s) {
				out = append(out, c)
				break
			}
		}
	}
	return out
}

// storedEvents reads a run's whole stored log from the database.
func (e *testEnv) storedEvents(id string) []models.Event {
	e.t.Helper()
	// id is the run's id as the API shows it: the store keeps its events
	// under the run's key (store.Run).
	run, err := e.store.GetTenantRun(context.Background(), "", "", id)
	if err != nil {
		e.t.Fatal(err)
	}
	var all []models.Event
	for after := int64(0); ; {
		page, err := e.store.ListEvents(context.Background(), run.ID, store.EventFilter{After: after, Limit: 1000})
		if err != nil {
			e.t.Fatal(err)
		}
		if len(page) == 0 {
			return all
		}
		all = append(all, page...)
		after = page[len(page)-1].Sequence
	}
}
