package api_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/op-stack/executor/api"
	"github.com/op-stack/executor/models"
	"github.com/op-stack/executor/store"
	"github.com/op-stack/executor/store/storetest"
)

// fakeMCPProbe is a named fake of the API's MCP probe (app wires the real
// one on package mcp): it records what it was asked to reach and answers
// by URL: ".../down" fails at once, ".../hang" waits for the deadline,
// anything else answers.
type fakeMCPProbe struct {
	mu      sync.Mutex
	targets []api.MCPProbeTarget
}

func (f *fakeMCPProbe) ProbeMCPServer(ctx context.Context, t api.MCPProbeTarget) error {
	f.mu.Lock()
	f.targets = append(f.targets, t)
	f.mu.Unlock()
	switch {
	case strings.HasSuffix(t.URL, "/down"):
		return errors.New("dial tcp 10.0.0.1:443: connect: connection refused")
	case strings.HasSuffix(t.URL, "/hang"):
		<-ctx.Done()
		return ctx.Err()
	}
	return nil
}

func (f *fakeMCPProbe) last() (api.MCPProbeTarget, int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.targets) == 0 {
		return api.MCPProbeTarget{}, 0
	}
	return f.targets[len(f.targets)-1], len(f.targets)
}

// TestMCPServerUnreachableWarning: create and update try to reach the
// server (with its stored credentials) and, when it does not answer
// within the probe timeout, still save it and answer a
// MCP_SERVER_UNREACHABLE warning; a server that answers gets none, get
// and list carry none, a stdio server is not probed, and the secret sent
// to the probe is never in an answer.
func TestMCPServerUnreachableWarning(t *testing.T) {
	storetest.ForEachDialect(t, func(t *testing.T, st *store.Store) {
		if err := st.SetMCPSecretKey(bytes.Repeat([]byte{1}, 32)); err != nil {
			t.Fatal(err)
		}
		probe := &fakeMCPProbe{}
		srv := httptest.NewServer(api.NewServer(api.Options{
			Store: st, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
			MCPStdioCommands: []string{"npx"}, MCPProbe: probe, MCPProbeTimeout: 300 * time.Millisecond,
		}).Handler())
		t.Cleanup(srv.Close)
		call := func(route, body string) (int, models.MCPServer, string) {
			t.Helper()
			resp, raw := artifactCall(t, http.MethodPost, srv.URL+"/api/executor/v1/mcp-servers/"+route, "", body)
			var env struct {
				Data models.MCPServer `json:"data"`
			}
			_ = json.Unmarshal(raw, &env)
			return resp.StatusCode, env.Data, string(raw)
		}
		const secret = "probe-secret-77"

		// Reachable: no warnings at all in the answer.
		code, m, raw := call("create", `{"name":"up","url":"https://example.com/mcp"}`)
		if code != http.StatusOK || len(m.Warnings) != 0 || strings.Contains(raw, "warnings") {
			t.Fatalf("reachable create: %d %s", code, raw)
		}
		if target, n := probe.last(); n != 1 || target.URL != "https://example.com/mcp" || target.Name != "up" {
			t.Fatalf("probe asked %d times, last %+v", n, target)
		}

		// Down: saved, with a warning naming the server and the cause.
		code, m, raw = call("create", `{"name":"down","url":"https://example.com/down","bearer_token":"`+secret+`"}`)
		if code != http.StatusOK || m.ID == "" || len(m.Warnings) != 1 || m.Warnings[0].Code != models.WarningMCPServerUnreachable ||
			!strings.Contains(m.Warnings[0].Message, `"down"`) || !strings.Contains(m.Warnings[0].Message, "connection refused") {
			t.Fatalf("unreachable create: %d %s", code, raw)
		}
		if strings.Contains(raw, secret) {
			t.Fatalf("the token is in the answer: %s", raw)
		}
		if target, _ := probe.last(); target.Headers["Authorization"] != "Bearer "+secret {
			t.Errorf("the probe was not sent the inline token: %v", target.Headers)
		}
		downID := m.ID
		if _, err := st.GetMCPServer(context.Background(), store.DefaultTenant, downID, ""); err != nil {
			t.Fatalf("the unreachable server was not saved: %v", err)
		}
		for _, route := range []string{"get", "list"} {
			if code, _, raw = call(route, `{"id":"`+downID+`"}`); code != http.StatusOK || strings.Contains(raw, "warnings") {
				t.Errorf("%s: %d %s: want no warnings", route, code, raw)
			}
		}

		// Update keeps the stored token and probes with it; still down.
		code, m, raw = call("update", `{"id":"`+downID+`","name":"down","url":"https://example.org/down"}`)
		if code != http.StatusOK || len(m.Warnings) != 1 || m.Warnings[0].Code != models.WarningMCPServerUnreachable {
			t.Fatalf("unreachable update: %d %s", code, raw)
		}
		if target, _ := probe.last(); target.URL != "https://example.org/down" || target.Headers["Authorization"] != "Bearer "+secret {
			t.Errorf("update probed %+v: want the new URL with the kept token", target)
		}
		// Fixed: no warning.
		if code, m, raw = call("update", `{"id":"`+downID+`","name":"down","url":"https://example.org/mcp"}`); code != http.StatusOK || len(m.Warnings) != 0 {
			t.Fatalf("reachable update: %d %s", code, raw)
		}

		// A server that never answers costs the probe timeout, not more.
		start := time.Now()
		code, m, raw = call("create", `{"name":"slow","url":"https://example.com/hang","header_env":{"X-Key":"MCP_HEADER_SLOW_KEY"}}`)
		if took := time.Since(start); took > 5*time.Second {
			t.Errorf("create took %v with a hanging server", took)
		}
		if code != http.StatusOK || len(m.Warnings) != 1 || !strings.Contains(m.Warnings[0].Message, "no answer within 300ms") ||
			!strings.Contains(m.Warnings[0].Message, "workers' environment") {
			t.Fatalf("hanging create: %d %s", code, raw)
		}

		// stdio runs on the workers: not probed from the API.
		_, before := probe.last()
		if code, m, raw = call("create", `{"name":"local","command":["npx","-y","@modelcontextprotocol/server-everything"]}`); code != http.StatusOK || len(m.Warnings) != 0 {
			t.Fatalf("stdio create: %d %s", code, raw)
		}
		if _, after := probe.last(); after != before {
			t.Errorf("a stdio server was probed")
		}
	})
}
