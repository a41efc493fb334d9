package e2e

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/op-stack/executor/llm/llmfake"
	"github.com/op-stack/executor/models"
)

// otlpSpan is one span an OTLP receiver got, flattened.
type otlpSpan struct {
	Service  string
	TraceID  string
	SpanID   string
	ParentID string
	Name     string
	Kind     tracepb.Span_SpanKind
	Status   tracepb.Status_StatusCode
	Attrs    map[string]string
}

// otlpReceiver is an OTLP/HTTP trace receiver (POST /v1/traces, protobuf,
// as otlptracehttp sends by default): what a collector, Jaeger or Langfuse
// would get.
type otlpReceiver struct {
	t     *testing.T
	mu    sync.Mutex
	spans []otlpSpan
	url   string
}

func newOTLPReceiver(t *testing.T) *otlpReceiver {
	r := &otlpReceiver{t: t}
	srv := httptest.NewServer(http.HandlerFunc(r.serve))
	t.Cleanup(srv.Close)
	r.url = srv.URL
	return r
}

func (r *otlpReceiver) serve(w http.ResponseWriter, req *http.Request) {
	if req.Method != http.MethodPost || req.URL.Path != "/v1/traces" {
		http.NotFound(w, req)
		return
	}
	var body io.Reader = req.Body
	if req.Header.Get("Content-Encoding") == "gzip" {
		gz, err := gzip.NewReader(req.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		body = gz
	}
	raw, err := io.ReadAll(body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var in coltracepb.ExportTraceServiceRequest
	if err := proto.Unmarshal(raw, &in); err != nil {
		r.t.Errorf("OTLP request is not an ExportTraceServiceRequest (%s): %v", req.Header.Get("Content-Type"), err)
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var got []otlpSpan
	for _, rs := range in.ResourceSpans {
		service := attrMap(rs.GetResource().GetAttributes())["service.name"]
		for _, ss := range rs.ScopeSpans {
			for _, s := range ss.Spans {
				got = append(got, otlpSpan{
					Service: service, TraceID: hex.EncodeToString(s.TraceId), SpanID: hex.EncodeToString(s.SpanId),
					ParentID: hex.EncodeToString(s.ParentSpanId), Name: s.Name, Kind: s.Kind,
					Status: s.GetStatus().GetCode(), Attrs: attrMap(s.Attributes),
				})
			}
		}
	}
	r.mu.Lock()
	r.spans = append(r.spans, got...)
	r.mu.Unlock()
	out, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
	w.Header().Set("Content-Type", "application/x-protobuf")
	w.Write(out)
}

func attrMap(kvs []*commonpb.KeyValue) map[string]string {
	m := map[string]string{}
	for _, kv := range kvs {
		v := kv.GetValue()
		switch x := v.GetValue().(type) {
		case *commonpb.AnyValue_StringValue:
			m[kv.Key] = x.StringValue
		case *commonpb.AnyValue_IntValue:
			m[kv.Key] = fmt.Sprint(x.IntValue)
		case *commonpb.AnyValue_BoolValue:
			m[kv.Key] = fmt.Sprint(x.BoolValue)
		case *commonpb.AnyValue_DoubleValue:
			m[kv.Key] = fmt.Sprint(x.DoubleValue)
		case *commonpb.AnyValue_ArrayValue:
			var parts []string
			for _, e := range x.ArrayValue.Values {
				parts = append(parts, e.GetStringValue())
			}
			m[kv.Key] = strings.Join(parts, ",")
		}
	}
	return m
}

func (r *otlpReceiver) all() []otlpSpan {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]otlpSpan(nil), r.spans...)
}

// env is the OTEL_* environment of a process exporting to the receiver,
// quickly (a 100 ms batch delay) so that a killed process has exported
// what it ended.
func (r *otlpReceiver) env(extra ...string) []string {
	return append([]string{
		"OTEL_EXPORTER_OTLP_ENDPOINT=" + r.url, "OTEL_EXPORTER_OTLP_PROTOCOL=http/protobuf", "OTEL_TRACES_EXPORTER=otlp",
		"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT=", "OTEL_BSP_SCHEDULE_DELAY=100", "OTEL_TRACES_SAMPLER=always_on",
		"OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=",
	}, extra...)
}

// waitWorkflowSpan waits until the receiver has the RunWorkflow span of
// the run's workflow, which ends last (after the run's status is written).
func (r *otlpReceiver) waitWorkflowSpan(t *testing.T, workflowID string) {
	waitFor(t, 30*time.Second, "the run's RunWorkflow span", func() bool {
		for _, s := range r.all() {
			if s.Name == "RunWorkflow:"+models.RunWorkflowName && s.Attrs["temporalWorkflowID"] == workflowID {
				return true
			}
		}
		return false
	})
	time.Sleep(500 * time.Millisecond) // the batches around it
}

// spanIndex indexes spans by id.
type spanIndex map[string]otlpSpan

func indexSpans(t *testing.T, spans []otlpSpan) spanIndex {
	idx := spanIndex{}
	for _, s := range spans {
		if prev, dup := idx[s.SpanID]; dup {
			t.Errorf("span %s emitted twice: %q and %q", s.SpanID, prev.Name, s.Name)
		}
		idx[s.SpanID] = s
	}
	return idx
}

// ancestors are s's parents, nearest first, as far as the index has them.
func (idx spanIndex) ancestors(s otlpSpan) []otlpSpan {
	var out []otlpSpan
	for p, ok := idx[s.ParentID]; ok; p, ok = idx[p.ParentID] {
		out = append(out, p)
	}
	return out
}

// agentSpan is the nearest invoke_agent span above s.
func (idx spanIndex) agentSpan(s otlpSpan) (otlpSpan, bool) {
	for _, a := range idx.ancestors(s) {
		if a.Attrs["gen_ai.operation.name"] == "invoke_agent" {
			return a, true
		}
	}
	return otlpSpan{}, false
}

func spansOf(spans []otlpSpan, op string) []otlpSpan {
	var out []otlpSpan
	for _, s := range spans {
		if s.Attrs["gen_ai.operation.name"] == op {
			out = append(out, s)
		}
	}
	return out
}

// TestGenAITraceOfARun runs the service as `executor serve` with OTLP
// export to a receiver in the test: a run of two teams whose searcher
// calls a tool and a sub-agent is one trace, from the API request through
// the workflows and activities to the provider's HTTP requests, with the
// GenAI conventions' spans and attributes, and no content or secret.
func TestGenAITraceOfARun(t *testing.T) {
	rcv := newOTLPReceiver(t)
	// An MCP server behind a bearer token, which no span may carry.
	const secret = "mcp-bearer-otel-5d2e9a"
	mcpSrv := sdk.NewServer(&sdk.Implementation{Name: "guarded", Version: "1"}, nil)
	sdk.AddTool(mcpSrv, &sdk.Tool{Name: "whoami", Description: "says who called"},
		func(context.Context, *sdk.CallToolRequest, struct{}) (*sdk.CallToolResult, any, error) {
			return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "authorized caller"}}}, nil, nil
		})
	h := sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return mcpSrv }, nil)
	guarded := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+secret {
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(guarded.Close)
	sealKey := base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{7}, 32))

	e := newEnv(t, nil, withoutWorker)
	e.fake.SetRules(append([]llmfake.Rule{
		{Name: "researcher", SystemContains: "SUB-RESEARCHER", Responses: contentResponses("researcher: tunnelling is real")},
	}, referenceRules(map[string][]llmfake.Response{
		"W-SEARCHER": {
			{ToolCalls: []llmfake.ToolCall{toolCall("calculator", `{"expression":"2*21"}`), toolCall("mcp_guarded__whoami", `{}`),
				delegateCall("researcher", "research tunnelling")}},
			{Content: "searcher: 42, and tunnelling is real"},
		},
	})...)...)
	port := freePort(t)
	e.serveProcess("all", rcv.env(fmt.Sprintf("HTTP_ADDR=127.0.0.1:%d", port), "AUTH_MODE=off", "METRICS_ADDR=", "OTEL_SERVICE_NAME=executor-e2e",
		"MCP_ALLOW_PRIVATE=true", "MCP_SECRET_KEY="+sealKey)...)
	e.apiURL = fmt.Sprintf("http://127.0.0.1:%d/api/executor/v1", port)
	waitFor(t, 60*time.Second, "the service process", func() bool {
		resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/readyz", port))
		if err == nil {
			resp.Body.Close()
		}
		return err == nil && resp.StatusCode == http.StatusOK
	})

	e.mustPost("/subagents/create", map[string]any{"id": "sa-researcher", "name": "researcher", "system_prompt": "SUB-RESEARCHER You research."}, nil)
	e.mustPost("/mcp-servers/create", map[string]any{"name": "guarded", "url": guarded.URL, "bearer_token": secret}, nil)
	body := referenceHierarchy()
	searcher := body["teams"].([]any)[0].(map[string]any)["workers"].([]any)[0].(map[string]any)
	searcher["tools"] = []string{"calculator", "mcp:guarded/whoami"}
	searcher["sub_agents"] = []string{"researcher"}
	id := e.startRun(e.createHierarchy(body), "explain tunnelling")
	v := e.waitRun(id, 2*time.Minute)
	if v.Status != models.RunCompleted {
		t.Fatalf("run ended %s: %s", v.Status, v.Error)
	}
	run, err := e.store.GetRun(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	rcv.waitWorkflowSpan(t, run.WorkflowID)
	spans := rcv.all()
	idx := indexSpans(t, spans)

	// The request that started the run is the trace's root.
	var root otlpSpan
	for _, s := range spans {
		if s.Kind == tracepb.Span_SPAN_KIND_SERVER && strings.HasSuffix(s.Attrs["http.route"], "/runs/start") {
			root = s
		}
	}
	if root.SpanID == "" {
		t.Fatalf("no server span of POST /runs/start among %d spans", len(spans))
	}
	inTrace := func(s otlpSpan) bool {
		if s.TraceID != root.TraceID {
			return false
		}
		anc := idx.ancestors(s)
		return len(anc) > 0 && anc[len(anc)-1].SpanID == root.SpanID
	}

	// invoke_agent: one per agent turn, every agent of the run.
	turns := map[string]int{}
	for _, s := range spansOf(spans, "invoke_agent") {
		turns[s.Attrs["gen_ai.agent.id"]]++
		if !inTrace(s) {
			t.Errorf("invoke_agent %q is not under the request's span (trace %s, parents %d)", s.Name, s.TraceID, len(idx.ancestors(s)))
		}
		if s.Name != "invoke_agent "+s.Attrs["gen_ai.agent.name"] || s.Attrs["gen_ai.conversation.id"] != id {
			t.Errorf("invoke_agent span %q: %v", s.Name, s.Attrs)
		}
	}
	// Decisions: gs 3, research 2 (its last is implied), writing 2; the
	// final answer; the
	// workers' and the sub-agent's turns.
	want := map[string]int{"gs-1": 4, "ts-research": 2, "ts-writing": 2, "w-searcher": 1, "w-analyst": 1, "w-writer": 1, "sa-researcher": 1}
	for agent, n := range want {
		if turns[agent] != n {
			t.Errorf("%d invoke_agent spans of %s, want %d (all: %v)", turns[agent], agent, n, turns)
		}
	}

	// chat: one per LLM call, under its agent's turn, with the
	// provider's HTTP request under it.
	chats := spansOf(spans, "chat")
	if n := len(e.fake.Calls()); len(chats) != n {
		t.Errorf("%d chat spans for %d LLM requests", len(chats), n)
	}
	for _, s := range chats {
		a := s.Attrs
		if s.Name != "chat test-model" || a["gen_ai.request.model"] != "test-model" || a["gen_ai.response.model"] == "" ||
			a["gen_ai.provider.name"] != "openai" || a["gen_ai.usage.input_tokens"] == "" || a["gen_ai.usage.output_tokens"] == "" ||
			a["gen_ai.conversation.id"] != id || s.Kind != tracepb.Span_SPAN_KIND_CLIENT {
			t.Errorf("chat span %q: kind %v %v", s.Name, s.Kind, a)
		}
		if agent, ok := idx.agentSpan(s); !ok || agent.Attrs["gen_ai.agent.id"] != a["gen_ai.agent.id"] {
			t.Errorf("chat span of %s is not under its agent's invoke_agent (%v)", a["gen_ai.agent.id"], agent.Attrs)
		}
		if !inTrace(s) {
			t.Errorf("chat span of %s is not in the request's trace", a["gen_ai.agent.id"])
		}
		if _, forbidden := a["gen_ai.input.messages"]; forbidden {
			t.Errorf("chat span carries the prompt without %s", "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT")
		}
		http := 0
		for _, c := range spans {
			if c.ParentID == s.SpanID && c.Kind == tracepb.Span_SPAN_KIND_CLIENT && c.Attrs["http.request.method"] == "POST" {
				http++
			}
		}
		if http != 1 {
			t.Errorf("chat span of %s has %d HTTP request spans under it, want 1", a["gen_ai.agent.id"], http)
		}
	}

	// execute_tool: the calculator and the MCP tool, under the searcher's
	// turn, each with its call's tool_execution_id.
	execIDs := map[string]string{}
	for _, ev := range e.storedEvents(id) {
		if ev.Event.Action == models.ActionToolResult {
			if x, _ := ev.Data["tool_execution_id"].(string); x != "" {
				execIDs[ev.Data["tool_name"].(string)] = x
			}
		}
	}
	tools := spansOf(spans, "execute_tool")
	if len(tools) != 2 {
		t.Fatalf("%d execute_tool spans, want the calculator's and the MCP tool's", len(tools))
	}
	for _, tool := range tools {
		name := tool.Attrs["gen_ai.tool.name"]
		if tool.Name != "execute_tool "+name || execIDs[name] == "" || tool.Attrs["gen_ai.tool.call.id"] != execIDs[name] ||
			tool.Attrs["gen_ai.agent.id"] != "w-searcher" || tool.Attrs["gen_ai.tool.call.arguments"] != "" || tool.Status == tracepb.Status_STATUS_CODE_ERROR {
			t.Errorf("execute_tool span %q: %v (tool_execution_ids %v)", tool.Name, tool.Attrs, execIDs)
		}
		wantMCP := map[string]string{"calculator": "", "mcp_guarded__whoami": "tools/call"}
		if m, ok := wantMCP[name]; !ok || tool.Attrs["mcp.method.name"] != m {
			t.Errorf("execute_tool %q: mcp.method.name %q", name, tool.Attrs["mcp.method.name"])
		}
		if agent, ok := idx.agentSpan(tool); !ok || agent.Attrs["gen_ai.agent.id"] != "w-searcher" {
			t.Errorf("the span of %s is not under the searcher's turn", name)
		}
	}

	// The sub-agent's turn is under the searcher's (through the child
	// workflow), and the teams' turns under their supervisors' run.
	var sub otlpSpan
	for _, s := range spansOf(spans, "invoke_agent") {
		if s.Attrs["gen_ai.agent.id"] == "sa-researcher" {
			sub = s
		}
	}
	if parent, ok := idx.agentSpan(sub); !ok || parent.Attrs["gen_ai.agent.id"] != "w-searcher" {
		t.Errorf("the sub-agent's invoke_agent is not under the searcher's (%v)", parent.Attrs)
	}

	// No secret in any span: the provider key, the MCP server's token, an
	// Authorization header.
	for _, s := range spans {
		for k, v := range s.Attrs {
			if strings.Contains(v, e.cfg.OpenAIAPIKey) || strings.Contains(v, secret) || strings.Contains(strings.ToLower(k), "authorization") {
				t.Errorf("span %q carries a secret in %s", s.Name, k)
			}
		}
	}
}

