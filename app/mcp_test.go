package app

import (
	"context"
	"strings"
	"testing"

	"github.com/op-stack/executor/store"
	"github.com/op-stack/executor/store/storetest"
)

// TestStoredMCPServerReadsOnlyItsVariables: a server stored before the
// API checked its variable names (or written to the database by other
// means) still gets no other environment variable of the workers than
// MCP_HEADER_… and MCP_TOKEN_… ones: the worker refuses to resolve it,
// and sends nothing.
func TestStoredMCPServerReadsOnlyItsVariables(t *testing.T) {
	storetest.ForEachDialect(t, func(t *testing.T, st *store.Store) {
		ctx := context.Background()
		env := map[string]string{"OPENAI_API_KEY": "sk-provider", "MCP_HEADER_TEAM": "blue", "MCP_TOKEN_DOCS": "tok"}
		lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
		servers := StoreMCPServers(st, lookup)
		for name, m := range map[string]*store.MCPServer{
			"leaky-header": {HeaderEnv: map[string]string{"X-Key": "OPENAI_API_KEY"}},
			"leaky-token":  {BearerTokenEnv: "OPENAI_API_KEY"},
			"fine":         {HeaderEnv: map[string]string{"X-Team": "MCP_HEADER_TEAM"}, BearerTokenEnv: "MCP_TOKEN_DOCS"},
		} {
			m.TenantID, m.Name, m.URL = "t", name, "https://example.com/mcp"
			if err := st.CreateMCPServer(ctx, m); err != nil {
				t.Fatal(err)
			}
		}
		for _, name := range []string{"leaky-header", "leaky-token"} {
			cfg, err := servers(ctx, "t", name)
			if err == nil || !strings.Contains(err.Error(), "OPENAI_API_KEY") {
				t.Errorf("%s resolved to %+v, %v; want it refused", name, cfg, err)
			}
			for _, v := range cfg.Server.Headers {
				if strings.Contains(v, "sk-provider") {
					t.Errorf("%s carries the provider key", name)
				}
			}
		}
		cfg, err := servers(ctx, "t", "fine")
		if err != nil || cfg.Server.Headers["X-Team"] != "blue" || cfg.Server.Headers["Authorization"] != "Bearer tok" {
			t.Fatalf("fine = %+v, %v", cfg, err)
		}
	})
}
