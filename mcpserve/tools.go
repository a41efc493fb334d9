package mcpserve

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/op-stack/executor/models"
)

// maxToolName is the longest tool name given. MCP allows 128 characters,
// but several clients (Claude's API among them) take at most 64, from
// [A-Za-z0-9_-].
const maxToolName = 64

// tool is a hierarchy as a tool.
type tool struct {
	name      string
	hierarchy Hierarchy
}

// toolName derives a tool's name from a hierarchy's name: letters, digits,
// '_' and '-' kept, every other run of characters one '_'.
func toolName(name string) string {
	var b strings.Builder
	under := false
	for _, r := range name {
		if r < 128 && (r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '-') {
			b.WriteRune(r)
			under = false
			continue
		}
		if !under && b.Len() > 0 {
			b.WriteByte('_')
			under = true
		}
	}
	s := strings.TrimRight(b.String(), "_")
	if s == "" {
		s = "hierarchy"
	}
	if len(s) > maxToolName {
		s = strings.TrimRight(s[:maxToolName], "_")
	}
	return s
}

// toolsOf names the hierarchies' tools. Names are unique: when two
// hierarchies' names give the same tool name, the older keeps it (the
// backend lists newest first; the oldest is named first here) and the
// others get a suffix from their ids, so that creating a hierarchy never
// renames an existing tool.
func toolsOf(hs []Hierarchy) []tool {
	taken := map[string]bool{}
	out := make([]tool, 0, len(hs))
	for i := len(hs) - 1; i >= 0; i-- {
		h := hs[i]
		name := toolName(h.Name)
		if taken[name] {
			// The id's first 8 characters, then more, then a counter.
			id := toolName(h.ID)
			id = id[:min(len(id), 40)]
			for n := min(8, len(id)); ; n++ {
				s := id
				if n < len(id) {
					s = id[:n]
				} else if n > len(id) {
					s = fmt.Sprintf("%s%d", id, n-len(id))
				}
				base := name[:max(0, min(len(name), maxToolName-len(s)-1))]
				if c := base + "_" + s; !taken[c] && len(c) <= maxToolName {
					name = c
					break
				}
			}
		}
		taken[name] = true
		out = append(out, tool{name: name, hierarchy: h})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].name < out[j].name })
	return out
}

// inputSchema is every tool's input: the task, and optionally the run it
// follows up.
var inputSchema = map[string]any{
	"type": "object",
	"properties": map[string]any{
		"task": map[string]any{
			"type": "string", "minLength": 1,
			"description": "The task for the hierarchy's agents, as runs/start's task.",
		},
		"previous_run_id": map[string]any{
			"type":        "string",
			"description": "Optional: the run_id of a finished run of this hierarchy that this run follows up (the same thread; its agents see that run's task and answers).",
		},
	},
	"required":             []string{"task"},
	"additionalProperties": false,
}

func (t tool) tool() *sdk.Tool {
	desc := strings.TrimSpace(t.hierarchy.Description)
	if desc == "" {
		desc = fmt.Sprintf("Runs the hierarchy %q of agents on a task.", t.hierarchy.Name)
	}
	desc += " Answers with the run's final answer (structuredContent: run_id, status, usage)."
	no, yes := false, true
	return &sdk.Tool{
		Name: t.name, Title: t.hierarchy.Name, Description: desc, InputSchema: inputSchema,
		// A run calls models and tools that reach outside, costs money and
		// is not repeatable, but deletes nothing.
		Annotations: &sdk.ToolAnnotations{Title: t.hierarchy.Name, DestructiveHint: &no, OpenWorldHint: &yes},
	}
}

// progress sends a call's progress notifications, when the client asked
// for them with a progressToken.
type progress struct {
	ctx   context.Context
	req   *sdk.CallToolRequest
	token any
	mu    sync.Mutex
	n     float64
}

func newProgress(ctx context.Context, req *sdk.CallToolRequest) *progress {
	return &progress{ctx: ctx, req: req, token: req.Params.GetProgressToken()}
}

// send sends one step. A notification that cannot be sent (the client has
// gone) is dropped: the call's end decides what happens to the run.
func (p *progress) send(msg string) {
	if p.token == nil || p.req.Session == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.n++
	_ = p.req.Session.NotifyProgress(p.ctx, &sdk.ProgressNotificationParams{ProgressToken: p.token, Progress: p.n, Message: msg})
}

// stepMessage is a short line for an agent's step, or "" for events that
// are not steps (streamed text, usage of a step already told).
func stepMessage(e models.Event) string {
	str := func(k string) string { s, _ := e.Data[k].(string); return s }
	who := agentLabel(e.Source)
	switch e.Event.String() {
	case "dispatch.team":
		return fmt.Sprintf("global supervisor dispatched team %s", str("team_name"))
	case "dispatch.worker":
		return fmt.Sprintf("%s dispatched worker %s", who, str("worker_name"))
	case "llm.usage":
		// One per successful model call: the agent has answered.
		return who + " answered"
	case "llm.tool_call":
		return fmt.Sprintf("%s calls tool %s", who, str("tool_name"))
	case "llm.tool_result":
		if b, _ := e.Data["is_error"].(bool); b {
			return fmt.Sprintf("%s: tool %s failed", who, str("tool_name"))
		}
		return ""
	case "llm.fallback":
		return fmt.Sprintf("%s falls back from %s to %s", who, str("from"), str("to"))
	case "approval.requested":
		return fmt.Sprintf("%s waits for approval %s", who, str("approval_id"))
	case "approval.resolved":
		return fmt.Sprintf("%s: approval %s %s", who, str("approval_id"), str("decision"))
	case "system.budget":
		return fmt.Sprintf("budget reached (%s)", str("scope"))
	case "system.warning":
		return fmt.Sprintf("%s: warning: %s", who, str("message"))
	case "lifecycle.queued":
		return fmt.Sprintf("run queued (%s, position %v)", str("reason"), e.Data["position"])
	case "lifecycle.paused":
		return "run paused"
	case "lifecycle.resumed":
		return "run resumed"
	case "lifecycle.completed":
		return "run completed"
	case "lifecycle.failed":
		return "run failed: " + str("error")
	case "lifecycle.cancelled":
		return "run cancelled"
	}
	return ""
}

// agentLabel names an event's agent: "team research: worker analyst",
// "global supervisor".
func agentLabel(s models.Source) string {
	var kind string
	switch s.AgentType {
	case models.AgentTypeGlobalSupervisor:
		return "global supervisor"
	case models.AgentTypeTeamSupervisor:
		kind = "supervisor"
	case models.AgentTypeWorker:
		kind = "worker"
	case models.AgentTypeSubAgent:
		kind = "sub-agent"
	default:
		kind = s.AgentType
	}
	label := strings.TrimSpace(kind + " " + firstNonEmpty(s.AgentName, s.AgentID))
	if s.TeamName != nil && *s.TeamName != "" {
		return "team " + *s.TeamName + ": " + label
	}
	return label
}

func firstNonEmpty(values ...string) string {
	for _, v := range values {
		if v != "" {
			return v
		}
	}
	return ""
}
