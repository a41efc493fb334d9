package telemetry

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// TestNilMetricsRecordNothing: the tests and tools that wire no metrics
// pass a nil *Metrics; every method must then neither panic nor record
// anywhere, not even in Prometheus's default registry.
func TestNilMetricsRecordNothing(t *testing.T) {
	var m *Metrics
	calls := map[string]func(){
		"ObserveHTTP":        func() { m.ObserveHTTP("GET", "/x", 200, time.Millisecond) },
		"EventPublished":     func() { m.EventPublished("llm", "stream") },
		"EventPublishFailed": func() { m.EventPublishFailed() },
		"ObserveLLMCall":     func() { m.ObserveLLMCall(LLMCall{Model: "m", Outcome: OutcomeOK}) },
		"AddLLMCost":         func() { m.AddLLMCost("m", "t", 0.5) },
		"RunFinished":        func() { m.RunFinished("completed") },
		"ObserveStreams":     func() { m.ObserveStreams(func() StreamCounts { return StreamCounts{Subscribers: 1} }) },
	}
	for name, call := range calls {
		func() {
			defer func() {
				if r := recover(); r != nil {
					t.Errorf("%s on a nil *Metrics panicked: %v", name, r)
				}
			}()
			call()
		}()
	}
	mfs, err := prometheus.DefaultGatherer.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if strings.HasPrefix(mf.GetName(), Namespace+"_") {
			t.Errorf("a nil *Metrics recorded %s in the default registry", mf.GetName())
		}
	}
}

func TestMetricsRecord(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := NewMetrics(reg)
	m.ObserveHTTP("POST", "/api/executor/v1/runs/start", 200, 30*time.Millisecond)
	m.ObserveHTTP("POST", "/api/executor/v1/runs/start", 200, 10*time.Millisecond)
	m.EventPublished("llm", "stream")
	m.EventPublishFailed()
	m.ObserveLLMCall(LLMCall{Model: "gpt-4o", Provider: "openai", Outcome: OutcomeOK, Duration: 2 * time.Second,
		FirstToken: 300 * time.Millisecond, PromptTokens: 100, CompletionTokens: 20})
	m.ObserveLLMCall(LLMCall{Model: "gpt-4o", Outcome: OutcomeError, Duration: time.Second})
	m.RunFinished("completed")
	m.AddLLMCost("gpt-4o", "acme", 0.25)
	m.AddLLMCost("gpt-4o", "acme", 0.5)
	m.AddLLMCost("gpt-4o", "", 1)

	if got := testutil.ToFloat64(m.llmCost.WithLabelValues("gpt-4o")); got != 1.75 {
		t.Errorf("gpt-4o's cost = %v, want 1.75", got)
	}
	if got := testutil.ToFloat64(m.httpRequests.WithLabelValues("POST", "/api/executor/v1/runs/start", "200")); got != 2 {
		t.Errorf("http requests = %v, want 2", got)
	}
	if got := testutil.ToFloat64(m.llmTokens.WithLabelValues("gpt-4o", "prompt")); got != 100 {
		t.Errorf("prompt tokens = %v", got)
	}
	if got := testutil.ToFloat64(m.llmTokens.WithLabelValues("gpt-4o", "completion")); got != 20 {
		t.Errorf("completion tokens = %v", got)
	}
	if got := testutil.ToFloat64(m.llmCalls.WithLabelValues("gpt-4o", "unknown", OutcomeError)); got != 1 {
		t.Errorf("failed calls without a provider = %v, want 1 under provider \"unknown\"", got)
	}
	if got := testutil.ToFloat64(m.runsFinished.WithLabelValues("completed")); got != 1 {
		t.Errorf("runs finished = %v", got)
	}
	// Every metric docs/production.md lists is registered under its name.
	names := map[string]bool{}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		names[mf.GetName()] = true
	}
	for _, want := range []string{
		"executor_http_requests_total", "executor_http_request_duration_seconds",
		"executor_events_published_total", "executor_event_publish_errors_total",
		"executor_llm_calls_total", "executor_llm_tokens_total", "executor_llm_cost_usd_total", "executor_llm_call_duration_seconds",
		"executor_llm_time_to_first_token_seconds", "executor_runs_finished_total",
	} {
		if !names[want] {
			t.Errorf("%s not gathered (have %v)", want, names)
		}
	}
}

