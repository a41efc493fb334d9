package e2e

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"

	"github.com/op-stack/executor/config"
	"github.com/op-stack/executor/internal/interop"
	"github.com/op-stack/executor/llm/llmfake"
	"github.com/op-stack/executor/models"
)

// startEverything installs the reference MCP server
// @modelcontextprotocol/server-everything (everythingBin) and starts it
// over Streamable HTTP on a free port. It returns its endpoint.
func startEverything(t *testing.T) string {
	t.Helper()
	bin := everythingBin(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	runEverything(t, bin, port)
	return fmt.Sprintf("http://127.0.0.1:%d/mcp", port)
}

// everythingBin installs the reference MCP server
// @modelcontextprotocol/server-everything at the version e2e/interop's
// package-lock.json pins (npm ci) and returns its entry point (node BIN
// streamableHttp|stdio). Without npm the test is skipped loudly, except in
// CI, where it must run.
func everythingBin(t *testing.T) string {
	t.Helper()
	const entry = "@modelcontextprotocol/server-everything/dist/index.js"
	return filepath.Join(interop.Dir(t, entry), "node_modules", entry)
}

// runEverything starts server-everything's Streamable HTTP transport on
// port and waits until it listens. The returned kill stops it at once
// (SIGKILL, as a crash would), and is also the test's cleanup.
func runEverything(t *testing.T, bin string, port int) (kill func()) {
	t.Helper()
	cmd := exec.Command("node", bin, "streamableHttp")
	cmd.Env = append(os.Environ(), fmt.Sprintf("PORT=%d", port))
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	kill = func() {
		once.Do(func() {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		})
	}
	t.Cleanup(kill)
	deadline := time.Now().Add(30 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", port), time.Second)
		if err == nil {
			c.Close()
			return kill
		}
		if time.Now().After(deadline) {
			t.Fatalf("server-everything did not listen on %d within 30s", port)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// startGoMCPServer is an MCP server built with the Go SDK for what the
// reference server cannot do: a tool that fails and one that hangs.
func startGoMCPServer(t *testing.T) string {
	t.Helper()
	s := sdk.NewServer(&sdk.Implementation{Name: "e2e", Version: "1"}, nil)
	release := make(chan struct{})
	sdk.AddTool(s, &sdk.Tool{Name: "fail", Description: "always fails"},
		func(context.Context, *sdk.CallToolRequest, struct{}) (*sdk.CallToolResult, any, error) {
			return nil, nil, errors.New("the tracker is read-only today")
		})
	sdk.AddTool(s, &sdk.Tool{Name: "hang", Description: "never answers"},
		func(ctx context.Context, _ *sdk.CallToolRequest, _ struct{}) (*sdk.CallToolResult, any, error) {
			select {
			case <-ctx.Done():
			case <-release:
			}
			return nil, nil, errors.New("released")
		})
	srv := httptest.NewServer(sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return s }, nil))
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(release) })
	return srv.URL
}

