package api_test

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/op-stack/executor/api"
	"github.com/op-stack/executor/auth"
	"github.com/op-stack/executor/store"
	"github.com/op-stack/executor/store/storetest"
)

// TestMCPServersAPI: create, get, list, update and delete an MCP server;
// its secrets are never answered (only named in secrets_set); another
// tenant's id reads as an unknown one; bad input is a 400 naming the
// field and stores nothing; the hierarchies scopes apply.
func TestMCPServersAPI(t *testing.T) {
	storetest.ForEachDialect(t, func(t *testing.T, st *store.Store) {
		ctx := context.Background()
		if err := st.SetMCPSecretKey(bytes.Repeat([]byte{1}, 32)); err != nil {
			t.Fatal(err)
		}
		srv := httptest.NewServer(api.NewServer(api.Options{
			Store: st, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
			Access:           api.Access{Mode: api.AuthRequired, Authenticator: auth.Keys{Lookup: st.KeyLookup()}},
			MCPStdioCommands: []string{"npx"},
		}).Handler())
		t.Cleanup(srv.Close)
		keyA, _, _ := st.IssueAPIKey(ctx, "tenant-a", []auth.Scope{auth.ScopeHierarchiesRead, auth.ScopeHierarchiesWrite}, 0, "a")
		keyB, _, _ := st.IssueAPIKey(ctx, "tenant-b", []auth.Scope{auth.ScopeHierarchiesRead, auth.ScopeHierarchiesWrite}, 0, "b")
		keyRead, _, _ := st.IssueAPIKey(ctx, "tenant-a", []auth.Scope{auth.ScopeHierarchiesRead}, 0, "a-read")
		call := func(key, route, body string) (int, string) {
			t.Helper()
			resp, raw := artifactCall(t, http.MethodPost, srv.URL+"/api/executor/v1/mcp-servers/"+route, key, body)
			return resp.StatusCode, string(raw)
		}
		const secret = "sk-very-secret-value"
		code, raw := call(keyA, "create", `{"name":"docs","url":"https://example.com/mcp","bearer_token":"`+secret+`","headers":{"X-Team":"hdr-secret-2"},"allowed_tools":["search"],"timeout_seconds":30,"approval":"destructive"}`)
		if code != http.StatusOK || strings.Contains(raw, secret) || strings.Contains(raw, "hdr-secret-2") ||
			!strings.Contains(raw, `"secrets_set":["X-Team","authorization"]`) || !strings.Contains(raw, `"timeout_seconds":30`) {
			t.Fatalf("create: %d %s", code, raw)
		}
		id := raw[strings.Index(raw, `"id":"`)+6:]
		id = id[:strings.Index(id, `"`)]

		for _, route := range []string{"get", "list"} {
			code, raw = call(keyA, route, `{"id":"`+id+`"}`)
			if code != http.StatusOK || strings.Contains(raw, secret) || !strings.Contains(raw, `"name":"docs"`) {
				t.Fatalf("%s: %d %s", route, code, raw)
			}
		}
		// Another tenant: an unknown id, the same answer.
		_, unknown := call(keyB, "get", `{"id":"mcp_nope"}`)
		for _, route := range []string{"get", "delete"} {
			code, raw = call(keyB, route, `{"id":"`+id+`"}`)
			if code != http.StatusNotFound || !strings.Contains(raw, "MCP_SERVER_NOT_FOUND") {
				t.Fatalf("tenant B %s: %d %s", route, code, raw)
			}
			if strings.ReplaceAll(raw, id, "X") != strings.ReplaceAll(unknown, "mcp_nope", "X") {
				t.Errorf("another tenant's id reads differently from an unknown one:\n%s\n%s", raw, unknown)
			}
		}
		code, raw = call(keyB, "update", `{"id":"`+id+`","name":"docs","url":"https://evil.example/mcp"}`)
		if code != http.StatusNotFound {
			t.Fatalf("tenant B update: %d %s", code, raw)
		}
		if code, raw = call(keyB, "list", `{}`); !strings.Contains(raw, `"items":[]`) {
			t.Fatalf("tenant B list: %d %s", code, raw)
		}
		// Scopes: a read-only key reads but does not write.
		if code, _ = call(keyRead, "list", `{}`); code != http.StatusOK {
			t.Errorf("read key list: %d", code)
		}
		if code, raw = call(keyRead, "create", `{"name":"x","url":"https://example.com/mcp"}`); code != http.StatusForbidden {
			t.Errorf("read key create: %d %s", code, raw)
		}
		// Bad input: 400 naming the field; nothing stored.
		for body, field := range map[string]string{
			`{"name":"Bad Name","url":"https://example.com/mcp"}`: "name",
			`{"name":"x"}`:                                                              "url",
			`{"name":"x","url":"ftp://example.com"}`:                                    "url",
			`{"name":"x","url":"https://u:p@example.com/mcp"}`:                          "url",
			`{"name":"x","command":["sh","-c","id"]}`:                                   "command",
			`{"name":"x","url":"https://example.com/mcp","header_env":{"X":"bad-env"}}`: "header_env",
			// A server may name only MCP_HEADER_/MCP_TOKEN_ variables: never
			// the workers' own secrets, which it would receive.
			`{"name":"x","url":"https://example.com/mcp","header_env":{"X":"OPENAI_API_KEY"}}`: "header_env",
			`{"name":"x","url":"https://example.com/mcp","header_env":{"X":"MCP_HEADER_"}}`:    "header_env",
			`{"name":"x","url":"https://example.com/mcp","bearer_token_env":"MCP_SECRET_KEY"}`: "bearer_token_env",
			`{"name":"x","url":"https://example.com/mcp","bearer_token_env":"DATABASE_URL"}`:   "bearer_token_env",
			`{"name":"x","url":"https://example.com/mcp","approval":"sometimes"}`:              "approval",
			`{"name":"x","url":"https://example.com/mcp","timeout_seconds":-1}`:                "timeout_seconds",
		} {
			code, raw = call(keyA, "create", body)
			if code != http.StatusBadRequest || !strings.Contains(raw, `"field":"`+field+`"`) {
				t.Errorf("%s: %d %s, want 400 naming %s", body, code, raw, field)
			}
		}
		if code, raw = call(keyA, "create", `{"name":"docs","url":"https://example.com/other"}`); code != http.StatusConflict || !strings.Contains(raw, `"field":"name"`) {
			t.Errorf("taken name: %d %s", code, raw)
		}
		if code, raw = call(keyA, "create", `{"name":"local","command":["npx","-y","@modelcontextprotocol/server-everything"]}`); code != http.StatusOK {
			t.Errorf("allowed stdio command: %d %s", code, raw)
		}
		if list, _ := st.ListMCPServers(ctx, "tenant-a"); len(list) != 2 {
			t.Errorf("tenant-a has %d servers, want 2 (docs, local)", len(list))
		}
		// Update without secrets keeps them; the answer still hides them.
		code, raw = call(keyA, "update", `{"id":"`+id+`","name":"docs","url":"https://example.com/v2"}`)
		if code != http.StatusOK || !strings.Contains(raw, `"secrets_set":["X-Team","authorization"]`) || strings.Contains(raw, secret) {
			t.Fatalf("update: %d %s", code, raw)
		}
		if sec, err := st.MCPServerSecrets(ctx, "tenant-a", id); err != nil || sec.BearerToken != secret {
			t.Fatalf("secrets after update: %+v %v", sec, err)
		}
		if code, raw = call(keyA, "delete", `{"name":"docs"}`); code != http.StatusOK || !strings.Contains(raw, `"deleted":true`) {
			t.Fatalf("delete: %d %s", code, raw)
		}
		if code, _ = call(keyA, "get", `{"id":"`+id+`"}`); code != http.StatusNotFound {
			t.Errorf("get after delete: %d", code)
		}
	})
}

