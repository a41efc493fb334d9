package telemetry

import (
	"net/http"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Namespace prefixes the service's own metric names.
const Namespace = "executor"

// Label values of LLMCall.Outcome.
const (
	OutcomeOK        = "ok"
	OutcomeError     = "error"
	OutcomeCancelled = "cancelled"
)

// NewRegistry returns the registry that /metrics serves: the Go runtime and
// process collectors, to which NewMetrics and NewTemporalMetrics add theirs.
// A private registry (not prometheus.DefaultRegisterer) keeps tests and
// several servers in one process from colliding.
func NewRegistry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	)
	return reg
}

// Handler serves reg in the Prometheus exposition formats.
func Handler(reg *prometheus.Registry) http.Handler {
	// Registry: reg counts the handler's own requests and errors
	// (promhttp_metric_handler_*) in the same registry.
	return promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg})
}

// Metrics holds the service's own collectors, all named executor_*. Its
// methods are safe on a nil *Metrics, which records nothing, so the API,
// the activities and their tests need no metrics to work.
type Metrics struct {
	httpRequests       *prometheus.CounterVec
	httpDuration       *prometheus.HistogramVec
	eventsPublished    *prometheus.CounterVec
	eventPublishErrors prometheus.Counter
	eventDelivery      prometheus.Histogram
	eventFlush         prometheus.Gauge
	eventSaturated     prometheus.Gauge
	llmCalls           *prometheus.CounterVec
	llmTokens          *prometheus.CounterVec
	llmCost            *prometheus.CounterVec
	llmDuration        *prometheus.HistogramVec
	llmFirstToken      *prometheus.HistogramVec
	runsFinished       *prometheus.CounterVec
	streams            *streamCollector
	circuits           *circuitCollector
	tenantLabel        bool
}

// MetricsOptions configure NewMetricsWith.
type MetricsOptions struct {
	// TenantLabel adds the label tenant, the run's tenant, to
	// executor_llm_cost_usd_total. Off by default: /metrics needs no key,
	// and a per-tenant series would tell anyone who can reach it every
	// tenant's name and spend (METRICS_TENANT_LABEL; serve only accepts it
	// with /metrics on an operator-only METRICS_ADDR).
	TenantLabel bool
}

// NewMetrics creates the collectors, without per-tenant series, and
// registers them on reg; it panics when they are registered there
// already, a wiring mistake.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	return NewMetricsWith(reg, MetricsOptions{})
}

// NewMetricsWith is NewMetrics with options.
func NewMetricsWith(reg prometheus.Registerer, opts MetricsOptions) *Metrics {
	costLabels, costHelp := []string{"model"}, "Cost in US dollars of successful LLM calls whose model has a price, by model."
	if opts.TenantLabel {
		costLabels, costHelp = []string{"model", "tenant"}, "Cost in US dollars of successful LLM calls whose model has a price, by model and tenant."
	}
	m := &Metrics{
		tenantLabel: opts.TenantLabel,
		httpRequests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: Namespace, Name: "http_requests_total",
			Help: "HTTP requests served, by method, route (the router's pattern, \"unmatched\" for none) and status code.",
		}, []string{"method", "route", "status"}),
		httpDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: Namespace, Name: "http_request_duration_seconds",
			Help: "Time to serve an HTTP request, by method and route. An event stream counts the whole time it was open.",
			// Default buckets plus longer ones: event streams last minutes.
			Buckets: []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 300, 900},
		}, []string{"method", "route"}),
		eventsPublished: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: Namespace, Name: "events_published_total",
			Help: "Run events that activities delivered to their run's workflow, by category and action (coalesced llm.stream deltas count once).",
		}, []string{"category", "action"}),
		eventPublishErrors: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: Namespace, Name: "event_publish_errors_total",
			Help: "Event batches that activities failed to deliver to their run's workflow.",
		}),
		eventDelivery: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: Namespace, Name: "event_delivery_seconds",
			Help:    "Time for an event batch's update to be applied by its run's workflow (the worker's and Temporal's queue of workflow tasks included).",
			Buckets: []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5},
		}),
		eventFlush: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: Namespace, Name: "event_flush_interval_seconds",
			Help: "How long streamed deltas wait, at most, before they are sent to their run's workflow: EVENT_FLUSH_INTERVAL, lengthened while event deliveries are slow.",
		}),
		eventSaturated: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: Namespace, Name: "event_delivery_saturated",
			Help: "1 while event deliveries are slow enough that the flush interval is lengthened (the workers or the Temporal server are saturated), else 0.",
		}),
		llmCalls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: Namespace, Name: "llm_calls_total",
			Help: "LLM call attempts, by model, provider and outcome (ok, error, cancelled).",
		}, []string{"model", "provider", "outcome"}),
		llmTokens: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: Namespace, Name: "llm_tokens_total",
			Help: "Tokens of successful LLM calls, by model and kind (prompt, completion).",
		}, []string{"model", "kind"}),
		llmCost: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: Namespace, Name: "llm_cost_usd_total",
			Help: costHelp,
		}, costLabels),
		llmDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: Namespace, Name: "llm_call_duration_seconds",
			Help:    "Duration of LLM call attempts, whatever their outcome, by model.",
			Buckets: []float64{.1, .25, .5, 1, 2.5, 5, 10, 20, 30, 60, 120, 300},
		}, []string{"model"}),
		llmFirstToken: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: Namespace, Name: "llm_time_to_first_token_seconds",
			Help:    "Time from the start of an LLM call to its first streamed token, by model (calls that streamed nothing are left out).",
			Buckets: []float64{.05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60},
		}, []string{"model"}),
		runsFinished: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: Namespace, Name: "runs_finished_total",
			Help: "Runs that reached a terminal status (completed, failed, cancelled, timed_out), counted by the worker that wrote it, or by the API process that ended a terminated or timed-out workflow's run.",
		}, []string{"status"}),
		streams:  newStreamCollector(),
		circuits: newCircuitCollector(),
	}
	reg.MustRegister(m.httpRequests, m.httpDuration, m.eventsPublished, m.eventPublishErrors, m.eventDelivery, m.eventFlush, m.eventSaturated,
		m.llmCalls, m.llmTokens, m.llmCost, m.llmDuration, m.llmFirstToken, m.runsFinished, m.streams, m.circuits)
	return m
}

