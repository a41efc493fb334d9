package telemetry

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/exporters/stdout/stdouttrace"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// DefaultServiceName is the service.name of the traces when
// OTEL_SERVICE_NAME (or service.name in OTEL_RESOURCE_ATTRIBUTES) is unset.
const DefaultServiceName = "op-stack-executor"

// The standard OpenTelemetry variables that decide whether tracing is on.
// The exporters read the rest of OTEL_EXPORTER_OTLP_* (headers, timeout,
// certificates, insecure) themselves, and the SDK reads OTEL_TRACES_SAMPLER
// and OTEL_RESOURCE_ATTRIBUTES.
const (
	EnvTracesExporter     = "OTEL_TRACES_EXPORTER"
	EnvOTLPEndpoint       = "OTEL_EXPORTER_OTLP_ENDPOINT"
	EnvOTLPTracesEndpoint = "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"
	EnvOTLPProtocol       = "OTEL_EXPORTER_OTLP_PROTOCOL"
	EnvOTLPTracesProtocol = "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"
	EnvServiceName        = "OTEL_SERVICE_NAME"
)

// Values of OTEL_TRACES_EXPORTER and OTEL_EXPORTER_OTLP_PROTOCOL.
const (
	exporterOTLP         = "otlp"
	exporterConsole      = "console"
	exporterNone         = "none"
	protocolHTTPProtobuf = "http/protobuf"
	protocolGRPC         = "grpc"
)

// Propagator is the W3C trace-context and baggage propagation that the
// HTTP middleware and the Temporal interceptor share.
var Propagator = propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{})

// TracesExporters returns the trace exporters the environment asks for:
// OTEL_TRACES_EXPORTER (otlp, console, both comma-separated, or none) when
// set, else otlp when an OTLP endpoint variable is set, else none. Tracing
// is off by default, unlike the SDK's own default of otlp: a service
// without a collector should not log export errors forever.
func TracesExporters(getenv func(string) string) ([]string, error) {
	v := strings.TrimSpace(getenv(EnvTracesExporter))
	if v == "" {
		if getenv(EnvOTLPEndpoint) != "" || getenv(EnvOTLPTracesEndpoint) != "" {
			return []string{exporterOTLP}, nil
		}
		return nil, nil
	}
	var out []string
	for _, e := range strings.Split(v, ",") {
		switch e = strings.ToLower(strings.TrimSpace(e)); e {
		case "":
		case exporterNone:
			return nil, nil
		case exporterOTLP, exporterConsole:
			if !slices.Contains(out, e) {
				out = append(out, e)
			}
		default:
			return nil, fmt.Errorf("%s: %q is not supported (want otlp, console or none)", EnvTracesExporter, e)
		}
	}
	return out, nil
}

// newTracerProvider builds the SDK tracer provider with the exporters the
// environment names; nil when it names none.
func newTracerProvider(ctx context.Context, getenv func(string) string, console io.Writer) (*sdktrace.TracerProvider, []string, error) {
	names, err := TracesExporters(getenv)
	if err != nil || len(names) == 0 {
		return nil, nil, err
	}
	opts := []sdktrace.TracerProviderOption{}
	var used []string
	for _, name := range names {
		var exp sdktrace.SpanExporter
		switch name {
		case exporterConsole:
			if console == nil {
				console = os.Stdout
			}
			exp, err = stdouttrace.New(stdouttrace.WithWriter(console))
		case exporterOTLP:
			var proto string
			exp, proto, err = newOTLPExporter(ctx, getenv)
			name += " " + proto
		}
		if err != nil {
			return nil, nil, fmt.Errorf("trace exporter %s: %w", name, err)
		}
		// Batching keeps exporting off the request path; Shutdown flushes.
		opts = append(opts, sdktrace.WithBatcher(exp))
		used = append(used, name)
	}
	res, err := newResource(ctx, getenv)
	if err != nil {
		return nil, nil, err
	}
	// The sampler comes from OTEL_TRACES_SAMPLER (default: parent-based,
	// always on), read by the SDK.
	// Spans of workflow code get ids a replay derives again (IDGenerator).
	opts = append(opts, sdktrace.WithResource(res), sdktrace.WithIDGenerator(IDGenerator{}))
	return sdktrace.NewTracerProvider(opts...), used, nil
}

// newOTLPExporter picks the OTLP transport from
// OTEL_EXPORTER_OTLP_TRACES_PROTOCOL or OTEL_EXPORTER_OTLP_PROTOCOL:
// http/protobuf (the specification's default) or grpc. The exporter reads
// the endpoint and its other settings from the environment itself.
func newOTLPExporter(ctx context.Context, getenv func(string) string) (sdktrace.SpanExporter, string, error) {
	proto := strings.TrimSpace(getenv(EnvOTLPTracesProtocol))
	if proto == "" {
		proto = strings.TrimSpace(getenv(EnvOTLPProtocol))
	}
	switch proto {
	case "", protocolHTTPProtobuf:
		exp, err := otlptracehttp.New(ctx)
		return exp, protocolHTTPProtobuf, err
	case protocolGRPC:
		exp, err := otlptracegrpc.New(ctx)
		return exp, protocolGRPC, err
	}
	return nil, "", fmt.Errorf("%s=%q is not supported (want http/protobuf or grpc)", EnvOTLPProtocol, proto)
}

// newResource describes the process: service.name (DefaultServiceName
// unless OTEL_SERVICE_NAME or OTEL_RESOURCE_ATTRIBUTES say otherwise), the
// SDK and the host.
func newResource(ctx context.Context, getenv func(string) string) (*resource.Resource, error) {
	detected, err := resource.New(ctx, resource.WithFromEnv(), resource.WithTelemetrySDK(), resource.WithHost())
	if err != nil && !errors.Is(err, resource.ErrPartialResource) {
		return nil, err
	}
	name := DefaultServiceName
	if v := strings.TrimSpace(getenv(EnvServiceName)); v != "" {
		name = v
	}
	// Merge lets the second resource win: the detected (environment's)
	// attributes override the default name.
	return resource.Merge(resource.NewSchemaless(attribute.String("service.name", name)), detected)
}