func TestStreamGaugesReadTheirSource(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := NewMetrics(reg)
	if n := testutil.CollectAndCount(m.streams); n != 0 {
		t.Fatalf("without a source the stream collector exports %d series, want none", n)
	}
	subscribers := int64(3)
	m.ObserveStreams(func() StreamCounts {
		return StreamCounts{Subscribers: subscribers, Pollers: 1, Queries: 42, Wakeups: 7}
	})
	want := `
# HELP executor_sse_pollers Pollers running now: at most one per live run with subscribers in this process.
# TYPE executor_sse_pollers gauge
executor_sse_pollers 1
# HELP executor_sse_subscribers Event streams (SSE) open now.
# TYPE executor_sse_subscribers gauge
executor_sse_subscribers 3
# HELP executor_sse_workflow_queries_total Workflow event queries made by the pollers.
# TYPE executor_sse_workflow_queries_total counter
executor_sse_workflow_queries_total 42
# HELP executor_sse_wakeups_total Pollers' queries made because the run was notified (SSE_NOTIFY).
# TYPE executor_sse_wakeups_total counter
executor_sse_wakeups_total 7
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "executor_sse_subscribers", "executor_sse_pollers", "executor_sse_workflow_queries_total", "executor_sse_wakeups_total"); err != nil {
		t.Fatal(err)
	}
	subscribers = 0
	if err := testutil.GatherAndCompare(reg, strings.NewReader(strings.Replace(want, "executor_sse_subscribers 3", "executor_sse_subscribers 0", 1)), "executor_sse_subscribers"); err != nil {
		t.Fatal(err)
	}
}

// TestTemporalMetricsShareTheRegistry: the SDK's metrics, recorded through
// the contrib OpenTelemetry handler, come out of the same /metrics as the
// service's, in Prometheus spelling.
func TestTemporalMetricsShareTheRegistry(t *testing.T) {
	reg := NewRegistry()
	m := NewMetrics(reg)
	tm, err := NewTemporalMetrics(reg, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tm.Shutdown(t.Context())
	h := tm.Handler.WithTags(map[string]string{"operation": "StartWorkflowExecution"})
	h.Counter("temporal_request").Inc(2)
	h.Timer("temporal_request_latency").Record(40 * time.Millisecond)
	h.Gauge("temporal_num_pollers").Update(2)
	m.RunFinished("failed")

	srv := httptest.NewServer(Handler(reg))
	defer srv.Close()
	resp, err := http.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	body := string(raw)
	for _, want := range []string{
		`temporal_request_total{operation="StartWorkflowExecution"} 2`,
		`temporal_request_latency_seconds_bucket{operation="StartWorkflowExecution",le="0.05"} 1`,
		`temporal_num_pollers{operation="StartWorkflowExecution"} 2`,
		`executor_runs_finished_total{status="failed"} 1`,
		"go_goroutines ",
		"process_cpu_seconds_total ",
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %q:\n%s", want, grep(body, "temporal_", "executor_runs"))
		}
	}
	if strings.Contains(body, "otel_scope_name") || strings.Contains(body, "target_info") {
		t.Errorf("/metrics carries OpenTelemetry scope or target info:\n%s", grep(body, "otel_scope", "target_info"))
	}
}

func grep(body string, subs ...string) string {
	var out []string
	for _, l := range strings.Split(body, "\n") {
		for _, s := range subs {
			if strings.Contains(l, s) {
				out = append(out, l)
				break
			}
		}
	}
	return strings.Join(out, "\n")
}

func TestCircuitMetricsReadTheirSource(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := NewMetrics(reg)
	if n := testutil.CollectAndCount(m.circuits); n != 0 {
		t.Fatalf("without a source the circuit collector exports %d series, want none", n)
	}
	m.ObserveCircuits(func() []CircuitState {
		return []CircuitState{{Provider: "compatible", State: 2, Openings: 1}, {Provider: "openai", State: 0}}
	})
	want := `
# HELP executor_llm_circuit_openings_total Times the circuit breaker of an LLM provider opened in this process.
# TYPE executor_llm_circuit_openings_total counter
executor_llm_circuit_openings_total{provider="compatible"} 1
executor_llm_circuit_openings_total{provider="openai"} 0
# HELP executor_llm_circuit_state Circuit breaker of an LLM provider in this process: 0 closed, 1 half-open, 2 open.
# TYPE executor_llm_circuit_state gauge
executor_llm_circuit_state{provider="compatible"} 2
executor_llm_circuit_state{provider="openai"} 0
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "executor_llm_circuit_state", "executor_llm_circuit_openings_total"); err != nil {
		t.Fatal(err)
	}
}

// TestCostMetricNamesNoTenantByDefault: /metrics needs no key, so by
// default its scrape names no tenant (issue 23 item 6); the per-tenant
// series exist only when asked for (METRICS_TENANT_LABEL).
func TestCostMetricNamesNoTenantByDefault(t *testing.T) {
	scrape := func(m *Metrics, reg *prometheus.Registry) string {
		m.AddLLMCost("gpt-4o", "acme-corp", 0.25)
		m.AddLLMCost("gpt-4o", "globex", 0.5)
		rec := httptest.NewRecorder()
		Handler(reg).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
		return rec.Body.String()
	}
	reg := NewRegistry()
	body := scrape(NewMetrics(reg), reg)
	for _, tenant := range []string{"acme-corp", "globex", `tenant="`} {
		if strings.Contains(body, tenant) {
			t.Errorf("the default scrape carries %q", tenant)
		}
	}
	if !strings.Contains(body, `executor_llm_cost_usd_total{model="gpt-4o"} 0.75`) {
		t.Errorf("the default scrape lacks the cost by model:\n%s", grepLines(body, "llm_cost"))
	}

	reg = NewRegistry()
	body = scrape(NewMetricsWith(reg, MetricsOptions{TenantLabel: true}), reg)
	for _, want := range []string{`executor_llm_cost_usd_total{model="gpt-4o",tenant="acme-corp"} 0.25`, `executor_llm_cost_usd_total{model="gpt-4o",tenant="globex"} 0.5`} {
		if !strings.Contains(body, want) {
			t.Errorf("with TenantLabel the scrape lacks %q:\n%s", want, grepLines(body, "llm_cost"))
		}
	}
}

func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
