package telemetry

import (
	"context"
	"encoding/json"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	semconv "go.opentelemetry.io/otel/semconv/v1.41.0"
	"go.opentelemetry.io/otel/trace"
	"go.temporal.io/sdk/workflow"
)

// The service's GenAI spans follow OpenTelemetry's GenAI semantic
// conventions as go.opentelemetry.io/otel's semconv v1.41.0 spells them
// (the newest semconv package of otel v1.47 with the gen_ai.* keys; later
// ones moved them to the conventions' own repository):
//
//   - invoke_agent {agent}: one turn of an agent (a worker's or a
//     sub-agent's turn, made in workflow code as a WorkflowSpan; a
//     supervisor's decision or the final answer, made in its activity);
//   - chat {model}: one LLM call, in the activity that makes it, parent of
//     the provider's HTTP request;
//   - execute_tool {tool}: one tool call (MCP tools included), in the
//     activity that runs it.

// TracerName names the service's own tracer (its GenAI spans).
const TracerName = "github.com/op-stack/executor"

// EnvCaptureContent is the variable that lets spans carry prompts,
// completions, tool arguments and tool results, the name other GenAI
// instrumentations read. Off by default: they are the tenants' content.
const EnvCaptureContent = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"

var captureContent atomic.Bool

// SetCaptureContent turns content capture on or off for the process
// (Setup sets it from EnvCaptureContent).
func SetCaptureContent(on bool) { captureContent.Store(on) }

// CaptureContent says whether GenAI spans carry content.
func CaptureContent() bool { return captureContent.Load() }

// parseBool reads a boolean variable's value: true, 1 or yes.
func parseBool(v string) bool {
	b, err := strconv.ParseBool(strings.TrimSpace(v))
	return err == nil && b || strings.EqualFold(strings.TrimSpace(v), "yes")
}

func tracer() trace.Tracer { return otel.GetTracerProvider().Tracer(TracerName) }

// ProviderName is the gen_ai.provider.name of one of the router's
// providers: the convention's value where it has one.
func ProviderName(provider string) attribute.KeyValue {
	switch strings.ToLower(provider) {
	case "openai":
		return semconv.GenAIProviderNameOpenAI
	case "aws_bedrock", "bedrock", "aws.bedrock": // the router's name is aws_bedrock
		return semconv.GenAIProviderNameAWSBedrock
	case "anthropic":
		return semconv.GenAIProviderNameAnthropic
	}
	return semconv.GenAIProviderNameKey.String(provider)
}

// Agent is what a GenAI span says of the agent it works for.
type Agent struct {
	Name string
	ID   string // the hierarchy's agent_id
	// Conversation is the run's thread id ("" for runs started before the
	// spans).
	Conversation string
}

func (a Agent) attrs() []attribute.KeyValue {
	var out []attribute.KeyValue
	if a.Name != "" {
		out = append(out, semconv.GenAIAgentName(a.Name))
	}
	if a.ID != "" {
		out = append(out, semconv.GenAIAgentID(a.ID))
	}
	if a.Conversation != "" {
		out = append(out, semconv.GenAIConversationID(a.Conversation))
	}
	return out
}

// AgentAttributes are the attributes of an invoke_agent span.
func AgentAttributes(a Agent, model, provider string) []attribute.KeyValue {
	out := append([]attribute.KeyValue{semconv.GenAIOperationNameInvokeAgent}, a.attrs()...)
	if model != "" {
		out = append(out, semconv.GenAIRequestModel(model))
	}
	if provider != "" {
		out = append(out, ProviderName(provider))
	}
	return out
}

// UsageAttributes are a span's token counts.
func UsageAttributes(input, output int) []attribute.KeyValue {
	return []attribute.KeyValue{semconv.GenAIUsageInputTokens(input), semconv.GenAIUsageOutputTokens(output)}
}

// StartAgent starts an invoke_agent span in an activity (a supervisor's
// turn is one activity).
func StartAgent(ctx context.Context, a Agent, model, provider string) (context.Context, trace.Span) {
	return tracer().Start(ctx, "invoke_agent "+a.Name, trace.WithSpanKind(trace.SpanKindInternal),
		trace.WithAttributes(AgentAttributes(a, model, provider)...))
}

