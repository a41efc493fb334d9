package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	sdkworker "go.temporal.io/sdk/worker"

	"github.com/op-stack/executor/api"
	"github.com/op-stack/executor/config"
	"github.com/op-stack/executor/store/storetest"
)

func TestMetricsPlacement(t *testing.T) {
	all, worker := role{api: true, worker: true}, role{worker: true}
	for _, c := range []struct {
		addr            string
		r               role
		listen          string
		onAPI, required bool
	}{
		{"", all, "", true, false},
		{"", role{api: true}, "", true, false},
		{"", worker, config.DefaultWorkerMetricsAddr, false, false},
		{":9100", all, ":9100", false, true},
		{":9100", worker, ":9100", false, true},
		{config.MetricsOff, all, "", false, false},
		{config.MetricsOff, worker, "", false, false},
	} {
		listen, onAPI, required := metricsPlacement(c.addr, c.r)
		if listen != c.listen || onAPI != c.onAPI || required != c.required {
			t.Errorf("METRICS_ADDR=%q %+v: got %q %v %v", c.addr, c.r, listen, onAPI, required)
		}
	}
}

// TestMetricsTenantLabelOnlyOffTheAPI: per-tenant cost series are refused
// where /metrics is on the API's (unauthenticated, client-facing) address
// and accepted on a listener of its own.
func TestMetricsTenantLabelOnlyOffTheAPI(t *testing.T) {
	all, worker := role{api: true, worker: true}, role{worker: true}
	for _, c := range []struct {
		addr  string
		r     role
		label bool
		ok    bool
	}{
		{"", all, false, true},
		{"", all, true, false},
		{"", role{api: true}, true, false},
		{"", worker, true, true},
		{"127.0.0.1:9100", all, true, true},
		{config.MetricsOff, all, true, true},
	} {
		err := checkMetricsTenantLabel(config.Config{MetricsAddr: c.addr, MetricsTenantLabel: c.label}, c.r)
		if (err == nil) != c.ok {
			t.Errorf("METRICS_ADDR=%q %+v METRICS_TENANT_LABEL=%v: err = %v", c.addr, c.r, c.label, err)
		}
	}
}

// stuckWorker is a worker whose Stop never returns in time.
type stuckWorker struct {
	sdkworker.Worker
	stopped chan struct{}
}

func (w stuckWorker) Stop() { <-w.stopped }

// TestShutdownIsBounded: a worker that does not stop and a request that
// does not end hold shutdown up for the drain time only.
func TestShutdownIsBounded(t *testing.T) {
	var logs bytes.Buffer
	var mu sync.Mutex
	log := slog.New(slog.NewTextHandler(opsWriterFunc(func(p []byte) (int, error) {
		mu.Lock()
		defer mu.Unlock()
		return logs.Write(p)
	}), nil))
	srv := api.NewServer(api.Options{Store: storetest.SQLite(t), Logger: log})
	inFlight := make(chan struct{})
	hang := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		close(inFlight)
		<-r.Context().Done()
	})
	hs := httptest.NewUnstartedServer(hang)
	hs.Start()
	defer hs.Close()
	go http.Get(hs.URL)
	<-inFlight
	w := stuckWorker{stopped: make(chan struct{})}
	defer close(w.stopped)

	const budget = time.Second
	start := time.Now()
	stop := shutdown(log, budget, running{api: srv, http: hs.Config, worker: w})
	took := time.Since(start)
	if took > budget {
		t.Errorf("shutdown took %v, longer than its budget %v", took, budget)
	}
	if took < 700*time.Millisecond {
		t.Errorf("shutdown took %v: it did not wait for the drain", took)
	}
	if d := stop.deadline.Sub(stop.start); d != budget {
		t.Errorf("flush deadline %v after the start, want the budget %v", d, budget)
	}
	mu.Lock()
	defer mu.Unlock()
	if !strings.Contains(logs.String(), "not everything stopped in time") {
		t.Errorf("the overrun was not logged:\n%s", logs.String())
	}
}

type opsWriterFunc func([]byte) (int, error)

func (f opsWriterFunc) Write(p []byte) (int, error) { return f(p) }

// opsProcess is a running executor binary with its output.
type opsProcess struct {
	cmd            *exec.Cmd
	stdout, stderr *opsBuffer
	exited         chan error
}

type opsBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *opsBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *opsBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func startOpsProcess(t *testing.T, bin string, env []string, args ...string) *opsProcess {
	t.Helper()
	p := &opsProcess{cmd: exec.Command(bin, args...), stdout: &opsBuffer{}, stderr: &opsBuffer{}, exited: make(chan error, 1)}
	p.cmd.Env = append(os.Environ(), env...)
	p.cmd.Stdout, p.cmd.Stderr = p.stdout, p.stderr
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.exited <- p.cmd.Wait() }()
	t.Cleanup(func() {
		p.cmd.Process.Kill()
		if t.Failed() {
			t.Logf("executor %v log:\n%s", args, p.stderr.String())
		}
	})
	return p
}

