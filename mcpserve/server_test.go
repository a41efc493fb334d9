package mcpserve

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/op-stack/executor/auth"
	"github.com/op-stack/executor/models"
)

// fakeBackend is a named in-process Backend: a tenant's hierarchies, runs
// that play a fixed list of events, and a record of what was started and
// cancelled. The real one (the API's) is tested end to end in
// e2e/mcpserve_test.go.
type fakeBackend struct {
	mu          sync.Mutex
	hierarchies map[string][]Hierarchy // by tenant
	events      []models.Event         // each run plays these
	hang        bool                   // runs never end: Follow waits for ctx
	started     []string               // "tenant/hierarchy/task"
	cancelled   []string
	following   chan string
}

func (b *fakeBackend) Hierarchies(ctx context.Context) ([]Hierarchy, error) {
	p, _ := auth.PrincipalFrom(ctx)
	return b.hierarchies[p.Tenant], nil
}

func (b *fakeBackend) Start(ctx context.Context, hierarchyID, task string, previous *string) (Run, error) {
	p, _ := auth.PrincipalFrom(ctx)
	b.mu.Lock()
	defer b.mu.Unlock()
	if task == "over budget" {
		return Run{}, models.Errorf(models.CodeInvalidConfig, "budget: too small")
	}
	b.started = append(b.started, p.Tenant+"/"+hierarchyID+"/"+task)
	return Run{ID: "run-" + hierarchyID, Status: models.RunPending}, nil
}

func (b *fakeBackend) Follow(ctx context.Context, runID string, fn func(models.Event)) (models.Event, error) {
	if b.following != nil {
		b.following <- runID
	}
	if b.hang {
		<-ctx.Done()
		return models.Event{}, ctx.Err()
	}
	for _, e := range b.events {
		fn(e)
	}
	return b.events[len(b.events)-1], nil
}

func (b *fakeBackend) Cancel(_ context.Context, runID string) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.cancelled = append(b.cancelled, runID)
	return nil
}

// serve serves h as the API does: behind authentication that puts the
// key's principal (keys maps bearer keys to principals) in the context.
func serve(t *testing.T, h http.Handler, keys map[string]auth.Principal) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p, ok := keys[strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")]
		if !ok {
			http.Error(w, "no key", http.StatusUnauthorized)
			return
		}
		h.ServeHTTP(w, r.WithContext(auth.WithPrincipal(r.Context(), p)))
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

type keyTransport struct{ key string }

func (k keyTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if k.key == "" {
		return http.DefaultTransport.RoundTrip(r)
	}
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+k.key)
	return http.DefaultTransport.RoundTrip(r)
}

