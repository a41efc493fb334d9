package telemetry

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"fmt"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/baggage"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
	"go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"
)

// This file is the Temporal SDK's OpenTelemetry tracer (the interceptor.Tracer
// of go.temporal.io/sdk/contrib/opentelemetry, whose behaviour and header it
// keeps) with two changes that make the spans made in workflow code
// replay-safe:
//
//   - A span the SDK gives an idempotency key (RunWorkflow, signals,
//     updates: spans of workflow code) gets ids derived from that key, so a
//     worker that replays a workflow after another worker died makes the
//     same span, with the same id, as the one its children already name as
//     their parent.
//   - The RunWorkflow span ends only when the workflow code returned. When
//     a worker evicts a workflow from its cache, the SDK unwinds the
//     workflow's goroutines and runs their deferred calls, which would end
//     (and export) the span early; the replay that follows ends it again.
//
// The GenAI spans of workflow code (WorkflowSpan) are children of these
// spans and parents of the SDK's activity and child-workflow spans.

// workflowSpanKey holds the current span in a workflow context (the SDK's
// TracerOptions.SpanContextKey), so that WorkflowSpan can read and replace
// it.
type workflowSpanKey struct{}

// temporalHeaderKey is the Temporal header field of the span context, the
// one every SDK uses.
const temporalHeaderKey = "_tracer-data"

type temporalTracer struct {
	interceptor.BaseTracer
	tracer     trace.Tracer
	propagator propagation.TextMapPropagator
	options    TemporalTracerOptions
}

// TemporalTracerOptions are the contrib tracer's options this tracer keeps.
type TemporalTracerOptions struct {
	DisableSignalTracing bool
	DisableQueryTracing  bool
	DisableUpdateTracing bool
}

// TemporalTracing is what Setup adds to the Temporal client: the SDK's
// tracing interceptor with this file's tracer (traced with tp, signals,
// queries and updates left out as Setup leaves them), for a workflow
// replayer that must see the same interceptors.
func TemporalTracing(tp trace.TracerProvider) []interceptor.Interceptor {
	return newTemporalTracingInterceptor(tp.Tracer("temporal-sdk-go"), Propagator, defaultTemporalTracerOptions)
}

// defaultTemporalTracerOptions: activities signal (or send by update)
// streamed events to their run every flush interval and the API's pollers
// query live runs every poll interval: traced, they would add hundreds of
// spans per LLM call and bury the run's shape (workflows, child workflows,
// activities). The SDK also traces an update's handler again on every
// replay.
var defaultTemporalTracerOptions = TemporalTracerOptions{DisableSignalTracing: true, DisableQueryTracing: true, DisableUpdateTracing: true}

// newTemporalTracingInterceptor is the SDK's tracing interceptor with this
// file's tracer, followed by the interceptor that tells the tracer that a
// workflow's code returned. (The SDK applies a client's interceptors in
// order, the first outermost, so the marker runs inside the tracing
// interceptor's RunWorkflow span.)
func newTemporalTracingInterceptor(t trace.Tracer, p propagation.TextMapPropagator, o TemporalTracerOptions) []interceptor.Interceptor {
	return []interceptor.Interceptor{
		interceptor.NewTracingInterceptor(&temporalTracer{tracer: t, propagator: p, options: o}),
		&returnMarker{},
	}
}

func (t *temporalTracer) Options() interceptor.TracerOptions {
	return interceptor.TracerOptions{
		SpanContextKey:       workflowSpanKey{},
		HeaderKey:            temporalHeaderKey,
		DisableSignalTracing: t.options.DisableSignalTracing,
		DisableQueryTracing:  t.options.DisableQueryTracing,
		DisableUpdateTracing: t.options.DisableUpdateTracing,
		// A header from another tracer must not fail a workflow.
		AllowInvalidParentSpans: true,
	}
}

// tracerSpan is a span this tracer started.
type tracerSpan struct {
	trace.Span
	bag baggage.Baggage
	// runWorkflow spans end only once returned is set (see returnMarker).
	runWorkflow bool
	returned    bool
}

