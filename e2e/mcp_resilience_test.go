package e2e

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	enumspb "go.temporal.io/api/enums/v1"
	workflowpb "go.temporal.io/api/workflow/v1"

	"github.com/op-stack/executor/config"
	"github.com/op-stack/executor/llm/llmfake"
	"github.com/op-stack/executor/models"
)

// lockedBuffer is a bytes.Buffer that the service's goroutines may log
// into while the test reads it.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// freePort is a TCP port of 127.0.0.1 that nobody listens on (now).
func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// pendingToolAttempt looks for the run's RunTool activity in flight (in
// the run's workflow or its first team turn's) and returns its attempt
// number and its last failure's message.
func (e *testEnv) pendingToolAttempt(runID string) (int32, string) {
	e.t.Helper()
	pa := e.pendingTool(runID)
	return pa.GetAttempt(), pa.GetLastFailure().GetMessage()
}

// pendingTool is the run's RunTool activity in flight, nil when none is.
func (e *testEnv) pendingTool(runID string) *workflowpb.PendingActivityInfo {
	e.t.Helper()
	for _, wf := range []string{models.RunWorkflowID(runID), models.TeamWorkflowID(runID, 1)} {
		d, err := e.temporal.DescribeWorkflowExecution(context.Background(), wf, "")
		if err != nil {
			continue // the team's workflow does not exist (yet, or inline)
		}
		for _, pa := range d.GetPendingActivities() {
			if pa.GetActivityType().GetName() == "RunTool" {
				return pa
			}
		}
	}
	return nil
}

// toolEvents are the run's llm.tool_call and llm.tool_result events of
// the function named tool, in order.
func toolEvents(msgs []sseMessage, tool string) (calls, results []models.Event) {
	for _, m := range msgs {
		if m.Event.Data["tool_name"] != tool {
			continue
		}
		switch m.Type {
		case "llm.tool_call":
			calls = append(calls, m.Event)
		case "llm.tool_result":
			results = append(results, m.Event)
		}
	}
	return calls, results
}

// TestMCPServerKilledAndRestarted: the reference server
// (server-everything over Streamable HTTP, a real node process) is killed
// (SIGKILL) after the worker has listed its tools and while the model is
// answering with a call to one of them. The call's first attempt finds
// the port closed (connection refused); the server is started again on
// the same port; the tool activity's retry opens a fresh session and the
// model gets the tool's result. The retry is visible: Temporal counted a
// failed attempt, and the stream's llm.tool_result says which attempt
// answered.
func TestMCPServerKilledAndRestarted(t *testing.T) {
	bin := everythingBin(t)
	port := freePort(t)
	kill := runEverything(t, bin, port)
	// Tool retries wait 3s, then 6s: time for node to start again before
	// the last of the three attempts.
	e := newEnv(t, nil, withConfig(func(c *config.Config) {
		c.MCPAllowPrivate = true
		c.LLMRetryInitial, c.LLMRetryMax = 3*time.Second, 6*time.Second
	}))
	e.mustPost("/mcp-servers/create", map[string]any{"name": "everything", "url": fmt.Sprintf("http://127.0.0.1:%d/mcp", port)}, nil)
	e.fake.SetRules(append([]llmfake.Rule{
		{Name: "searcher after tools", SystemContains: "W-SEARCHER", HasToolResult: true, Responses: contentResponses("searcher: the sum is in")},
		{Name: "searcher first", SystemContains: "W-SEARCHER", Responses: []llmfake.Response{{ToolCalls: []llmfake.ToolCall{
			toolCall("mcp_everything__get-sum", `{"a":2,"b":40}`),
		}}}},
	}, referenceRules(nil)...)...)
	// The server dies while the fake model streams its answer with the
	// tool call: the worker listed the tools before asking the model, so
	// the call meets a dead server.
	killed := make(chan struct{})
	var once sync.Once
	e.fake.SetOnChunkWritten(func(callIndex, chunkIndex int, _ time.Time) {
		if chunkIndex != 0 {
			return
		}
		for _, c := range e.fake.Calls() {
			if c.Index == callIndex && c.RuleName == "searcher first" {
				once.Do(func() { kill(); close(killed) })
			}
		}
	})
	body := referenceHierarchy()
	searcher := body["teams"].([]any)[0].(map[string]any)["workers"].([]any)[0].(map[string]any)
	searcher["tools"] = []string{"mcp:everything/get-sum"}
	id := e.startRun(e.createHierarchy(body), "add with a server that restarts")
	select {
	case <-killed:
	case <-time.After(time.Minute):
		t.Fatal("the searcher never asked the model")
	}
	// Temporal records the first attempt's failure and schedules the next.
	var failure string
	waitFor(t, 30*time.Second, "the tool's first attempt to fail", func() bool {
		var attempt int32
		attempt, failure = e.pendingToolAttempt(id)
		return attempt >= 2 && failure != ""
	})
	if !strings.Contains(failure, "connection refused") {
		t.Errorf("first attempt failed with %q, want a refused connection", failure)
	}
	runEverything(t, bin, port) // the same port, a new process
	msgs := e.streamAll(id)
	if last := msgs[len(msgs)-1].Type; last != "lifecycle.completed" {
		t.Fatalf("run ended with %s", last)
	}
	calls, results := toolEvents(msgs, "mcp_everything__get-sum")
	if len(calls) != 1 || len(results) != 1 {
		t.Fatalf("%d llm.tool_call and %d llm.tool_result: want one of each (a retry is not a new call)", len(calls), len(results))
	}
	res := results[0].Data
	attempt, _ := res["attempt"].(float64)
	if res["is_error"] != false || !strings.Contains(fmt.Sprint(res["result"]), "42") || attempt < 2 ||
		res["mcp_server"] != "everything" || res["tool_execution_id"] != calls[0].Data["tool_execution_id"] {
		t.Fatalf("tool result %v: want 42 from a retried attempt (attempt >= 2) of the same tool_execution_id", res)
	}
	var read bool
	for _, c := range callsMatching(e.fake.Calls(), "W-SEARCHER") {
		for _, m := range c.Messages {
			read = read || (m.Role == "tool" && strings.Contains(m.Content, "42"))
		}
	}
	if !read {
		t.Error("the model never read the tool's result")
	}
	t.Logf("first attempt failed with %q; attempt %v answered", failure, res["attempt"])
}

