package store_test

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/op-stack/executor/models"
	"github.com/op-stack/executor/store"
	"github.com/op-stack/executor/store/storetest"
)

func TestMCPServerSecretsSealedAndTenantScoped(t *testing.T) {
	storetest.ForEachDialect(t, func(t *testing.T, st *store.Store) {
		ctx := context.Background()
		token := "tok-" + t.Name()
		m := &store.MCPServer{TenantID: "acme", Name: "docs", URL: "https://example.com/mcp",
			Headers: map[string]string{"X-Api-Key": "hdr-secret"}, BearerToken: &token, Timeout: 5 * time.Second}
		// Without a key, inline secrets are refused, not stored in the clear.
		if err := st.CreateMCPServer(ctx, m); err != store.ErrNoMCPSecretKey {
			t.Fatalf("create without a key = %v, want ErrNoMCPSecretKey", err)
		}
		m.ID = ""
		m.Headers, m.BearerToken = map[string]string{"X-Api-Key": "hdr-secret"}, &token
		if err := st.SetMCPSecretKey(bytes.Repeat([]byte{7}, 32)); err != nil {
			t.Fatal(err)
		}
		if err := st.CreateMCPServer(ctx, m); err != nil {
			t.Fatal(err)
		}
		got, err := st.GetMCPServer(ctx, "acme", m.ID, "")
		if err != nil {
			t.Fatal(err)
		}
		if got.Headers != nil || got.BearerToken != nil || len(got.SecretNames) != 2 || got.Timeout != 5*time.Second {
			t.Fatalf("got %+v: want secrets named, not returned", got)
		}
		// At rest: neither secret appears in the row's bytes.
		var raw []byte
		if err := st.DB().Raw("SELECT secrets FROM mcp_server WHERE id = ?", m.ID).Row().Scan(&raw); err != nil {
			t.Fatal(err)
		}
		if len(raw) == 0 || bytes.Contains(raw, []byte("hdr-secret")) || bytes.Contains(raw, []byte(token)) {
			t.Fatalf("secrets at rest = %q: want sealed", raw)
		}
		sec, err := st.MCPServerSecrets(ctx, "acme", m.ID)
		if err != nil || sec.BearerToken != token || sec.Headers["X-Api-Key"] != "hdr-secret" {
			t.Fatalf("opened = %+v, %v", sec, err)
		}
		// Another tenant: the same answer as an unknown id.
		for _, err := range []error{
			func() error { _, err := st.GetMCPServer(ctx, "other", m.ID, ""); return err }(),
			func() error { _, err := st.MCPServerSecrets(ctx, "other", m.ID); return err }(),
			st.DeleteMCPServer(ctx, "other", m.ID),
			st.UpdateMCPServer(ctx, &store.MCPServer{ID: m.ID, TenantID: "other", Name: "x"}),
		} {
			if models.ErrorCode(err) != models.CodeMCPServerNotFound {
				t.Errorf("other tenant: %v, want MCP_SERVER_NOT_FOUND", err)
			}
		}
		if list, _ := st.ListMCPServers(ctx, "other"); len(list) != 0 {
			t.Errorf("other tenant lists %d servers", len(list))
		}
		// A taken name in the tenant is a conflict naming the field; the
		// same name in another tenant is fine.
		err = st.CreateMCPServer(ctx, &store.MCPServer{TenantID: "acme", Name: "docs", URL: "https://x.example/mcp"})
		if e, ok := err.(*models.Error); !ok || e.Code != models.CodeAlreadyExists || e.Field != "name" {
			t.Fatalf("taken name = %v", err)
		}
		if err := st.CreateMCPServer(ctx, &store.MCPServer{TenantID: "other", Name: "docs", URL: "https://x.example/mcp"}); err != nil {
			t.Fatal(err)
		}
		// An update without secrets keeps them; an empty token removes it.
		upd := &store.MCPServer{ID: m.ID, TenantID: "acme", Name: "docs", URL: "https://example.com/v2", AllowedTools: []string{"search"}}
		if err := st.UpdateMCPServer(ctx, upd); err != nil {
			t.Fatal(err)
		}
		if sec, _ := st.MCPServerSecrets(ctx, "acme", m.ID); sec.BearerToken != token {
			t.Fatalf("update without secrets lost them: %+v", sec)
		}
		empty := ""
		if err := st.UpdateMCPServer(ctx, &store.MCPServer{ID: m.ID, TenantID: "acme", Name: "docs", URL: upd.URL, BearerToken: &empty}); err != nil {
			t.Fatal(err)
		}
		got, _ = st.GetMCPServer(ctx, "acme", "", "docs")
		if len(got.SecretNames) != 1 || got.SecretNames[0] != "X-Api-Key" || got.URL != upd.URL {
			t.Fatalf("after removing the token: %+v", got)
		}
		if err := st.DeleteMCPServer(ctx, "acme", m.ID); err != nil {
			t.Fatal(err)
		}
	})
}
