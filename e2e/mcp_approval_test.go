package e2e

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/op-stack/executor/config"
	"github.com/op-stack/executor/llm/llmfake"
	"github.com/op-stack/executor/models"
)

// gatedServer is an MCP server built with the Go SDK whose tools carry
// annotations: wipe says destructiveHint, peek readOnlyHint. It counts
// the calls each tool gets and keeps wipe's arguments.
type gatedServer struct {
	url        string
	wipes      atomic.Int32
	peeks      atomic.Int32
	mu         sync.Mutex
	wipedPaths []string
}

func startGatedServer(t *testing.T) *gatedServer {
	t.Helper()
	g := &gatedServer{}
	s := sdk.NewServer(&sdk.Implementation{Name: "gated", Version: "1"}, nil)
	yes := true
	sdk.AddTool(s, &sdk.Tool{Name: "wipe", Description: "deletes a path", Annotations: &sdk.ToolAnnotations{DestructiveHint: &yes}},
		func(_ context.Context, _ *sdk.CallToolRequest, in struct {
			Path string `json:"path"`
		}) (*sdk.CallToolResult, any, error) {
			g.wipes.Add(1)
			g.mu.Lock()
			g.wipedPaths = append(g.wipedPaths, in.Path)
			g.mu.Unlock()
			return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "wiped " + in.Path}}}, nil, nil
		})
	sdk.AddTool(s, &sdk.Tool{Name: "peek", Description: "reads a path", Annotations: &sdk.ToolAnnotations{ReadOnlyHint: true}},
		func(context.Context, *sdk.CallToolRequest, struct{}) (*sdk.CallToolResult, any, error) {
			g.peeks.Add(1)
			return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "peeked"}}}, nil, nil
		})
	srv := httptest.NewServer(sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return s }, nil))
	t.Cleanup(srv.Close)
	g.url = srv.URL
	return g
}

func (g *gatedServer) paths() []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]string(nil), g.wipedPaths...)
}

// searcherWith is the reference hierarchy whose searcher has tools (and
// approval_tools, when given).
func searcherWith(tools, approvalTools []string) map[string]any {
	body := referenceHierarchy()
	searcher := body["teams"].([]any)[0].(map[string]any)["workers"].([]any)[0].(map[string]any)
	searcher["tools"] = tools
	if approvalTools != nil {
		searcher["approval_tools"] = approvalTools
	}
	return body
}

// mcpToolRules: the searcher calls calls, then answers.
func mcpToolRules(calls ...llmfake.ToolCall) []llmfake.Rule {
	return append([]llmfake.Rule{
		{Name: "searcher after tools", SystemContains: "W-SEARCHER", HasToolResult: true, Responses: contentResponses("searcher: done with the tools")},
		{Name: "searcher first", SystemContains: "W-SEARCHER", Responses: []llmfake.Response{{ToolCalls: calls}}},
	}, referenceRules(nil)...)
}

// approvalEventsOf are run id's stored approval.* events.
func (e *testEnv) approvalEventsOf(id string) []models.Event {
	var out []models.Event
	for _, ev := range e.storedEvents(id) {
		if ev.Event.Category == models.CategoryApproval {
			out = append(out, ev)
		}
	}
	return out
}