// TestMCPServerKilledDuringCall: the reference server is killed
// (SIGKILL) while it runs a call (its trigger-long-running-operation tool,
// 3 seconds long), so the session dies under the call; it is started again
// on the same port, and the tool activity's retry runs the call on a
// fresh session to its end.
func TestMCPServerKilledDuringCall(t *testing.T) {
	bin := everythingBin(t)
	port := freePort(t)
	kill := runEverything(t, bin, port)
	e := newEnv(t, nil, withConfig(func(c *config.Config) {
		c.MCPAllowPrivate = true
		c.LLMRetryInitial, c.LLMRetryMax = 3*time.Second, 6*time.Second
	}))
	e.mustPost("/mcp-servers/create", map[string]any{"name": "everything", "url": fmt.Sprintf("http://127.0.0.1:%d/mcp", port)}, nil)
	const tool = "mcp_everything__trigger-long-running-operation"
	e.fake.SetRules(append([]llmfake.Rule{
		{Name: "searcher after tools", SystemContains: "W-SEARCHER", HasToolResult: true, Responses: contentResponses("searcher: the operation ran")},
		{Name: "searcher first", SystemContains: "W-SEARCHER", Responses: []llmfake.Response{{ToolCalls: []llmfake.ToolCall{
			toolCall(tool, `{"duration":3,"steps":3}`),
		}}}},
	}, referenceRules(nil)...)...)
	body := referenceHierarchy()
	searcher := body["teams"].([]any)[0].(map[string]any)["workers"].([]any)[0].(map[string]any)
	searcher["tools"] = []string{"mcp:everything/trigger-long-running-operation"}
	id := e.startRun(e.createHierarchy(body), "a long call on a server that crashes")
	// The call is running (its activity's first attempt started); a
	// second into its three, the server dies.
	waitFor(t, time.Minute, "the call to start", func() bool {
		pa := e.pendingTool(id)
		return pa != nil && pa.GetAttempt() == 1 && pa.GetState() == enumspb.PENDING_ACTIVITY_STATE_STARTED
	})
	time.Sleep(time.Second)
	if pa := e.pendingTool(id); pa == nil || pa.GetAttempt() != 1 {
		t.Fatalf("the call's activity is %v when the server is killed, want its first attempt still running", pa)
	}
	kill()
	var failure string
	waitFor(t, 30*time.Second, "the attempt cut by the crash to fail", func() bool {
		var attempt int32
		attempt, failure = e.pendingToolAttempt(id)
		return attempt >= 2 && failure != ""
	})
	runEverything(t, bin, port)
	msgs := e.streamAll(id)
	if last := msgs[len(msgs)-1].Type; last != "lifecycle.completed" {
		t.Fatalf("run ended with %s", last)
	}
	calls, results := toolEvents(msgs, tool)
	if len(calls) != 1 || len(results) != 1 {
		t.Fatalf("%d llm.tool_call and %d llm.tool_result: want one of each", len(calls), len(results))
	}
	res := results[0].Data
	attempt, _ := res["attempt"].(float64)
	if res["is_error"] != false || !strings.Contains(fmt.Sprint(res["result"]), "Long running operation completed") || attempt < 2 {
		t.Fatalf("tool result %v: want the operation's completion from a retried attempt", res)
	}
	t.Logf("the crash failed the first attempt with %q; attempt %v answered", failure, res["attempt"])
}