// ObserveHTTP records one served request. route is the router's pattern
// (gin's FullPath), never the raw path, so ids do not become label values.
func (m *Metrics) ObserveHTTP(method, route string, status int, d time.Duration) {
	if m == nil {
		return
	}
	m.httpRequests.WithLabelValues(method, route, strconv.Itoa(status)).Inc()
	m.httpDuration.WithLabelValues(method, route).Observe(d.Seconds())
}

// EventPublished records one event delivered to a run's workflow.
func (m *Metrics) EventPublished(category, action string) {
	if m == nil {
		return
	}
	m.eventsPublished.WithLabelValues(category, action).Inc()
}

// EventDelivered records how long one event update took.
func (m *Metrics) EventDelivered(took time.Duration) {
	if m == nil {
		return
	}
	m.eventDelivery.Observe(took.Seconds())
}

// EventFlush records the current flush interval of streamed deltas, and
// whether it is lengthened because deliveries are slow (saturation).
func (m *Metrics) EventFlush(interval time.Duration, saturated bool) {
	if m == nil {
		return
	}
	m.eventFlush.Set(interval.Seconds())
	v := 0.0
	if saturated {
		v = 1
	}
	m.eventSaturated.Set(v)
}

// EventPublishFailed records a batch that could not be delivered.
func (m *Metrics) EventPublishFailed() {
	if m == nil {
		return
	}
	m.eventPublishErrors.Inc()
}

// LLMCall describes one finished LLM call attempt.
type LLMCall struct {
	Model    string
	Provider string // "" when unknown (the call failed before routing)
	Outcome  string // OutcomeOK, OutcomeError or OutcomeCancelled
	Duration time.Duration
	// FirstToken is the time to the first streamed token; 0 when none came.
	FirstToken       time.Duration
	PromptTokens     int
	CompletionTokens int
}

// AddLLMCost counts what a successful call cost, by the model that
// answered and, with MetricsOptions.TenantLabel only, the run's tenant
// ("" when the run has none).
func (m *Metrics) AddLLMCost(model, tenant string, usd float64) {
	if m == nil || usd < 0 {
		return
	}
	if !m.tenantLabel {
		m.llmCost.WithLabelValues(model).Add(usd)
		return
	}
	m.llmCost.WithLabelValues(model, tenant).Add(usd)
}

// ObserveLLMCall records one LLM call attempt.
func (m *Metrics) ObserveLLMCall(c LLMCall) {
	if m == nil {
		return
	}
	provider := c.Provider
	if provider == "" {
		provider = "unknown"
	}
	m.llmCalls.WithLabelValues(c.Model, provider, c.Outcome).Inc()
	m.llmDuration.WithLabelValues(c.Model).Observe(c.Duration.Seconds())
	if c.FirstToken > 0 {
		m.llmFirstToken.WithLabelValues(c.Model).Observe(c.FirstToken.Seconds())
	}
	if c.PromptTokens > 0 {
		m.llmTokens.WithLabelValues(c.Model, "prompt").Add(float64(c.PromptTokens))
	}
	if c.CompletionTokens > 0 {
		m.llmTokens.WithLabelValues(c.Model, "completion").Add(float64(c.CompletionTokens))
	}
}

