package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/op-stack/executor/auth"
	"github.com/op-stack/executor/config"
	"github.com/op-stack/executor/llm/llmfake"
	"github.com/op-stack/executor/models"
	"github.com/op-stack/executor/store"
)

// accessHierarchy is a one-team hierarchy whose global supervisor finishes
// at once (accessRules), so that every run is two model calls.
func accessHierarchy(name string) map[string]any {
	return map[string]any{
		"name":                    name,
		"global_supervisor_agent": map[string]any{"system_prompt": "GS-ACCESS You decide."},
		"teams": []any{map[string]any{
			"name":                  "only",
			"team_supervisor_agent": map[string]any{"system_prompt": "TS-ACCESS You lead."},
			"workers":               []any{map[string]any{"name": "worker", "system_prompt": "W-ACCESS You work."}},
		}},
	}
}

func accessRules() []llmfake.Rule {
	return []llmfake.Rule{
		{Name: "decide", SystemContains: "GS-ACCESS", HasJSONSchema: true, Responses: contentResponses(decision("finish", "", ""))},
		{Name: "final", SystemContains: "GS-ACCESS", Responses: contentResponses("ACCESS FINAL")},
		{Name: "anything else", Responses: contentResponses(`{"summary":"formatted"}`)},
	}
}

// withAuth turns access control on, as `executor serve` does by default.
func withAuth(o *envOptions) {
	withConfig(func(c *config.Config) { c.AuthMode = config.AuthRequired })(o)
}

// issueKey makes an API key as `executor apikeys create` does.
func (e *testEnv) issueKey(tenant string, scopes ...auth.Scope) string {
	e.t.Helper()
	key, _, err := e.store.IssueAPIKey(context.Background(), tenant, scopes, 0, "e2e")
	if err != nil {
		e.t.Fatal(err)
	}
	return key
}