// terminate sends SIGTERM and waits at most d for the exit.
func (p *opsProcess) terminate(t *testing.T, d time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-p.exited:
		if err != nil {
			t.Errorf("exit after SIGTERM: %v", err)
		}
	case <-time.After(d):
		t.Fatalf("no exit within %v of SIGTERM", d)
	}
	return time.Since(start)
}

func opsFetch(method, url, body string) (int, string, error) {
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		return 0, "", err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(raw), err
}

// opsHasSeries tells whether the exposition has a sample of name whose labels
// include every one of labels, with a value above zero.
func opsHasSeries(body, name string, labels ...string) bool {
	for _, line := range strings.Split(body, "\n") {
		if !strings.HasPrefix(line, name+"{") && !strings.HasPrefix(line, name+" ") {
			continue
		}
		all := true
		for _, l := range labels {
			all = all && strings.Contains(line, l)
		}
		fields := strings.Fields(line)
		if v, err := strconv.ParseFloat(fields[len(fields)-1], 64); all && err == nil && v > 0 {
			return true
		}
	}
	return false
}

// TestOperations runs the real binary: `executor dev` serves /healthz,
// /readyz and /metrics (the service's and the Temporal SDK's metrics) on
// the API's address, counts a run's LLM calls, events and outcome, and
// with OTEL_TRACES_EXPORTER=console traces the request that started the
// run into Temporal; a worker-only process serves them on METRICS_ADDR and
// stops within SHUTDOWN_TIMEOUT.
func TestOperations(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a Temporal dev server")
	}
	cli := temporalCLI(t)
	bin := filepath.Join(t.TempDir(), "executor")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	dataDir := t.TempDir()
	httpPort, grpcPort, uiPort, metricsPort := freePort(t), freePort(t), freePort(t), freePort(t)
	offline := []string{"OPENAI_API_KEY=", "OPENROUTER_API_KEY=", "COMPATIBLE_BASE_URL=", "AWS_BEDROCK_ENABLED=false",
		"LLM_DEFAULT_PROVIDER=", "LLM_MODELS=", "OFFLINE_TOKEN_DELAY=1ms", "DATABASE_URL=", "DATA_DIR=" + dataDir,
		"OTEL_EXPORTER_OTLP_ENDPOINT=", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT=", "LOG_FORMAT=json"}
	dev := startOpsProcess(t, bin, append(offline,
		"TEMPORAL_ADDRESS=", "TEMPORAL_CLI="+cli, "METRICS_ADDR=",
		fmt.Sprintf("HTTP_ADDR=127.0.0.1:%d", httpPort),
		fmt.Sprintf("TEMPORAL_DEV_PORT=%d", grpcPort),
		fmt.Sprintf("TEMPORAL_UI_PORT=%d", uiPort),
		"OTEL_TRACES_EXPORTER=console",
	), "dev")
	base := fmt.Sprintf("http://127.0.0.1:%d", httpPort)
	waitFor(t, 90*time.Second, dev.exited, func() error {
		status, body, err := opsFetch(http.MethodGet, base+"/readyz", "")
		if err == nil && status != http.StatusOK {
			err = fmt.Errorf("readyz %d %s", status, body)
		}
		return err
	})
	if status, body, _ := opsFetch(http.MethodGet, base+"/readyz", ""); !strings.Contains(body, `"database":"ok"`) || !strings.Contains(body, `"temporal":"ok"`) {
		t.Errorf("readyz = %d %s", status, body)
	}
	if status, body, _ := opsFetch(http.MethodGet, base+"/healthz", ""); status != http.StatusOK || strings.TrimSpace(body) != `{"status":"ok"}` {
		t.Errorf("healthz = %d %s", status, body)
	}

	// A run on the offline model.
	_, body, err := opsFetch(http.MethodPost, base+"/api/executor/v1/hierarchies/create",
		`{"name":"ops","global_supervisor_agent":{"agent_id":"gs-1"},"teams":[{"name":"t","workers":[{"agent_id":"w-1","name":"w"}]}]}`)
	var created struct {
		Data struct {
			HierarchyID string `json:"hierarchy_id"`
		} `json:"data"`
	}
	if err != nil || json.Unmarshal([]byte(body), &created) != nil || created.Data.HierarchyID == "" {
		t.Fatalf("create: %v %s", err, body)
	}
	_, body, err = opsFetch(http.MethodPost, base+"/api/executor/v1/runs/start",
		`{"hierarchy_id":"`+created.Data.HierarchyID+`","task":"observe me"}`)
	var started struct {
		Data struct {
			ID string `json:"id"`
		} `json:"data"`
	}
	if err != nil || json.Unmarshal([]byte(body), &started) != nil || started.Data.ID == "" {
		t.Fatalf("start: %v %s", err, body)
	}
	waitFor(t, 60*time.Second, dev.exited, func() error {
		_, body, err := opsFetch(http.MethodPost, base+"/api/executor/v1/runs/get", `{"id":"`+started.Data.ID+`"}`)
		if err != nil {
			return err
		}
		if !strings.Contains(body, `"status":"completed"`) {
			return fmt.Errorf("run not completed: %.300s", body)
		}
		return nil
	})

	_, metrics, err := opsFetch(http.MethodGet, base+"/metrics", "")
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []struct {
		name   string
		labels []string
	}{
		{"executor_http_requests_total", []string{`route="/api/executor/v1/runs/start"`, `status="200"`}},
		{"executor_http_request_duration_seconds_count", []string{`route="/api/executor/v1/runs/get"`}},
		{"executor_llm_calls_total", []string{`provider="offline"`, `outcome="ok"`}},
		{"executor_llm_tokens_total", []string{`kind="completion"`}},
		{"executor_llm_call_duration_seconds_count", nil},
		{"executor_events_published_total", []string{`category="llm"`, `action="stream"`}},
		{"executor_events_published_total", []string{`category="dispatch"`}},
		{"executor_runs_finished_total", []string{`status="completed"`}},
		{"temporal_worker_start_total", nil},
		{"temporal_request_total", []string{`operation="StartWorkflowExecution"`}},
		{"temporal_activity_execution_latency_seconds_count", nil},
	} {
		if !opsHasSeries(metrics, s.name, s.labels...) {
			t.Errorf("/metrics has no %s%v", s.name, s.labels)
		}
	}
	if !strings.Contains(metrics, "executor_sse_subscribers 0") {
		t.Error("/metrics has no executor_sse_subscribers")
	}

	// A worker-only process on METRICS_ADDR.
	worker := startOpsProcess(t, bin, append(offline,
		fmt.Sprintf("TEMPORAL_ADDRESS=127.0.0.1:%d", grpcPort),
		fmt.Sprintf("METRICS_ADDR=127.0.0.1:%d", metricsPort),
		// serve refuses stand-in answers unless told: this worker serves
		// the offline model by choice.
		"SHUTDOWN_TIMEOUT=2s", "OTEL_TRACES_EXPORTER=", "LLM_OFFLINE_FALLBACK=true",
	), "serve", "-role", "worker")
	wbase := fmt.Sprintf("http://127.0.0.1:%d", metricsPort)
	waitFor(t, 30*time.Second, worker.exited, func() error {
		status, body, err := opsFetch(http.MethodGet, wbase+"/readyz", "")
		if err == nil && status != http.StatusOK {
			err = fmt.Errorf("readyz %d %s", status, body)
		}
		return err
	})
	// The metrics listener answers before the worker has started: wait for
	// the worker's first series.
	var wmetrics string
	waitFor(t, 30*time.Second, worker.exited, func() error {
		_, wmetrics, _ = opsFetch(http.MethodGet, wbase+"/metrics", "")
		if !opsHasSeries(wmetrics, "temporal_worker_start_total") {
			return fmt.Errorf("no temporal_worker_start_total yet")
		}
		return nil
	})
	if !opsHasSeries(wmetrics, "temporal_worker_start_total") || !strings.Contains(wmetrics, "go_goroutines") {
		t.Errorf("worker /metrics:\n%.2000s", wmetrics)
	}
	if took := worker.terminate(t, 10*time.Second); took > 2*time.Second+time.Second {
		t.Errorf("the worker took %v to stop; SHUTDOWN_TIMEOUT is 2s", took)
	}
	if logs := worker.stderr.String(); !strings.Contains(logs, `"msg":"shutdown complete"`) {
		t.Errorf("no shutdown log:\n%s", logs)
	}

	dev.terminate(t, 60*time.Second)
	// The console exporter's spans, flushed on exit: the API request that
	// started the run, continued by the Temporal interceptor into the
	// workflow and its activities, all in one trace.
	// (The dev server prints its banner to the same standard output.)
	spans := map[string]string{}
	for _, line := range strings.Split(dev.stdout.String(), "\n") {
		var s struct {
			Name        string
			SpanContext struct{ TraceID string }
		}
		if json.Unmarshal([]byte(line), &s) != nil || s.Name == "" {
			continue
		}
		if _, seen := spans[s.Name]; !seen {
			spans[s.Name] = s.SpanContext.TraceID
		}
	}
	t.Logf("span names: %v", slices.Sorted(maps.Keys(spans)))
	startTrace := spans["POST /api/executor/v1/runs/start"]
	if startTrace == "" {
		t.Fatalf("no span of the start request among %d spans: %v", len(spans), spans)
	}
	for _, name := range []string{"StartWorkflow:RunWorkflow", "RunWorkflow:RunWorkflow", "RunActivity:Respond"} {
		if spans[name] != startTrace {
			t.Errorf("span %s in trace %q, want the start request's %s (spans: %v)", name, spans[name], startTrace, spans)
		}
	}
	for name := range spans {
		if name == "GET /readyz" || strings.HasPrefix(name, "SignalWorkflow:") || strings.HasPrefix(name, "QueryWorkflow:") {
			t.Errorf("span %s: probes, signals and queries are not traced", name)
		}
	}
}