// TestMCPStdioReferenceServer: a worker's MCP server is the reference
// server's stdio transport (node server-everything stdio), a program the
// operator allows in MCP_STDIO_COMMANDS: the worker starts it for the
// listing and for the call, and the run gets the tool's result.
func TestMCPStdioReferenceServer(t *testing.T) {
	bin := everythingBin(t)
	e := newEnv(t, nil, withConfig(func(c *config.Config) { c.MCPStdioCommands = []string{"node"} }))
	// A program the operator did not list is refused.
	if status, env := e.post("/mcp-servers/create", map[string]any{"name": "sh", "command": []string{"sh", "-c", "id"}}); status != 400 || !strings.Contains(env.Message, "MCP_STDIO_COMMANDS") {
		t.Fatalf("create with sh: %d %s", status, env.Message)
	}
	var created models.MCPServer
	e.mustPost("/mcp-servers/create", map[string]any{"name": "local", "command": []string{"node", bin, "stdio"}, "timeout_seconds": 60}, &created)
	if len(created.Warnings) != 0 {
		t.Errorf("a stdio server got warnings at create: %v", created.Warnings)
	}
	e.fake.SetRules(append([]llmfake.Rule{
		{Name: "searcher after tools", SystemContains: "W-SEARCHER", HasToolResult: true, Responses: contentResponses("searcher: stdio answered")},
		{Name: "searcher first", SystemContains: "W-SEARCHER", Responses: []llmfake.Response{{ToolCalls: []llmfake.ToolCall{
			toolCall("mcp_local__echo", `{"message":"over stdio"}`),
			toolCall("mcp_local__get-sum", `{"a":20,"b":22}`),
		}}}},
	}, referenceRules(nil)...)...)
	body := referenceHierarchy()
	searcher := body["teams"].([]any)[0].(map[string]any)["workers"].([]any)[0].(map[string]any)
	searcher["tools"] = []string{"mcp:local/echo", "mcp:local/get-sum"}
	id := e.startRun(e.createHierarchy(body), "stdio")
	msgs := e.streamAll(id)
	if last := msgs[len(msgs)-1].Type; last != "lifecycle.completed" {
		t.Fatalf("run ended with %s", last)
	}
	for tool, want := range map[string]string{"mcp_local__echo": "Echo: over stdio", "mcp_local__get-sum": "42"} {
		_, results := toolEvents(msgs, tool)
		if len(results) != 1 {
			t.Errorf("%s: %d results", tool, len(results))
			continue
		}
		res := results[0].Data
		if res["is_error"] != false || !strings.Contains(fmt.Sprint(res["result"]), want) || res["mcp_server"] != "local" {
			t.Errorf("%s: result %v, want %q from server local", tool, res, want)
		}
	}
	var offered bool
	for _, c := range e.fake.Calls() {
		for _, tool := range c.Tools {
			offered = offered || tool.Name == "mcp_local__get-sum"
		}
	}
	if !offered {
		t.Error("the model was not offered the stdio server's tools")
	}
}