// TestHierarchyMCPToolKeys: a worker lists "mcp:<server>/<tool>" next to
// built-in tools; an unknown server (or another tenant's), a malformed key
// or a tool outside the server's allowed_tools is a 400 naming the field.
func TestHierarchyMCPToolKeys(t *testing.T) {
	storetest.ForEachDialect(t, func(t *testing.T, st *store.Store) {
		a := newTestAPI(t, st, withFakeTools)
		ctx := context.Background()
		for _, m := range []*store.MCPServer{
			{TenantID: "default", Name: "tracker", URL: "https://example.com/mcp", AllowedTools: []string{"search_issues"}},
			{TenantID: "default", Name: "docs", URL: "https://example.com/docs"},
			{TenantID: "other", Name: "secretsrv", URL: "https://example.com/other"},
		} {
			if err := st.CreateMCPServer(ctx, m); err != nil {
				t.Fatal(err)
			}
		}
		body := specBody()
		worker(body, 0, 0)["tools"] = []any{"calculator", "mcp:tracker/search_issues", "mcp:docs/*"}
		id := create(a, body)
		if w := get(a, id).Teams[0].Workers[0]; strings.Join(w.Tools, ",") != "calculator,mcp:tracker/search_issues,mcp:docs/*" {
			t.Fatalf("tools = %v", w.Tools)
		}
		for _, tools := range [][]any{
			{"mcp:nope/x"},
			{"mcp:secretsrv/x"}, // another tenant's server is unknown
			{"mcp:tracker/delete_everything"},
			{"mcp:tracker"},
			{"calculator", "mcp:Docs/x"},
		} {
			body := specBody()
			worker(body, 0, 0)["tools"] = tools
			env := a.expectError(pathCreate, body, 400, 40001)
			if env.Field != "teams[0].workers[0].tools" {
				t.Errorf("%v: field %q (%s)", tools, env.Field, env.Message)
			}
		}
	})
}

