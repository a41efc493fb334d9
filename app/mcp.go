package app

import (
	"context"
	"fmt"
	"os"

	"github.com/op-stack/executor/api"
	"github.com/op-stack/executor/config"
	"github.com/op-stack/executor/mcp"
	"github.com/op-stack/executor/models"
	"github.com/op-stack/executor/store"
)

// NewMCPToolbox is the worker's MCP side: the client under the operator's
// policy (MCP_ALLOW_PRIVATE, or TOOLS_HTTP_ALLOW_PRIVATE; MCP_STDIO_COMMANDS)
// and the tenants' servers read from the store.
func NewMCPToolbox(cfg config.Config, st *store.Store) *mcp.Toolbox {
	useMCPSecretKey(cfg, st)
	return &mcp.Toolbox{Client: newMCPClient(cfg), Servers: StoreMCPServers(st, os.LookupEnv)}
}

// newMCPClient is an MCP client under the operator's policy.
func newMCPClient(cfg config.Config) *mcp.Client {
	return mcp.New(mcp.Config{
		AllowPrivate:  cfg.MCPAllowPrivate || cfg.ToolsHTTPAllowPrivate,
		StdioCommands: cfg.MCPStdioCommands,
	})
}

// MCPProbe is the API's check that an MCP server answers when it is
// created or updated (api.MCPProbe): a tools/list over the workers'
// client, so under the same network guard (MCP_ALLOW_PRIVATE).
func MCPProbe(cfg config.Config) api.MCPProbe {
	return mcpProbe{client: newMCPClient(cfg)}
}

type mcpProbe struct{ client *mcp.Client }

func (p mcpProbe) ProbeMCPServer(ctx context.Context, t api.MCPProbeTarget) error {
	_, err := p.client.ListTools(ctx, mcp.Server{Name: t.Name, URL: t.URL, Headers: t.Headers})
	return err
}

// StoreMCPServers resolves a tenant's server by name from the store, its
// secrets opened or read from the worker's environment (lookupEnv). The
// values live in this process only for the call: they never enter a
// workflow's input, history or events.
func StoreMCPServers(st *store.Store, lookupEnv func(string) (string, bool)) mcp.ServerSource {
	return func(ctx context.Context, tenant, name string) (mcp.ServerConfig, error) {
		m, err := st.GetMCPServer(ctx, tenant, "", name)
		if err != nil {
			return mcp.ServerConfig{}, err
		}
		sec, err := st.MCPServerSecrets(ctx, tenant, m.ID)
		if err != nil {
			return mcp.ServerConfig{}, err
		}
		headers := map[string]string{}
		for k, v := range sec.Headers {
			headers[k] = v
		}
		for k, env := range m.HeaderEnv {
			// Checked at create too; again here for servers stored before
			// the rule, which must not reach other variables either.
			if !models.MCPSecretEnvAllowed(env, models.MCPHeaderEnvPrefix) {
				return mcp.ServerConfig{}, fmt.Errorf("environment variable %s (header %s) may not be read for an MCP server: only %s<NAME>", env, k, models.MCPHeaderEnvPrefix)
			}
			v, ok := lookupEnv(env)
			if !ok {
				return mcp.ServerConfig{}, fmt.Errorf("environment variable %s (header %s) is not set on this worker", env, k)
			}
			headers[k] = v
		}
		token := sec.BearerToken
		if m.BearerTokenEnv != "" {
			if !models.MCPSecretEnvAllowed(m.BearerTokenEnv, models.MCPTokenEnvPrefix) {
				return mcp.ServerConfig{}, fmt.Errorf("environment variable %s (bearer token) may not be read for an MCP server: only %s<NAME>", m.BearerTokenEnv, models.MCPTokenEnvPrefix)
			}
			v, ok := lookupEnv(m.BearerTokenEnv)
			if !ok {
				return mcp.ServerConfig{}, fmt.Errorf("environment variable %s (bearer token) is not set on this worker", m.BearerTokenEnv)
			}
			token = v
		}
		if token != "" {
			headers["Authorization"] = "Bearer " + token
		}
		return mcp.ServerConfig{
			Server:       mcp.Server{Name: m.Name, URL: m.URL, Command: m.Command, Headers: headers, Timeout: m.Timeout},
			AllowedTools: m.AllowedTools,
			Approval:     m.Approval,
		}, nil
	}
}

// useMCPSecretKey gives the store MCP_SECRET_KEY, which config.Load has
// already checked to be 32 bytes.
func useMCPSecretKey(cfg config.Config, st *store.Store) {
	if cfg.MCPSecretKey == nil || st == nil {
		return
	}
	if err := st.SetMCPSecretKey(cfg.MCPSecretKey); err != nil {
		panic("MCP_SECRET_KEY: " + err.Error()) // config.Load refuses a key of another size
	}
}
