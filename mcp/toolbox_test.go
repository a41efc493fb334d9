package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/op-stack/executor/models"
)

func TestToolboxDefinitionsAndCalls(t *testing.T) {
	srv, _ := testServer(t)
	var lists atomic.Int32
	counted := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body := make([]byte, 4096)
		n, _ := r.Body.Read(body)
		if strings.Contains(string(body[:n]), `"tools/list"`) {
			lists.Add(1)
		}
		r.Body = http.NoBody
		if n > 0 {
			r.Body = readCloser{strings.NewReader(string(body[:n]))}
		}
		proxy(srv.URL, w, r)
	}))
	defer counted.Close()
	b := &Toolbox{
		Client: New(Config{AllowPrivate: true}),
		Servers: func(_ context.Context, tenant, name string) (ServerConfig, error) {
			if tenant != "acme" {
				return ServerConfig{}, errors.New("unknown server")
			}
			switch name {
			case "t":
				return ServerConfig{Server: Server{Name: "t", URL: counted.URL}, AllowedTools: []string{"echo", "add", "fail"}}, nil
			case "down":
				return ServerConfig{Server: Server{Name: "down", URL: "http://127.0.0.1:1/mcp"}}, nil
			}
			return ServerConfig{}, errors.New("unknown server")
		},
	}
	ctx := context.Background()
	defs, warnings := b.Definitions(ctx, "acme", []string{"calculator", "mcp:t/*", "mcp:down/x", "mcp:t/picture"})
	var names []string
	for _, d := range defs {
		names = append(names, d.Name)
	}
	if strings.Join(names, ",") != "mcp_t__add,mcp_t__echo,mcp_t__fail" {
		t.Errorf("defs = %v: want the allowed tools only", names)
	}
	if len(warnings) != 2 || !strings.Contains(warnings[0], `"down"`) || !strings.Contains(warnings[1], `no tool "picture"`) {
		t.Errorf("warnings = %q", warnings)
	}
	// The listing is cached: a second agent turn does not list again.
	before := lists.Load()
	b.Definitions(ctx, "acme", []string{"mcp:t/echo"})
	if lists.Load() != before {
		t.Errorf("listed again within the TTL")
	}

	res, err := b.Call(ctx, "acme", []string{"mcp:t/*"}, "mcp_t__add", json.RawMessage(`{"a":1,"b":2}`), CallApproval{})
	if err != nil || !strings.Contains(res.Content, `"sum":3`) {
		t.Fatalf("add = %+v, %v", res, err)
	}
	// Not offered: not the agent's, not allowed by the server, another tenant.
	for _, c := range []struct {
		tenant string
		keys   []string
		name   string
	}{
		{"acme", []string{"mcp:t/echo"}, "mcp_t__add"},
		{"acme", []string{"mcp:t/*"}, "mcp_t__picture"},
		{"other", []string{"mcp:t/*"}, "mcp_t__echo"},
		{"acme", []string{"mcp:t/*"}, "calculator"},
	} {
		if _, err := b.Call(ctx, c.tenant, c.keys, c.name, nil, CallApproval{}); err == nil {
			t.Errorf("%+v: called, want a refusal", c)
		}
	}
}

type readCloser struct{ *strings.Reader }

func (readCloser) Close() error { return nil }

// proxy forwards r to target, streaming the answer.
func proxy(target string, w http.ResponseWriter, r *http.Request) {
	req, _ := http.NewRequestWithContext(r.Context(), r.Method, target, r.Body)
	req.Header = r.Header.Clone()
	resp, err := http.DefaultTransport.RoundTrip(req)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	defer resp.Body.Close()
	for k, v := range resp.Header {
		w.Header()[k] = v
	}
	w.WriteHeader(resp.StatusCode)
	buf := make([]byte, 32<<10)
	for {
		n, err := resp.Body.Read(buf)
		if n > 0 {
			w.Write(buf[:n])
			if f, ok := w.(http.Flusher); ok {
				f.Flush()
			}
		}
		if err != nil {
			return
		}
	}
}

