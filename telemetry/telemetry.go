// Package telemetry sets up the service's operational signals: Prometheus
// metrics (the service's own executor_* collectors and the Temporal SDK's
// temporal_* metrics on one registry) and OpenTelemetry tracing (off unless
// the standard OTEL_* variables ask for it), plus trace ids in logs.
package telemetry

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"os"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/interceptor"
)

// Options configure Setup.
type Options struct {
	Log *slog.Logger
	// Getenv reads the OTEL_* variables that switch tracing on; nil uses
	// os.Getenv. (The exporters read their own settings from the process
	// environment.)
	Getenv func(string) string
	// ConsoleWriter receives the spans of OTEL_TRACES_EXPORTER=console;
	// nil is standard output.
	ConsoleWriter io.Writer
	// Metrics configure the service's own collectors (per-tenant series).
	Metrics MetricsOptions
}

// Telemetry is one process's metrics and tracing, built once by Setup and
// stopped by Shutdown.
type Telemetry struct {
	// Registry is what /metrics serves.
	Registry *prometheus.Registry
	// Metrics are the service's own collectors, registered on Registry.
	Metrics *Metrics
	// Temporal feeds the Temporal SDK's metrics into Registry.
	Temporal *TemporalMetrics
	// TracerProvider is nil when tracing is off.
	TracerProvider *sdktrace.TracerProvider
	// Exporters names the trace exporters in use, for the start-up log.
	Exporters []string

	temporalTracing []interceptor.Interceptor
}

// Setup builds the registry with every collector and, when the environment
// asks for it, the tracer provider, which it installs as OpenTelemetry's
// global provider with W3C propagation. Without the OTEL_* variables no
// provider is installed and nothing is traced.
func Setup(ctx context.Context, opts Options) (*Telemetry, error) {
	log := opts.Log
	if log == nil {
		log = slog.Default()
	}
	getenv := opts.Getenv
	if getenv == nil {
		getenv = os.Getenv
	}
	reg := NewRegistry()
	t := &Telemetry{Registry: reg, Metrics: NewMetricsWith(reg, opts.Metrics)}
	var err error
	if t.Temporal, err = NewTemporalMetrics(reg, log); err != nil {
		return nil, err
	}
	tp, exporters, err := newTracerProvider(ctx, getenv, opts.ConsoleWriter)
	if err != nil {
		return nil, err
	}
	if tp == nil {
		return t, nil
	}
	t.TracerProvider, t.Exporters = tp, exporters
	// Export failures (a collector that is down) go to the service's log
	// instead of the standard logger.
	otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) { log.Warn("OpenTelemetry", "error", err) }))
	otel.SetTracerProvider(tp)
	otel.SetTextMapPropagator(Propagator)
	SetCaptureContent(parseBool(getenv(EnvCaptureContent)))
	// The SDK's tracing interceptor, with a tracer whose workflow spans are
	// replay-safe (temporaltrace.go), without signals, queries and updates.
	t.temporalTracing = TemporalTracing(tp)
	return t, nil
}

// MetricsHandler serves the registry at /metrics.
func (t *Telemetry) MetricsHandler() http.Handler { return Handler(t.Registry) }

// Tracing returns the tracer provider, or nil (an untyped nil interface)
// when tracing is off, for options that take a trace.TracerProvider.
func (t *Telemetry) Tracing() trace.TracerProvider {
	if t == nil || t.TracerProvider == nil {
		return nil
	}
	return t.TracerProvider
}

// ClientOptions adds the SDK's metrics handler and, with tracing on, the
// SDK's OpenTelemetry tracing interceptor to a Temporal client's options.
// The interceptor is also a worker interceptor, and the SDK applies a
// client's worker interceptors to every worker built from the client, so
// workflows and activities are traced without setting it again on the
// worker (the SDK warns against setting it in both places).
func (t *Telemetry) ClientOptions(o *client.Options) {
	if t == nil {
		return
	}
	if t.Temporal != nil {
		o.MetricsHandler = t.Temporal.Handler
	}
	if t.temporalTracing != nil {
		for _, i := range t.temporalTracing {
			o.Interceptors = append(o.Interceptors, i)
		}
	}
}

// Shutdown flushes the spans still buffered and stops the providers
// within ctx's deadline.
func (t *Telemetry) Shutdown(ctx context.Context) error {
	if t == nil {
		return nil
	}
	var errs []error
	if t.TracerProvider != nil {
		errs = append(errs, t.TracerProvider.Shutdown(ctx))
	}
	errs = append(errs, t.Temporal.Shutdown(ctx))
	return errors.Join(errs...)
}

// LogHandler wraps h so that records logged with a context that carries a
// span (slog's *Context methods and LogAttrs) get trace_id and span_id,
// which tie a log line to its trace.
func LogHandler(h slog.Handler) slog.Handler { return traceLogHandler{h} }

type traceLogHandler struct{ slog.Handler }

func (h traceLogHandler) Handle(ctx context.Context, r slog.Record) error {
	if sc := trace.SpanContextFromContext(ctx); sc.IsValid() {
		r.AddAttrs(slog.String("trace_id", sc.TraceID().String()), slog.String("span_id", sc.SpanID().String()))
	}
	return h.Handler.Handle(ctx, r)
}

func (h traceLogHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return traceLogHandler{h.Handler.WithAttrs(attrs)}
}

func (h traceLogHandler) WithGroup(name string) slog.Handler {
	return traceLogHandler{h.Handler.WithGroup(name)}
}