// connect opens a Go SDK client session with key, recording progress.
func connect(t *testing.T, url, key string, progress *[]string) *sdk.ClientSession {
	t.Helper()
	var mu sync.Mutex
	c := sdk.NewClient(&sdk.Implementation{Name: "test", Version: "1"}, &sdk.ClientOptions{
		ProgressNotificationHandler: func(_ context.Context, req *sdk.ProgressNotificationClientRequest) {
			mu.Lock()
			defer mu.Unlock()
			if progress != nil {
				*progress = append(*progress, req.Params.Message)
			}
		},
	})
	cs, err := c.Connect(context.Background(), &sdk.StreamableClientTransport{Endpoint: url, HTTPClient: &http.Client{Transport: keyTransport{key}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

func team(s string) *string { return &s }

var playedEvents = []models.Event{
	{Event: models.EventKind{Category: "lifecycle", Action: "started"}, Source: models.Source{AgentType: models.AgentTypeGlobalSupervisor}},
	{Event: models.EventKind{Category: "dispatch", Action: "team"}, Data: map[string]any{"team_name": "research"}},
	{Event: models.EventKind{Category: "dispatch", Action: "worker"}, Data: map[string]any{"worker_name": "analyst"}, Source: models.Source{AgentType: models.AgentTypeTeamSupervisor, AgentName: "lead", TeamName: team("research")}},
	{Event: models.EventKind{Category: "llm", Action: "stream"}, Data: map[string]any{"content": "par"}, Source: models.Source{AgentType: models.AgentTypeWorker, AgentName: "analyst", TeamName: team("research")}},
	{Event: models.EventKind{Category: "llm", Action: "usage"}, Source: models.Source{AgentType: models.AgentTypeWorker, AgentName: "analyst", TeamName: team("research")}},
	{Event: models.EventKind{Category: "lifecycle", Action: "completed"}, Data: map[string]any{"final_answer": "42", "usage": map[string]any{"total_tokens": 7.0}}},
}

func principal(tenant string, scopes ...auth.Scope) auth.Principal {
	return auth.Principal{Tenant: tenant, Scopes: scopes, Method: auth.MethodAPIKey, KeyID: "key-" + tenant + string(rune('0'+len(scopes)))}
}

func TestToolsRunHierarchies(t *testing.T) {
	b := &fakeBackend{
		hierarchies: map[string][]Hierarchy{
			// Newest first, as the API lists them.
			"a": {{ID: "h3", Name: "Market research!"}, {ID: "h2", Name: "Market research?", Description: "Finds markets."}, {ID: "h1", Name: "tr"}},
			"b": {{ID: "hb", Name: "other"}},
		},
		events: playedEvents,
	}
	url := serve(t, NewHandler(b, Options{}), map[string]auth.Principal{
		"ka":  principal("a", auth.ScopeHierarchiesRead, auth.ScopeRunsWrite),
		"kar": principal("a", auth.ScopeHierarchiesRead),
		"kb":  principal("b", auth.ScopeHierarchiesRead, auth.ScopeRunsWrite),
	})
	var progress []string
	cs := connect(t, url, "ka", &progress)
	ctx := context.Background()
	list, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tl := range list.Tools {
		names = append(names, tl.Name)
	}
	// The older hierarchy keeps the plain name; the newer gets its id.
	if got, want := strings.Join(names, ","), "Market_research,Market_research_h3,tr"; got != want {
		t.Fatalf("tools %s, want %s", got, want)
	}
	if list.Tools[0].Description != "Finds markets. Answers with the run's final answer (structuredContent: run_id, status, usage)." {
		t.Errorf("description %q", list.Tools[0].Description)
	}

	res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "Market_research", Arguments: map[string]any{"task": "size it"}, Meta: sdk.Meta{"progressToken": "p1"}})
	if err != nil {
		t.Fatal(err)
	}
	if res.IsError || res.Content[0].(*sdk.TextContent).Text != "42" {
		t.Fatalf("result %+v", res)
	}
	sc := res.StructuredContent.(map[string]any)
	if sc["run_id"] != "run-h2" || sc["status"] != "completed" || sc["usage"].(map[string]any)["total_tokens"] != 7.0 {
		t.Errorf("structured content %v", sc)
	}
	if got := b.started; len(got) != 1 || got[0] != "a/h2/size it" {
		t.Errorf("started %v", got)
	}
	// Notifications may trail the response by a moment.
	deadline := time.Now().Add(5 * time.Second)
	want := "run run-h2 of Market research? started|global supervisor dispatched team research|team research: supervisor lead dispatched worker analyst|team research: worker analyst answered|run completed"
	for strings.Join(progress, "|") != want && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if got := strings.Join(progress, "|"); got != want {
		t.Errorf("progress\n got %s\nwant %s", got, want)
	}

	// Bad input and a refused start are tool errors with the API's code.
	for args, code := range map[string]map[string]any{
		"INVALID_PARAMETERS: task: must not be empty": {"task": " "},
		"INVALID_PARAMETERS: the arguments must be":   {"task": "x", "extra": 1},
		"INVALID_CONFIG: budget: too small":           {"task": "over budget"},
	} {
		res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "tr", Arguments: code})
		if err != nil {
			t.Fatal(err)
		}
		if text := res.Content[0].(*sdk.TextContent).Text; !res.IsError || !strings.HasPrefix(text, args) {
			t.Errorf("%v: %v %q, want an error starting %q", code, res.IsError, text, args)
		}
	}

	// An unknown tool (or another tenant's) is a protocol error.
	if _, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "other", Arguments: map[string]any{"task": "x"}}); err == nil || !strings.Contains(err.Error(), "unknown tool") {
		t.Errorf("another tenant's tool: %v", err)
	}
	// Tenant b sees its own tool only.
	lb, err := connect(t, url, "kb", nil).ListTools(ctx, nil)
	if err != nil || len(lb.Tools) != 1 || lb.Tools[0].Name != "other" {
		t.Errorf("tenant b's tools: %v %v", lb, err)
	}
	// A key without runs:write lists but cannot run.
	ro := connect(t, url, "kar", nil)
	if _, err := ro.ListTools(ctx, nil); err != nil {
		t.Fatal(err)
	}
	res, err = ro.CallTool(ctx, &sdk.CallToolParams{Name: "tr", Arguments: map[string]any{"task": "x"}})
	if err != nil || !res.IsError || !strings.Contains(res.Content[0].(*sdk.TextContent).Text, "PERMISSION_DENIED") {
		t.Errorf("read-only key's call: %+v %v", res, err)
	}
	if len(b.started) != 1 {
		t.Errorf("started %v", b.started)
	}
}

