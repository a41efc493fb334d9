package telemetry

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"slices"
	"strings"
	"testing"

	"go.opentelemetry.io/otel"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace/noop"
	"go.temporal.io/sdk/client"
)

func env(vars map[string]string) func(string) string {
	return func(k string) string { return vars[k] }
}

func TestTracesExporters(t *testing.T) {
	for _, c := range []struct {
		vars map[string]string
		want []string
		err  bool
	}{
		{vars: nil, want: nil},
		{vars: map[string]string{EnvOTLPEndpoint: "http://collector:4318"}, want: []string{"otlp"}},
		{vars: map[string]string{EnvOTLPTracesEndpoint: "http://collector:4318/v1/traces"}, want: []string{"otlp"}},
		{vars: map[string]string{EnvTracesExporter: "console"}, want: []string{"console"}},
		{vars: map[string]string{EnvTracesExporter: "otlp, console,otlp"}, want: []string{"otlp", "console"}},
		{vars: map[string]string{EnvTracesExporter: "none", EnvOTLPEndpoint: "http://collector:4318"}, want: nil},
		{vars: map[string]string{EnvTracesExporter: "zipkin"}, err: true},
	} {
		got, err := TracesExporters(env(c.vars))
		if (err != nil) != c.err || !slices.Equal(got, c.want) {
			t.Errorf("%v: got %v, %v; want %v (error %v)", c.vars, got, err, c.want, c.err)
		}
	}
}

// restoreGlobals puts OpenTelemetry's global provider back after a test
// that installs one.
func restoreGlobals(t *testing.T) {
	tp, prop := otel.GetTracerProvider(), otel.GetTextMapPropagator()
	t.Cleanup(func() {
		otel.SetTracerProvider(tp)
		otel.SetTextMapPropagator(prop)
	})
}

func TestTracingIsOffWithoutTheVariables(t *testing.T) {
	restoreGlobals(t)
	otel.SetTracerProvider(noop.NewTracerProvider())
	tel, err := Setup(t.Context(), Options{Getenv: env(nil)})
	if err != nil {
		t.Fatal(err)
	}
	defer tel.Shutdown(context.Background())
	if tel.TracerProvider != nil || tel.Tracing() != nil {
		t.Fatal("a tracer provider was built without any OTEL_* variable")
	}
	if _, installed := otel.GetTracerProvider().(*sdktrace.TracerProvider); installed {
		t.Fatal("a global tracer provider was installed without any OTEL_* variable")
	}
	var opts client.Options
	tel.ClientOptions(&opts)
	if len(opts.Interceptors) != 0 {
		t.Errorf("interceptors = %v, want none", opts.Interceptors)
	}
	if opts.MetricsHandler == nil {
		t.Error("the Temporal client gets no metrics handler")
	}
}

func TestConsoleTracing(t *testing.T) {
	restoreGlobals(t)
	var out bytes.Buffer
	tel, err := Setup(t.Context(), Options{
		Getenv:        env(map[string]string{EnvTracesExporter: "console", EnvServiceName: "executor-test"}),
		ConsoleWriter: &out,
	})
	if err != nil {
		t.Fatal(err)
	}
	if tel.Tracing() == nil || otel.GetTracerProvider() != tel.TracerProvider {
		t.Fatal("tracing on, but no global provider installed")
	}
	var opts client.Options
	tel.ClientOptions(&opts)
	if len(opts.Interceptors) != 2 {
		t.Fatalf("interceptors = %v, want the Temporal tracing interceptor and its return marker", opts.Interceptors)
	}
	_, span := tel.Tracing().Tracer("test").Start(t.Context(), "unit-of-work")
	span.End()
	if err := tel.Shutdown(t.Context()); err != nil {
		t.Fatal(err)
	}
	var exported struct {
		Name     string
		Resource []struct {
			Key   string
			Value struct{ Value any }
		}
	}
	if err := json.NewDecoder(&out).Decode(&exported); err != nil {
		t.Fatalf("console exporter output %q: %v", out.String(), err)
	}
	if exported.Name != "unit-of-work" {
		t.Errorf("exported span %q", exported.Name)
	}
	service := ""
	for _, kv := range exported.Resource {
		if kv.Key == "service.name" {
			service, _ = kv.Value.Value.(string)
		}
	}
	if service != "executor-test" {
		t.Errorf("service.name = %q, want OTEL_SERVICE_NAME's", service)
	}
}

func TestDefaultServiceName(t *testing.T) {
	res, err := newResource(t.Context(), env(nil))
	if err != nil {
		t.Fatal(err)
	}
	for _, kv := range res.Attributes() {
		if kv.Key == "service.name" && kv.Value.AsString() != DefaultServiceName {
			t.Errorf("service.name = %q", kv.Value.AsString())
		}
	}
}

func TestUnsupportedProtocol(t *testing.T) {
	_, err := Setup(t.Context(), Options{Getenv: env(map[string]string{EnvOTLPEndpoint: "http://x:4318", EnvOTLPProtocol: "http/json"})})
	if err == nil || !strings.Contains(err.Error(), "http/json") {
		t.Fatalf("err = %v", err)
	}
}

func TestLogHandlerAddsTheTrace(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(LogHandler(slog.NewJSONHandler(&buf, nil))).With("component", "test")
	tp := sdktrace.NewTracerProvider()
	defer tp.Shutdown(context.Background())
	ctx, span := tp.Tracer("test").Start(context.Background(), "op")
	log.InfoContext(ctx, "traced")
	log.Info("untraced")
	span.End()
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 2 {
		t.Fatalf("lines: %q", lines)
	}
	var traced, untraced map[string]any
	_ = json.Unmarshal([]byte(lines[0]), &traced)
	_ = json.Unmarshal([]byte(lines[1]), &untraced)
	if traced["trace_id"] != span.SpanContext().TraceID().String() || traced["span_id"] == nil || traced["component"] != "test" {
		t.Errorf("traced line %v", traced)
	}
	if _, ok := untraced["trace_id"]; ok {
		t.Errorf("untraced line %v", untraced)
	}
}
