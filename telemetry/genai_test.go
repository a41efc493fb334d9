package telemetry

import (
	"context"
	"errors"
	"testing"
	"time"

	"go.opentelemetry.io/otel"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.temporal.io/sdk/interceptor"
)

// recorder installs a global provider with the service's ID generator
// that records ended spans.
func recorder(t *testing.T) (*tracetest.SpanRecorder, *sdktrace.TracerProvider) {
	restoreGlobals(t)
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec), sdktrace.WithIDGenerator(IDGenerator{}))
	otel.SetTracerProvider(tp)
	return rec, tp
}

func TestSeededIDsRepeat(t *testing.T) {
	g := IDGenerator{}
	ctx := withIDSeed(context.Background(), "WorkflowInboundInterceptor:ns:run-1:r:1")
	t1, s1 := g.NewIDs(ctx)
	t2, s2 := g.NewIDs(ctx)
	if t1 != t2 || s1 != s2 || !t1.IsValid() || !s1.IsValid() {
		t.Errorf("seeded ids differ: %s/%s and %s/%s", t1, s1, t2, s2)
	}
	if g.NewSpanID(ctx, t1) != s1 {
		t.Errorf("NewSpanID and NewIDs disagree for one seed")
	}
	if _, other := g.NewIDs(withIDSeed(context.Background(), "another")); other == s1 {
		t.Errorf("two seeds gave one span id")
	}
	r1, _ := g.NewIDs(context.Background())
	r2, _ := g.NewIDs(context.Background())
	if r1 == r2 || !r1.IsValid() {
		t.Errorf("unseeded trace ids %s and %s", r1, r2)
	}
}

// The RunWorkflow span of a workflow the worker evicts (the SDK runs the
// deferred Finish of its goroutines) is not exported; the replay's span,
// with the same ids, is once the workflow returns.
func TestRunWorkflowSpanEndsOnlyWhenTheWorkflowReturned(t *testing.T) {
	rec, tp := recorder(t)
	tr := &temporalTracer{tracer: tp.Tracer("temporal-sdk-go"), propagator: Propagator}
	opts := func() *interceptor.TracerStartSpanOptions {
		return &interceptor.TracerStartSpanOptions{Operation: "RunWorkflow", Name: "RunWorkflow", Time: time.Now(),
			FromHeader: true, IdempotencyKey: "WorkflowInboundInterceptor:default:run-x:abc:1"}
	}
	evicted, err := tr.StartSpan(opts())
	if err != nil {
		t.Fatal(err)
	}
	evicted.Finish(&interceptor.TracerFinishSpanOptions{})
	if n := len(rec.Ended()); n != 0 {
		t.Fatalf("%d spans ended by an eviction", n)
	}
	replayed, _ := tr.StartSpan(opts())
	replayed.(*tracerSpan).returned = true
	replayed.Finish(&interceptor.TracerFinishSpanOptions{Error: errors.New("boom")})
	ended := rec.Ended()
	if len(ended) != 1 {
		t.Fatalf("%d spans ended, want the returned workflow's", len(ended))
	}
	if ended[0].SpanContext().SpanID() != evicted.(*tracerSpan).SpanContext().SpanID() {
		t.Errorf("the replay's RunWorkflow span has another id than the first worker's")
	}
	if ended[0].Status().Description != "boom" {
		t.Errorf("status = %v", ended[0].Status())
	}
}