// TestMCPServerUnreachableAtCreate: a server that does not answer (a
// closed port; a loopback address the network guard refuses when private
// addresses are not allowed) is saved, and create and update answer a
// MCP_SERVER_UNREACHABLE warning, as does the CLI on its standard error;
// the reference server, running, gets none.
func TestMCPServerUnreachableAtCreate(t *testing.T) {
	closed := fmt.Sprintf("http://127.0.0.1:%d/mcp", freePort(t))
	e := newEnv(t, nil, withConfig(func(c *config.Config) { c.MCPAllowPrivate = true }))
	var m models.MCPServer
	e.mustPost("/mcp-servers/create", map[string]any{"name": "later", "url": closed}, &m)
	if len(m.Warnings) != 1 || m.Warnings[0].Code != models.WarningMCPServerUnreachable || !strings.Contains(m.Warnings[0].Message, "connection refused") {
		t.Fatalf("create of a closed port: warnings %+v", m.Warnings)
	}
	var got models.MCPServer
	e.mustPost("/mcp-servers/get", map[string]any{"name": "later"}, &got)
	if got.ID != m.ID || got.URL != closed || len(got.Warnings) != 0 {
		t.Fatalf("get: %+v: want the server saved, without warnings", got)
	}
	// Once the server is up, an update finds it.
	everything := startEverything(t)
	var updated models.MCPServer
	e.mustPost("/mcp-servers/update", map[string]any{"id": m.ID, "name": "later", "url": everything}, &updated)
	if len(updated.Warnings) != 0 {
		t.Errorf("update to the running reference server: warnings %+v", updated.Warnings)
	}
	e.mustPost("/mcp-servers/update", map[string]any{"id": m.ID, "name": "later", "url": closed}, &updated)
	if len(updated.Warnings) != 1 || updated.Warnings[0].Code != models.WarningMCPServerUnreachable {
		t.Errorf("update back to a closed port: warnings %+v", updated.Warnings)
	}
	// The CLI says it on standard error and still succeeds.
	r := e.runCLI("", "mcp-servers", "create", "--name", "later-cli", "--url", closed)
	if r.code != 0 || !strings.Contains(r.stderr, "warning: MCP_SERVER_UNREACHABLE") || strings.TrimSpace(r.stdout) == "" {
		t.Errorf("CLI create: exit %d\nstdout %s\nstderr %s", r.code, r.stdout, r.stderr)
	}

	// Without MCP_ALLOW_PRIVATE the probe goes through the network guard:
	// the running reference server on loopback is refused, and saved.
	guarded := newEnv(t, nil)
	guarded.mustPost("/mcp-servers/create", map[string]any{"name": "loopback", "url": everything}, &m)
	if len(m.Warnings) != 1 || m.Warnings[0].Code != models.WarningMCPServerUnreachable {
		t.Fatalf("create of a loopback server without MCP_ALLOW_PRIVATE: warnings %+v", m.Warnings)
	}
	t.Logf("guarded warning: %s", m.Warnings[0].Message)
}

