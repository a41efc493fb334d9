package main

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/spf13/cobra"

	"github.com/op-stack/executor/models"
)

// TestHelpEverywhere walks the whole command tree: every command answers
// --help and -h with its usage on standard output and exit status 0,
// without running (so `executor replay --help` never reads a file named
// --help, and `executor dev --help` starts nothing), and describes itself.
func TestHelpEverywhere(t *testing.T) {
	var walk func(c *cobra.Command, path []string)
	n := 0
	walk = func(c *cobra.Command, path []string) {
		for _, flag := range []string{"--help", "-h"} {
			args := append(append([]string{}, path...), flag)
			var stdout, stderr bytes.Buffer
			code := execute(context.Background(), args, &stdout, &stderr)
			out := stdout.String()
			if code != 0 || stderr.Len() != 0 {
				t.Errorf("executor %s: exit %d, stderr %q", strings.Join(args, " "), code, stderr.String())
			}
			if !strings.Contains(out, "Usage:") || !strings.Contains(out, c.UseLine()) {
				t.Errorf("executor %s: no usage line %q in\n%s", strings.Join(args, " "), c.UseLine(), out)
			}
		}
		if c.Short == "" {
			t.Errorf("%q has no short description", c.CommandPath())
		}
		n++
		for _, sub := range c.Commands() {
			if sub.Hidden || sub.Name() == "help" {
				continue
			}
			walk(sub, append(append([]string{}, path...), sub.Name()))
		}
	}
	walk(newRootCommand(), nil)
	// The commands of issue 16 and the ones that came before must all be
	// there: a command dropped from the tree would otherwise pass.
	root := newRootCommand()
	for _, path := range [][]string{
		{"serve"}, {"dev"}, {"migrate"}, {"replay"}, {"apikeys", "create"}, {"apikeys", "list"}, {"apikeys", "revoke"},
		{"hierarchies", "create"}, {"hierarchies", "get"}, {"hierarchies", "list"},
		{"runs", "start"}, {"runs", "follow"}, {"runs", "get"}, {"runs", "list"}, {"runs", "events"}, {"runs", "cancel"},
		{"runs", "approvals"}, {"runs", "approve"}, {"runs", "reject"}, {"runs", "pause"}, {"runs", "resume"}, {"runs", "redirect"},
		{"runs", "cancel-team"}, {"runs", "fork-points"}, {"runs", "fork"}, {"runs", "delete"}, {"threads", "list"}, {"threads", "continue"},
		{"mcp-servers", "create"}, {"mcp-servers", "get"}, {"mcp-servers", "list"}, {"mcp-servers", "update"}, {"mcp-servers", "delete"},
		{"webhooks", "create"}, {"webhooks", "get"}, {"webhooks", "list"}, {"webhooks", "update"}, {"webhooks", "delete"},
		{"webhooks", "deliveries"}, {"webhooks", "redeliver"},
	} {
		if c, _, err := root.Find(path); err != nil || c.Name() != path[len(path)-1] {
			t.Errorf("no command %q", strings.Join(path, " "))
		}
	}
	t.Logf("%d commands answer --help and -h", n)

	// `help <command>` and the Go-style -help the commands took before.
	for _, args := range [][]string{{"help", "runs", "start"}, {"serve", "-help"}, {"replay", "-h"}} {
		var stdout, stderr bytes.Buffer
		if code := execute(context.Background(), args, &stdout, &stderr); code != 0 || !strings.Contains(stdout.String(), "Usage:") {
			t.Errorf("executor %s: exit %d\n%s%s", strings.Join(args, " "), code, stdout.String(), stderr.String())
		}
	}
}

// TestCommandLineMistakes: a missing or unknown command, or a missing
// argument, fails with exit status 1 and says what is wrong.
func TestCommandLineMistakes(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{nil, "a command is required"},
		{[]string{"nope"}, `unknown command "nope"`},
		{[]string{"runs"}, "a command is required"},
		{[]string{"runs", "nope"}, `unknown command "nope"`},
		{[]string{"runs", "get"}, "the run id, is required"},
		{[]string{"runs", "start", "--url", "http://127.0.0.1:1", "--task", "x"}, "--hierarchy ID"},
		{[]string{"hierarchies", "create", "--url", "http://127.0.0.1:1"}, "-f FILE is required"},
		{[]string{"runs", "list", "--url", "ftp://x"}, "http or https URL"},
		{[]string{"runs", "list", "-o", "yaml"}, "--output"},
		{[]string{"serve", "-role", "bogus"}, "--role: want all, api or worker"},
		{[]string{"replay"}, "usage: executor replay"},
		{[]string{"runs", "approve", "r1"}, "the run id and the approval_id, are required"},
		{[]string{"runs", "reject", "r1", "apr_1"}, "--comment is required"},
		{[]string{"runs", "approve", "r1", "apr_1", "--arguments", "{x"}, "--arguments: not valid JSON"},
		{[]string{"runs", "cancel-team", "r1"}, "the run id and the team's name, are required"},
		{[]string{"runs", "redirect", "r1", "--agent", "gs-1"}, "--message TEXT are required"},
		{[]string{"runs", "fork", "r1"}, "--after SEQUENCE is required"},
		{[]string{"runs", "fork", "r1", "--after", "3", "--team-instruction", "writing"}, "want TEAM=TEXT"},
		{[]string{"runs", "fork", "r1", "--after", "3", "--agent-model", "=x"}, "want AGENT_ID=MODEL"},
		{[]string{"runs", "delete"}, "the run id, is required"},
		{[]string{"threads"}, "a command is required"},
		{[]string{"threads", "continue", "r1"}, "--task"},
		{[]string{"threads", "list"}, "the thread or run id, is required"},
	} {
		var stdout, stderr bytes.Buffer
		code := execute(context.Background(), tc.args, &stdout, &stderr)
		if code != 1 || !strings.Contains(stderr.String(), tc.want) {
			t.Errorf("executor %q: exit %d, stderr %q; want exit 1 saying %q", tc.args, code, stderr.String(), tc.want)
		}
	}
}

