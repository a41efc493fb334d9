package telemetry

import (
	"context"
	"log/slog"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/otlptranslator"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.temporal.io/sdk/client"
	temporalotel "go.temporal.io/sdk/contrib/opentelemetry"
)

// temporalLatencyBuckets suit the SDK's timers (request, poll, schedule-to-
// start and task latencies), recorded in seconds: OpenTelemetry's default
// buckets (0 … 10000) are meant for milliseconds.
var temporalLatencyBuckets = []float64{.001, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 300}

// TemporalMetrics is the Temporal SDK's metrics handler for client.Options.
// MetricsHandler, backed by OpenTelemetry and exported through reg: the
// SDK's official contrib handler (go.temporal.io/sdk/contrib/opentelemetry)
// with OpenTelemetry's Prometheus exporter, so the SDK's temporal_* metrics
// and the service's executor_* metrics come from one registry.
type TemporalMetrics struct {
	Handler  client.MetricsHandler
	provider *sdkmetric.MeterProvider
}

// NewTemporalMetrics builds the handler on reg. Errors of the SDK's metric
// calls are logged instead of panicking, the contrib handler's default.
func NewTemporalMetrics(reg prometheus.Registerer, log *slog.Logger) (*TemporalMetrics, error) {
	exporter, err := otelprom.New(
		otelprom.WithRegisterer(reg),
		// Prometheus spelling: counters get _total, timers _seconds.
		otelprom.WithTranslationStrategy(otlptranslator.UnderscoreEscapingWithSuffixes),
		// The scrape's job and instance labels identify the process;
		// per-series scope labels and target_info would only add noise.
		otelprom.WithoutScopeInfo(),
		otelprom.WithoutTargetInfo(),
	)
	if err != nil {
		return nil, err
	}
	provider := sdkmetric.NewMeterProvider(
		sdkmetric.WithReader(exporter),
		sdkmetric.WithView(sdkmetric.NewView(
			sdkmetric.Instrument{Kind: sdkmetric.InstrumentKindHistogram, Unit: "s"},
			sdkmetric.Stream{Aggregation: sdkmetric.AggregationExplicitBucketHistogram{Boundaries: temporalLatencyBuckets}},
		)),
	)
	if log == nil {
		log = slog.Default()
	}
	handler := temporalotel.NewMetricsHandler(temporalotel.MetricsHandlerOptions{
		Meter: provider.Meter("go.temporal.io/sdk"),
		// Counters are monotonic, so Prometheus sees them as counters
		// (temporal_request_total), not gauges.
		UseMonotonicCounters: true,
		OnError:              func(err error) { log.Warn("Temporal SDK metric", "error", err) },
	})
	return &TemporalMetrics{Handler: handler, provider: provider}, nil
}

// Shutdown stops the meter provider. Prometheus pulls, so there is nothing
// to flush; this releases the provider's resources.
func (t *TemporalMetrics) Shutdown(ctx context.Context) error {
	if t == nil {
		return nil
	}
	return t.provider.Shutdown(ctx)
}
