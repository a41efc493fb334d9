package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/mattn/go-isatty"
	"github.com/spf13/cobra"

	"github.com/op-stack/executor/client"
	"github.com/op-stack/executor/models"
)

// followOptions are the flags of `runs start --follow` and `runs follow`.
type followOptions struct {
	after     int64
	reasoning bool
	usage     bool
	color     string // auto, always, never
}

func (fo *followOptions) register(cmd *cobra.Command) {
	cmd.Flags().BoolVar(&fo.reasoning, "reasoning", false, "also print the models' reasoning text, when they send it")
	cmd.Flags().BoolVar(&fo.usage, "usage", false, "also print each model call's tokens and cost")
	cmd.Flags().StringVar(&fo.color, "color", "auto", "colour the [team/agent] prefixes: auto (on a terminal, unless NO_COLOR is set), always or never")
}

// useColor decides whether to colour output written to w.
func (fo followOptions) useColor(w io.Writer) bool {
	switch fo.color {
	case "always":
		return true
	case "never":
		return false
	}
	if _, set := os.LookupEnv("NO_COLOR"); set {
		return false
	}
	f, ok := w.(*os.File)
	return ok && (isatty.IsTerminal(f.Fd()) || isatty.IsCygwinTerminal(f.Fd()))
}

// teamColors are the ANSI colours of teams' prefixes, in order of first
// appearance; the global supervisor and system lines are bold.
var teamColors = []string{"36", "32", "33", "35", "34", "31", "96", "92", "93", "95"}

// printer renders a run's events for a terminal. Text streams in as the
// agents write it: a line stays open while the same agent goes on, so
// tokens appear as they arrive, and every line starts with its
// [team/agent] prefix, so agents working at once stay apart.
type printer struct {
	w     io.Writer
	opts  followOptions
	color bool
	teams map[string]string // team name → colour
	open  string            // agent_id whose text line is open, "" when none
}

func newPrinter(w io.Writer, opts followOptions) *printer {
	return &printer{w: w, opts: opts, color: opts.useColor(w), teams: map[string]string{}}
}

// prefix is an event's [team/agent] label, coloured by team.
func (p *printer) prefix(src models.Source) string {
	name := nameOr(src.AgentName, src.AgentID)
	label := "[" + name + "]"
	code := "1"
	if src.TeamName != nil && *src.TeamName != "" {
		team := *src.TeamName
		label = "[" + team + "/" + name + "]"
		c, ok := p.teams[team]
		if !ok {
			c = teamColors[len(p.teams)%len(teamColors)]
			p.teams[team] = c
		}
		code = c
	}
	return p.paint(code, label)
}

func (p *printer) paint(code, s string) string {
	if !p.color {
		return s
	}
	return "\x1b[" + code + "m" + s + "\x1b[0m"
}

// breakLine ends the open text line, if any.
func (p *printer) breakLine() {
	if p.open != "" {
		fmt.Fprintln(p.w)
		p.open = ""
	}
}

// line prints one whole line for src.
func (p *printer) line(src models.Source, format string, args ...any) {
	p.breakLine()
	fmt.Fprintf(p.w, "%s %s\n", p.prefix(src), fmt.Sprintf(format, args...))
}

// text streams content written by src: continuing src's open line, or
// opening one.
func (p *printer) text(src models.Source, content string, dim bool) {
	if content == "" {
		return
	}
	if p.open != src.AgentID {
		p.breakLine()
		fmt.Fprintf(p.w, "%s ", p.prefix(src))
		p.open = src.AgentID
	}
	parts := strings.Split(content, "\n")
	for i, part := range parts {
		if i > 0 {
			fmt.Fprintf(p.w, "\n%s ", p.prefix(src))
		}
		if dim && part != "" {
			part = p.paint("2", part)
		}
		io.WriteString(p.w, part)
	}
}

