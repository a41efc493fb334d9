package client_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/op-stack/executor/api"
	"github.com/op-stack/executor/auth"
	"github.com/op-stack/executor/client"
	"github.com/op-stack/executor/store/storetest"
)

// TestMCPServers drives the five mcp-servers routes of the real API (an
// in-process server on SQLite, access control on) through the client:
// create, list, get by id and by name, update (stored secrets kept),
// delete, and a 404 for an unknown server. No answer carries a secret.
func TestMCPServers(t *testing.T) {
	ctx := context.Background()
	st := storetest.SQLite(t)
	if err := st.SetMCPSecretKey(bytes.Repeat([]byte{7}, 32)); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(api.NewServer(api.Options{
		Store: st, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Access: api.Access{Mode: api.AuthRequired, Authenticator: auth.Keys{Lookup: st.KeyLookup()}},
	}).Handler())
	t.Cleanup(srv.Close)
	key, _, err := st.IssueAPIKey(ctx, "acme", []auth.Scope{auth.ScopeHierarchiesRead, auth.ScopeHierarchiesWrite}, 0, "client-test")
	if err != nil {
		t.Fatal(err)
	}
	c, err := client.New(srv.URL, key, nil)
	if err != nil {
		t.Fatal(err)
	}

	const secret = "sk-client-test-secret"
	token := secret
	created, err := c.CreateMCPServer(ctx, client.MCPServerInput{Name: "docs", URL: "https://mcp.example.com/mcp", BearerToken: &token,
		HeaderEnv: map[string]string{"X-Team": "MCP_HEADER_DOCS_TEAM"}, AllowedTools: []string{"search"}, TimeoutSeconds: 30, Approval: "destructive"})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(created.ID, "mcp_") || created.Tenant != "acme" || created.TimeoutSeconds != 30 ||
		!slices.Equal(created.SecretsSet, []string{"authorization"}) || created.HeaderEnv["X-Team"] != "MCP_HEADER_DOCS_TEAM" {
		t.Fatalf("created %+v", created)
	}

	list, err := c.ListMCPServers(ctx)
	if err != nil || list.Total != 1 || len(list.Items) != 1 || list.Items[0].ID != created.ID {
		t.Fatalf("list %+v %v", list, err)
	}
	for _, ref := range []client.MCPServerRef{{ID: created.ID}, {Name: "docs"}} {
		got, err := c.GetMCPServer(ctx, ref)
		if err != nil || got.ID != created.ID || !slices.Equal(got.AllowedTools, []string{"search"}) {
			t.Fatalf("get %+v: %+v %v", ref, got, err)
		}
	}
	raw, err := c.CallRaw(ctx, "/mcp-servers/get", client.MCPServerRef{ID: created.ID})
	if err != nil || strings.Contains(string(raw), secret) {
		t.Fatalf("get answers the secret or fails: %s %v", raw, err)
	}

	updated, err := c.UpdateMCPServer(ctx, client.MCPServerInput{ID: created.ID, Name: "docs", URL: "https://mcp.example.com/v2", AllowedTools: []string{"search", "fetch"}})
	if err != nil || updated.URL != "https://mcp.example.com/v2" || !slices.Equal(updated.SecretsSet, []string{"authorization"}) || len(updated.HeaderEnv) != 0 {
		t.Fatalf("update %+v %v", updated, err)
	}
	if sec, err := st.MCPServerSecrets(ctx, "acme", created.ID); err != nil || sec.BearerToken != secret {
		t.Fatalf("the update lost the stored token: %+v %v", sec, err)
	}

	del, err := c.DeleteMCPServer(ctx, client.MCPServerRef{Name: "docs"})
	if err != nil || !del.Deleted || del.ID != created.ID {
		t.Fatalf("delete %+v %v", del, err)
	}
	for name, call := range map[string]func() error{
		"get":    func() error { _, err := c.GetMCPServer(ctx, client.MCPServerRef{ID: created.ID}); return err },
		"delete": func() error { _, err := c.DeleteMCPServer(ctx, client.MCPServerRef{Name: "docs"}); return err },
		"update": func() error {
			_, err := c.UpdateMCPServer(ctx, client.MCPServerInput{ID: created.ID, Name: "docs", URL: "https://mcp.example.com/mcp"})
			return err
		},
	} {
		var apiErr *client.APIError
		if err := call(); !errors.As(err, &apiErr) || apiErr.Status != http.StatusNotFound || apiErr.ErrorCode != "MCP_SERVER_NOT_FOUND" {
			t.Errorf("%s of a deleted server: %v, want a 404 MCP_SERVER_NOT_FOUND", name, err)
		}
	}
	// A refused body names the field.
	_, err = c.CreateMCPServer(ctx, client.MCPServerInput{Name: "Bad Name", URL: "https://mcp.example.com/mcp"})
	var apiErr *client.APIError
	if !errors.As(err, &apiErr) || apiErr.Status != http.StatusBadRequest || apiErr.Field != "name" {
		t.Errorf("bad name: %v", err)
	}
}