func TestFailedRunIsToolError(t *testing.T) {
	b := &fakeBackend{
		hierarchies: map[string][]Hierarchy{"a": {{ID: "h1", Name: "h"}}},
		events: []models.Event{{Event: models.EventKind{Category: "lifecycle", Action: "failed"},
			Data: map[string]any{"error": "the model refused", "error_code": "EXECUTION_FAILED"}}},
	}
	url := serve(t, NewHandler(b, Options{}), map[string]auth.Principal{"ka": principal("a", auth.ScopeAdmin)})
	res, err := connect(t, url, "ka", nil).CallTool(context.Background(), &sdk.CallToolParams{Name: "h", Arguments: map[string]any{"task": "x"}})
	if err != nil {
		t.Fatal(err)
	}
	sc, _ := res.StructuredContent.(map[string]any)
	if !res.IsError || res.Content[0].(*sdk.TextContent).Text != "run run-h1 failed. EXECUTION_FAILED: the model refused" || sc["status"] != "failed" {
		t.Errorf("result %+v %v", res.Content[0], sc)
	}
}

// TestCancelledCallCancelsRun: the client cancelling its call
// (notifications/cancelled) cancels the run.
func TestCancelledCallCancelsRun(t *testing.T) {
	b := &fakeBackend{hierarchies: map[string][]Hierarchy{"a": {{ID: "h1", Name: "h"}}}, hang: true, following: make(chan string, 1)}
	url := serve(t, NewHandler(b, Options{}), map[string]auth.Principal{"ka": principal("a", auth.ScopeAdmin)})
	cs := connect(t, url, "ka", nil)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "h", Arguments: map[string]any{"task": "x"}})
		done <- err
	}()
	<-b.following
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Errorf("call: %v", err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		b.mu.Lock()
		n := len(b.cancelled)
		b.mu.Unlock()
		if n > 0 {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.cancelled) != 1 || b.cancelled[0] != "run-h1" {
		t.Errorf("cancelled %v, want [run-h1]", b.cancelled)
	}
}

// waitCancelled waits for the backend to have cancelled want.
func waitCancelled(t *testing.T, b *fakeBackend, want string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		b.mu.Lock()
		got := strings.Join(b.cancelled, ",")
		b.mu.Unlock()
		if got == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("cancelled %q, want %q", got, want)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestEndedSessionCancelsRun: a client that ends its session (DELETE)
// during a call cancels the call's run; the SDK alone would wait for the
// call to end before closing the session.
func TestEndedSessionCancelsRun(t *testing.T) {
	b := &fakeBackend{hierarchies: map[string][]Hierarchy{"a": {{ID: "h1", Name: "h"}}}, hang: true, following: make(chan string, 1)}
	url := serve(t, NewHandler(b, Options{}), map[string]auth.Principal{"ka": principal("a", auth.ScopeAdmin), "kb": principal("b", auth.ScopeAdmin)})
	cs := connect(t, url, "ka", nil)
	go cs.CallTool(context.Background(), &sdk.CallToolParams{Name: "h", Arguments: map[string]any{"task": "x"}})
	<-b.following
	// Another key's DELETE of the session is refused, and cancels nothing.
	for _, key := range []string{"kb", "ka"} {
		req, _ := http.NewRequest("DELETE", url, nil)
		req.Header.Set("Authorization", "Bearer "+key)
		req.Header.Set("Mcp-Session-Id", cs.ID())
		req.Header.Set("Mcp-Protocol-Version", "2025-06-18")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if key == "kb" {
			b.mu.Lock()
			n := len(b.cancelled)
			b.mu.Unlock()
			if resp.StatusCode != http.StatusForbidden || n != 0 {
				t.Fatalf("another key's DELETE: %d, cancelled %v", resp.StatusCode, b.cancelled)
			}
		} else if resp.StatusCode != http.StatusNoContent {
			t.Errorf("DELETE: %d", resp.StatusCode)
		}
	}
	waitCancelled(t, b, "run-h1")
}

// TestDisconnectedClientCancelsRun: a client whose connection drops
// before the answer (no notifications/cancelled, no DELETE) cancels the
// call's run.
func TestDisconnectedClientCancelsRun(t *testing.T) {
	b := &fakeBackend{hierarchies: map[string][]Hierarchy{"a": {{ID: "h1", Name: "h"}}}, hang: true, following: make(chan string, 1)}
	url := serve(t, NewHandler(b, Options{}), map[string]auth.Principal{"ka": principal("a", auth.ScopeAdmin)})
	cs := connect(t, url, "ka", nil)
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, "POST", url, strings.NewReader(`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"h","arguments":{"task":"x"}}}`))
	req.Header.Set("Authorization", "Bearer ka")
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Session-Id", cs.ID())
	req.Header.Set("Mcp-Protocol-Version", "2025-06-18")
	done := make(chan struct{})
	go func() {
		defer close(done)
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
		}
	}()
	<-b.following
	b.mu.Lock()
	n := len(b.cancelled)
	b.mu.Unlock()
	if n != 0 {
		t.Fatalf("cancelled %v before the client left", b.cancelled)
	}
	cancel()
	<-done
	waitCancelled(t, b, "run-h1")
}