// Message is one chat message as gen_ai.input.messages records it.
type Message struct {
	Role    string
	Content string
}

// ChatRequest describes one LLM call.
type ChatRequest struct {
	Agent    Agent
	Model    string
	Provider string // "" when the router picks it
	// Messages is called only when content is captured.
	Messages func() []Message
}

// ChatSpan is one LLM call's span.
type ChatSpan struct{ span trace.Span }

// StartChat starts the chat span of an LLM call; the provider's HTTP
// request (otelhttp on the LLM clients) is its child.
func StartChat(ctx context.Context, r ChatRequest) (context.Context, ChatSpan) {
	attrs := append([]attribute.KeyValue{semconv.GenAIOperationNameChat, semconv.GenAIRequestModel(r.Model)}, r.Agent.attrs()...)
	if r.Provider != "" {
		attrs = append(attrs, ProviderName(r.Provider))
	}
	ctx, span := tracer().Start(ctx, "chat "+r.Model, trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(attrs...))
	if CaptureContent() && r.Messages != nil && span.IsRecording() {
		// Built only for a span that is kept: a prompt can be long.
		span.SetAttributes(semconv.GenAIInputMessagesKey.String(messagesJSON(r.Messages(), "")))
	}
	return ctx, ChatSpan{span}
}

// ChatResult is what an LLM call answered.
type ChatResult struct {
	Provider      string
	Model         string // the model that answered
	InputTokens   int
	OutputTokens  int
	FinishReason  string
	Output        string
	ToolCallNames []string
}

// End ends the span with the call's answer or error.
func (s ChatSpan) End(res *ChatResult, err error) {
	if res != nil {
		if res.Provider != "" {
			s.span.SetAttributes(ProviderName(res.Provider))
		}
		if res.Model != "" {
			s.span.SetAttributes(semconv.GenAIResponseModel(res.Model))
		}
		s.span.SetAttributes(UsageAttributes(res.InputTokens, res.OutputTokens)...)
		if res.FinishReason != "" {
			s.span.SetAttributes(semconv.GenAIResponseFinishReasons(res.FinishReason))
		}
		if CaptureContent() {
			s.span.SetAttributes(semconv.GenAIOutputMessagesKey.String(messagesJSON([]Message{{Role: "assistant", Content: res.Output}}, res.FinishReason)))
		}
	}
	EndSpan(s.span, err)
}

// SetProvider names the provider of a failed call, when the error did.
func (s ChatSpan) SetProvider(provider string) {
	if provider != "" {
		s.span.SetAttributes(ProviderName(provider))
	}
}

// messagesJSON is gen_ai.input.messages / gen_ai.output.messages: the
// conventions' JSON, one text part per message.
func messagesJSON(msgs []Message, finish string) string {
	type part struct {
		Type    string `json:"type"`
		Content string `json:"content"`
	}
	type msg struct {
		Role         string `json:"role"`
		Parts        []part `json:"parts"`
		FinishReason string `json:"finish_reason,omitempty"`
	}
	out := make([]msg, len(msgs))
	for i, m := range msgs {
		out[i] = msg{Role: m.Role, Parts: []part{{Type: "text", Content: m.Content}}, FinishReason: finish}
	}
	raw, _ := json.Marshal(out)
	return string(raw)
}

// ToolCall describes one tool call.
type ToolCall struct {
	Agent     Agent
	Name      string
	CallID    string // the tool_execution_id
	MCPServer string // the MCP server's name for an MCP tool
	Arguments string // recorded only when content is captured
}

