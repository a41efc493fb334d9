package api_test

import (
	"bytes"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/op-stack/executor/api"
	"github.com/op-stack/executor/store/storetest"
	"github.com/op-stack/executor/telemetry"
)

func httpGet(t *testing.T, url string, header ...string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

// TestHTTPMetricsByRoute: requests are counted under their route pattern,
// never their raw path, and /metrics serves the registry.
func TestHTTPMetricsByRoute(t *testing.T) {
	reg := telemetry.NewRegistry()
	m := telemetry.NewMetrics(reg)
	a := newTestAPI(t, storetest.SQLite(t), func(o *api.Options) {
		o.Metrics, o.MetricsHandler = m, telemetry.Handler(reg)
	})
	a.mustPost("/api/executor/v1/hierarchies/list", map[string]any{}, nil)
	a.mustPost("/api/executor/v1/hierarchies/list", map[string]any{}, nil)
	a.expectError("/api/executor/v1/hierarchies/get", map[string]any{"hierarchy_id": "nope"}, 404, 40401)
	httpGet(t, a.url+"/api/executor/v1/runs/run-123/stream") // no runs on this server: 503
	httpGet(t, a.url+"/scanner/probe/123")

	status, body := httpGet(t, a.url+"/metrics")
	if status != http.StatusOK {
		t.Fatalf("/metrics = %d", status)
	}
	for _, want := range []string{
		`executor_http_requests_total{method="POST",route="/api/executor/v1/hierarchies/list",status="200"} 2`,
		`executor_http_requests_total{method="POST",route="/api/executor/v1/hierarchies/get",status="404"} 1`,
		`executor_http_requests_total{method="GET",route="/api/executor/v1/runs/:id/stream",status="503"} 1`,
		`executor_http_requests_total{method="GET",route="unmatched",status="404"} 1`,
		`executor_http_request_duration_seconds_count{method="POST",route="/api/executor/v1/hierarchies/list"} 2`,
		// The stream gauges read the server's hub.
		"executor_sse_subscribers 0",
		"executor_sse_pollers 0",
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
	for _, raw := range []string{"run-123", "scanner"} {
		if strings.Contains(body, raw) {
			t.Errorf("/metrics carries the raw path %q", raw)
		}
	}
}

func TestNoMetricsEndpointWithoutHandler(t *testing.T) {
	a := newTestAPI(t, storetest.SQLite(t), func(o *api.Options) { o.Metrics = telemetry.NewMetrics(telemetry.NewRegistry()) })
	if status, _ := httpGet(t, a.url+"/metrics"); status != http.StatusNotFound {
		t.Fatalf("/metrics = %d, want 404 when the process serves it elsewhere", status)
	}
}

// TestRequestSpans: with a tracer provider every API request gets a server
// span named by its route that continues the caller's trace; probes get
// none.
func TestRequestSpans(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	defer tp.Shutdown(t.Context())
	a := newTestAPI(t, storetest.SQLite(t), func(o *api.Options) { o.TracerProvider = tp })

	const parentTrace = "4bf92f3577b34da6a3ce929d0e0e4736"
	httpGet(t, a.url+"/api/executor/v1/runs/r-1/stream", "traceparent", "00-"+parentTrace+"-00f067aa0ba902b7-01")
	a.mustPost("/api/executor/v1/hierarchies/list", map[string]any{}, nil)
	httpGet(t, a.url+"/healthz")
	httpGet(t, a.url+"/readyz")

	spans := rec.Ended()
	var names []string
	for _, s := range spans {
		names = append(names, s.Name())
	}
	if len(spans) != 2 {
		t.Fatalf("spans %q, want one per API request and none for probes", names)
	}
	stream, list := spans[0], spans[1]
	if stream.Name() != "GET /api/executor/v1/runs/:id/stream" || list.Name() != "POST /api/executor/v1/hierarchies/list" {
		t.Fatalf("span names %q", names)
	}
	if got := stream.SpanContext().TraceID().String(); got != parentTrace {
		t.Errorf("span's trace %s, want the caller's %s", got, parentTrace)
	}
	attrs := map[attribute.Key]attribute.Value{}
	for _, kv := range list.Attributes() {
		attrs[kv.Key] = kv.Value
	}
	if attrs["http.route"].AsString() != "/api/executor/v1/hierarchies/list" || attrs["http.response.status_code"].AsInt64() != 200 {
		t.Errorf("span attributes %v", list.Attributes())
	}
}

// syncBuffer is a log sink the server's goroutines may write at once.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestRequestLog: one info line per request with its route, status and
// duration; no query string; probes only at debug.
func TestRequestLog(t *testing.T) {
	var logs syncBuffer
	a := newTestAPI(t, storetest.SQLite(t), func(o *api.Options) {
		o.Logger = slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
	})
	httpGet(t, a.url+"/api/executor/v1/runs/r-7/stream?after=3&token=secret")
	httpGet(t, a.url+"/healthz")
	out := logs.String()
	if !strings.Contains(out, `level=INFO msg="http request" method=GET route=/api/executor/v1/runs/:id/stream path=/api/executor/v1/runs/r-7/stream status=503 duration=`) {
		t.Errorf("request log:\n%s", out)
	}
	if strings.Contains(out, "secret") || strings.Contains(out, "after=3") {
		t.Errorf("the query string was logged:\n%s", out)
	}
	if strings.Contains(out, "/healthz") {
		t.Errorf("a probe was logged at info:\n%s", out)
	}
}