// TestConsoleMCP drives the web console in headless Chromium: a run whose
// worker calls a built-in tool and an MCP tool (whose server refuses the
// first attempt, as a restarting one does) shows both as tool cards, the
// MCP one titled "mcp <server>/<tool>" with its result and the attempt
// that answered; the MCP servers page lists the tenant's server with
// where its credential comes from; no script failed.
func TestConsoleMCP(t *testing.T) {
	t.Setenv("MCP_HEADER_TRACKER_TEAM", "blue")
	s := sdk.NewServer(&sdk.Implementation{Name: "tracker", Version: "1"}, nil)
	sdk.AddTool(s, &sdk.Tool{Name: "search_issues", Description: "searches issues"},
		func(context.Context, *sdk.CallToolRequest, struct{}) (*sdk.CallToolResult, any, error) {
			return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "3 open issues"}}}, nil, nil
		})
	h := sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return s }, nil)
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("X-Team") != "blue" {
			http.Error(w, "who are you", http.StatusUnauthorized)
			return
		}
		raw, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(raw))
		if bytes.Contains(raw, []byte(`"tools/call"`)) && calls.Add(1) == 1 {
			http.Error(w, "restarting", http.StatusServiceUnavailable)
			return
		}
		h.ServeHTTP(w, r)
	}))
	defer srv.Close()
	e := newEnv(t, nil, withConfig(func(c *config.Config) { c.MCPAllowPrivate = true }))
	var tracker struct {
		ID string `json:"id"`
	}
	e.mustPost("/mcp-servers/create", map[string]any{"name": "tracker", "url": srv.URL, "header_env": map[string]string{"X-Team": "MCP_HEADER_TRACKER_TEAM"}}, &tracker)
	e.fake.SetRules(append([]llmfake.Rule{
		{Name: "searcher after tools", SystemContains: "W-SEARCHER", HasToolResult: true, Responses: contentResponses("searcher: 3 issues, 42")},
		{Name: "searcher first", SystemContains: "W-SEARCHER", Responses: []llmfake.Response{{ToolCalls: []llmfake.ToolCall{
			toolCall("calculator", `{"expression":"2*21"}`),
			toolCall("mcp_tracker__search_issues", `{}`),
		}}}},
	}, referenceRules(nil)...)...)
	body := referenceHierarchy()
	searcher := body["teams"].([]any)[0].(map[string]any)["workers"].([]any)[0].(map[string]any)
	searcher["tools"] = []string{"calculator", "mcp:tracker/search_issues"}
	id := e.startRun(e.createHierarchy(body), "console mcp")
	e.waitRun(id, 2*time.Minute)

	root := e.rootURL()
	b := newBrowser(t)
	b.do("open the run page", chromedp.Navigate(root+"/runs/"+id))
	b.waitJS("the run drawn to its end", `document.body.dataset.runStatus === 'completed' && document.querySelectorAll('.tool-card.completed').length === 2`, 60*time.Second)
	type card struct {
		Title, Server, Status, State, Result, Lane string
	}
	cards := eval[[]card](b, `[...document.querySelectorAll('.tool-card')].map((c) => ({
	  Title: c.querySelector('.tool-title').textContent, Server: c.dataset.mcpServer || '', Status: c.dataset.status || '',
	  State: c.querySelector('.badge').textContent, Result: c.querySelector('.tool-result').textContent,
	  Lane: c.closest('.lane').dataset.agentId }))`)
	byServer := map[string]card{}
	for _, c := range cards {
		byServer[c.Server] = c
	}
	mcpCard, builtin := byServer["tracker"], byServer[""]
	if len(cards) != 2 || !strings.HasPrefix(mcpCard.Title, "mcp tracker/search_issues ") || mcpCard.Status != "completed" ||
		mcpCard.Result != "3 open issues" || !strings.Contains(mcpCard.State, "attempt 2") || mcpCard.Lane != "w-searcher" {
		t.Errorf("MCP card %+v (all cards %+v): want 'mcp tracker/search_issues', completed on attempt 2 with its result, in the searcher's lane", mcpCard, cards)
	}
	if !strings.HasPrefix(builtin.Title, "tool calculator ") || !strings.Contains(builtin.Result, `"result":42`) || builtin.Status != "completed" {
		t.Errorf("built-in card %+v: want 'tool calculator' with 42", builtin)
	}
	b.screenshot("console-mcp-cards")

	// An MCP call the server's approval policy gates (the tool has no
	// readOnlyHint) waits on the run page as "mcp tracker/search_issues",
	// with its reason, and the page's Approve runs it.
	e.mustPost("/mcp-servers/update", map[string]any{"id": tracker.ID, "name": "tracker", "url": srv.URL, "header_env": map[string]string{"X-Team": "MCP_HEADER_TRACKER_TEAM"}, "approval": "not_read_only"}, nil)
	gated := e.startRun(e.createHierarchy(body), "console mcp approval")
	b.do("open the gated run's page", chromedp.Navigate(root+"/runs/"+gated))
	b.waitJS("the MCP approval card", `!!document.querySelector('.approval.pending[data-agent-id="w-searcher"] .approval-tool')`, 60*time.Second)
	gate := eval[map[string]string](b, `(() => { const c = document.querySelector('.approval.pending[data-agent-id="w-searcher"]');
	  return { tool: c.querySelector('.approval-tool').textContent, reason: (c.querySelector('.approval-reason') || {}).textContent || '' }; })()`)
	if gate["tool"] != "mcp tracker/search_issues" || gate["reason"] != " (not read only)" {
		t.Errorf("MCP approval card = %v; want 'mcp tracker/search_issues' and its reason", gate)
	}
	before := calls.Load()
	b.do("approve the MCP call", chromedp.Click(chromedp.CSS(`.approval.pending[data-agent-id="w-searcher"] button.approve`)))
	if v := e.waitRun(gated, 2*time.Minute); v.Status != "completed" {
		t.Fatalf("the approved run ended %s: %s", v.Status, v.Error)
	}
	if calls.Load() == before {
		t.Error("the approved MCP call never reached the server")
	}
	b.screenshot("console-mcp-approval")

	b.do("open the MCP servers page", chromedp.Navigate(root+"/mcp-servers"))
	b.waitJS("the MCP servers page", `document.body.dataset.ready === 'true'`, 30*time.Second)
	row := eval[map[string]string](b, `(() => { const r = document.querySelector('#mcp-server-list tr[data-mcp-server="tracker"]');
	  return r ? { endpoint: r.querySelector('.endpoint').textContent, credentials: r.querySelector('.credentials').textContent,
	    tools: r.querySelector('.tools').textContent, current: document.querySelector('#nav-mcp-servers.current') ? 'yes' : 'no' } : {}; })()`)
	if row["endpoint"] != srv.URL || row["credentials"] != "X-Team from $MCP_HEADER_TRACKER_TEAM" || row["tools"] != "all" || row["current"] != "yes" {
		t.Errorf("MCP servers page row = %v", row)
	}
	if strings.Contains(eval[string](b, `document.body.textContent`), "blue") {
		t.Error("the MCP servers page shows a credential's value")
	}
	b.screenshot("console-mcp-servers")
	if errs := b.pageErrors(); len(errs) > 0 {
		t.Errorf("page errors: %v", errs)
	}
}