// StartTool starts the execute_tool span of a tool call. An MCP tool's
// span also has mcp.method.name (tools/call).
func StartTool(ctx context.Context, c ToolCall) (context.Context, trace.Span) {
	attrs := append([]attribute.KeyValue{semconv.GenAIOperationNameExecuteTool, semconv.GenAIToolName(c.Name),
		semconv.GenAIToolCallID(c.CallID)}, c.Agent.attrs()...)
	if c.MCPServer != "" {
		attrs = append(attrs, semconv.GenAIToolType("extension"), semconv.McpMethodNameToolsCall)
	} else {
		attrs = append(attrs, semconv.GenAIToolType("function"))
	}
	if CaptureContent() {
		attrs = append(attrs, semconv.GenAIToolCallArgumentsKey.String(c.Arguments))
	}
	return tracer().Start(ctx, "execute_tool "+c.Name, trace.WithSpanKind(trace.SpanKindInternal), trace.WithAttributes(attrs...))
}

// EndTool ends a tool call's span: result is recorded when content is
// captured; a result that is the tool's error marks the span as an error.
func EndTool(span trace.Span, result string, isError bool, err error) {
	if CaptureContent() && err == nil {
		span.SetAttributes(semconv.GenAIToolCallResultKey.String(result))
	}
	if err == nil && isError {
		span.SetAttributes(semconv.ErrorTypeKey.String("tool_error"))
		span.SetStatus(codes.Error, "the tool returned an error")
	}
	EndSpan(span, err)
}

// EndSpan ends span, recording err.
func EndSpan(span trace.Span, err error) {
	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
		span.SetAttributes(semconv.ErrorType(err))
	}
	span.End()
}

// WorkflowSpan is a span of workflow code (an agent turn's invoke_agent)
// that is emitted once, however often the workflow replays: its ids are
// derived from the workflow execution and key, so the activities and child
// workflows started under it name the same parent on every replay, its
// times come from workflow.Now, and End emits it only when the workflow is
// not replaying. A nil *WorkflowSpan (tracing off) does nothing.
type WorkflowSpan struct {
	name   string
	seed   string
	parent trace.SpanContext
	attrs  []attribute.KeyValue
	begin  time.Time
}

// StartWorkflowSpan starts a WorkflowSpan named name under the workflow's
// current span; key tells it from the workflow's other spans and must be
// the same on every replay (an id the workflow recorded). The returned
// context makes it the parent of what the workflow starts next.
func StartWorkflowSpan(ctx workflow.Context, key, name string, attrs ...attribute.KeyValue) (workflow.Context, *WorkflowSpan) {
	parent, bag, ok := spanContextOf(ctx.Value(workflowSpanKey{}))
	if !ok || !parent.IsValid() {
		return ctx, nil
	}
	info := workflow.GetInfo(ctx)
	seed := "WorkflowSpan:" + info.Namespace + ":" + info.WorkflowExecution.ID + ":" + info.WorkflowExecution.RunID + ":" + key
	_, sid := seededIDs(seed)
	sc := trace.NewSpanContext(trace.SpanContextConfig{TraceID: parent.TraceID(), SpanID: sid, TraceFlags: parent.TraceFlags(), TraceState: parent.TraceState()})
	s := &WorkflowSpan{name: name, seed: seed, parent: parent, attrs: attrs, begin: workflow.Now(ctx)}
	return workflow.WithValue(ctx, workflowSpanKey{}, &spanRef{sc: sc, bag: bag}), s
}

// End emits the span, unless the workflow is replaying (a replay reaches
// End of spans that were emitted already). Call it on the turn's return
// paths, not in a defer: the SDK unwinds an evicted workflow's goroutines
// with their deferred calls.
func (s *WorkflowSpan) End(ctx workflow.Context, err error, attrs ...attribute.KeyValue) {
	if s == nil || workflow.IsReplaying(ctx) {
		return
	}
	start := trace.WithTimestamp(s.begin)
	c := withIDSeed(trace.ContextWithSpanContext(context.Background(), s.parent), s.seed)
	_, span := tracer().Start(c, s.name, start, trace.WithSpanKind(trace.SpanKindInternal), trace.WithAttributes(s.attrs...))
	span.SetAttributes(attrs...)
	if err != nil {
		span.SetStatus(codes.Error, err.Error())
		span.SetAttributes(semconv.ErrorType(err))
	}
	span.End(trace.WithTimestamp(workflow.Now(ctx)))
}