// TestGenAISpansSurviveAWorkerKill kills the worker process while the
// writer's model streams, after the research team's turns ended; another
// worker replays the run and finishes it. No span is emitted twice: the
// turns that ended before the kill are not emitted again by the replay,
// and every chat span is one completed LLM call. The turn that spanned
// the kill keeps its span id, so the retried call's chat span is under it.
// Content capture is on: the prompts are on the chat spans, the tool's
// arguments and result on its span.
func TestGenAISpansSurviveAWorkerKill(t *testing.T) {
	rcv := newOTLPReceiver(t)
	e := newEnv(t, referenceRules(map[string][]llmfake.Response{
		"W-SEARCHER": {{ToolCalls: []llmfake.ToolCall{toolCall("calculator", `{"expression":"6*7"}`)}}, {Content: "searcher: 42"}},
		"W-WRITER":   {{Content: strings.Repeat("word ", 80), ChunkSize: 5, TokenDelay: 50 * time.Millisecond}},
	}), withoutWorker)
	env := rcv.env("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true")
	first := e.workerProcess(env...)
	body := referenceHierarchy()
	body["teams"].([]any)[0].(map[string]any)["workers"].([]any)[0].(map[string]any)["tools"] = []string{"calculator"}
	id := e.startRun(e.createHierarchy(body), "survive a kill")
	waitFor(t, 60*time.Second, "the writer's call to stream", func() bool {
		for _, c := range callsMatching(e.fake.Calls(), "W-WRITER") {
			if len(c.ChunkTimes) > 0 {
				return true
			}
		}
		return false
	})
	// The research team's turns ended before the writer started: their
	// spans are exported within the batch delay.
	waitFor(t, 10*time.Second, "the research team's spans", func() bool {
		n := 0
		for _, s := range spansOf(rcv.all(), "invoke_agent") {
			if a := s.Attrs["gen_ai.agent.id"]; a == "w-searcher" || a == "w-analyst" {
				n++
			}
		}
		return n == 2
	})
	// The spans the worker ended when it scheduled the writer's call (the
	// StartActivity span its attempts run under) go out within the batch
	// delay too; spans a killed worker never exported are lost.
	time.Sleep(time.Second)
	if err := first.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	first.Wait()
	before := len(rcv.all())
	e.workerProcess(env...)
	v := e.waitRun(id, 2*time.Minute)
	if v.Status != models.RunCompleted {
		t.Fatalf("run ended %s: %s", v.Status, v.Error)
	}
	run, err := e.store.GetRun(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	rcv.waitWorkflowSpan(t, run.WorkflowID)
	spans := rcv.all()
	if len(spans) <= before {
		t.Fatalf("the second worker exported nothing")
	}
	idx := indexSpans(t, spans) // fails on any span emitted twice

	turns := map[string]int{}
	for _, s := range spansOf(spans, "invoke_agent") {
		turns[s.Attrs["gen_ai.agent.id"]]++
		if _, ok := idx[s.ParentID]; !ok {
			t.Errorf("invoke_agent of %s names a parent that was never exported", s.Attrs["gen_ai.agent.id"])
		}
	}
	for _, agent := range []string{"w-searcher", "w-analyst", "w-writer"} {
		if turns[agent] != 1 {
			t.Errorf("%d invoke_agent spans of %s, want 1 (all: %v)", turns[agent], agent, turns)
		}
	}

	// Every chat span is a completed call: as many as the run's usage
	// rows of successful calls (the killed attempt's call ended nowhere).
	calls, err := e.store.LLMCalls(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	ok := 0
	for _, c := range calls {
		if c.Status == "ok" {
			ok++
		}
	}
	chats := spansOf(spans, "chat")
	okChats := 0
	writerChats := 0
	for _, s := range chats {
		if s.Status != tracepb.Status_STATUS_CODE_ERROR {
			okChats++
		}
		if s.Attrs["gen_ai.agent.id"] == "w-writer" {
			writerChats++
			if agent, found := idx.agentSpan(s); !found || agent.Attrs["gen_ai.agent.id"] != "w-writer" {
				t.Errorf("the writer's chat span is not under the writer's turn")
				for _, a := range idx.ancestors(s) {
					t.Logf("ancestor %s %q parent %s %v", a.SpanID, a.Name, a.ParentID, a.Attrs)
				}

			}
		}
		if !strings.Contains(s.Attrs["gen_ai.input.messages"], `"role":"system"`) || !strings.Contains(s.Attrs["gen_ai.output.messages"], `"role":"assistant"`) {
			t.Errorf("with content capture on, chat span of %s has no messages: %v", s.Attrs["gen_ai.agent.id"], s.Attrs)
		}
	}
	if okChats != ok {
		t.Errorf("%d chat spans for %d completed LLM calls", okChats, ok)
	}
	if writerChats != 1 {
		t.Errorf("%d chat spans of the writer, want the completed attempt's only", writerChats)
	}
	// The searcher's tool call, made by the first worker: once, with its
	// arguments and result captured.
	tools := spansOf(spans, "execute_tool")
	if len(tools) != 1 || tools[0].Attrs["gen_ai.tool.call.arguments"] != `{"expression":"6*7"}` || !strings.Contains(tools[0].Attrs["gen_ai.tool.call.result"], `"result":42`) {
		t.Errorf("execute_tool spans: %v", tools)
	}
}
