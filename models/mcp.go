package models

import (
	"regexp"
	"strings"
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