// TestMCPToolsInARun: a worker calls tools of two MCP servers of its
// tenant (the reference server-everything from npm, and a Go SDK server)
// and gets their results: text, structured content and an image stored
// as an artifact; a tool's own error and a hanging call (the server's 1s
// timeout) come back as error results; every call has spec 004's events
// with mcp_server, and the model's next request carries the results.
func TestMCPToolsInARun(t *testing.T) {
	everything := startEverything(t)
	gosrv := startGoMCPServer(t)
	e := newEnv(t, nil, withConfig(func(c *config.Config) { c.MCPAllowPrivate = true }))
	e.mustPost("/mcp-servers/create", map[string]any{"name": "everything", "url": everything}, nil)
	e.mustPost("/mcp-servers/create", map[string]any{"name": "gosrv", "url": gosrv, "timeout_seconds": 1}, nil)

	e.fake.SetRules(append([]llmfake.Rule{
		{Name: "searcher after tools", SystemContains: "W-SEARCHER", HasToolResult: true, Responses: contentResponses("searcher: the tools said their piece")},
		{Name: "searcher first", SystemContains: "W-SEARCHER", Responses: []llmfake.Response{{ToolCalls: []llmfake.ToolCall{
			toolCall("mcp_everything__echo", `{"message":"hello mcp"}`),
			toolCall("mcp_everything__get-sum", `{"a":2,"b":40}`),
			toolCall("mcp_everything__get-tiny-image", `{}`),
			toolCall("mcp_gosrv__fail", `{}`),
			toolCall("mcp_gosrv__hang", `{}`),
			// A tool of the server that the agent does not list.
			toolCall("mcp_everything__get-env", `{}`),
		}}}},
	}, referenceRules(nil)...)...)
	body := referenceHierarchy()
	searcher := body["teams"].([]any)[0].(map[string]any)["workers"].([]any)[0].(map[string]any)
	searcher["tools"] = []string{"calculator", "mcp:everything/echo", "mcp:everything/get-sum", "mcp:everything/get-tiny-image", "mcp:gosrv/*"}
	id := e.startRun(e.createHierarchy(body), "mcp")
	msgs := e.streamAll(id)
	if last := msgs[len(msgs)-1].Type; last != "lifecycle.completed" {
		t.Fatalf("run ended with %s", last)
	}
	calls, results := map[string]models.Event{}, map[string]models.Event{}
	for _, m := range msgs {
		switch m.Type {
		case "llm.tool_call":
			calls[m.Event.Data["tool_name"].(string)] = m.Event
		case "llm.tool_result":
			results[m.Event.Data["tool_name"].(string)] = m.Event
		}
	}
	want := map[string]struct {
		server, contains string
		isError          bool
	}{
		"mcp_everything__echo":           {"everything", "Echo: hello mcp", false},
		"mcp_everything__get-sum":        {"everything", "42", false},
		"mcp_everything__get-tiny-image": {"everything", "image/png", false},
		"mcp_gosrv__fail":                {"gosrv", "read-only today", true},
		"mcp_gosrv__hang":                {"gosrv", "no answer within 1s", true},
		"mcp_everything__get-env":        {"everything", "not one of this agent's tools", true},
	}
	for name, w := range want {
		call, res := calls[name], results[name]
		if call.Data == nil || res.Data == nil {
			t.Errorf("%s: call %v result %v", name, call.Data, res.Data)
			continue
		}
		if call.Data["mcp_server"] != w.server || res.Data["mcp_server"] != w.server || call.Data["tool_execution_id"] != res.Data["tool_execution_id"] {
			t.Errorf("%s: call %v, result %v: want mcp_server %s and one tool_execution_id", name, call.Data, res.Data, w.server)
		}
		content := fmt.Sprint(res.Data["result"], res.Data["content"], res.Data["error"])
		if !strings.Contains(content, w.contains) || (res.Data["is_error"] == true) != w.isError {
			t.Errorf("%s: result %v, want is_error %v and %q", name, res.Data, w.isError, w.contains)
		}
	}
	if ids, _ := results["mcp_everything__get-tiny-image"].Data["artifact_ids"].([]any); len(ids) != 1 {
		t.Errorf("the image is not stored as an artifact: %v", results["mcp_everything__get-tiny-image"].Data)
	}
	// The model was offered the MCP tools and read their results.
	var offered, read bool
	for _, c := range e.fake.Calls() {
		for _, tool := range c.Tools {
			offered = offered || tool.Name == "mcp_everything__get-sum"
		}
		for _, m := range c.Messages {
			read = read || (m.Role == "tool" && strings.Contains(m.Content, "Echo: hello mcp"))
		}
	}
	if !offered || !read {
		t.Errorf("offered the MCP tools %v, read their results %v", offered, read)
	}
	// The Web UI's line for each MCP call names its server and tool.
	summaries := activitySummaries(t, e.temporal, models.RunWorkflowID(id))
	for _, want := range []string{"mcp everything/echo · searcher", "mcp everything/get-sum · searcher", "mcp gosrv/hang · searcher"} {
		if !slices.Contains(summaries, want) {
			t.Errorf("no activity summary %q among %q", want, summaries)
		}
	}
}

