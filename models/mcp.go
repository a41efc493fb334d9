package models

import (
	"regexp"
	"strings"
	"time"
)

// MCPToolPrefix starts an agent's tool key that names a tool of one of its
// tenant's MCP servers: "mcp:<server>/<tool>", or "mcp:<server>/*" for
// every tool the server offers (and its allowed_tools lets through).
const MCPToolPrefix = "mcp:"

// MCPAllTools is the tool part of a key that takes every tool of a server.
const MCPAllTools = "*"

var (
	mcpServerNameRE = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,63}$`)
	mcpToolNameRE   = regexp.MustCompile(`^[A-Za-z0-9_./-]{1,128}$`)
)

// IsMCPToolKey reports whether an agent's tool key names an MCP tool.
func IsMCPToolKey(key string) bool { return strings.HasPrefix(key, MCPToolPrefix) }

// ParseMCPToolKey splits "mcp:<server>/<tool>" into its server and tool
// names; ok is false when key is not a well-formed MCP tool key.
func ParseMCPToolKey(key string) (server, tool string, ok bool) {
	rest, isMCP := strings.CutPrefix(key, MCPToolPrefix)
	if !isMCP {
		return "", "", false
	}
	server, tool, found := strings.Cut(rest, "/")
	if !found || !mcpServerNameRE.MatchString(server) || (tool != MCPAllTools && !mcpToolNameRE.MatchString(tool)) {
		return "", "", false
	}
	return server, tool, true
}

// MCPToolKeys are the MCP tool keys among an agent's tool keys.
func MCPToolKeys(keys []string) []string {
	var out []string
	for _, k := range keys {
		if IsMCPToolKey(k) {
			out = append(out, k)
		}
	}
	return out
}

// MCPFunctionPrefix starts the function name the model sees for an MCP
// tool: "mcp_<server>__<tool>", the tool's name reduced to what providers
// allow in a function name (MCPFunctionName).
const MCPFunctionPrefix = "mcp_"

var unsafeFunctionChars = regexp.MustCompile(`[^a-zA-Z0-9_-]`)

// MCPFunctionName is the name the model calls server's tool by, at most
// 64 characters (the providers' limit).
func MCPFunctionName(server, tool string) string {
	name := MCPFunctionPrefix + server + "__" + unsafeFunctionChars.ReplaceAllString(tool, "_")
	if len(name) > 64 {
		name = name[:64]
	}
	return name
}

// ParseMCPFunctionName splits a tool call's function name into the MCP
// server and the tool as the model named it; ok is false for a name that
// is not an MCP tool's. Workflows use it for the Web UI's activity summary,
// activities to route the call.
func ParseMCPFunctionName(name string) (server, tool string, ok bool) {
	rest, found := strings.CutPrefix(name, MCPFunctionPrefix)
	if !found {
		return "", "", false
	}
	server, tool, found = strings.Cut(rest, "__")
	return server, tool, found && server != ""
}

// MCPServer is a tenant's MCP server as the mcp-servers routes answer it
// (docs/mcp.md): the API writes it, the Go client (package client) reads
// it. Its secrets never come back: SecretsSet names the inline headers
// (and "authorization" for an inline bearer token) that are set.
type MCPServer struct {
	ID             string            `json:"id"`
	Name           string            `json:"name"`
	Tenant         string            `json:"tenant"`
	URL            string            `json:"url,omitempty"`
	Command        []string          `json:"command,omitempty"`
	HeaderEnv      map[string]string `json:"header_env,omitempty"`
	BearerTokenEnv string            `json:"bearer_token_env,omitempty"`
	SecretsSet     []string          `json:"secrets_set"`
	AllowedTools   []string          `json:"allowed_tools"`
	TimeoutSeconds float64           `json:"timeout_seconds"`
	Approval       string            `json:"approval"`
	CreatedAt      time.Time         `json:"created_at"`
	UpdatedAt      time.Time         `json:"updated_at"`
	// Warnings are create's and update's notes on a server that was saved
	// but may not work yet (MCP_SERVER_UNREACHABLE); get and list leave
	// them out.
	Warnings []MCPServerWarning `json:"warnings,omitempty"`
}

// MCPServerWarning is a problem with a server that did not stop it from
// being saved: a server may come up after it is added.
type MCPServerWarning struct {
	// Code is machine-readable: WarningMCPServerUnreachable.
	Code    string `json:"code"`
	Message string `json:"message"`
}

// WarningMCPServerUnreachable: the server did not answer (an MCP
// initialize and tools/list) within a few seconds when it was created or
// updated. It is saved all the same; runs list its tools when they need
// them.
const WarningMCPServerUnreachable = "MCP_SERVER_UNREACHABLE"

// MCPServerInput is the body of mcp-servers/create and update. An update
// replaces every field but the secrets: Headers and BearerToken left nil
// keep the stored ones (an empty map or string clears them).
type MCPServerInput struct {
	// ID names the server to update; create ignores it.
	ID      string   `json:"id,omitempty"`
	Name    string   `json:"name"`
	URL     string   `json:"url,omitempty"`
	Command []string `json:"command,omitempty"`
	// Headers are inline header values, stored encrypted (secrets); nil
	// is sent as null, which an update reads as "keep the stored ones".
	Headers map[string]string `json:"headers"`
	// BearerToken is an inline token, stored encrypted (a secret); nil
	// keeps the stored one on update, "" removes it.
	BearerToken *string `json:"bearer_token,omitempty"`
	// HeaderEnv maps a header to the workers' environment variable that
	// holds its value.
	HeaderEnv map[string]string `json:"header_env,omitempty"`
	// BearerTokenEnv names the workers' environment variable that holds
	// the bearer token.
	BearerTokenEnv string   `json:"bearer_token_env,omitempty"`
	AllowedTools   []string `json:"allowed_tools,omitempty"`
	TimeoutSeconds float64  `json:"timeout_seconds,omitempty"`
	Approval       string   `json:"approval,omitempty"`
}

// MCPServerRef names one MCP server by its id or, when ID is empty, by its
// name: the body of mcp-servers/get and delete.
type MCPServerRef struct {
	ID   string `json:"id,omitempty"`
	Name string `json:"name,omitempty"`
}

// MCPServerList is mcp-servers/list's answer: every server of the
// caller's tenant, by name.
type MCPServerList struct {
	Items []MCPServer `json:"items"`
	Total int         `json:"total"`
}

// MCPServerDeleted is mcp-servers/delete's answer.
type MCPServerDeleted struct {
	ID      string `json:"id"`
	Name    string `json:"name"`
	Deleted bool   `json:"deleted"`
}

// The approval policies of an MCP server (its "approval" field): which of
// its tools' calls wait for a person, judged by the tools' annotations.
const (
	// MCPApprovalNone: no call waits (stored as "").
	MCPApprovalNone = "none"
	// MCPApprovalDestructive: calls of tools that may be destructive wait.
	MCPApprovalDestructive = "destructive"
	// MCPApprovalNotReadOnly: calls of every tool not marked readOnlyHint
	// wait.
	MCPApprovalNotReadOnly = "not_read_only"
)

// MCPGateAgent is the reason of a gate that the agent's approval_tools
// asked for ("mcp:<server>/<tool>" or "mcp:<server>/*"); the others are
// the server's policies, MCPApprovalDestructive and MCPApprovalNotReadOnly.
const MCPGateAgent = "approval_tools"

// MCPToolGate says that every call of one MCP tool an agent was offered
// waits for a person's decision, and why. The LLM-call activity, which
// lists the tools, returns the gates with the model's answer
// (RespondResult.MCPGates), so the workflow decides from its history and
// replay agrees.
type MCPToolGate struct {
	// Function is the name the model calls the tool by (MCPFunctionName).
	Function string `json:"function"`
	Server   string `json:"server"`
	// Tool is the tool's name on its server.
	Tool string `json:"tool"`
	// Reason is MCPGateAgent, MCPApprovalDestructive or
	// MCPApprovalNotReadOnly.
	Reason string `json:"reason"`
}

// MCPPolicyGate is why a tool with the given annotations waits under a
// server's approval policy ("" when it does not). readOnly is the tool's
// readOnlyHint; destructive its destructiveHint as MCP defines it (true
// when absent, meaningless when readOnly), see mcp.ToolInfo.
func MCPPolicyGate(policy string, readOnly, destructive bool) string {
	switch policy {
	case MCPApprovalDestructive:
		if !readOnly && destructive {
			return MCPApprovalDestructive
		}
	case MCPApprovalNotReadOnly:
		if !readOnly {
			return MCPApprovalNotReadOnly
		}
	}
	return ""
}

// MCPKeyCovers reports whether an agent's MCP tool key ("mcp:<server>/<tool>"
// or "mcp:<server>/*") takes server's tool.
func MCPKeyCovers(key, server, tool string) bool {
	s, t, ok := ParseMCPToolKey(key)
	return ok && s == server && (t == MCPAllTools || t == tool)
}

// The environment variables an MCP server may name for its secrets
// (header_env, bearer_token_env) start with these prefixes. Whoever
// registers a server chooses where its headers go: were any name allowed,
// a tenant could have the workers send their own secrets (a provider key,
// DATABASE_URL, MCP_SECRET_KEY) to a server of its own.
const (
	MCPHeaderEnvPrefix = "MCP_HEADER_"
	MCPTokenEnvPrefix  = "MCP_TOKEN_"
)

var mcpEnvNameRE = regexp.MustCompile(`^[A-Z][A-Z0-9_]{0,127}$`)

// MCPSecretEnvAllowed reports whether an MCP server may name environment
// variable env, which must start with prefix (MCPHeaderEnvPrefix or
// MCPTokenEnvPrefix) and name something after it.
func MCPSecretEnvAllowed(env, prefix string) bool {
	return mcpEnvNameRE.MatchString(env) && strings.HasPrefix(env, prefix) && len(env) > len(prefix)
}
