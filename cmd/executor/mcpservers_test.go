package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/op-stack/executor/api"
	"github.com/op-stack/executor/auth"
	"github.com/op-stack/executor/client"
	"github.com/op-stack/executor/store/storetest"
)

// TestMCPServersCommand runs `executor mcp-servers` against the real API
// (in process, on SQLite, access control on): create from flags and from
// a file, list, get by id and name, update, delete, text and -o json; an
// unknown server exits 1 with the API's 404; a bearer token given inline
// (on standard input or in the file) never appears in any output.
func TestMCPServersCommand(t *testing.T) {
	ctx := context.Background()
	st := storetest.SQLite(t)
	if err := st.SetMCPSecretKey(bytes.Repeat([]byte{3}, 32)); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(api.NewServer(api.Options{
		Store: st, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Access: api.Access{Mode: api.AuthRequired, Authenticator: auth.Keys{Lookup: st.KeyLookup()}},
	}).Handler())
	t.Cleanup(srv.Close)
	key, _, err := st.IssueAPIKey(ctx, "acme", []auth.Scope{auth.ScopeHierarchiesRead, auth.ScopeHierarchiesWrite}, 0, "cli-test")
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("EXECUTOR_URL", srv.URL)
	t.Setenv("EXECUTOR_API_KEY", key)

	const secret = "sk-inline-cli-secret"
	var outputs strings.Builder // everything the commands printed
	run := func(stdin string, args ...string) (string, string, int) {
		t.Helper()
		root := newRootCommand()
		root.SetIn(strings.NewReader(stdin))
		var stdout, stderr bytes.Buffer
		root.SetArgs(args)
		root.SetOut(&stdout)
		root.SetErr(&stderr)
		code := 0
		if err := root.ExecuteContext(ctx); err != nil {
			code = 1
			if ee, ok := err.(exitError); ok {
				code = ee.code
			}
			stderr.WriteString(err.Error())
		}
		outputs.WriteString(stdout.String() + stderr.String())
		return stdout.String(), stderr.String(), code
	}
	must := func(stdin string, args ...string) string {
		t.Helper()
		out, errOut, code := run(stdin, args...)
		if code != 0 {
			t.Fatalf("executor %q: exit %d\n%s%s", args, code, out, errOut)
		}
		return out
	}

	// create from flags, the token on standard input.
	id := strings.TrimSpace(must(secret+"\n", "mcp-servers", "create", "--name", "docs", "--url", "https://mcp.example.com/mcp",
		"--bearer-token-stdin", "--header-env", "X-Team=MCP_HEADER_DOCS_TEAM", "--header-env", "X-Org=MCP_HEADER_DOCS_ORG",
		"--allowed-tool", "search", "--allowed-tool", "fetch", "--timeout", "30s", "--approval", "destructive"))
	if !strings.HasPrefix(id, "mcp_") {
		t.Fatalf("create printed %q, want the id alone", id)
	}
	// create from a file with an inline token, -o json.
	file := filepath.Join(t.TempDir(), "wiki.json")
	body := `{"name":"wiki","url":"https://wiki.example.com/mcp","bearer_token":"` + secret + `","allowed_tools":["lookup"]}`
	if err := os.WriteFile(file, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	var wiki client.MCPServer
	if err := json.Unmarshal([]byte(must("", "mcp-servers", "create", "-f", file, "-o", "json")), &wiki); err != nil || wiki.Name != "wiki" || len(wiki.SecretsSet) != 1 {
		t.Fatalf("create -f -o json: %+v %v", wiki, err)
	}

	list := must("", "mcp-servers", "list")
	for _, want := range []string{id, "docs", "wiki", "https://mcp.example.com/mcp", "search,fetch", "authorization", "X-Team $MCP_HEADER_DOCS_TEAM"} {
		if !strings.Contains(list, want) {
			t.Errorf("list does not show %q:\n%s", want, list)
		}
	}
	var l client.MCPServerList
	if err := json.Unmarshal([]byte(must("", "mcp-servers", "list", "-o", "json")), &l); err != nil || l.Total != 2 {
		t.Fatalf("list -o json: %+v %v", l, err)
	}

	for _, ref := range []string{id, "docs"} {
		got := strings.Join(strings.Fields(must("", "mcp-servers", "get", ref)), " ")
		for _, want := range []string{id, "mcp:docs/<tool>", "header X-Team from $MCP_HEADER_DOCS_TEAM", "secrets set authorization", "timeout 30s", "approval destructive"} {
			if !strings.Contains(got, want) {
				t.Errorf("get %s does not show %q:\n%s", ref, want, got)
			}
		}
	}
	var m client.MCPServer
	if err := json.Unmarshal([]byte(must("", "mcp-servers", "get", "docs", "-o", "json")), &m); err != nil || m.ID != id || m.TimeoutSeconds != 30 || m.HeaderEnv["X-Org"] != "MCP_HEADER_DOCS_ORG" {
		t.Fatalf("get -o json: %+v %v", m, err)
	}

	// update changes only the flags given; the stored token stays.
	if err := json.Unmarshal([]byte(must("", "mcp-servers", "update", "docs", "--url", "https://mcp.example.com/v2", "--allowed-tool", "search", "-o", "json")), &m); err != nil {
		t.Fatal(err)
	}
	if m.URL != "https://mcp.example.com/v2" || strings.Join(m.AllowedTools, ",") != "search" || m.TimeoutSeconds != 30 ||
		m.Approval != "destructive" || m.HeaderEnv["X-Team"] != "MCP_HEADER_DOCS_TEAM" || strings.Join(m.SecretsSet, ",") != "authorization" {
		t.Fatalf("update: %+v", m)
	}
	if sec, err := st.MCPServerSecrets(ctx, "acme", id); err != nil || sec.BearerToken != secret {
		t.Fatalf("the update lost the stored token: %v", err)
	}
	// switching to a token from the environment drops the inline one.
	must("", "mcp-servers", "update", id, "--bearer-token-env", "MCP_TOKEN_DOCS")
	if err := json.Unmarshal([]byte(must("", "mcp-servers", "get", id, "-o", "json")), &m); err != nil || m.BearerTokenEnv != "MCP_TOKEN_DOCS" || len(m.SecretsSet) != 0 {
		t.Fatalf("after --bearer-token-env: %+v %v", m, err)
	}

	if out := must("", "mcp-servers", "delete", "docs"); !strings.Contains(out, id+" docs deleted") {
		t.Errorf("delete printed %q", out)
	}
	must("", "mcp-servers", "delete", wiki.ID, "-o", "json")

	// Unknown servers: exit 1 with the API's 404, as every client command.
	for _, args := range [][]string{
		{"mcp-servers", "get", id}, {"mcp-servers", "get", "nope"}, {"mcp-servers", "delete", "docs"}, {"mcp-servers", "update", "nope", "--url", "https://x.example.com"},
	} {
		var stdout, stderr bytes.Buffer
		code := execute(ctx, args, &stdout, &stderr)
		outputs.WriteString(stdout.String() + stderr.String())
		if code != 1 || !strings.Contains(stderr.String(), "HTTP 404 MCP_SERVER_NOT_FOUND") || stdout.Len() != 0 {
			t.Errorf("executor %q: exit %d, stderr %q", args, code, stderr.String())
		}
	}
	// Mistakes on the command line.
	for args, want := range map[string][]string{
		"--name and --url are required": {"mcp-servers", "create", "--name", "x"},
		"want HEADER=ENV":               {"mcp-servers", "create", "--name", "x", "--url", "https://x.example.com", "--header-env", "X-Team"},
		"HTTP 400":                      {"mcp-servers", "create", "--name", "Bad Name", "--url", "https://x.example.com"},
	} {
		var stdout, stderr bytes.Buffer
		if code := execute(ctx, want, &stdout, &stderr); code != 1 || !strings.Contains(stderr.String(), args) {
			t.Errorf("executor %q: exit %d, stderr %q; want %q", want, code, stderr.String(), args)
		}
	}

	if strings.Contains(outputs.String(), secret) {
		t.Errorf("the inline bearer token was printed:\n%s", outputs.String())
	}
}
