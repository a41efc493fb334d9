package e2e

import (
	"context"
	"encoding/json"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/op-stack/executor/auth"
	"github.com/op-stack/executor/internal/interop"
	"github.com/op-stack/executor/llm/llmfake"
	"github.com/op-stack/executor/models"
)

// mcpServeHierarchy is one team with one worker; its prompts carry the
// markers mcpServeRules match on.
func mcpServeHierarchy(name, description string) map[string]any {
	return map[string]any{
		"name": name, "description": description,
		"global_supervisor_agent": map[string]any{"agent_id": "gs-mcps", "system_prompt": "GS-MCPS You lead."},
		"teams": []any{map[string]any{
			"name":                  "research",
			"team_supervisor_agent": map[string]any{"agent_id": "ts-mcps", "name": "lead", "system_prompt": "TS-MCPS You lead research."},
			"workers":               []any{map[string]any{"agent_id": "w-mcps", "name": "analyst", "system_prompt": "W-MCPS You analyse."}},
		}},
	}
}

const mcpServeAnswer = "MCP FINAL ANSWER: the market is large."

// mcpServeRules script two runs told apart by their tasks: "SLOW TASK"'s
// worker streams for half a minute (the run to cancel), any other task
// runs to mcpServeAnswer.
func mcpServeRules() []llmfake.Rule {
	const slow = "Task: SLOW TASK"
	return []llmfake.Rule{
		{Name: "gs slow", SystemContains: "GS-MCPS", UserContains: slow, HasJSONSchema: true, Responses: contentResponses(decision("dispatch", "research", "look"), decision("finish", "", ""))},
		{Name: "final slow", SystemContains: "GS-MCPS", UserContains: slow, Responses: contentResponses("SLOW FINAL")},
		{Name: "ts slow", SystemContains: "TS-MCPS", UserContains: slow, Responses: contentResponses(decision("dispatch", "analyst", "SLOWWORK"), decision("finish", "", ""))},
		{Name: "worker slow", SystemContains: "W-MCPS", UserContains: "SLOWWORK", Responses: []llmfake.Response{{Content: strings.Repeat("word ", 600), TokenDelay: 50 * time.Millisecond}}},
		{Name: "gs", SystemContains: "GS-MCPS", HasJSONSchema: true, Responses: contentResponses(decision("dispatch", "research", "size it"), decision("finish", "", ""))},
		{Name: "final", SystemContains: "GS-MCPS", Responses: contentResponses(mcpServeAnswer)},
		{Name: "ts", SystemContains: "TS-MCPS", Responses: contentResponses(decision("dispatch", "analyst", "analyse"), decision("finish", "", ""))},
		{Name: "worker", SystemContains: "W-MCPS", Responses: contentResponses("analyst notes")},
	}
}

// mcpClientOut is what e2e/interop/mcp-client.mjs prints.
type mcpClientOut struct {
	SessionID  string `json:"sessionId"`
	ServerInfo struct {
		Name string `json:"name"`
	} `json:"serverInfo"`
	Tools []struct {
		Name        string         `json:"name"`
		Title       string         `json:"title"`
		Description string         `json:"description"`
		InputSchema map[string]any `json:"inputSchema"`
	} `json:"tools"`
	Progress []struct {
		Progress float64 `json:"progress"`
		Message  string  `json:"message"`
	} `json:"progress"`
	Result *struct {
		Content []struct {
			Type string `json:"type"`
			Text string `json:"text"`
		} `json:"content"`
		StructuredContent map[string]any `json:"structuredContent"`
		IsError           bool           `json:"isError"`
	} `json:"result"`
	Error *struct {
		Message string `json:"message"`
	} `json:"error"`
	// StatusWhileConnected is the cancelled call's run status, read while
	// the client was still connected (cancel).
	StatusWhileConnected string `json:"statusWhileConnected"`
}

// runMCPClient runs the official TypeScript SDK's client (the script
// e2e/interop/mcp-client.mjs) with args after the URL and key.
func runMCPClient(t *testing.T, url, key string, args ...string) mcpClientOut {
	t.Helper()
	dir := interop.Dir(t, "@modelcontextprotocol/sdk/package.json")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", append([]string{"mcp-client.mjs", url, key}, args...)...)
	cmd.Dir = dir
	var stderr strings.Builder
	cmd.Stderr = &stderr
	raw, err := cmd.Output()
	if err != nil {
		t.Fatalf("node mcp-client.mjs %v: %v\n%s", args, err, stderr.String())
	}
	var out mcpClientOut
	if err := json.Unmarshal(raw, &out); err != nil {
		t.Fatalf("mcp-client.mjs printed %q: %v\n%s", raw, err, stderr.String())
	}
	return out
}