// spanRef is a span known by its context only: one read from a header, or
// a WorkflowSpan's, which it emits itself. Finish does nothing.
type spanRef struct {
	sc  trace.SpanContext
	bag baggage.Baggage
}

func (*spanRef) Finish(*interceptor.TracerFinishSpanOptions) {}

func (t *tracerSpan) Finish(opts *interceptor.TracerFinishSpanOptions) {
	if t.runWorkflow && !t.returned {
		// Evicted from the cache, not finished: the replay ends it.
		return
	}
	if opts.Error != nil {
		t.RecordError(opts.Error)
		if !isBenign(opts.Error) {
			t.SetStatus(codes.Error, opts.Error.Error())
		}
	}
	t.End()
}

func isBenign(err error) bool {
	appErr, _ := err.(*temporal.ApplicationError)
	return appErr != nil && appErr.Category() == temporal.ApplicationErrorCategoryBenign
}

// spanContextOf is the context and baggage of any span this tracer hands
// out; ok is false for anything else.
func spanContextOf(s any) (trace.SpanContext, baggage.Baggage, bool) {
	switch s := s.(type) {
	case *tracerSpan:
		return s.SpanContext(), s.bag, true
	case *spanRef:
		return s.sc, s.bag, true
	}
	return trace.SpanContext{}, baggage.Baggage{}, false
}

type mapCarrier map[string]string

func (m mapCarrier) Get(k string) string { return m[k] }
func (m mapCarrier) Set(k, v string)     { m[k] = v }
func (m mapCarrier) Keys() []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

func (t *temporalTracer) UnmarshalSpan(m map[string]string) (interceptor.TracerSpanRef, error) {
	if _, ok := m["traceparent"]; !ok {
		return nil, nil
	}
	ctx := t.propagator.Extract(context.Background(), mapCarrier(m))
	sc := trace.SpanContextFromContext(ctx)
	if !sc.IsValid() {
		return nil, fmt.Errorf("no valid OpenTelemetry span context in the Temporal header")
	}
	return &spanRef{sc: sc, bag: baggage.FromContext(ctx)}, nil
}

func (t *temporalTracer) MarshalSpan(span interceptor.TracerSpan) (map[string]string, error) {
	sc, bag, ok := spanContextOf(span)
	if !ok {
		return nil, fmt.Errorf("unknown span type %T", span)
	}
	m := mapCarrier{}
	ctx := baggage.ContextWithBaggage(trace.ContextWithSpanContext(context.Background(), sc), bag)
	t.propagator.Inject(ctx, m)
	return m, nil
}

func (t *temporalTracer) SpanFromContext(ctx context.Context) interceptor.TracerSpan {
	span := trace.SpanFromContext(ctx)
	if !span.SpanContext().IsValid() {
		return nil
	}
	return &tracerSpan{Span: span, bag: baggage.FromContext(ctx)}
}

func (t *temporalTracer) ContextWithSpan(ctx context.Context, span interceptor.TracerSpan) context.Context {
	switch s := span.(type) {
	case *tracerSpan:
		return baggage.ContextWithBaggage(trace.ContextWithSpan(ctx, s.Span), s.bag)
	case *spanRef:
		return baggage.ContextWithBaggage(trace.ContextWithRemoteSpanContext(ctx, s.sc), s.bag)
	}
	return ctx
}

func (t *temporalTracer) StartSpan(opts *interceptor.TracerStartSpanOptions) (interceptor.TracerSpan, error) {
	if opts.ToHeader && opts.FromHeader {
		return nil, fmt.Errorf("cannot set both ToHeader and FromHeader for span")
	}
	ctx := context.Background()
	var bag baggage.Baggage
	if opts.Parent != nil {
		sc, b, ok := spanContextOf(opts.Parent)
		if !ok {
			return nil, fmt.Errorf("unrecognized parent type %T", opts.Parent)
		}
		bag = b
		if sc.IsValid() {
			ctx = baggage.ContextWithBaggage(trace.ContextWithSpanContext(ctx, sc), bag)
		}
	}
	if opts.IdempotencyKey != "" {
		// The same key on every replay: the same ids (see the file's
		// comment).
		ctx = withIDSeed(ctx, opts.IdempotencyKey)
	}
	kind := trace.SpanKindServer
	if opts.ToHeader {
		kind = trace.SpanKindClient
	}
	attrs := make([]attribute.KeyValue, 0, len(opts.Tags))
	for k, v := range opts.Tags {
		attrs = append(attrs, attribute.String(k, v))
	}
	_, span := t.tracer.Start(ctx, opts.Operation+":"+opts.Name,
		trace.WithTimestamp(opts.Time), trace.WithSpanKind(kind), trace.WithAttributes(attrs...))
	return &tracerSpan{Span: span, bag: bag, runWorkflow: opts.Operation == "RunWorkflow"}, nil
}