// call sends an authenticated request (key may be empty) to the API's root
// URL plus path and returns the status and body.
func (e *testEnv) call(method, path, key string, body any) (int, []byte) {
	e.t.Helper()
	var r io.Reader
	if body != nil {
		raw, _ := json.Marshal(body)
		r = bytes.NewReader(raw)
	}
	req, err := http.NewRequest(method, e.rootURL()+path, r)
	if err != nil {
		e.t.Fatal(err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, raw
}

func (e *testEnv) rootURL() string { return strings.TrimSuffix(e.apiURL, "/api/executor/v1") }

// mustCall is call that fails the test unless the answer is 200, decoding
// the envelope's data into out.
func (e *testEnv) mustCall(method, path, key string, body, out any) {
	e.t.Helper()
	status, raw := e.call(method, path, key, body)
	if status != http.StatusOK {
		e.t.Fatalf("%s %s: %d %s", method, path, status, raw)
	}
	if out != nil {
		var env struct {
			Data json.RawMessage `json:"data"`
		}
		if err := json.Unmarshal(raw, &env); err != nil {
			e.t.Fatal(err)
		}
		if err := json.Unmarshal(env.Data, out); err != nil {
			e.t.Fatal(err)
		}
	}
}

// accessFixture is one tenant's objects.
type accessFixture struct {
	hierarchy, hierarchyToDelete, v1Team, v1TeamToDelete string
	run, subAgent, subAgentToDelete, keyToRevoke         string
	// runToDelete is a second run, for runs/delete.
	runToDelete string
	// artifact is a file stored for run.
	artifact string
	// mcpServer and mcpServerToDelete are MCP servers of the tenant.
	mcpServer, mcpServerToDelete string
	// schedule and scheduleToDelete are paused schedules of hierarchy.
	schedule, scheduleToDelete string
	// webhook and webhookToDelete are webhook endpoints of the tenant;
	// webhookDelivery is a delivery of run to webhook.
	webhook, webhookToDelete, webhookDelivery string
	// memoryKey and memoryKeyToDelete are memory items of the tenant, in
	// namespace ["route-test"] (keys unique to the tenant).
	memoryKey, memoryKeyToDelete string
}

// routeCase builds the request a route test sends for one route: its path
// (with :id filled) and body, addressing tenant A's objects.
type routeCase struct {
	// object: the route addresses one of A's objects, so tenant B gets 404.
	// list: the route lists, so tenant B's answer must not show A's ids.
	object, list bool
	build        func(f accessFixture) (path string, body any)
}

// routeCases is the access test's request for every route. A route the
// router serves that is missing here fails TestAccessRouteTable.
func routeCases() map[string]routeCase {
	e, v1 := "/api/executor/v1", "/api/v1"
	body := func(path string, b any) func(accessFixture) (string, any) {
		return func(accessFixture) (string, any) { return path, b }
	}
	obj := func(build func(f accessFixture) (string, any)) routeCase {
		return routeCase{object: true, build: build}
	}
	runBody := func(path string) routeCase {
		return obj(func(f accessFixture) (string, any) { return e + path, map[string]any{"id": f.run} })
	}
	scheduleBody := func(path string) routeCase {
		return obj(func(f accessFixture) (string, any) { return e + path, map[string]any{"id": f.schedule} })
	}
	hier := accessHierarchy("created-by-route-test")
	return map[string]routeCase{
		"GET /healthz":      {build: body("/healthz", nil)},
		"GET /readyz":       {build: body("/readyz", nil)},
		"GET /openapi.json": {build: body("/openapi.json", nil)},

		// The console's pages and assets carry no data (public); what they
		// show comes from the routes below, with the person's key.
		"GET /":               {build: body("/", nil)},
		"GET /runs":           {build: body("/runs", nil)},
		"GET /runs/:id":       {build: func(f accessFixture) (string, any) { return "/runs/" + f.run, nil }},
		"GET /mcp-servers":    {build: body("/mcp-servers", nil)},
		"GET /schedules":      {build: body("/schedules", nil)},
		"GET /webhooks":       {build: body("/webhooks", nil)},
		"GET /compare":        {build: body("/compare", nil)},
		"GET /memory":         {build: body("/memory", nil)},
		"GET /console/*asset": {build: body("/console/app.js", nil)},

		// A2A agents: the card is one of A's hierarchies (404 for B); the
		// JSON-RPC endpoint answers JSON-RPC errors in a 200, so it is
		// checked as a list: B's ListTasks on A's agent shows nothing of A.
		"GET /a2a/:hierarchy_id/.well-known/agent-card.json": obj(func(f accessFixture) (string, any) {
			return "/a2a/" + f.hierarchy + "/.well-known/agent-card.json", nil
		}),
		"POST /a2a/:hierarchy_id": {list: true, build: func(f accessFixture) (string, any) {
			return "/a2a/" + f.hierarchy, map[string]any{"jsonrpc": "2.0", "id": 1, "method": "ListTasks", "params": map[string]any{}}
		}},

		"POST " + e + "/hierarchies/create": {build: body(e+"/hierarchies/create", hier)},
		"POST " + e + "/hierarchies/get": obj(func(f accessFixture) (string, any) {
			return e + "/hierarchies/get", map[string]any{"hierarchy_id": f.hierarchy}
		}),
		"POST " + e + "/hierarchies/update": obj(func(f accessFixture) (string, any) {
			b := accessHierarchy("renamed")
			b["hierarchy_id"] = f.hierarchy
			return e + "/hierarchies/update", b
		}),
		"POST " + e + "/hierarchies/delete": obj(func(f accessFixture) (string, any) {
			return e + "/hierarchies/delete", map[string]any{"hierarchy_id": f.hierarchyToDelete}
		}),
		"POST " + e + "/hierarchies/list": {list: true, build: body(e+"/hierarchies/list", map[string]any{})},

		"POST " + e + "/subagents/create": {build: body(e+"/subagents/create", map[string]any{"name": "route-test-helper", "system_prompt": "Help."})},
		"POST " + e + "/subagents/get": obj(func(f accessFixture) (string, any) {
			return e + "/subagents/get", map[string]any{"id": f.subAgent}
		}),
		"POST " + e + "/subagents/update": obj(func(f accessFixture) (string, any) {
			return e + "/subagents/update", map[string]any{"id": f.subAgent, "name": "helper-a", "system_prompt": "Help more."}
		}),
		"POST " + e + "/subagents/delete": obj(func(f accessFixture) (string, any) {
			return e + "/subagents/delete", map[string]any{"id": f.subAgentToDelete}
		}),
		"POST " + e + "/subagents/list": {list: true, build: body(e+"/subagents/list", map[string]any{})},
		"POST " + e + "/tools/list":     {list: true, build: body(e+"/tools/list", map[string]any{})},

		"POST " + e + "/runs/start": obj(func(f accessFixture) (string, any) {
			return e + "/runs/start", map[string]any{"hierarchy_id": f.hierarchy, "task": "route test"}
		}),
		"POST " + e + "/runs/get": runBody("/runs/get"),
		"POST " + e + "/runs/fork": obj(func(f accessFixture) (string, any) {
			return e + "/runs/fork", map[string]any{"id": f.run, "after_sequence": 1}
		}),
		"POST " + e + "/runs/fork-points": runBody("/runs/fork-points"),
		"POST " + e + "/runs/list":        {list: true, build: body(e+"/runs/list", map[string]any{})},
		"POST " + e + "/runs/cancel":      runBody("/runs/cancel"),
		"POST " + e + "/runs/delete": obj(func(f accessFixture) (string, any) {
			return e + "/runs/delete", map[string]any{"id": f.runToDelete}
		}),
		"POST " + e + "/runs/pause":     runBody("/runs/pause"),
		"POST " + e + "/runs/resume":    runBody("/runs/resume"),
		"POST " + e + "/runs/approvals": runBody("/runs/approvals"),
		"POST " + e + "/runs/approve":   runBody("/runs/approve"),
		"POST " + e + "/runs/reject":    runBody("/runs/reject"),
		"POST " + e + "/runs/teams/cancel": obj(func(f accessFixture) (string, any) {
			return e + "/runs/teams/cancel", map[string]any{"id": f.run, "team_name": "route-test-team", "reason": "route test"}
		}),
		"POST " + e + "/runs/redirect": obj(func(f accessFixture) (string, any) {
			return e + "/runs/redirect", map[string]any{"id": f.run, "agent_id": "route-test-agent", "message": "route test"}
		}),
		"POST " + e + "/runs/events":       runBody("/runs/events"),
		"POST " + e + "/runs/messages":     runBody("/runs/messages"),
		"POST " + e + "/runs/stream":       runBody("/runs/stream"),
		"POST " + e + "/runs/stream-token": runBody("/runs/stream-token"),
		"GET " + e + "/runs/:id/stream": obj(func(f accessFixture) (string, any) {
			return e + "/runs/" + f.run + "/stream", nil
		}),
		// AG-UI's route (HttpAgent POSTs a RunAgentInput).
		"POST " + e + "/runs/:id/stream": obj(func(f accessFixture) (string, any) {
			return e + "/runs/" + f.run + "/stream?format=ag-ui", map[string]any{}
		}),
		// Without upgrade headers, the right key gets 426 Upgrade Required.
		"GET " + e + "/runs/:id/ws": obj(func(f accessFixture) (string, any) {
			return e + "/runs/" + f.run + "/ws", nil
		}),
		"POST " + e + "/runs/results": runBody("/runs/results"),
		"POST " + e + "/runs/results/format": obj(func(f accessFixture) (string, any) {
			return e + "/runs/results/format", map[string]any{"id": f.run, "output_template": map[string]any{"summary": "string"}}
		}),

		"POST " + e + "/artifacts/list": runBody("/artifacts/list"),
		"GET " + v1 + "/artifacts/:id": obj(func(f accessFixture) (string, any) {
			return v1 + "/artifacts/" + f.artifact, nil
		}),

		"POST " + e + "/mcp-servers/create": {build: body(e+"/mcp-servers/create", map[string]any{"name": "route-test-docs", "url": "https://example.com/mcp"})},
		"POST " + e + "/mcp-servers/get": obj(func(f accessFixture) (string, any) {
			return e + "/mcp-servers/get", map[string]any{"id": f.mcpServer}
		}),
		"POST " + e + "/mcp-servers/update": obj(func(f accessFixture) (string, any) {
			return e + "/mcp-servers/update", map[string]any{"id": f.mcpServer, "name": "docs", "url": "https://example.com/mcp2"}
		}),
		"POST " + e + "/mcp-servers/delete": obj(func(f accessFixture) (string, any) {
			return e + "/mcp-servers/delete", map[string]any{"id": f.mcpServerToDelete}
		}),
		"POST " + e + "/mcp-servers/list": {list: true, build: body(e+"/mcp-servers/list", map[string]any{})},

		"POST " + e + "/schedules/create": obj(func(f accessFixture) (string, any) {
			return e + "/schedules/create", map[string]any{"hierarchy_id": f.hierarchy, "task": "route test", "cron": []string{"0 0 1 1 *"}, "paused": true}
		}),
		"POST " + e + "/schedules/list":    {list: true, build: body(e+"/schedules/list", map[string]any{})},
		"POST " + e + "/schedules/get":     scheduleBody("/schedules/get"),
		"POST " + e + "/schedules/pause":   scheduleBody("/schedules/pause"),
		"POST " + e + "/schedules/unpause": scheduleBody("/schedules/unpause"),
		// Trigger takes an action now, paused or not; the run is a quick
		// one.
		"POST " + e + "/schedules/trigger": scheduleBody("/schedules/trigger"),
		"POST " + e + "/schedules/update": obj(func(f accessFixture) (string, any) {
			return e + "/schedules/update", map[string]any{"id": f.schedule, "task": "route test update"}
		}),
		"POST " + e + "/schedules/delete": obj(func(f accessFixture) (string, any) {
			return e + "/schedules/delete", map[string]any{"id": f.scheduleToDelete}
		}),
		"POST " + e + "/webhooks/create": {build: body(e+"/webhooks/create", map[string]any{"url": "https://example.invalid/route-test", "events": []string{"run.completed"}})},
		"POST " + e + "/webhooks/get": obj(func(f accessFixture) (string, any) {
			return e + "/webhooks/get", map[string]any{"id": f.webhook}
		}),
		"POST " + e + "/webhooks/update": obj(func(f accessFixture) (string, any) {
			return e + "/webhooks/update", map[string]any{"id": f.webhook, "url": "https://example.invalid/hook2", "events": []string{"run.failed"}}
		}),
		"POST " + e + "/webhooks/delete": obj(func(f accessFixture) (string, any) {
			return e + "/webhooks/delete", map[string]any{"id": f.webhookToDelete}
		}),
		"POST " + e + "/webhooks/list": {list: true, build: body(e+"/webhooks/list", map[string]any{})},
		"POST " + e + "/webhooks/deliveries": obj(func(f accessFixture) (string, any) {
			return e + "/webhooks/deliveries", map[string]any{"endpoint_id": f.webhook}
		}),
		"POST " + e + "/webhooks/redeliver": obj(func(f accessFixture) (string, any) {
			return e + "/webhooks/redeliver", map[string]any{"id": f.webhookDelivery}
		}),

		// Memory: an item is found by namespace and key in the caller's
		// tenant only (B gets 404); searches, listings and exports show
		// only the caller's. An import's body is JSON lines: one JSON
		// object is one line.
		"POST " + e + "/memory/put": {build: body(e+"/memory/put", map[string]any{"namespace": []string{"route-test"}, "key": "put-by-route-test", "value": "v"})},
		"POST " + e + "/memory/get": obj(func(f accessFixture) (string, any) {
			return e + "/memory/get", map[string]any{"namespace": []string{"route-test"}, "key": f.memoryKey}
		}),
		"POST " + e + "/memory/delete": obj(func(f accessFixture) (string, any) {
			return e + "/memory/delete", map[string]any{"namespace": []string{"route-test"}, "key": f.memoryKeyToDelete}
		}),
		"POST " + e + "/memory/search":          {list: true, build: body(e+"/memory/search", map[string]any{"query": "kept"})},
		"POST " + e + "/memory/list-namespaces": {list: true, build: body(e+"/memory/list-namespaces", map[string]any{})},
		"POST " + e + "/memory/export":          {list: true, build: body(e+"/memory/export", map[string]any{})},
		"POST " + e + "/memory/import":          {build: body(e+"/memory/import", map[string]any{"namespace": []string{"route-test"}, "key": "imported-by-route-test", "value": 1})},

		// The MCP server (its own tenancy is TestMCPServerWithTheSDKClient's):
		// without a session or the SSE Accept header, the transport answers
		// 400 to the right key, after access control has let it in.
		"POST " + e + "/mcp": {build: body(e+"/mcp", map[string]any{"jsonrpc": "2.0", "id": 1, "method": "initialize",
			"params": map[string]any{"protocolVersion": "2025-06-18", "capabilities": map[string]any{}, "clientInfo": map[string]any{"name": "access", "version": "1"}}})},
		"GET " + e + "/mcp":    {build: body(e+"/mcp", nil)},
		"DELETE " + e + "/mcp": {build: body(e+"/mcp", nil)},

		"POST " + e + "/apikeys/create": {build: body(e+"/apikeys/create", map[string]any{"tenant": "tenant-c", "scopes": []string{"runs:read"}})},
		"POST " + e + "/apikeys/list":   {build: body(e+"/apikeys/list", map[string]any{})},
		"POST " + e + "/apikeys/revoke": {build: func(f accessFixture) (string, any) {
			return e + "/apikeys/revoke", map[string]any{"id": f.keyToRevoke}
		}},

		"POST " + v1 + "/hierarchical-teams": {build: body(v1+"/hierarchical-teams", v1Team("created-by-route-test"))},
		"GET " + v1 + "/hierarchical-teams/:id": obj(func(f accessFixture) (string, any) {
			return v1 + "/hierarchical-teams/" + f.v1Team, nil
		}),
		"PUT " + v1 + "/hierarchical-teams/:id": obj(func(f accessFixture) (string, any) {
			return v1 + "/hierarchical-teams/" + f.v1Team, v1Team("renamed")
		}),
		"DELETE " + v1 + "/hierarchical-teams/:id": obj(func(f accessFixture) (string, any) {
			return v1 + "/hierarchical-teams/" + f.v1TeamToDelete, nil
		}),
		"POST " + v1 + "/hierarchical-teams/:id/execute": obj(func(f accessFixture) (string, any) {
			return v1 + "/hierarchical-teams/" + f.v1Team + "/execute", map[string]any{"task": "route test"}
		}),
		"GET " + v1 + "/executions/:id": obj(func(f accessFixture) (string, any) {
			return v1 + "/executions/" + f.run, nil
		}),
		"GET " + v1 + "/executions/:id/stream": obj(func(f accessFixture) (string, any) {
			return v1 + "/executions/" + f.run + "/stream", nil
		}),
		"GET " + v1 + "/executions/:id/ws": obj(func(f accessFixture) (string, any) {
			return v1 + "/executions/" + f.run + "/ws", nil
		}),
		"POST " + v1 + "/executions/:id/stream-token": obj(func(f accessFixture) (string, any) {
			return v1 + "/executions/" + f.run + "/stream-token", nil
		}),
		"GET " + v1 + "/executions/:id/results": obj(func(f accessFixture) (string, any) {
			return v1 + "/executions/" + f.run + "/results", nil
		}),
		"POST " + v1 + "/executions/:id/results/format": obj(func(f accessFixture) (string, any) {
			return v1 + "/executions/" + f.run + "/results/format", map[string]any{"output_template": map[string]any{"summary": "string"}}
		}),
		"POST " + v1 + "/executions/:id/cancel": obj(func(f accessFixture) (string, any) {
			return v1 + "/executions/" + f.run + "/cancel", nil
		}),
		"POST " + v1 + "/executions/:id/pause": obj(func(f accessFixture) (string, any) {
			return v1 + "/executions/" + f.run + "/pause", nil
		}),
		"POST " + v1 + "/executions/:id/resume": obj(func(f accessFixture) (string, any) {
			return v1 + "/executions/" + f.run + "/resume", nil
		}),
	}
}

// v1Team is a spec 001 team body shaped like accessHierarchy.
func v1Team(name string) map[string]any {
	return map[string]any{
		"team_name":             name,
		"top_supervisor_config": map[string]any{"system_prompt": "GS-ACCESS You decide."},
		"sub_teams": []any{map[string]any{
			"name":              "only",
			"supervisor_config": map[string]any{"system_prompt": "TS-ACCESS You lead."},
			"agent_configs":     []any{map[string]any{"agent_name": "worker", "system_prompt": "W-ACCESS You work."}},
		}},
	}
}

// setUpTenant creates a tenant's objects with its key and runs one run to
// the end.
func (e *testEnv) setUpTenant(key string, admin string) accessFixture {
	e.t.Helper()
	var f accessFixture
	var h struct {
		ID string `json:"hierarchy_id"`
	}
	e.mustCall("POST", "/api/executor/v1/hierarchies/create", key, accessHierarchy("mine"), &h)
	f.hierarchy = h.ID
	e.mustCall("POST", "/api/executor/v1/hierarchies/create", key, accessHierarchy("doomed"), &h)
	f.hierarchyToDelete = h.ID
	var team struct {
		TeamID string `json:"team_id"`
	}
	e.mustCall("POST", "/api/v1/hierarchical-teams", key, v1Team("mine-v1"), &team)
	f.v1Team = team.TeamID
	e.mustCall("POST", "/api/v1/hierarchical-teams", key, v1Team("doomed-v1"), &team)
	f.v1TeamToDelete = team.TeamID
	var sa struct {
		ID string `json:"id"`
	}
	e.mustCall("POST", "/api/executor/v1/subagents/create", key, map[string]any{"name": "helper", "system_prompt": "Help."}, &sa)
	f.subAgent = sa.ID
	e.mustCall("POST", "/api/executor/v1/subagents/create", key, map[string]any{"name": "doomed-helper", "system_prompt": "Help."}, &sa)
	f.subAgentToDelete = sa.ID
	var mcp struct {
		ID string `json:"id"`
	}
	e.mustCall("POST", "/api/executor/v1/mcp-servers/create", key, map[string]any{"name": "docs", "url": "https://example.com/mcp"}, &mcp)
	f.mcpServer = mcp.ID
	e.mustCall("POST", "/api/executor/v1/mcp-servers/create", key, map[string]any{"name": "doomed-docs", "url": "https://example.com/mcp"}, &mcp)
	f.mcpServerToDelete = mcp.ID
	var sc struct {
		ID string `json:"id"`
	}
	schedule := map[string]any{"hierarchy_id": f.hierarchy, "task": "fixture", "cron": []string{"0 0 1 1 *"}, "paused": true}
	e.mustCall("POST", "/api/executor/v1/schedules/create", key, schedule, &sc)
	f.schedule = sc.ID
	e.mustCall("POST", "/api/executor/v1/schedules/create", key, schedule, &sc)
	f.scheduleToDelete = sc.ID
	e.t.Cleanup(func() {
		e.call("POST", "/api/executor/v1/schedules/delete", key, map[string]any{"id": f.schedule})
		e.call("POST", "/api/executor/v1/schedules/delete", key, map[string]any{"id": f.scheduleToDelete})
	})
	var run struct {
		ID string `json:"id"`
	}
	e.mustCall("POST", "/api/executor/v1/runs/start", key, map[string]any{"hierarchy_id": f.hierarchy, "task": "fixture"}, &run)
	f.run = run.ID
	e.mustCall("POST", "/api/executor/v1/runs/start", key, map[string]any{"hierarchy_id": f.hierarchy, "task": "fixture"}, &run)
	f.runToDelete = run.ID
	waitFor(e.t, time.Minute, "the fixture runs to end", func() bool {
		var v, w runView
		e.mustCall("POST", "/api/executor/v1/runs/get", key, map[string]any{"id": f.run}, &v)
		e.mustCall("POST", "/api/executor/v1/runs/get", key, map[string]any{"id": f.runToDelete}, &w)
		return models.IsTerminal(v.Status) && models.IsTerminal(w.Status)
	})
	// A file of the run, stored as a worker stores one.
	art := &store.Artifact{RunID: f.run, AgentID: "fixture", Source: models.ArtifactSourceAnswer, Name: "fixture.txt", MediaType: "text/plain", Content: []byte("fixture\n"), Producer: "fixture/" + f.run, Attempt: 1}
	if err := e.store.SaveArtifact(context.Background(), art, 0, store.ArtifactLimits{}); err != nil {
		e.t.Fatal(err)
	}
	f.artifact = art.ID
	// Webhook endpoints made after the run, so that it delivers nothing;
	// a delivery of it stored as a worker stores one.
	var wh models.WebhookEndpoint
	e.mustCall("POST", "/api/executor/v1/webhooks/create", key, map[string]any{"url": "https://example.invalid/hook", "events": []string{"run.completed"}}, &wh)
	f.webhook = wh.ID
	e.mustCall("POST", "/api/executor/v1/webhooks/create", key, map[string]any{"url": "https://example.invalid/doomed", "events": []string{"run.completed"}}, &wh)
	f.webhookToDelete = wh.ID
	ep, err := e.store.GetWebhookEndpoint(context.Background(), "", f.webhook)
	if err != nil {
		e.t.Fatal(err)
	}
	d := &store.WebhookDelivery{ID: store.WebhookDeliveryID(f.webhook, f.run, 1), TenantID: ep.TenantID, EndpointID: f.webhook, RunID: f.run,
		Sequence: 1, EventType: models.WebhookRunStarted, Payload: "{}"}
	if err := e.store.InsertWebhookDelivery(context.Background(), d); err != nil {
		e.t.Fatal(err)
	}
	f.webhookDelivery = d.ID
	var k struct {
		APIKey struct {
			ID string `json:"id"`
		} `json:"api_key"`
	}
	e.mustCall("POST", "/api/executor/v1/apikeys/create", admin, map[string]any{"tenant": "tenant-a", "scopes": []string{"runs:read"}}, &k)
	f.keyToRevoke = k.APIKey.ID
	f.memoryKey, f.memoryKeyToDelete = "fact-"+models.NewID(), "doomed-"+models.NewID()
	for _, mk := range []string{f.memoryKey, f.memoryKeyToDelete} {
		e.mustCall("POST", "/api/executor/v1/memory/put", key, map[string]any{"namespace": []string{"route-test"}, "key": mk, "value": map[string]any{"fact": "kept"}}, nil)
	}
	return f
}

// TestAccessRouteTable walks the router's route table and, for every
// route, checks that no key gets 401, tenant B's key on tenant A's object
// 404 (and B's lists none of A's objects), a key without the route's scope
// 403, and the right key neither 401 nor 403. A route added without an
// access rule panics NewServer; one added without a case here fails this
// test.
func TestAccessRouteTable(t *testing.T) {
	// Every route is called with the same keys within a second or two:
	// a rate limit high enough that the table's growth never meets it
	// (TestIdempotencyLimitsAndBrowserSafety tests the limit).
	e := newEnv(t, accessRules(), withAuth, withConfig(func(c *config.Config) {
		c.RateLimitRPS, c.RateLimitBurst = 1000, 2000
		// Webhook secrets are sealed with it; a redelivery gives up soon.
		c.MCPSecretKey, c.WebhookRetryFor = make([]byte, 32), 5*time.Second
	}))
	nonAdmin := []auth.Scope{auth.ScopeHierarchiesRead, auth.ScopeHierarchiesWrite, auth.ScopeRunsRead, auth.ScopeRunsWrite, auth.ScopeMemoryRead, auth.ScopeMemoryWrite}
	admin := e.issueKey("ops", auth.ScopeAdmin)
	keyA := e.issueKey("tenant-a", nonAdmin...)
	keyB := e.issueKey("tenant-b", nonAdmin...)
	fa := e.setUpTenant(keyA, admin)
	e.setUpTenant(keyB, admin)

	cases := routeCases()
	routes := e.api.Routes()
	// Destructive routes last, so that the others still find A's objects.
	sort.SliceStable(routes, func(i, j int) bool {
		return !destructive(routes[i].Path, routes[i].Method) && destructive(routes[j].Path, routes[j].Method)
	})
	for _, r := range routes {
		name := r.Method + " " + r.Path
		c, ok := cases[name]
		if !ok {
			t.Errorf("%s: no access case; add one to routeCases", name)
			continue
		}
		t.Run(strings.ReplaceAll(name, "/", "_"), func(t *testing.T) {
			path, body := c.build(fa)
			scope, public := e.api.RouteScope(r.Method, r.Path)
			status, raw := e.call(r.Method, path, "", body)
			if public {
				if status != http.StatusOK {
					t.Errorf("public route without a key: %d %s", status, raw)
				}
				return
			}
			if status != http.StatusUnauthorized || !bytes.Contains(raw, []byte("INVALID_API_KEY")) {
				t.Errorf("no key: %d %s, want 401 INVALID_API_KEY", status, raw)
			}
			if status, raw := e.call(r.Method, path, "osk_"+strings.Repeat("x", 43), body); status != http.StatusUnauthorized {
				t.Errorf("unknown key: %d %s, want 401", status, raw)
			}
			// A key with every scope but the route's.
			var others []auth.Scope
			for _, s := range nonAdmin {
				if s != scope {
					others = append(others, s)
				}
			}
			if status, raw := e.call(r.Method, path, e.issueKey("tenant-a", others...), body); status != http.StatusForbidden || !bytes.Contains(raw, []byte("PERMISSION_DENIED")) {
				t.Errorf("key without %s: %d %s, want 403 PERMISSION_DENIED", scope, status, raw)
			}
			right := keyA
			if scope == auth.ScopeAdmin {
				right = admin
				if status, raw := e.call(r.Method, path, keyB, body); status != http.StatusForbidden {
					t.Errorf("tenant key on an admin route: %d %s, want 403", status, raw)
				}
			}
			switch {
			case c.object:
				if status, raw := e.call(r.Method, path, keyB, body); status != http.StatusNotFound {
					t.Errorf("tenant B on tenant A's object: %d %s, want 404", status, raw)
				}
			case c.list:
				status, raw := e.call(r.Method, path, keyB, body)
				if status != http.StatusOK {
					t.Errorf("tenant B's list: %d %s", status, raw)
				}
				for _, id := range []string{fa.hierarchy, fa.run, fa.subAgent, fa.v1Team, fa.mcpServer, fa.schedule, fa.webhook, fa.memoryKey} {
					if bytes.Contains(raw, []byte(id)) {
						t.Errorf("tenant B's list shows tenant A's %s: %s", id, raw)
					}
				}
			}
			if status, raw := e.call(r.Method, path, right, body); status == http.StatusUnauthorized || status == http.StatusForbidden || status == http.StatusNotFound {
				t.Errorf("right key: %d %s", status, raw)
			}
		})
	}
}

func destructive(path, method string) bool {
	return method == http.MethodDelete || strings.HasSuffix(path, "/delete") || strings.HasSuffix(path, "/cancel") || strings.HasSuffix(path, "/revoke")
}

// TestTenantsAreIsolated runs two tenants concurrently, each with its own
// key, and checks that neither can read, cancel or stream the other's runs
// on either surface, that a stream token opens only its own run, and that
// each streams its own run to the end.
func TestTenantsAreIsolated(t *testing.T) {
	slow := accessRules()
	slow[1].Responses = []llmfake.Response{{Content: strings.Repeat("word ", 30), TokenDelay: 20 * time.Millisecond}}
	e := newEnv(t, slow, withAuth)
	keys := map[string]string{"a": e.issueKey("tenant-a", auth.ScopeHierarchiesWrite, auth.ScopeRunsRead, auth.ScopeRunsWrite),
		"b": e.issueKey("tenant-b", auth.ScopeHierarchiesWrite, auth.ScopeRunsRead, auth.ScopeRunsWrite)}
	runs := map[string]string{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for tenant, key := range keys {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var h struct {
				ID string `json:"hierarchy_id"`
			}
			e.mustCall("POST", "/api/executor/v1/hierarchies/create", key, accessHierarchy(tenant), &h)
			var run struct {
				ID string `json:"id"`
			}
			e.mustCall("POST", "/api/executor/v1/runs/start", key, map[string]any{"hierarchy_id": h.ID, "task": "isolated " + tenant}, &run)
			mu.Lock()
			runs[tenant] = run.ID
			mu.Unlock()
		}()
	}
	wg.Wait()

	other := map[string]string{"a": "b", "b": "a"}
	for tenant, key := range keys {
		theirs := runs[other[tenant]]
		for _, req := range []struct{ method, path string }{
			{"POST", "/api/executor/v1/runs/get"}, {"POST", "/api/executor/v1/runs/events"}, {"POST", "/api/executor/v1/runs/stream"},
			{"POST", "/api/executor/v1/runs/stream-token"}, {"POST", "/api/executor/v1/runs/cancel"},
			{"POST", "/api/executor/v1/runs/delete"},
			{"GET", "/api/executor/v1/runs/" + theirs + "/stream"},
			{"GET", "/api/v1/executions/" + theirs}, {"GET", "/api/v1/executions/" + theirs + "/stream"},
			{"POST", "/api/v1/executions/" + theirs + "/cancel"}, {"POST", "/api/v1/executions/" + theirs + "/stream-token"},
		} {
			var body any
			if req.method == "POST" && strings.HasPrefix(req.path, "/api/executor") {
				body = map[string]any{"id": theirs}
			}
			if status, raw := e.call(req.method, req.path, key, body); status != http.StatusNotFound {
				t.Errorf("tenant %s: %s %s on tenant %s's run: %d %s, want 404", tenant, req.method, req.path, other[tenant], status, raw)
			}
		}
		var list struct {
			Items []struct {
				ID string `json:"id"`
			} `json:"items"`
		}
		e.mustCall("POST", "/api/executor/v1/runs/list", key, map[string]any{}, &list)
		if len(list.Items) != 1 || list.Items[0].ID != runs[tenant] {
			t.Errorf("tenant %s lists %+v, want only its run %s", tenant, list.Items, runs[tenant])
		}
	}

	// Each tenant streams its own run with a stream token, as a browser's
	// EventSource would; the token does not open the other run.
	for tenant, key := range keys {
		var tok struct {
			Token     string `json:"token"`
			StreamURL string `json:"stream_url"`
		}
		e.mustCall("POST", "/api/executor/v1/runs/stream-token", key, map[string]any{"id": runs[tenant]}, &tok)
		if status, raw := e.call("GET", "/api/executor/v1/runs/"+runs[other[tenant]]+"/stream?token="+tok.Token, "", nil); status != http.StatusUnauthorized {
			t.Errorf("tenant %s's stream token on the other run: %d %s, want 401", tenant, status, raw)
		}
		resp, err := http.Get(e.rootURL() + tok.StreamURL)
		if err != nil {
			t.Fatal(err)
		}
		var last string
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			if line := sc.Text(); strings.HasPrefix(line, "event: ") {
				last = strings.TrimPrefix(line, "event: ")
			}
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || last != "lifecycle.completed" {
			t.Errorf("tenant %s's stream: status %d, last event %q", tenant, resp.StatusCode, last)
		}
	}
}

// TestIdempotencyLimitsAndBrowserSafety drives the limits through the real
// API with keys: Idempotency-Key on runs/start and spec 001's create
// (replayed, 409 on another body, one run), the tenant's concurrent-run
// limit (429 with Retry-After), the key's request rate (429 with
// Retry-After), bodies that are not JSON (415), and CORS for listed origins
// only.
func TestIdempotencyLimitsAndBrowserSafety(t *testing.T) {
	slow := accessRules()
	slow[1].Responses = []llmfake.Response{{Content: strings.Repeat("word ", 40), TokenDelay: 25 * time.Millisecond}}
	e := newEnv(t, slow, withAuth, withConfig(func(c *config.Config) {
		c.MaxConcurrentRunsPerTenant = 1
		// Polling every 50 ms stays under 40/s; the burst test below
		// sends faster than that.
		c.RateLimitRPS, c.RateLimitBurst = 40, 60
		c.CORSAllowedOrigins = []string{"https://console.example"}
	}))
	key := e.issueKey("tenant-a", auth.ScopeHierarchiesWrite, auth.ScopeRunsRead, auth.ScopeRunsWrite)
	var h struct {
		ID string `json:"hierarchy_id"`
	}
	e.mustCall("POST", "/api/executor/v1/hierarchies/create", key, accessHierarchy("idem"), &h)

	send := func(idemKey string, body any) (int, http.Header, []byte) {
		raw, _ := json.Marshal(body)
		req, _ := http.NewRequest(http.MethodPost, e.apiURL+"/runs/start", bytes.NewReader(raw))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+key)
		req.Header.Set("Idempotency-Key", idemKey)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		out, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, resp.Header, out
	}
	body := map[string]any{"hierarchy_id": h.ID, "task": "once"}
	s1, _, first := send("start-1", body)
	s2, h2, again := send("start-1", body)
	if s1 != http.StatusOK || s2 != http.StatusOK || !bytes.Equal(first, again) || h2.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("same key, same body: %d %s then %d %s (replayed %q)", s1, first, s2, again, h2.Get("Idempotent-Replayed"))
	}
	if s, _, raw := send("start-1", map[string]any{"hierarchy_id": h.ID, "task": "twice"}); s != http.StatusConflict || !bytes.Contains(raw, []byte("IDEMPOTENCY_KEY_REUSED")) {
		t.Errorf("same key, other body: %d %s, want 409 IDEMPOTENCY_KEY_REUSED", s, raw)
	}
	var list struct {
		Total int `json:"total"`
	}
	e.mustCall("POST", "/api/executor/v1/runs/list", key, map[string]any{}, &list)
	if list.Total != 1 {
		t.Errorf("%d runs after three starts with one key, want 1", list.Total)
	}

	// The first run is still going: a second one is over the tenant's
	// limit, refused as it asks (on_limit reject; by default it would queue).
	s, hdr, raw := send("start-2", map[string]any{"hierarchy_id": h.ID, "task": "second", "on_limit": "reject"})
	if s != http.StatusTooManyRequests || hdr.Get("Retry-After") == "" || !bytes.Contains(raw, []byte("RATE_LIMIT_EXCEEDED")) {
		t.Errorf("second concurrent run: %d %s (Retry-After %q), want 429", s, raw, hdr.Get("Retry-After"))
	}
	// Refused for a limit, the key is not kept: the same request may be
	// retried once the first run has ended.
	var first1 struct {
		Data struct {
			ID string `json:"id"`
		} `json:"data"`
	}
	_ = json.Unmarshal(first, &first1)
	waitFor(t, time.Minute, "the first run to end", func() bool {
		var v runView
		e.mustCall("POST", "/api/executor/v1/runs/get", key, map[string]any{"id": first1.Data.ID}, &v)
		return models.IsTerminal(v.Status)
	})
	if s, _, raw := send("start-2", map[string]any{"hierarchy_id": h.ID, "task": "second", "on_limit": "reject"}); s != http.StatusOK {
		t.Errorf("retry of the refused start after the first run ended: %d %s", s, raw)
	}

	// Not JSON: refused before anything is read, on both surfaces.
	for _, ct := range []string{"text/plain", "application/x-www-form-urlencoded", ""} {
		for _, path := range []string{"/api/executor/v1/hierarchies/create", "/api/v1/hierarchical-teams"} {
			raw, _ := json.Marshal(accessHierarchy("csrf"))
			req, _ := http.NewRequest(http.MethodPost, e.rootURL()+path, bytes.NewReader(raw))
			if ct != "" {
				req.Header.Set("Content-Type", ct)
			}
			req.Header.Set("Authorization", "Bearer "+key)
			req.Header.Set("Origin", "http://evil.example")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			out, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusUnsupportedMediaType || !bytes.Contains(out, []byte("UNSUPPORTED_MEDIA_TYPE")) {
				t.Errorf("POST %s as %q: %d %s, want 415", path, ct, resp.StatusCode, out)
			}
			if got := resp.Header.Get("Access-Control-Allow-Origin"); got != "" {
				t.Errorf("POST %s from an unlisted origin allowed by CORS: %q", path, got)
			}
		}
	}

	// CORS: the listed origin's preflight is answered, another's is not.
	for origin, allowed := range map[string]bool{"https://console.example": true, "http://evil.example": false} {
		req, _ := http.NewRequest(http.MethodOptions, e.apiURL+"/runs/list", nil)
		req.Header.Set("Origin", origin)
		req.Header.Set("Access-Control-Request-Method", "POST")
		req.Header.Set("Access-Control-Request-Headers", "authorization,content-type")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		got := resp.Header.Get("Access-Control-Allow-Origin")
		if allowed && (got != origin || resp.StatusCode >= 300) || !allowed && got != "" {
			t.Errorf("preflight from %s: %d, Access-Control-Allow-Origin %q", origin, resp.StatusCode, got)
		}
	}

	// The key's request rate: a burst well beyond 60 from 8 clients at
	// once is refused with Retry-After; another key is not affected.
	burstKey := e.issueKey("tenant-a", auth.ScopeHierarchiesRead)
	var refused atomic.Int32
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 40 {
				if s, raw := e.call("POST", "/api/executor/v1/hierarchies/list", burstKey, map[string]any{}); s == http.StatusTooManyRequests {
					refused.Add(1)
					if !bytes.Contains(raw, []byte("RATE_LIMIT_EXCEEDED")) {
						t.Errorf("429 body %s", raw)
					}
				}
			}
		}()
	}
	wg.Wait()
	if refused.Load() == 0 {
		t.Error("320 requests at once with a burst of 60 and 40/s: none refused")
	}
	if s, raw := e.call("POST", "/api/executor/v1/runs/list", key, map[string]any{}); s != http.StatusOK {
		t.Errorf("another key after the burst: %d %s", s, raw)
	}
}