// activitySummaries are the summaries (the Web UI's line) of the
// activities workflowID's history scheduled, in order.
func activitySummaries(t *testing.T, c client.Client, workflowID string) []string {
	t.Helper()
	it := c.GetWorkflowHistory(context.Background(), workflowID, "", false, 0)
	var out []string
	for it.HasNext() {
		ev, err := it.Next()
		if err != nil {
			t.Fatalf("history of %s: %v", workflowID, err)
		}
		if ev.GetActivityTaskScheduledEventAttributes() == nil || ev.GetUserMetadata().GetSummary() == nil {
			continue
		}
		var summary string
		if err := converter.GetDefaultDataConverter().FromPayload(ev.GetUserMetadata().GetSummary(), &summary); err != nil {
			t.Fatalf("summary of event %d: %v", ev.GetEventId(), err)
		}
		out = append(out, summary)
	}
	return out
}

// TestMCPSecretStaysOut: a server that wants a bearer token gets it (sealed
// with MCP_SECRET_KEY in the database, opened by the worker's activity,
// and by the API's probe at create), and the token appears in no API
// answer, stored event, stream message, workflow history of the run, nor
// in the service's logs.
func TestMCPSecretStaysOut(t *testing.T) {
	const secret = "mcp-bearer-e2e-0b7c1f"
	s := sdk.NewServer(&sdk.Implementation{Name: "guarded", Version: "1"}, nil)
	sdk.AddTool(s, &sdk.Tool{Name: "whoami", Description: "says who called"},
		func(context.Context, *sdk.CallToolRequest, struct{}) (*sdk.CallToolResult, any, error) {
			return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "authorized caller"}}}, nil, nil
		})
	h := sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return s }, nil)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+secret {
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		h.ServeHTTP(w, r)
	}))
	defer srv.Close()
	key := make([]byte, 32)
	for i := range key {
		key[i] = byte(i + 1)
	}
	var logs lockedBuffer
	e := newEnv(t, nil, withLogs(&logs), withConfig(func(c *config.Config) { c.MCPAllowPrivate, c.MCPSecretKey = true, key }))
	var created map[string]any
	e.mustPost("/mcp-servers/create", map[string]any{"name": "guarded", "url": srv.URL, "bearer_token": secret}, &created)
	e.fake.SetRules(append([]llmfake.Rule{
		{Name: "searcher after tools", SystemContains: "W-SEARCHER", HasToolResult: true, Responses: contentResponses("searcher: called")},
		{Name: "searcher first", SystemContains: "W-SEARCHER", Responses: []llmfake.Response{{ToolCalls: []llmfake.ToolCall{
			toolCall("mcp_guarded__whoami", `{}`),
		}}}},
	}, referenceRules(nil)...)...)
	body := referenceHierarchy()
	searcher := body["teams"].([]any)[0].(map[string]any)["workers"].([]any)[0].(map[string]any)
	searcher["tools"] = []string{"mcp:guarded/whoami"}
	id := e.startRun(e.createHierarchy(body), "secret")
	msgs := e.streamAll(id)
	if last := msgs[len(msgs)-1].Type; last != "lifecycle.completed" {
		t.Fatalf("run ended with %s", last)
	}
	var called bool
	var everything strings.Builder
	for _, m := range msgs {
		fmt.Fprintf(&everything, "%v\n", m.Event)
		if m.Type == "llm.tool_result" && strings.Contains(fmt.Sprint(m.Event.Data["result"]), "authorized caller") {
			called = true
		}
	}
	if !called {
		t.Fatalf("the tool was not called with the token: %s", everything.String())
	}
	for _, ev := range e.storedEvents(id) {
		fmt.Fprintf(&everything, "%v\n", ev)
	}
	_, got := e.post("/mcp-servers/get", map[string]any{"name": "guarded"})
	_, list := e.post("/mcp-servers/list", map[string]any{})
	_, run := e.post("/runs/get", map[string]any{"id": id})
	fmt.Fprintf(&everything, "%v\n%s\n%s\n%s\n", created, got.Data, list.Data, run.Data)
	everything.WriteString(historyJSON(t, e.temporal, models.RunWorkflowID(id)))
	if strings.Contains(everything.String(), secret) {
		t.Fatal("the bearer token leaked into an answer, an event or the workflow history")
	}
	// The service's own logs (API, worker and Temporal SDK, at debug
	// level), which did see the call: the worker's line for it is there.
	if !strings.Contains(logs.String(), "mcp_guarded__whoami") {
		t.Fatalf("the captured logs do not show the call, so grepping them proves nothing:\n%s", logs.String())
	}
	if strings.Contains(logs.String(), secret) {
		t.Fatalf("the bearer token leaked into the service's logs:\n%s", logs.String())
	}
	if !strings.Contains(string(got.Data), `"secrets_set":["authorization"]`) {
		t.Errorf("get = %s: want the token named as set", got.Data)
	}
}