// TestMCPApprovalTools: a worker's approval_tools may name its MCP tools,
// one ("mcp:<server>/<tool>", covered by one of its keys) or all of a
// server's ("mcp:<server>/*"); a malformed key or an MCP tool the worker
// does not have is a 400 naming approval_tools.
func TestMCPApprovalTools(t *testing.T) {
	storetest.ForEachDialect(t, func(t *testing.T, st *store.Store) {
		a := newTestAPI(t, st, withFakeTools)
		ctx := context.Background()
		for _, m := range []*store.MCPServer{
			{TenantID: "default", Name: "tracker", URL: "https://example.com/mcp"},
			{TenantID: "default", Name: "docs", URL: "https://example.com/docs"},
		} {
			if err := st.CreateMCPServer(ctx, m); err != nil {
				t.Fatal(err)
			}
		}
		body := specBody()
		w := worker(body, 0, 0)
		w["tools"] = []any{"calculator", "mcp:tracker/*", "mcp:docs/search"}
		w["approval_tools"] = []any{"calculator", "mcp:tracker/delete_issue", "mcp:docs/*"}
		got := get(a, create(a, body)).Teams[0].Workers[0]
		if strings.Join(got.ApprovalTools, ",") != "calculator,mcp:tracker/delete_issue,mcp:docs/*" {
			t.Fatalf("approval_tools = %v", got.ApprovalTools)
		}
		for _, bad := range [][]any{
			{"mcp:other/x"},       // no key on that server
			{"mcp:docs/delete"},   // the worker has docs/search only
			{"mcp:tracker"},       // malformed
			{"mcp:Tracker/x"},     // malformed server name
			{"mcp:tracker/a b c"}, // malformed tool name
		} {
			body := specBody()
			w := worker(body, 0, 0)
			w["tools"] = []any{"mcp:tracker/*", "mcp:docs/search"}
			w["approval_tools"] = bad
			env := a.expectError(pathCreate, body, 400, 40001)
			if env.Field != "teams[0].workers[0].approval_tools" {
				t.Errorf("%v: field %q (%s)", bad, env.Field, env.Message)
			}
		}
	})
}