// TestSessionBelongsToItsKey: another key presenting a session's id is
// refused, so a session (and its calls) never crosses keys or tenants.
func TestSessionBelongsToItsKey(t *testing.T) {
	b := &fakeBackend{hierarchies: map[string][]Hierarchy{"a": {{ID: "h1", Name: "h"}}}}
	url := serve(t, NewHandler(b, Options{}), map[string]auth.Principal{
		"ka": principal("a", auth.ScopeAdmin), "kb": principal("b", auth.ScopeAdmin),
	})
	cs := connect(t, url, "ka", nil)
	req, _ := http.NewRequest("POST", url, strings.NewReader(`{"jsonrpc":"2.0","id":9,"method":"tools/list"}`))
	req.Header.Set("Authorization", "Bearer kb")
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Session-Id", cs.ID())
	req.Header.Set("Mcp-Protocol-Version", "2025-06-18")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Errorf("another key on the session: %d, want 403", resp.StatusCode)
	}
}

// TestShutdownLeavesRunsBe: Close ends the sessions, and the calls in
// them, without cancelling their runs (the process is going away, not the
// client).
func TestShutdownLeavesRunsBe(t *testing.T) {
	b := &fakeBackend{hierarchies: map[string][]Hierarchy{"a": {{ID: "h1", Name: "h"}}}, hang: true, following: make(chan string, 1)}
	h := NewHandler(b, Options{})
	url := serve(t, h, map[string]auth.Principal{"ka": principal("a", auth.ScopeAdmin)})
	cs := connect(t, url, "ka", nil)
	done := make(chan error, 1)
	go func() {
		_, err := cs.CallTool(context.Background(), &sdk.CallToolParams{Name: "h", Arguments: map[string]any{"task": "x"}})
		done <- err
	}()
	<-b.following
	h.Close()
	select {
	case err := <-done:
		if err == nil {
			t.Error("the call answered after its session was closed")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the call did not end with its session")
	}
	time.Sleep(100 * time.Millisecond)
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.started) != 1 || len(b.cancelled) != 0 {
		t.Errorf("started %v, cancelled %v: want the run started and not cancelled", b.started, b.cancelled)
	}
}

// TestWithoutAuthorizationHeader: with access control off the request has
// no bearer token, and the principal in the context serves all the same.
func TestWithoutAuthorizationHeader(t *testing.T) {
	b := &fakeBackend{hierarchies: map[string][]Hierarchy{"default": {{ID: "h1", Name: "h"}}}}
	url := serve(t, NewHandler(b, Options{LocalhostProtection: true}), map[string]auth.Principal{"": auth.Anonymous()})
	list, err := connect(t, url, "", nil).ListTools(context.Background(), nil)
	if err != nil || len(list.Tools) != 1 || list.Tools[0].Name != "h" {
		t.Fatalf("tools %+v %v", list, err)
	}
}

func TestToolName(t *testing.T) {
	for in, want := range map[string]string{
		"Market research":       "Market_research",
		"  héllo wörld ":        "h_llo_w_rld",
		"!!!":                   "hierarchy",
		"a.b/c-d_e":             "a_b_c-d_e",
		strings.Repeat("x", 99): strings.Repeat("x", 64),
	} {
		if got := toolName(in); got != want {
			t.Errorf("toolName(%q) = %q, want %q", in, got, want)
		}
	}
}