// TestMCPTransportFailureRetried: the MCP server is down for the first
// attempt of a call (its proxy answers 503, as a restarting server behind
// a load balancer does); the tool activity retries with a fresh session
// and the model gets the tool's answer, not an error.
func TestMCPTransportFailureRetried(t *testing.T) {
	s := sdk.NewServer(&sdk.Implementation{Name: "flaky", Version: "1"}, nil)
	sdk.AddTool(s, &sdk.Tool{Name: "lookup", Description: "looks up"},
		func(context.Context, *sdk.CallToolRequest, struct{}) (*sdk.CallToolResult, any, error) {
			return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "found it"}}}, nil, nil
		})
	h := sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return s }, nil)
	var calls, refused atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		raw, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(raw))
		if bytes.Contains(raw, []byte(`"tools/call"`)) && calls.Add(1) == 1 {
			refused.Add(1)
			http.Error(w, "restarting", http.StatusServiceUnavailable)
			return
		}
		h.ServeHTTP(w, r)
	}))
	defer srv.Close()
	e := newEnv(t, nil, withConfig(func(c *config.Config) { c.MCPAllowPrivate = true }))
	e.mustPost("/mcp-servers/create", map[string]any{"name": "flaky", "url": srv.URL}, nil)
	e.fake.SetRules(append([]llmfake.Rule{
		{Name: "searcher after tools", SystemContains: "W-SEARCHER", HasToolResult: true, Responses: contentResponses("searcher: done")},
		{Name: "searcher first", SystemContains: "W-SEARCHER", Responses: []llmfake.Response{{ToolCalls: []llmfake.ToolCall{
			toolCall("mcp_flaky__lookup", `{}`),
		}}}},
	}, referenceRules(nil)...)...)
	body := referenceHierarchy()
	searcher := body["teams"].([]any)[0].(map[string]any)["workers"].([]any)[0].(map[string]any)
	searcher["tools"] = []string{"mcp:flaky/*"}
	id := e.startRun(e.createHierarchy(body), "flaky")
	msgs := e.streamAll(id)
	if last := msgs[len(msgs)-1].Type; last != "lifecycle.completed" {
		t.Fatalf("run ended with %s", last)
	}
	var results []string
	for _, m := range msgs {
		if m.Type == "llm.tool_result" {
			results = append(results, fmt.Sprint(m.Event.Data["is_error"], " ", m.Event.Data["result"]))
		}
	}
	if refused.Load() != 1 || calls.Load() != 2 || len(results) != 1 || results[0] != "false found it" {
		t.Fatalf("refused %d of %d calls; results %q: want one refusal, a retry and one successful result", refused.Load(), calls.Load(), results)
	}
}