// A header the tracer wrote is read back as the same span context.
func TestTemporalHeaderRoundTrip(t *testing.T) {
	_, tp := recorder(t)
	tr := &temporalTracer{tracer: tp.Tracer("x"), propagator: Propagator}
	span, _ := tr.StartSpan(&interceptor.TracerStartSpanOptions{Operation: "StartActivity", Name: "A", ToHeader: true, Time: time.Now()})
	m, err := tr.MarshalSpan(span)
	if err != nil {
		t.Fatal(err)
	}
	ref, err := tr.UnmarshalSpan(m)
	if err != nil {
		t.Fatal(err)
	}
	got, _, _ := spanContextOf(ref)
	if want := span.(*tracerSpan).SpanContext(); got.SpanID() != want.SpanID() || got.TraceID() != want.TraceID() {
		t.Errorf("round trip: %v, want %v", got, want)
	}
	child, _ := tr.StartSpan(&interceptor.TracerStartSpanOptions{Operation: "RunActivity", Name: "A", FromHeader: true, Parent: ref, Time: time.Now()})
	child.Finish(&interceptor.TracerFinishSpanOptions{})
	if c := child.(*tracerSpan); c.SpanContext().TraceID() != got.TraceID() {
		t.Errorf("a child of the header's span is in another trace")
	}
}

// Content is on the chat and tool spans only when the operator opts in.
func TestContentCaptureIsOptIn(t *testing.T) {
	rec, _ := recorder(t)
	t.Cleanup(func() { SetCaptureContent(false) })
	agent := Agent{Name: "writer", ID: "w-1", Conversation: "thread-1"}
	for _, capture := range []bool{false, true} {
		SetCaptureContent(capture)
		_, chat := StartChat(context.Background(), ChatRequest{Agent: agent, Model: "m", Provider: "openai",
			Messages: func() []Message { return []Message{{Role: "user", Content: "PROMPT"}} }})
		chat.End(&ChatResult{Provider: "openai", Model: "m-1", InputTokens: 3, OutputTokens: 4, FinishReason: "stop", Output: "ANSWER"}, nil)
		_, tool := StartTool(context.Background(), ToolCall{Agent: agent, Name: "calc", CallID: "exec_1", Arguments: "ARGS"})
		EndTool(tool, "RESULT", false, nil)
	}
	ended := rec.Ended()
	if len(ended) != 4 {
		t.Fatalf("%d spans", len(ended))
	}
	for i, s := range ended {
		attrs := map[string]string{}
		for _, kv := range s.Attributes() {
			attrs[string(kv.Key)] = kv.Value.Emit()
		}
		captured := i >= 2
		content := attrs["gen_ai.input.messages"] + attrs["gen_ai.output.messages"] + attrs["gen_ai.tool.call.arguments"] + attrs["gen_ai.tool.call.result"]
		if (content != "") != captured {
			t.Errorf("span %q (capture %v): content %q", s.Name(), captured, content)
		}
		if attrs["gen_ai.agent.id"] != "w-1" || attrs["gen_ai.agent.name"] != "writer" || attrs["gen_ai.conversation.id"] != "thread-1" {
			t.Errorf("span %q: %v", s.Name(), attrs)
		}
		switch s.Name() {
		case "chat m":
			if attrs["gen_ai.operation.name"] != "chat" || attrs["gen_ai.provider.name"] != "openai" || attrs["gen_ai.request.model"] != "m" ||
				attrs["gen_ai.response.model"] != "m-1" || attrs["gen_ai.usage.input_tokens"] != "3" || attrs["gen_ai.usage.output_tokens"] != "4" {
				t.Errorf("chat: %v", attrs)
			}
		case "execute_tool calc":
			if attrs["gen_ai.operation.name"] != "execute_tool" || attrs["gen_ai.tool.name"] != "calc" || attrs["gen_ai.tool.call.id"] != "exec_1" {
				t.Errorf("tool: %v", attrs)
			}
		default:
			t.Errorf("span %q", s.Name())
		}
	}
}

// The router's provider names become the conventions' values where they
// have one.
func TestProviderName(t *testing.T) {
	for in, want := range map[string]string{"openai": "openai", "aws_bedrock": "aws.bedrock", "openrouter": "openrouter", "offline": "offline"} {
		if got := ProviderName(in).Value.AsString(); got != want {
			t.Errorf("ProviderName(%q) = %q, want %q", in, got, want)
		}
	}
}
