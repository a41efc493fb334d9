package models

import "testing"

func TestParseMCPToolKey(t *testing.T) {
	for key, want := range map[string][2]string{
		"mcp:tracker/search_issues": {"tracker", "search_issues"},
		"mcp:docs/*":                {"docs", "*"},
		"mcp:a-b_1/get-tiny.image":  {"a-b_1", "get-tiny.image"},
	} {
		s, tool, ok := ParseMCPToolKey(key)
		if !ok || s != want[0] || tool != want[1] {
			t.Errorf("ParseMCPToolKey(%q) = %q, %q, %v", key, s, tool, ok)
		}
	}
	for _, key := range []string{"calculator", "mcp:", "mcp:docs", "mcp:docs/", "mcp:Docs/x", "mcp:/x", "mcp:docs/a b", "mcp:docs/**"} {
		if _, _, ok := ParseMCPToolKey(key); ok {
			t.Errorf("ParseMCPToolKey(%q) accepted", key)
		}
	}
}