// TestV1TeamMCPTools: spec 001's team routes keep a worker's MCP tool
// keys (unknown built-in tools are dropped with a warning, MCP keys are
// not) and check them as hierarchies/create does: an unknown server or a
// malformed key is a 400 naming the field in spec 001's terms. Its
// approval_tools may name them too.
func TestV1TeamMCPTools(t *testing.T) {
	storetest.ForEachDialect(t, func(t *testing.T, st *store.Store) {
		a := newTestAPI(t, st, withFakeTools)
		ctx := context.Background()
		for _, m := range []*store.MCPServer{
			{TenantID: "default", Name: "tracker", URL: "https://example.com/mcp", AllowedTools: []string{"search_issues", "close_issue"}},
			{TenantID: "other", Name: "theirs", URL: "https://example.com/other"},
		} {
			if err := st.CreateMCPServer(ctx, m); err != nil {
				t.Fatal(err)
			}
		}
		agentConfig := func(req map[string]any) map[string]any {
			return req["sub_teams"].([]any)[0].(map[string]any)["agent_configs"].([]any)[0].(map[string]any)
		}
		req := specRequest(t)
		ac := agentConfig(req)
		ac["tools"] = []any{"calculator", "mcp:tracker/search_issues", "mcp:tracker/close_issue"}
		ac["approval_tools"] = []any{"mcp:tracker/close_issue"}
		var created teamSummary
		a.mustDo(http.MethodPost, pathTeams, req, api.CodeTeamCreated, &created)
		for _, w := range created.Warnings {
			if strings.Contains(w, "mcp:") {
				t.Errorf("an MCP tool was dropped: %q", w)
			}
		}
		stored := get(a, created.TeamID).Teams[0].Workers[0]
		if strings.Join(stored.Tools, ",") != "calculator,mcp:tracker/search_issues,mcp:tracker/close_issue" ||
			strings.Join(stored.ApprovalTools, ",") != "mcp:tracker/close_issue" {
			t.Fatalf("stored tools %v, approval_tools %v", stored.Tools, stored.ApprovalTools)
		}
		var got struct {
			SubTeams []struct {
				AgentConfigs []struct {
					Tools         []string `json:"tools"`
					ApprovalTools []string `json:"approval_tools"`
				} `json:"agent_configs"`
			} `json:"sub_teams"`
		}
		a.mustDo(http.MethodGet, pathTeams+"/"+created.TeamID, nil, api.CodeTeamInfoRetrieved, &got)
		if w := got.SubTeams[0].AgentConfigs[0]; !slices.Contains(w.Tools, "mcp:tracker/close_issue") || !slices.Equal(w.ApprovalTools, []string{"mcp:tracker/close_issue"}) {
			t.Errorf("read back: %+v", w)
		}
		// An update keeps them too.
		ac["tools"] = []any{"mcp:tracker/*"}
		ac["approval_tools"] = []any{"mcp:tracker/*"}
		a.mustDo(http.MethodPut, pathTeams+"/"+created.TeamID, req, api.CodeTeamUpdated, nil)
		if w := get(a, created.TeamID).Teams[0].Workers[0]; strings.Join(w.Tools, ",") != "mcp:tracker/*" || strings.Join(w.ApprovalTools, ",") != "mcp:tracker/*" {
			t.Errorf("after update: tools %v, approval_tools %v", w.Tools, w.ApprovalTools)
		}

		for _, c := range []struct {
			tools, approval []any
			field           string
		}{
			{[]any{"mcp:nope/x"}, nil, "sub_teams[0].agent_configs[0].tools"},
			{[]any{"mcp:theirs/x"}, nil, "sub_teams[0].agent_configs[0].tools"}, // another tenant's
			{[]any{"mcp:tracker/delete_all"}, nil, "sub_teams[0].agent_configs[0].tools"},
			{[]any{"mcp:tracker"}, nil, "sub_teams[0].agent_configs[0].tools"},
			{[]any{"mcp:tracker/search_issues"}, []any{"mcp:tracker/close_issue"}, "sub_teams[0].agent_configs[0].approval_tools"},
		} {
			for _, method := range []string{http.MethodPost, http.MethodPut} {
				req := specRequest(t)
				ac := agentConfig(req)
				ac["tools"], ac["approval_tools"] = c.tools, c.approval
				path := pathTeams
				if method == http.MethodPut {
					path += "/" + created.TeamID
				}
				env := a.expectV1Error(method, path, req, http.StatusBadRequest, "INVALID_PARAMETERS")
				if got := env.Error.Details["field"]; got != c.field {
					t.Errorf("%s %v/%v: field %v (%s), want %s", method, c.tools, c.approval, got, env.Error.Message, c.field)
				}
			}
		}
	})
}
