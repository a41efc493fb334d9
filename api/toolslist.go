package api

import (
	"github.com/gin-gonic/gin"
)

// toolLister is a ToolCatalog that can also list its tools (the tools
// package's *Registry): tools/list shows them to people who build
// hierarchies, e.g. the console's editor. A catalog without it lists none.
type toolLister interface {
	Keys() []string
	Describe(key string) string
}

// toolView is one built-in tool in tools/list.
type toolView struct {
	Key         string `json:"key"`
	Description string `json:"description"`
}

// toolList is tools/list's answer.
type toolList struct {
	Items []toolView `json:"items"`
	Total int        `json:"total"`
}

// listTools answers the built-in tools an agent's "tools" may name (the
// same catalog hierarchies/create checks them against). MCP servers' tools
// are the tenant's and are listed by mcp-servers/list.
func (s *Server) listTools(c *gin.Context) {
	out := toolList{Items: []toolView{}}
	if l, ok := s.tools.(toolLister); ok {
		for _, k := range l.Keys() {
			out.Items = append(out.Items, toolView{Key: k, Description: l.Describe(k)})
		}
	}
	out.Total = len(out.Items)
	ok(c, out)
}