// print renders one event; it is Follow's callback.
func (p *printer) print(ev models.Event) error {
	d := ev.Data
	src := ev.Source
	switch ev.Event.String() {
	case "lifecycle.started":
		p.line(src, "%s run %s started: %s", p.paint("1", "▶"), ev.RunID, oneLine(str(d, "task")))
	case "system.topology":
		// The tree is `hierarchies get`'s; here it would only push the
		// agents' text off the screen.
	case "dispatch.team":
		p.line(src, "%s team %s: %s", p.paint("1", "» dispatch"), str(d, "team_name"), clip(oneLine(str(d, "instruction")), 200))
	case "dispatch.worker":
		p.line(src, "%s worker %s (%s): %s", p.paint("1", "» dispatch"), str(d, "worker_name"), str(d, "worker_agent_id"), clip(oneLine(str(d, "instruction")), 200))
	case "llm.stream":
		p.text(src, str(d, "content"), false)
	case "llm.reasoning":
		if p.opts.reasoning {
			p.text(src, str(d, "content"), true)
		}
	case "llm.tool_call":
		args := d["tool_input"]
		if args == nil {
			args = d["arguments"]
		}
		p.line(src, "%s %s %s  (execution %s)", p.paint("1", "⚙ tool call"), str(d, "tool_name"), clip(compact(args), 200), str(d, "execution_id"))
	case "llm.tool_result":
		out, mark := compact(d["result"]), "⚙ tool result"
		if b, _ := d["is_error"].(bool); b || str(d, "status") == "failed" {
			out, mark = str(d, "error"), "⚙ tool failed"
		}
		p.line(src, "%s %s in %vms: %s", p.paint("1", mark), str(d, "tool_name"), num(d, "duration_ms"), clip(oneLine(out), 200))
	case "llm.retry":
		p.line(src, "%s attempt %v: the text of attempt %v above is superseded", p.paint("33;1", "↻ retry"), num(d, "attempt"), num(d, "previous_attempt"))
	case "llm.fallback":
		p.line(src, "%s %s → %s (%s): the text of the failed call above is superseded", p.paint("33;1", "↻ fallback"), str(d, "from"), str(d, "to"), str(d, "why"))
	case "llm.usage":
		// A model call has ended: the agent's next text is another turn.
		if p.open == src.AgentID {
			p.breakLine()
		}
		if p.opts.usage {
			c := "unknown"
			if v, ok := d["cost_usd"].(float64); ok {
				c = fmt.Sprintf("$%.4f", v)
			}
			p.line(src, "%s %s: %v tokens, %s", p.paint("2", "usage"), str(d, "model"), num(d, "total_tokens"), c)
		}
	case "system.warning":
		p.line(src, "%s %s", p.paint("33;1", "! warning"), oneLine(str(d, "message")))
	case "system.error":
		p.line(src, "%s %s", p.paint("31;1", "! error"), oneLine(str(d, "message")))
	case "system.budget":
		p.line(src, "%s %s: spent %s of %s (%s)", p.paint("33;1", "! budget"), budgetScope(d), budgetFigures(d["spent"], false), budgetFigures(d["limit"], true), str(d, "on_exceeded"))
	case "approval.requested":
		what := str(d, "instruction")
		if what == "" {
			tool := str(d, "tool")
			if server := str(d, "mcp_server"); server != "" {
				// An MCP tool's gate: its server and tool, and why it waits.
				tool = "mcp " + server + "/" + str(d, "mcp_tool") + " (" + str(d, "reason") + ")"
			}
			what = tool + " " + compact(d["arguments"])
		}
		p.line(src, "%s %s (%s): %s — approve or reject it through the API (runs/approve, runs/reject)", p.paint("35;1", "⏸ approval requested"), str(d, "approval_id"), str(d, "kind"), clip(oneLine(what), 200))
	case "approval.resolved":
		p.line(src, "%s %s %s by %s", p.paint("35;1", "⏵ approval"), str(d, "approval_id"), str(d, "decision"), str(d, "decided_by"))
	case "dispatch.team_cancelled":
		p.line(src, "%s team %s: %s", p.paint("31;1", "✗ cancelled"), str(d, "team_name"), str(d, "reason"))
	case "dispatch.redirect":
		p.line(src, "%s %s: %s", p.paint("1", "» redirect"), str(d, "agent_id"), clip(oneLine(str(d, "message")), 200))
	case "lifecycle.queued":
		p.line(src, "%s %s, position %v", p.paint("35;1", "… queued"), str(d, "reason"), d["position"])
	case "lifecycle.paused":
		p.line(src, "%s", p.paint("35;1", "⏸ paused"))
	case "lifecycle.resumed":
		p.line(src, "%s (%s)", p.paint("35;1", "⏵ resumed"), str(d, "status"))
	case "lifecycle.completed":
		p.line(src, "%s", p.paint("32;1", "✔ completed"))
	case "lifecycle.failed":
		p.line(src, "%s %s", p.paint("31;1", "✗ failed:"), oneLine(str(d, "error")))
	case "lifecycle.cancelled":
		p.line(src, "%s %s", p.paint("33;1", "✗ cancelled:"), oneLine(str(d, "reason")))
	}
	return nil
}