func (t *temporalTracer) GetLogger(logger log.Logger, ref interceptor.TracerSpanRef) log.Logger {
	sc, _, ok := spanContextOf(ref)
	if !ok || !sc.IsValid() {
		return logger
	}
	return log.With(logger, "TraceID", sc.TraceID(), "SpanID", sc.SpanID())
}

// returnMarker marks the RunWorkflow span of a workflow whose code
// returned, not in a replay, which lets the span end (see
// tracerSpan.Finish).
type returnMarker struct {
	interceptor.InterceptorBase
}

func (m *returnMarker) InterceptWorkflow(ctx workflow.Context, next interceptor.WorkflowInboundInterceptor) interceptor.WorkflowInboundInterceptor {
	return &returnMarkerInbound{WorkflowInboundInterceptorBase: interceptor.WorkflowInboundInterceptorBase{Next: next}}
}

type returnMarkerInbound struct {
	interceptor.WorkflowInboundInterceptorBase
}

func (m *returnMarkerInbound) ExecuteWorkflow(ctx workflow.Context, in *interceptor.ExecuteWorkflowInput) (any, error) {
	ret, err := m.Next.ExecuteWorkflow(ctx, in)
	// Not reached when the SDK unwinds an evicted workflow. A replay that
	// reaches the end (a query of a closed workflow replays it whole)
	// returns again: the span was emitted when the workflow really ended.
	if s, ok := ctx.Value(workflowSpanKey{}).(*tracerSpan); ok && s.runWorkflow && !workflow.IsReplaying(ctx) {
		s.returned = true
	}
	return ret, err
}

// idSeedKey holds, in the context a span is started with, the seed its ids
// are derived from (see IDGenerator).
type idSeedKey struct{}

func withIDSeed(ctx context.Context, seed string) context.Context {
	return context.WithValue(ctx, idSeedKey{}, seed)
}

// IDGenerator is the tracer provider's ID generator: random ids, except
// for spans started with a seed (spans of workflow code), whose ids are
// derived from it so that a replay makes the same ones.
type IDGenerator struct{}

func seededIDs(seed string) (trace.TraceID, trace.SpanID) {
	sum := sha256.Sum256([]byte(seed))
	var tid trace.TraceID
	var sid trace.SpanID
	copy(tid[:], sum[:16])
	copy(sid[:], sum[16:24])
	if !sid.IsValid() {
		sid[7] = 1
	}
	if !tid.IsValid() {
		tid[15] = 1
	}
	return tid, sid
}

// NewIDs returns the ids of a root span.
func (IDGenerator) NewIDs(ctx context.Context) (trace.TraceID, trace.SpanID) {
	if seed, ok := ctx.Value(idSeedKey{}).(string); ok {
		return seededIDs(seed)
	}
	var tid trace.TraceID
	var sid trace.SpanID
	for !tid.IsValid() {
		_, _ = rand.Read(tid[:])
	}
	for !sid.IsValid() {
		_, _ = rand.Read(sid[:])
	}
	return tid, sid
}

// NewSpanID returns the id of a span of trace traceID.
func (IDGenerator) NewSpanID(ctx context.Context, traceID trace.TraceID) trace.SpanID {
	if seed, ok := ctx.Value(idSeedKey{}).(string); ok {
		_, sid := seededIDs(seed)
		return sid
	}
	var sid trace.SpanID
	for !sid.IsValid() {
		_, _ = rand.Read(sid[:])
	}
	return sid
}
