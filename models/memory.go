package models

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
	"unicode"
)

// Memory tools' registry keys (docs/memory.md): an agent that lists them
// in its tools searches and saves the tenant's long-term memory, within
// the namespaces its hierarchy declares.
const (
	MemorySearchToolName = "memory_search"
	MemorySaveToolName   = "memory_save"
)

// MemoryConfig is a hierarchy's `memory` setting: the namespaces its
// agents' memory tools may read and write, and whether a run starts with
// memories of its task in the global supervisor's prompt.
type MemoryConfig struct {
	// Namespaces are namespace paths, each segment plain text or holding
	// {variables}: {user_id} (any key of the run's `metadata`),
	// {hierarchy_id}, {tenant_id}. A tool call names one of them (the
	// first by default) or a namespace under one.
	Namespaces [][]string `json:"namespaces"`
	// Preload > 0 puts the top Preload memories found for the task in the
	// declared namespaces into the global supervisor's prompt at the run's
	// start (at most 20).
	Preload int `json:"preload,omitempty"`
	// TTLSeconds > 0 makes what the tools save expire after that long
	// (0: kept until deleted, or until its run is deleted).
	TTLSeconds int `json:"ttl_seconds,omitempty"`
}

// MaxMemoryPreload bounds MemoryConfig.Preload.
const MaxMemoryPreload = 20

// RunMemory is a run's memory scope, resolved by the API at the start from
// its hierarchy's MemoryConfig and the run's metadata: what the memory
// tools' activities may reach. It travels in RunOptions, so activities
// need no lookup, and it holds no secrets (metadata values are ids).
type RunMemory struct {
	// Namespaces are the declared namespaces with their variables filled.
	Namespaces [][]string `json:"namespaces"`
	TTLSeconds int        `json:"ttl_seconds,omitempty"`
	// Preloaded is the text of the memories preloaded for the task (the
	// global supervisor's prompt shows it); "" when none.
	Preloaded string `json:"preloaded,omitempty"`
}

// memoryVariable is a {variable} in a namespace segment.
var memoryVariable = regexp.MustCompile(`\{([A-Za-z_][A-Za-z0-9_]{0,63})\}`)

// CheckMemoryConfig checks a hierarchy's memory setting (field names it),
// and that only a hierarchy declaring memory lists the memory tools.
func (h *Hierarchy) CheckMemoryConfig(field string) error {
	uses := false
	for _, a := range h.Agents() {
		if slices.Contains(a.Tools, MemorySearchToolName) || slices.Contains(a.Tools, MemorySaveToolName) {
			uses = true
		}
	}
	m := h.Memory
	if m == nil {
		if uses {
			return FieldError(field, "is required when an agent lists %s or %s: declare the namespaces they reach", MemorySearchToolName, MemorySaveToolName)
		}
		return nil
	}
	if len(m.Namespaces) == 0 || len(m.Namespaces) > 10 {
		return FieldError(field+".namespaces", "must list 1 to 10 namespace paths, e.g. [[\"users\", \"{user_id}\"]]")
	}
	for i, ns := range m.Namespaces {
		if len(ns) == 0 || len(ns) > 10 {
			return FieldError(fmt.Sprintf("%s.namespaces[%d]", field, i), "must have 1 to 10 segments")
		}
		for j, seg := range ns {
			f := fmt.Sprintf("%s.namespaces[%d][%d]", field, i, j)
			if strings.TrimSpace(seg) == "" || strings.Contains(seg, "/") || len(seg) > 128 {
				return FieldError(f, "must be 1 to 128 characters without '/', got %q", seg)
			}
			rest := memoryVariable.ReplaceAllString(seg, "")
			if strings.ContainsAny(rest, "{}") {
				return FieldError(f, "has a malformed variable: write {name} with letters, digits and '_', got %q", seg)
			}
		}
	}
	if m.Preload < 0 || m.Preload > MaxMemoryPreload {
		return FieldError(field+".preload", "must be between 0 and %d, got %d", MaxMemoryPreload, m.Preload)
	}
	if m.TTLSeconds < 0 {
		return FieldError(field+".ttl_seconds", "must be 0 (no expiry) or more, got %d", m.TTLSeconds)
	}
	return nil
}

// ResolveMemory fills the variables of the hierarchy's memory namespaces
// from vars (the run's metadata plus hierarchy_id and tenant_id). A
// variable without a value is INVALID_PARAMETERS naming metadata.<name>:
// a run must say whose memory it reaches. nil when the hierarchy declares
// no memory.
func (h *Hierarchy) ResolveMemory(vars map[string]string) (*RunMemory, error) {
	if h.Memory == nil {
		return nil, nil
	}
	out := &RunMemory{TTLSeconds: h.Memory.TTLSeconds}
	for _, ns := range h.Memory.Namespaces {
		var path []string
		for _, seg := range ns {
			var missing string
			filled := memoryVariable.ReplaceAllStringFunc(seg, func(m string) string {
				name := m[1 : len(m)-1]
				v, ok := vars[name]
				if !ok || v == "" {
					missing = name
				}
				return v
			})
			if missing != "" {
				return nil, FieldError("metadata."+missing, "is required: the hierarchy's memory namespace %q names {%s}", strings.Join(ns, "/"), missing)
			}
			if strings.Contains(filled, "/") || strings.TrimSpace(filled) == "" || strings.IndexFunc(filled, unicode.IsControl) >= 0 {
				return nil, FieldError("metadata", "fills memory namespace %q with %q: values must be non-empty, without '/' or control characters", strings.Join(ns, "/"), filled)
			}
			path = append(path, filled)
		}
		out.Namespaces = append(out.Namespaces, path)
	}
	return out, nil
}

// Agents lists every agent of the hierarchy: global supervisor first, then
// each team's supervisor followed by its workers.
func (h *Hierarchy) Agents() []Agent {
	out := []Agent{h.GlobalSupervisor}
	for _, t := range h.Teams {
		out = append(out, t.Supervisor)
		out = append(out, t.Workers...)
	}
	return out
}
