package mcp

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"sync"
	"time"

	"github.com/op-stack/executor/llm"
	"github.com/op-stack/executor/models"
	"github.com/op-stack/executor/tools"
)

// ServerConfig is a tenant's stored server, secrets resolved, as the
// Toolbox needs it.
type ServerConfig struct {
	Server
	// AllowedTools limits the tools offered (empty: all).
	AllowedTools []string
	// Approval is the server's approval policy: "" (none),
	// models.MCPApprovalDestructive or models.MCPApprovalNotReadOnly.
	Approval string
}

// ServerSource finds a tenant's server by name (with its secrets
// resolved: opened, or read from the worker's environment). An unknown
// server is an error.
type ServerSource func(ctx context.Context, tenant, name string) (ServerConfig, error)

// Toolbox offers a tenant's MCP tools to agents and runs their calls: the
// activities' side of MCP. Listings are cached per tenant and server for
// ListTTL, in at most MaxCached entries, so that an agent's every model
// call does not relist its servers' tools.
type Toolbox struct {
	Client  *Client
	Servers ServerSource
	// ListTTL is how long a listing is reused (DefaultListTTL when zero).
	ListTTL time.Duration
	// MaxCached bounds the cached listings (DefaultMaxCached when zero).
	MaxCached int

	mu    sync.Mutex
	cache map[string]cachedList
}

// Defaults of the Toolbox's cache.
const (
	DefaultListTTL   = 5 * time.Minute
	DefaultMaxCached = 256
)

type cachedList struct {
	tools   []ToolInfo
	expires time.Time
}

// unsafeName matches what a file or function name may not hold.
var unsafeName = regexp.MustCompile(`[^a-zA-Z0-9_-]`)

// NamePrefix starts the function name the model sees for an MCP tool
// (models.MCPFunctionPrefix).
const NamePrefix = models.MCPFunctionPrefix

// FunctionName is the name the model calls server's tool by
// (models.MCPFunctionName).
func FunctionName(server, tool string) string { return models.MCPFunctionName(server, tool) }

// IsFunctionName reports whether a tool call's name is an MCP tool's and
// which server it is on.
func IsFunctionName(name string) (server string, ok bool) {
	server, _, ok = models.ParseMCPFunctionName(name)
	return server, ok
}