// summary prints how the run ended: status, time, tokens and cost.
func (p *printer) summary(r client.Run) {
	p.breakLine()
	took := ""
	if r.StartedAt != nil && r.CompletedAt != nil {
		took = " in " + r.CompletedAt.Sub(*r.StartedAt).Round(1e6).String()
	}
	fmt.Fprintf(p.w, "run %s %s%s: %d tokens, %s\n", r.ID, r.Status, took, r.Usage.TotalTokens, cost(r.Usage))
}

// eventLine is one event as `runs events` prints it.
func eventLine(ev models.Event) string {
	who := nameOr(ev.Source.AgentName, ev.Source.AgentID)
	if ev.Source.TeamName != nil && *ev.Source.TeamName != "" {
		who = *ev.Source.TeamName + "/" + who
	}
	data := ev.Data
	var what string
	switch ev.Event.String() {
	case "llm.stream", "llm.reasoning":
		what = fmt.Sprintf("%q", str(data, "content"))
	default:
		what = clip(compact(data), 240)
	}
	return fmt.Sprintf("%6d  %s  %-20s [%s] %s", ev.Sequence, ev.Timestamp, ev.Event.String(), who, what)
}

// budgetScope names whose budget a system.budget event is about.
func budgetScope(d map[string]any) string {
	switch scope := str(d, "scope"); scope {
	case "team":
		return "team " + str(d, "team_name")
	case "agent":
		return "agent " + str(d, "agent_id")
	default:
		return scope
	}
}

// budgetFigures renders a system.budget event's spent block
// ({total_tokens,cost_usd,cost_unknown}) or, with limit, its limit block
// ({max_tokens,max_cost_usd}, an absent or zero one being no limit).
func budgetFigures(v any, limit bool) string {
	m, _ := v.(map[string]any)
	tokens, cost := "total_tokens", "cost_usd"
	if limit {
		tokens, cost = "max_tokens", "max_cost_usd"
	}
	var parts []string
	if n, ok := m[tokens].(float64); ok && (n > 0 || !limit) {
		parts = append(parts, fmt.Sprintf("%.0f tokens", n))
	}
	if c, ok := m[cost].(float64); ok && (c > 0 || !limit) {
		s := fmt.Sprintf("$%.4f", c)
		if unknown, _ := m["cost_unknown"].(bool); unknown {
			s += " (and calls of unknown cost)"
		}
		parts = append(parts, s)
	}
	if len(parts) == 0 {
		return compact(v)
	}
	return strings.Join(parts, ", ")
}

func str(d map[string]any, key string) string {
	switch v := d[key].(type) {
	case string:
		return v
	case nil:
		return ""
	default:
		return fmt.Sprint(v)
	}
}

func num(d map[string]any, key string) any {
	if v, ok := d[key].(float64); ok && v == float64(int64(v)) {
		return int64(v)
	}
	return d[key]
}

// compact is v as one line of JSON (a string as it is).
func compact(v any) string {
	if s, ok := v.(string); ok {
		return s
	}
	raw, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(raw)
}