// TestMCPApprovalFromAnnotations: a server whose approval is
// "destructive" gates its tool annotated destructiveHint (wipe), not the
// one annotated readOnlyHint (peek). The wipe call waits: the run reads
// waiting_approval, the pending approval and approval.requested name the
// MCP server, the tool and the reason, and the server has not been
// called. Approved with edited arguments, the server gets those; in a
// second run, rejected, the server never sees wipe and the model gets an
// error result. Then an agent asks for a gate itself: approval_tools
// naming "mcp:plain/peek" on a server with no policy.
func TestMCPApprovalFromAnnotations(t *testing.T) {
	g := startGatedServer(t)
	e := newEnv(t, mcpToolRules(toolCall("mcp_gated__wipe", `{"path":"/tmp/a"}`), toolCall("mcp_gated__peek", `{}`)),
		withConfig(func(c *config.Config) { c.MCPAllowPrivate = true }))
	e.mustPost("/mcp-servers/create", map[string]any{"name": "gated", "url": g.url, "approval": "destructive"}, nil)
	hid := e.createHierarchy(searcherWith([]string{"mcp:gated/*"}, nil))

	waitGate := func(id string) models.Approval {
		t.Helper()
		wipes, peeks := g.wipes.Load(), g.peeks.Load()
		ap := e.waitApproval(id, "w-searcher")
		if ap.Kind != models.ApprovalKindTool || ap.Tool != "mcp_gated__wipe" || ap.MCPServer != "gated" || ap.MCPTool != "wipe" ||
			ap.Reason != "destructive" || ap.Arguments != `{"path":"/tmp/a"}` {
			t.Fatalf("pending approval = %+v", ap)
		}
		if v := e.getRun(id); v.Status != models.RunWaitingApproval {
			t.Errorf("run status while the MCP call waits: %s", v.Status)
		}
		if g.wipes.Load() != wipes || g.peeks.Load() != peeks {
			t.Errorf("the server was called before the decision: wipe %d, peek %d (were %d, %d)", g.wipes.Load(), g.peeks.Load(), wipes, peeks)
		}
		return ap
	}

	// Approved, with edited arguments.
	id := e.startRun(hid, "mcp approve")
	ap := waitGate(id)
	e.mustPost("/runs/approve", map[string]any{"id": id, "approval_id": ap.ApprovalID, "arguments": map[string]any{"path": "/tmp/b"}}, nil)
	if v := e.waitRun(id, time.Minute); v.Status != models.RunCompleted {
		t.Fatalf("approved run ended %s: %s", v.Status, v.Error)
	}
	if p := g.paths(); len(p) != 1 || p[0] != "/tmp/b" || g.peeks.Load() != 1 {
		t.Fatalf("after approval: wiped %v, peeks %d: want /tmp/b once and one peek", p, g.peeks.Load())
	}
	evs := e.approvalEventsOf(id)
	if len(evs) != 2 || evs[0].Event.Action != models.ActionRequested || evs[0].Data["mcp_server"] != "gated" ||
		evs[0].Data["mcp_tool"] != "wipe" || evs[0].Data["tool"] != "mcp_gated__wipe" || evs[0].Data["reason"] != "destructive" ||
		evs[1].Data["decision"] != models.ApprovalApproved || evs[1].Data["edited"] != true {
		t.Errorf("approval events = %+v", evs)
	}

	// Rejected: wipe never reaches the server.
	id = e.startRun(hid, "mcp reject")
	ap = waitGate(id)
	if g.wipes.Load() != 1 {
		t.Fatalf("wipe calls before the rejection: %d", g.wipes.Load())
	}
	e.mustPost("/runs/reject", map[string]any{"id": id, "approval_id": ap.ApprovalID, "comment": "not today"}, nil)
	if v := e.waitRun(id, time.Minute); v.Status != models.RunCompleted {
		t.Fatalf("rejected run ended %s: %s", v.Status, v.Error)
	}
	if g.wipes.Load() != 1 || g.peeks.Load() != 2 {
		t.Errorf("after the rejection: wipe %d (want 1: the first run's), peek %d (want 2)", g.wipes.Load(), g.peeks.Load())
	}
	var result models.Event
	for _, ev := range e.storedEvents(id) {
		if ev.Event.Action == models.ActionToolResult && ev.Data["tool_name"] == "mcp_gated__wipe" {
			result = ev
		}
	}
	if result.Data["is_error"] != true || result.Data["mcp_server"] != "gated" {
		t.Errorf("the rejected call's llm.tool_result = %+v", result.Data)
	}
	var told bool
	for _, c := range callsMatching(e.fake.Calls(), "W-SEARCHER") {
		for _, m := range c.Messages {
			told = told || (m.Role == "tool" && m.Content == "error: tool call rejected by anonymous: not today")
		}
	}
	if !told {
		t.Error("the model was not told of the rejection")
	}

	// The agent's own gate: approval_tools names an MCP tool of a server
	// without a policy; the read-only tool waits all the same.
	e.mustPost("/mcp-servers/create", map[string]any{"name": "plain", "url": g.url}, nil)
	e.fake.SetRules(mcpToolRules(toolCall("mcp_plain__peek", `{}`), toolCall("mcp_plain__wipe", `{"path":"/tmp/c"}`))...)
	id = e.startRun(e.createHierarchy(searcherWith([]string{"mcp:plain/*"}, []string{"mcp:plain/peek"})), "mcp agent gate")
	ap = e.waitApproval(id, "w-searcher")
	if ap.MCPServer != "plain" || ap.MCPTool != "peek" || ap.Reason != models.MCPGateAgent {
		t.Fatalf("agent-gated approval = %+v", ap)
	}
	if g.peeks.Load() != 2 {
		t.Errorf("peek ran before its approval")
	}
	e.mustPost("/runs/approve", map[string]any{"id": id, "approval_id": ap.ApprovalID}, nil)
	if v := e.waitRun(id, time.Minute); v.Status != models.RunCompleted {
		t.Fatalf("agent-gated run ended %s: %s", v.Status, v.Error)
	}
	if g.peeks.Load() != 3 || g.wipes.Load() != 2 {
		t.Errorf("after the agent's gate: peek %d (want 3), wipe %d (want 2: no policy on plain)", g.peeks.Load(), g.wipes.Load())
	}
}