// list lists server's tools for tenant, from the cache when fresh.
func (b *Toolbox) list(ctx context.Context, tenant string, cfg ServerConfig) ([]ToolInfo, error) {
	key := tenant + "\x00" + cfg.Name
	now := time.Now()
	b.mu.Lock()
	if c, ok := b.cache[key]; ok && now.Before(c.expires) {
		b.mu.Unlock()
		return c.tools, nil
	}
	b.mu.Unlock()
	list, err := b.Client.ListTools(ctx, cfg.Server)
	if err != nil {
		return nil, err
	}
	if len(cfg.AllowedTools) > 0 {
		list = slices.DeleteFunc(slices.Clone(list), func(t ToolInfo) bool { return !slices.Contains(cfg.AllowedTools, t.Name) })
	}
	ttl, max := b.ListTTL, b.MaxCached
	if ttl <= 0 {
		ttl = DefaultListTTL
	}
	if max <= 0 {
		max = DefaultMaxCached
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.cache == nil {
		b.cache = map[string]cachedList{}
	}
	if len(b.cache) >= max {
		// Drop the expired entries, then, if still full, any one: the
		// bound matters more than which listing is fetched again.
		for k, c := range b.cache {
			if now.After(c.expires) {
				delete(b.cache, k)
			}
		}
		for k := range b.cache {
			if len(b.cache) < max {
				break
			}
			delete(b.cache, k)
		}
	}
	b.cache[key] = cachedList{tools: list, expires: now.Add(ttl)}
	return list, nil
}

// Definitions are the function definitions of an agent's MCP tool keys
// ("mcp:<server>/<tool>", "mcp:<server>/*"; other keys are skipped). A
// server that cannot be listed is left out with a warning: the agent
// works on with its other tools, as with a tool removed from the registry.
func (b *Toolbox) Definitions(ctx context.Context, tenant string, keys []string) (defs []llm.ToolDef, warnings []string) {
	defs, _, warnings = b.Offer(ctx, tenant, keys, nil)
	return defs, warnings
}

// Offer is Definitions with the gates of the tools offered: those whose
// calls wait for a person, because their server's approval policy meets
// their annotations (models.MCPPolicyGate) or because one of the agent's
// approvalKeys (its approval_tools) covers them. The agent's keys come
// first: a gate it asked for is one it asked for, whatever the server says.
func (b *Toolbox) Offer(ctx context.Context, tenant string, keys, approvalKeys []string) (defs []llm.ToolDef, gates []models.MCPToolGate, warnings []string) {
	seen := map[string]bool{}
	for _, k := range keys {
		server, tool, ok := models.ParseMCPToolKey(k)
		if !ok {
			continue
		}
		cfg, err := b.Servers(ctx, tenant, server)
		if err != nil {
			warnings = append(warnings, fmt.Sprintf("MCP server %q: %v", server, err))
			continue
		}
		list, err := b.list(ctx, tenant, cfg)
		if err != nil {
			warnings = append(warnings, fmt.Sprintf("MCP server %q did not list its tools: %v", server, err))
			continue
		}
		found := false
		for _, t := range list {
			if tool != models.MCPAllTools && t.Name != tool {
				continue
			}
			found = true
			name := FunctionName(server, t.Name)
			if seen[name] {
				continue
			}
			seen[name] = true
			if reason := gateReason(cfg, t, approvalKeys); reason != "" {
				gates = append(gates, models.MCPToolGate{Function: name, Server: server, Tool: t.Name, Reason: reason})
			}
			desc := t.Description
			if desc == "" {
				desc = "Tool " + t.Name + " of the MCP server " + server + "."
			}
			defs = append(defs, llm.ToolDef{Name: name, Description: desc, Parameters: t.InputSchema})
		}
		if !found && tool != models.MCPAllTools {
			warnings = append(warnings, fmt.Sprintf("MCP server %q offers no tool %q", server, tool))
		}
	}
	return defs, gates, warnings
}

// gateReason is why calls of cfg's tool t wait for a person (see
// models.MCPToolGate), "" when they do not: one of the agent's
// approvalKeys covers it, or the server's policy meets its annotations.
func gateReason(cfg ServerConfig, t ToolInfo, approvalKeys []string) string {
	for _, k := range approvalKeys {
		if models.MCPKeyCovers(k, cfg.Name, t.Name) {
			return models.MCPGateAgent
		}
	}
	return models.MCPPolicyGate(cfg.Approval, t.ReadOnly, t.Destructive)
}

// CallApproval is what a call's workflow decided about its approval: the
// agent's "mcp:" approval_tools keys, and whether a person approved it.
type CallApproval struct {
	Keys     []string
	Approved bool
}

// Call runs the call of function name (an MCP tool's, see FunctionName)
// for tenant, whose agent listed keys. A name the agent's keys do not
// cover is refused: the model may only call what it was offered. So is a
// call of a gated tool (gateReason) that nobody approved: the workflow
// gates the calls of the tools an LLM call's listing offered, and this
// catches the others (a tool named while its server could not be listed),
// so that no gated call runs unasked.
func (b *Toolbox) Call(ctx context.Context, tenant string, keys []string, name string, arguments json.RawMessage, approval CallApproval) (tools.Result, error) {
	server, ok := IsFunctionName(name)
	if !ok {
		return tools.Result{}, fmt.Errorf("%q is not an MCP tool", name)
	}
	var wanted []string
	for _, k := range keys {
		if s, tool, ok := models.ParseMCPToolKey(k); ok && s == server {
			wanted = append(wanted, tool)
		}
	}
	if len(wanted) == 0 {
		return tools.Result{}, fmt.Errorf("tool %q is not one of this agent's tools", name)
	}
	cfg, err := b.Servers(ctx, tenant, server)
	if err != nil {
		return tools.Result{}, fmt.Errorf("MCP server %q: %v", server, err)
	}
	list, err := b.list(ctx, tenant, cfg)
	if err != nil {
		return tools.Result{}, err
	}
	for _, t := range list {
		if FunctionName(server, t.Name) != name {
			continue
		}
		if !slices.Contains(wanted, models.MCPAllTools) && !slices.Contains(wanted, t.Name) {
			break
		}
		if reason := gateReason(cfg, t, approval.Keys); reason != "" && !approval.Approved {
			return tools.Result{}, fmt.Errorf("MCP tool %s/%s needs a person's approval (%s), and this call was not approved: call it again to have it approved", server, t.Name, reason)
		}
		return b.Client.CallTool(ctx, cfg.Server, t.Name, arguments)
	}
	return tools.Result{}, fmt.Errorf("tool %q is not one of this agent's tools", name)
}