// TestToolboxGates: Offer gates the tools whose calls wait for a person:
// under "destructive", those that may be destructive (picture says so,
// add says nothing, which MCP reads as destructive; echo is read-only);
// under "not_read_only", all but echo; under none, only those the agent's
// approval keys name. The agent's key wins over the policy's reason. A
// call of a gated tool that nobody approved is refused.
func TestToolboxGates(t *testing.T) {
	srv, _ := testServer(t)
	policy := ""
	b := &Toolbox{
		Client: New(Config{AllowPrivate: true}),
		Servers: func(_ context.Context, _, name string) (ServerConfig, error) {
			return ServerConfig{Server: Server{Name: name, URL: srv.URL}, AllowedTools: []string{"echo", "add", "picture"}, Approval: policy}, nil
		},
		ListTTL: time.Nanosecond,
	}
	gates := func(approvalKeys ...string) string {
		_, gs, warnings := b.Offer(context.Background(), "acme", []string{"mcp:t/*"}, approvalKeys)
		if len(warnings) > 0 {
			t.Fatalf("warnings %q", warnings)
		}
		var out []string
		for _, g := range gs {
			if g.Function != FunctionName(g.Server, g.Tool) || g.Server != "t" {
				t.Errorf("gate %+v", g)
			}
			out = append(out, g.Tool+":"+g.Reason)
		}
		return strings.Join(out, ",")
	}
	for _, c := range []struct {
		policy string
		keys   []string
		want   string
	}{
		{"", nil, ""},
		{"", []string{"mcp:t/echo", "mcp:other/*"}, "echo:approval_tools"},
		{"", []string{"mcp:t/*"}, "add:approval_tools,echo:approval_tools,picture:approval_tools"},
		{models.MCPApprovalDestructive, nil, "add:destructive,picture:destructive"},
		{models.MCPApprovalNotReadOnly, nil, "add:not_read_only,picture:not_read_only"},
		{models.MCPApprovalDestructive, []string{"mcp:t/picture"}, "add:destructive,picture:approval_tools"},
	} {
		policy = c.policy
		if got := gates(c.keys...); got != c.want {
			t.Errorf("policy %q, keys %v: gates %q, want %q", c.policy, c.keys, got, c.want)
		}
	}

	// A call of a gated tool runs only when approved; an ungated one
	// always. The agent's keys gate as the policy does.
	ctx := context.Background()
	for _, c := range []struct {
		policy   string
		approval CallApproval
		name     string
		runs     bool
	}{
		{models.MCPApprovalDestructive, CallApproval{}, "mcp_t__add", false},
		{models.MCPApprovalDestructive, CallApproval{Approved: true}, "mcp_t__add", true},
		{models.MCPApprovalDestructive, CallApproval{}, "mcp_t__echo", true},
		{"", CallApproval{}, "mcp_t__add", true},
		{"", CallApproval{Keys: []string{"mcp:t/echo"}}, "mcp_t__echo", false},
		{"", CallApproval{Keys: []string{"mcp:t/echo"}, Approved: true}, "mcp_t__echo", true},
	} {
		policy = c.policy
		args := json.RawMessage(`{"a":1,"b":2}`)
		if c.name == "mcp_t__echo" {
			args = json.RawMessage(`{"message":"m"}`)
		}
		_, err := b.Call(ctx, "acme", []string{"mcp:t/*"}, c.name, args, c.approval)
		if c.runs && err != nil {
			t.Errorf("%+v: %v", c, err)
		}
		if !c.runs && (err == nil || !strings.Contains(err.Error(), "needs a person's approval")) {
			t.Errorf("%+v: ran (err %v), want a refusal", c, err)
		}
	}
}

// TestPolicyGate: the approval policies against readOnlyHint and
// destructiveHint (as ToolInfo holds them, MCP's defaults applied).
func TestPolicyGate(t *testing.T) {
	for _, c := range []struct {
		policy                string
		readOnly, destructive bool
		want                  string
	}{
		{"", false, true, ""},
		{models.MCPApprovalNone, false, true, ""},
		{models.MCPApprovalDestructive, false, true, models.MCPApprovalDestructive},
		{models.MCPApprovalDestructive, false, false, ""}, // additive only
		{models.MCPApprovalDestructive, true, true, ""},   // read-only wins
		{models.MCPApprovalNotReadOnly, false, false, models.MCPApprovalNotReadOnly},
		{models.MCPApprovalNotReadOnly, true, false, ""},
	} {
		if got := models.MCPPolicyGate(c.policy, c.readOnly, c.destructive); got != c.want {
			t.Errorf("%+v: %q", c, got)
		}
	}
}