// hangingServer is a Go SDK MCP server whose tool hangs until its
// request's context ends, recording that it started and that the
// context was cancelled.
type hangingServer struct {
	url                string
	started, cancelled chan struct{}
}

func startHangingServer(t *testing.T) *hangingServer {
	t.Helper()
	h := &hangingServer{started: make(chan struct{}, 8), cancelled: make(chan struct{}, 8)}
	s := sdk.NewServer(&sdk.Implementation{Name: "hanging", Version: "1"}, nil)
	release := make(chan struct{})
	sdk.AddTool(s, &sdk.Tool{Name: "wait", Description: "waits for ever", Annotations: &sdk.ToolAnnotations{ReadOnlyHint: true}},
		func(ctx context.Context, _ *sdk.CallToolRequest, _ struct{}) (*sdk.CallToolResult, any, error) {
			h.started <- struct{}{}
			select {
			case <-ctx.Done():
				h.cancelled <- struct{}{}
			case <-release: // the test is over (and failed): let Close return
			}
			return nil, nil, ctx.Err()
		})
	srv := httptest.NewServer(sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return s }, nil))
	t.Cleanup(srv.Close)
	t.Cleanup(srv.CloseClientConnections)
	t.Cleanup(func() { close(release) }) // runs first
	h.url = srv.URL
	return h
}

// TestMCPCallCancelled: a run cancelled while its worker's MCP call hangs
// (the server's timeout an hour, the tool's two minutes) ends cancelled
// promptly, and the server sees the call's request cancelled: the
// activity learns of the cancel from its heartbeat and closes the call.
// So does a team's turn cancelled (runs/teams/cancel) during the call,
// and the run completes without the team.
func TestMCPCallCancelled(t *testing.T) {
	h := startHangingServer(t)
	e := newEnv(t, mcpToolRules(toolCall("mcp_hanging__wait", `{}`)), withConfig(func(c *config.Config) { c.MCPAllowPrivate = true }))
	e.mustPost("/mcp-servers/create", map[string]any{"name": "hanging", "url": h.url, "timeout_seconds": 3600}, nil)
	id := e.startRun(e.createHierarchy(searcherWith([]string{"mcp:hanging/wait"}, nil)), "mcp cancel")
	select {
	case <-h.started:
	case <-time.After(30 * time.Second):
		t.Fatal("the MCP call never reached the server")
	}
	cancelled := time.Now()
	e.mustPost("/runs/cancel", map[string]any{"id": id}, nil)
	v := e.waitRun(id, 20*time.Second)
	if v.Status != models.RunCancelled {
		t.Fatalf("run ended %s: %s", v.Status, v.Error)
	}
	took := time.Since(cancelled)
	select {
	case <-h.cancelled:
	case <-time.After(20 * time.Second):
		t.Fatal("the server's request was not cancelled: the call goes on after its run")
	}
	if took > 15*time.Second {
		t.Errorf("the run took %s to end cancelled", took)
	}
	// Nothing more reaches the server: the call is not retried.
	time.Sleep(2 * time.Second)
	if n := len(h.started); n != 0 {
		t.Errorf("%d more calls reached the server after the cancel", n)
	}
	var raw []byte
	for _, ev := range e.storedEvents(id) {
		if ev.Event.Category == models.CategoryLifecycle {
			raw, _ = json.Marshal(ev.Event)
		}
	}
	if string(raw) != `{"category":"lifecycle","action":"cancelled"}` {
		t.Errorf("last lifecycle event = %s", raw)
	}

	// Per-team cancel: the research team's turn is cancelled during the
	// call; its call's request ends, and the run goes on without it. The
	// supervisors' scripts start again.
	e.fake.SetRules(mcpToolRules(toolCall("mcp_hanging__wait", `{}`))...)
	id = e.startRun(e.createHierarchy(searcherWith([]string{"mcp:hanging/wait"}, nil)), "mcp team cancel")
	select {
	case <-h.started:
	case <-time.After(30 * time.Second):
		t.Fatalf("the second run's MCP call never reached the server (run %s)", e.getRun(id).Status)
	}
	e.mustPost("/runs/teams/cancel", map[string]any{"id": id, "team_name": "research", "reason": "enough"}, nil)
	select {
	case <-h.cancelled:
	case <-time.After(20 * time.Second):
		t.Fatal("the team's MCP call was not cancelled")
	}
	if v := e.waitRun(id, time.Minute); v.Status != models.RunCompleted {
		t.Errorf("run with a cancelled team ended %s: %s", v.Status, v.Error)
	}
	if n := len(h.started); n != 0 {
		t.Errorf("%d more calls reached the server after the team's cancel", n)
	}
}