// RunFinished records a run reaching a terminal status.
func (m *Metrics) RunFinished(status string) {
	if m == nil {
		return
	}
	m.runsFinished.WithLabelValues(status).Inc()
}

// StreamCounts are the API's event-stream counters (api.StreamStats).
type StreamCounts struct {
	Subscribers int64 // event streams open now
	Pollers     int64 // live-run pollers running now
	Queries     int64 // workflow event queries made so far
	Wakeups     int64 // queries made because a run's poller was notified
}

// ObserveStreams makes the SSE metrics read source at every scrape. The
// counts live in the API's stream hub; reading them at scrape time costs the
// hub nothing per event. A later call replaces the source.
func (m *Metrics) ObserveStreams(source func() StreamCounts) {
	if m == nil || source == nil {
		return
	}
	m.streams.source.Store(&source)
}

// streamCollector exports StreamCounts; it exports nothing until a source
// is set, so a worker-only process shows no stream series.
type streamCollector struct {
	source                                 atomic.Pointer[func() StreamCounts]
	subscribers, pollers, queries, wakeups *prometheus.Desc
}

func newStreamCollector() *streamCollector {
	return &streamCollector{
		subscribers: prometheus.NewDesc(Namespace+"_sse_subscribers", "Event streams (SSE) open now.", nil, nil),
		pollers:     prometheus.NewDesc(Namespace+"_sse_pollers", "Pollers running now: at most one per live run with subscribers in this process.", nil, nil),
		queries:     prometheus.NewDesc(Namespace+"_sse_workflow_queries_total", "Workflow event queries made by the pollers.", nil, nil),
		wakeups:     prometheus.NewDesc(Namespace+"_sse_wakeups_total", "Pollers' queries made because the run was notified (SSE_NOTIFY).", nil, nil),
	}
}

func (c *streamCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.subscribers
	ch <- c.pollers
	ch <- c.queries
	ch <- c.wakeups
}

func (c *streamCollector) Collect(ch chan<- prometheus.Metric) {
	f := c.source.Load()
	if f == nil {
		return
	}
	s := (*f)()
	ch <- prometheus.MustNewConstMetric(c.subscribers, prometheus.GaugeValue, float64(s.Subscribers))
	ch <- prometheus.MustNewConstMetric(c.pollers, prometheus.GaugeValue, float64(s.Pollers))
	ch <- prometheus.MustNewConstMetric(c.queries, prometheus.CounterValue, float64(s.Queries))
	ch <- prometheus.MustNewConstMetric(c.wakeups, prometheus.CounterValue, float64(s.Wakeups))
}

// CircuitState is one LLM provider's circuit breaker (llm.BreakerState).
type CircuitState struct {
	Provider string
	State    int    // 0 closed, 1 half-open, 2 open
	Openings uint64 // times it opened since the process started
}

// ObserveCircuits makes the circuit breaker metrics read source at every
// scrape. A later call replaces the source.
func (m *Metrics) ObserveCircuits(source func() []CircuitState) {
	if m == nil || source == nil {
		return
	}
	m.circuits.source.Store(&source)
}

// circuitCollector exports the circuits of the providers called so far.
type circuitCollector struct {
	source          atomic.Pointer[func() []CircuitState]
	state, openings *prometheus.Desc
}

func newCircuitCollector() *circuitCollector {
	return &circuitCollector{
		state:    prometheus.NewDesc(Namespace+"_llm_circuit_state", "Circuit breaker of an LLM provider in this process: 0 closed, 1 half-open, 2 open.", []string{"provider"}, nil),
		openings: prometheus.NewDesc(Namespace+"_llm_circuit_openings_total", "Times the circuit breaker of an LLM provider opened in this process.", []string{"provider"}, nil),
	}
}

func (c *circuitCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.state
	ch <- c.openings
}

func (c *circuitCollector) Collect(ch chan<- prometheus.Metric) {
	f := c.source.Load()
	if f == nil {
		return
	}
	for _, s := range (*f)() {
		ch <- prometheus.MustNewConstMetric(c.state, prometheus.GaugeValue, float64(s.State), s.Provider)
		ch <- prometheus.MustNewConstMetric(c.openings, prometheus.CounterValue, float64(s.Openings), s.Provider)
	}
}