// TestFollowPrinter: streamed text continues its agent's line, each line
// starts with its [team/agent] prefix even when agents interleave, tool
// calls, retries, an MCP tool's approval, budgets and the end are marked, and colour is used only when
// asked for (never on a pipe by default).
func TestFollowPrinter(t *testing.T) {
	team := "research"
	gs := models.Source{AgentID: "gs-1", AgentType: models.AgentTypeGlobalSupervisor, AgentName: "chief"}
	a := models.Source{AgentID: "w-a", AgentType: models.AgentTypeWorker, AgentName: "alice", TeamName: &team}
	b := models.Source{AgentID: "w-b", AgentType: models.AgentTypeWorker, AgentName: "bob", TeamName: &team}
	ev := func(src models.Source, kind string, data map[string]any) models.Event {
		cat, act, _ := strings.Cut(kind, ".")
		return models.Event{Source: src, Event: models.EventKind{Category: cat, Action: act}, Data: data}
	}
	events := []models.Event{
		ev(gs, "lifecycle.started", map[string]any{"task": "explain"}),
		ev(gs, "dispatch.team", map[string]any{"team_name": "research", "instruction": "look it up"}),
		ev(a, "llm.stream", map[string]any{"content": "Hello "}),
		ev(a, "llm.stream", map[string]any{"content": "world"}),
		ev(b, "llm.stream", map[string]any{"content": "Bob says\nhi"}),
		ev(a, "llm.stream", map[string]any{"content": "!"}),
		ev(a, "llm.tool_call", map[string]any{"tool_name": "web_search", "tool_input": map[string]any{"q": "x"}, "execution_id": "te-1"}),
		ev(a, "llm.tool_result", map[string]any{"tool_name": "web_search", "result": "found", "status": "completed", "duration_ms": 12.0}),
		ev(b, "llm.retry", map[string]any{"attempt": 2.0, "previous_attempt": 1.0}),
		ev(a, "approval.requested", map[string]any{"approval_id": "apr_1", "kind": "tool", "tool": "mcp_docs__drop", "arguments": `{"id":7}`,
			"mcp_server": "docs", "mcp_tool": "drop", "reason": "destructive"}),
		ev(gs, "system.budget", map[string]any{"scope": "team", "team_name": "research",
			"spent": map[string]any{"total_tokens": 530.0, "cost_usd": 0.0123, "cost_unknown": false},
			"limit": map[string]any{"max_tokens": 500.0}, "on_exceeded": "skip_team"}),
		ev(gs, "system.budget", map[string]any{"scope": "run",
			"spent": map[string]any{"total_tokens": 900.0, "cost_usd": 0.51, "cost_unknown": true},
			"limit": map[string]any{"max_cost_usd": 0.5}, "on_exceeded": "finish"}),
		ev(gs, "lifecycle.completed", map[string]any{}),
	}
	render := func(opts followOptions) string {
		var out bytes.Buffer
		p := newPrinter(&out, opts)
		for _, e := range events {
			if err := p.print(e); err != nil {
				t.Fatal(err)
			}
		}
		p.breakLine()
		return out.String()
	}
	got := render(followOptions{color: "auto"})
	want := `[chief] ▶ run  started: explain
[chief] » dispatch team research: look it up
[research/alice] Hello world
[research/bob] Bob says
[research/bob] hi
[research/alice] !
[research/alice] ⚙ tool call web_search {"q":"x"}  (execution te-1)
[research/alice] ⚙ tool result web_search in 12ms: found
[research/bob] ↻ retry attempt 2: the text of attempt 1 above is superseded
[research/alice] ⏸ approval requested apr_1 (tool): mcp docs/drop (destructive) {"id":7} — executor runs approve|reject  apr_1
[chief] ! budget team research: spent 530 tokens, $0.0123 of 500 tokens (skip_team)
[chief] ! budget run: spent 900 tokens, $0.5100 (and calls of unknown cost) of $0.5000 (finish)
[chief] ✔ completed
`
	if got != want {
		t.Errorf("plain output:\n%s\nwant:\n%s", got, want)
	}
	colored := render(followOptions{color: "always"})
	if !strings.Contains(colored, "\x1b[36m[research/alice]\x1b[0m Hello world") {
		t.Errorf("--color=always does not colour the team's prefix:\n%q", colored)
	}
	var queued bytes.Buffer
	qp := newPrinter(&queued, followOptions{color: "never"})
	qp.print(ev(gs, "lifecycle.queued", map[string]any{"reason": "tenant_limit", "position": 3.0}))
	if want := "[chief] ⧗ queued tenant_limit, position 3: it starts when a place frees\n"; queued.String() != want {
		t.Errorf("lifecycle.queued printed %q, want %q", queued.String(), want)
	}
	t.Setenv("NO_COLOR", "1")
	if out := render(followOptions{color: "auto"}); strings.Contains(out, "\x1b[") {
		t.Errorf("NO_COLOR: coloured output:\n%q", out)
	}
}