// TestMCPServerWithTheSDKClient drives the MCP server with the official
// TypeScript client from npm: tenant A's tools list is its hierarchy (not
// B's), a call runs it with progress notifications for the agents' steps
// and answers the final answer, a cancelled call cancels its run, a key
// without runs:write gets a tool error, and tenant B neither lists nor
// calls A's hierarchy.
func TestMCPServerWithTheSDKClient(t *testing.T) {
	e := newEnv(t, mcpServeRules(), withAuth)
	all := []auth.Scope{auth.ScopeHierarchiesRead, auth.ScopeHierarchiesWrite, auth.ScopeRunsRead, auth.ScopeRunsWrite}
	keyA, keyB := e.issueKey("tenant-a", all...), e.issueKey("tenant-b", all...)
	readOnly := e.issueKey("tenant-a", auth.ScopeHierarchiesRead)
	var h struct {
		ID string `json:"hierarchy_id"`
	}
	e.mustCall("POST", "/api/executor/v1/hierarchies/create", keyA, mcpServeHierarchy("Market research", "Sizes a market from public sources."), &h)
	e.mustCall("POST", "/api/executor/v1/hierarchies/create", keyB, mcpServeHierarchy("B private", ""), nil)
	url := e.apiURL + "/mcp"

	// The tools lists: each tenant its own.
	list := runMCPClient(t, url, keyA, "list")
	if list.Error != nil || list.SessionID == "" || list.ServerInfo.Name != "op-stack-executor" {
		t.Fatalf("list: %+v", list)
	}
	if len(list.Tools) != 1 || list.Tools[0].Name != "Market_research" || list.Tools[0].Title != "Market research" ||
		!strings.HasPrefix(list.Tools[0].Description, "Sizes a market from public sources.") {
		t.Fatalf("tenant A's tools: %+v", list.Tools)
	}
	if req, _ := list.Tools[0].InputSchema["required"].([]any); len(req) != 1 || req[0] != "task" {
		t.Errorf("input schema %v", list.Tools[0].InputSchema)
	}
	listB := runMCPClient(t, url, keyB, "list")
	if len(listB.Tools) != 1 || listB.Tools[0].Name != "B_private" {
		t.Errorf("tenant B's tools: %+v %+v", listB.Tools, listB.Error)
	}

	// Tenant A's call: progress per step, the final answer.
	call := runMCPClient(t, url, keyA, "call", "Market_research", "SIZE THE MARKET")
	if call.Error != nil || call.Result == nil || call.Result.IsError || len(call.Result.Content) != 1 || call.Result.Content[0].Text != mcpServeAnswer {
		t.Fatalf("call: %+v %+v", call.Result, call.Error)
	}
	sc := call.Result.StructuredContent
	runID, _ := sc["run_id"].(string)
	if runID == "" || sc["status"] != models.RunCompleted || sc["usage"] == nil {
		t.Errorf("structured content %v", sc)
	}
	var messages []string
	for i, p := range call.Progress {
		messages = append(messages, p.Message)
		if i > 0 && p.Progress <= call.Progress[i-1].Progress {
			t.Errorf("progress %v after %v: must increase", p.Progress, call.Progress[i-1].Progress)
		}
	}
	got := strings.Join(messages, "\n")
	for _, want := range []string{
		"run " + runID + " of Market research started",
		"global supervisor dispatched team research",
		"team research: supervisor lead dispatched worker analyst",
		"team research: worker analyst answered",
		"run completed",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("progress has no %q:\n%s", want, got)
		}
	}
	// The run is an ordinary run of tenant A's, and not B's to see.
	var v runView
	e.mustCall("POST", "/api/executor/v1/runs/get", keyA, map[string]any{"id": runID}, &v)
	if v.Status != models.RunCompleted || v.Task != "SIZE THE MARKET" {
		t.Errorf("run %s: %+v", runID, v)
	}
	if status, _ := e.call("POST", "/api/executor/v1/runs/get", keyB, map[string]any{"id": runID}); status != 404 {
		t.Errorf("tenant B reads tenant A's MCP run: %d, want 404", status)
	}

	// Tenant B cannot call A's hierarchy: it is an unknown tool to B.
	callB := runMCPClient(t, url, keyB, "call", "Market_research", "SIZE THE MARKET")
	if callB.Error == nil || !strings.Contains(callB.Error.Message, "unknown tool") || callB.Result != nil {
		t.Errorf("tenant B calls A's tool: %+v %+v", callB.Result, callB.Error)
	}
	// A key that may list but not run gets a tool error.
	ro := runMCPClient(t, url, readOnly, "call", "Market_research", "SIZE THE MARKET")
	if ro.Result == nil || !ro.Result.IsError || !strings.Contains(ro.Result.Content[0].Text, "PERMISSION_DENIED") {
		t.Errorf("read-only key's call: %+v %+v", ro.Result, ro.Error)
	}

	// Cancelling the call cancels the run: the client aborts once the
	// worker is at work, and keeps its session (no DELETE).
	cancelled := runMCPClient(t, url, keyA, "cancel", "Market_research", "SLOW TASK", "dispatched worker")
	if cancelled.Error == nil || cancelled.Result != nil || len(cancelled.Progress) == 0 {
		t.Fatalf("cancelled call: %+v %+v", cancelled.Result, cancelled.Error)
	}
	first := cancelled.Progress[0].Message
	slowID, ok := strings.CutPrefix(first, "run ")
	slowID, _, _ = strings.Cut(slowID, " ")
	if !ok || slowID == "" {
		t.Fatalf("first progress %q names no run", first)
	}
	// Cancelled while the client was still connected, with its session:
	// by notifications/cancelled, not by a disconnect.
	if cancelled.StatusWhileConnected != models.RunCancelled {
		t.Errorf("run %s while the client stayed connected: %q, want cancelled", slowID, cancelled.StatusWhileConnected)
	}
	e.mustCall("POST", "/api/executor/v1/runs/get", keyA, map[string]any{"id": slowID}, &v)
	if v.Status != models.RunCancelled {
		t.Errorf("run %s: %s, want cancelled", slowID, v.Status)
	}
}
