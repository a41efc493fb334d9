package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/op-stack/executor/client"
	"github.com/op-stack/executor/models"
)

// The runs commands that steer a run (docs/steering.md), decide its
// approval gates, fork it (docs/time-travel.md) or delete it. Each exits 0
// on success and 1 on any failure, as every client command but the
// following ones.

// steerCommands are the runs subcommands beyond start, follow, get, list,
// events and cancel; af is the runs command's connection flags.
func steerCommands(af *apiFlags) []*cobra.Command {
	approvals := &cobra.Command{
		Use:   "approvals ID",
		Short: "List a run's open approval gates",
		Long: `List a run's open approval gates: each gate's approval_id, kind (agent: a
turn about to start; tool: a tool call about to run), the agent, what waits
(the instruction, or the tool and its arguments) and, when the gate has a
timeout, when it resolves by itself. A finished run has none.` + clientLong,
		Example: "  ./bin/executor runs approvals $RUN\n  ./bin/executor runs approve $RUN apr_... --comment ok",
		Args:    exactArgs("run id"),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := af.client()
			if err != nil {
				return err
			}
			a, err := c.ListApprovals(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			if af.json() {
				return writeJSON(cmd.OutOrStdout(), a)
			}
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 0, 2, ' ', 0)
			fmt.Fprintln(tw, "APPROVAL\tKIND\tAGENT\tREQUESTED\tTIMEOUT\tWHAT")
			for _, g := range a.Approvals {
				timeout := "-"
				if g.TimeoutAt != "" {
					timeout = g.TimeoutAt + " → " + g.DefaultDecision
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", g.ApprovalID, g.Kind, agentLabel(g), g.RequestedAt, timeout, clip(oneLine(gateWhat(g)), 80))
			}
			tw.Flush()
			fmt.Fprintf(cmd.ErrOrStderr(), "run %s is %s: %d open approval(s)\n", args[0], a.Status, len(a.Approvals))
			return nil
		},
	}

	var comment, instruction, arguments string
	approve := &cobra.Command{
		Use:   "approve ID APPROVAL_ID [--comment C] [--instruction TEXT | --arguments JSON]",
		Short: "Approve an approval gate, optionally editing what the agent or tool gets",
		Long: `Approve one of a run's open approval gates ('runs approvals' lists them).
On an agent's gate --instruction replaces the instruction the agent gets; on
a tool's gate --arguments (a JSON object, or - for standard input) replaces
the arguments the tool runs with. A gate already resolved exits 1 with the
API's 409.` + clientLong,
		Example: `  ./bin/executor runs approve $RUN apr_01H... --comment "go ahead"
  ./bin/executor runs approve $RUN apr_01H... --instruction "Write it in one paragraph"
  ./bin/executor runs approve $RUN apr_01H... --arguments '{"expression":"6*7"}'`,
		Args: approvalArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := af.client()
			if err != nil {
				return err
			}
			d := client.Decision{RunID: args[0], ApprovalID: args[1], Comment: comment}
			if cmd.Flags().Changed("instruction") {
				d.Instruction = &instruction
			}
			if arguments != "" {
				raw, err := readArg(cmd, arguments)
				if err != nil {
					return err
				}
				if !json.Valid([]byte(raw)) {
					return fmt.Errorf("--arguments: not valid JSON: %s", clip(raw, 80))
				}
				d.Arguments = json.RawMessage(raw)
			}
			res, err := c.Approve(cmd.Context(), d)
			if err != nil {
				return err
			}
			return printResolved(cmd, af, res)
		},
	}
	approve.Flags().StringVar(&comment, "comment", "", "a comment kept with the decision")
	approve.Flags().StringVar(&instruction, "instruction", "", "an agent's gate: the instruction the agent gets instead")
	approve.Flags().StringVar(&arguments, "arguments", "", "a tool's gate: the arguments (JSON object; - reads standard input) the tool runs with instead")

	var rejectComment string
	reject := &cobra.Command{
		Use:   "reject ID APPROVAL_ID --comment C",
		Short: "Reject an approval gate with a comment",
		Long: `Reject one of a run's open approval gates. The comment is required: the
supervisor reads it as the agent's answer ("rejected by <who>: <comment>")
and the run goes on.` + clientLong,
		Example: `  ./bin/executor runs reject $RUN apr_01H... --comment "no analysis today"`,
		Args:    approvalArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := af.client()
			if err != nil {
				return err
			}
			if strings.TrimSpace(rejectComment) == "" {
				return errors.New("runs reject: --comment is required (the supervisor is told why)")
			}
			res, err := c.Reject(cmd.Context(), args[0], args[1], rejectComment)
			if err != nil {
				return err
			}
			return printResolved(cmd, af, res)
		},
	}
	reject.Flags().StringVar(&rejectComment, "comment", "", "why (required)")

	pause := statusCommand(af, "pause", "Pause a run: calls in flight finish, nothing new starts",
		"Pause a run: model and tool calls in flight finish, nothing new starts until 'runs resume'. The run shows paused.",
		func(cmd *cobra.Command, c *client.Client, id string) (string, error) {
			return c.PauseRun(cmd.Context(), id)
		})
	resume := statusCommand(af, "resume", "Resume a paused run",
		"Resume a paused run where it stopped; the answer is the status it goes on with.",
		func(cmd *cobra.Command, c *client.Client, id string) (string, error) {
			return c.ResumeRun(cmd.Context(), id)
		})

	var agent, message string
	redirect := &cobra.Command{
		Use:   "redirect ID --agent AGENT_ID --message TEXT",
		Short: "Queue guidance for an agent's next prompt",
		Long: `Queue a message for an agent of a running run: it is added to the agent's
next prompt (a supervisor's next decision, a worker's next turn).
'hierarchies get' lists the agent_ids; --message - reads standard input.` + clientLong,
		Example: `  ./bin/executor runs redirect $RUN --agent gs-1 --message "Skip the writing team"`,
		Args:    exactArgs("run id"),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := af.client()
			if err != nil {
				return err
			}
			if strings.TrimSpace(agent) == "" || strings.TrimSpace(message) == "" {
				return errors.New("runs redirect: --agent AGENT_ID and --message TEXT are required")
			}
			msg, err := readArg(cmd, message)
			if err != nil {
				return err
			}
			status, err := c.Redirect(cmd.Context(), args[0], agent, msg)
			if err != nil {
				return err
			}
			if af.json() {
				return writeJSON(cmd.OutOrStdout(), map[string]string{"id": args[0], "agent_id": agent, "status": status})
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s %s %s\n", args[0], agent, status)
			return nil
		},
	}
	redirect.Flags().StringVar(&agent, "agent", "", "the agent_id to guide (required)")
	redirect.Flags().StringVar(&message, "message", "", "the guidance (required; - reads standard input)")

	var reason string
	cancelTeam := &cobra.Command{
		Use:   "cancel-team ID TEAM_NAME [--reason R]",
		Short: "Cancel one team's turn; the run goes on",
		Long: `Cancel the turn of one team of a running run: its agents stop, the global
supervisor is told the team was cancelled (with the reason) and the run goes
on with the other teams.` + clientLong,
		Example: `  ./bin/executor runs cancel-team $RUN writing --reason "not needed"`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) != 2 {
				return fmt.Errorf("%s: two arguments, the run id and the team's name, are required (got %d)", cmd.CommandPath(), len(args))
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := af.client()
			if err != nil {
				return err
			}
			status, err := c.CancelTeam(cmd.Context(), args[0], args[1], reason)
			if err != nil {
				return err
			}
			if af.json() {
				return writeJSON(cmd.OutOrStdout(), map[string]string{"id": args[0], "team_name": args[1], "status": status})
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s team %s %s\n", args[0], args[1], status)
			return nil
		},
	}
	cancelTeam.Flags().StringVar(&reason, "reason", "", "why, told to the global supervisor")

	forkPoints := &cobra.Command{
		Use:   "fork-points ID",
		Short: "List where a finished run can be forked",
		Long: `List the points 'runs fork' accepts for a finished run, in sequence order:
the event sequence to pass as --after, its kind (dispatch.team: before a
team's turn; dispatch.worker: before a worker's answer; team.finished:
after a team's turn), the team turn and the team and worker.` + clientLong,
		Args: exactArgs("run id"),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := af.client()
			if err != nil {
				return err
			}
			points, err := c.ForkPoints(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			if af.json() {
				if points == nil {
					points = []client.ForkPoint{}
				}
				return writeJSON(cmd.OutOrStdout(), map[string]any{"id": args[0], "points": points})
			}
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 0, 2, ' ', 0)
			fmt.Fprintln(tw, "SEQUENCE\tKIND\tTURN\tTEAM\tWORKER")
			for _, p := range points {
				fmt.Fprintf(tw, "%d\t%s\t%d\t%s\t%s\n", p.Sequence, p.Kind, p.Turn, p.TeamName, nameOr(p.WorkerName, "-"))
			}
			return tw.Flush()
		},
	}

	var fork forkFlags
	var fo followOptions
	forkCmd := &cobra.Command{
		Use:   "fork ID --after SEQUENCE [changes] [--follow [--interactive]]",
		Short: "Start a new run from a finished run's state after one of its events",
		Long: `Fork a finished run: start a new run from the state the run had right after
its event --after ('runs fork-points' lists them), optionally with changes.
The events up to that point are copied, no model is called again for them,
and the original is untouched. The fork's id is printed alone on standard
output (the point it started from on standard error).

Changes: --team-instruction TEAM=TEXT (the turn the fork starts with),
--agent-prompt AGENT_ID=TEXT and --agent-model AGENT_ID=MODEL, --next-team
(at a team.finished point), --next-worker; or a whole changes object with
-f FILE (docs/time-travel.md), which the flags then amend.

With --follow it then streams the fork as 'runs follow' does, with the same
exit status.` + clientLong,
		Example: `  ./bin/executor runs fork-points $RUN
  FORK=$(./bin/executor runs fork $RUN --after 12 --team-instruction "writing=Write it for children")
  ./bin/executor runs fork $RUN --after 12 --agent-model w-writer=gpt-4o-mini --follow`,
		Args: exactArgs("run id"),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := af.client()
			if err != nil {
				return err
			}
			req, err := fork.request(cmd, args[0])
			if err != nil {
				return err
			}
			forked, err := c.ForkRun(cmd.Context(), req)
			if err != nil {
				return err
			}
			if !fork.follow {
				if af.json() {
					return writeJSON(cmd.OutOrStdout(), forked)
				}
				fmt.Fprintln(cmd.OutOrStdout(), forked.ID)
			}
			p := forked.ForkPoint
			fmt.Fprintf(cmd.ErrOrStderr(), "forked run %s after event %d (%s, turn %d, team %s) into run %s\n", args[0], p.Sequence, p.Kind, p.Turn, p.TeamName, forked.ID)
			if !fork.follow {
				return nil
			}
			return followRun(cmd, c, forked.ID, fo)
		},
	}
	fork.register(forkCmd)
	fo.register(forkCmd)

	del := &cobra.Command{
		Use:   "delete ID",
		Short: "Delete a finished run and everything stored of it",
		Long: `Delete a finished run: its events, messages, usage, artifacts, webhook
deliveries and its Temporal workflow histories. A run still going is
refused (cancel it first). There is no undo.` + clientLong,
		Args: exactArgs("run id"),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := af.client()
			if err != nil {
				return err
			}
			if err := c.DeleteRun(cmd.Context(), args[0]); err != nil {
				return err
			}
			if af.json() {
				return writeJSON(cmd.OutOrStdout(), map[string]any{"id": args[0], "deleted": true})
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s deleted\n", args[0])
			return nil
		},
	}
	return []*cobra.Command{approvals, approve, reject, pause, resume, redirect, cancelTeam, forkPoints, forkCmd, del}
}

// approvalArgs requires a run id and an approval id.
func approvalArgs(cmd *cobra.Command, args []string) error {
	if len(args) != 2 {
		return fmt.Errorf("%s: two arguments, the run id and the approval_id, are required (got %d)", cmd.CommandPath(), len(args))
	}
	return nil
}

// statusCommand is a command that changes a run's status (pause, resume)
// and prints the status the API answered.
func statusCommand(af *apiFlags, name, short, long string, call func(*cobra.Command, *client.Client, string) (string, error)) *cobra.Command {
	return &cobra.Command{
		Use:   name + " ID",
		Short: short,
		Long:  long + clientLong,
		Args:  exactArgs("run id"),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := af.client()
			if err != nil {
				return err
			}
			status, err := call(cmd, c, args[0])
			if err != nil {
				return err
			}
			if af.json() {
				return writeJSON(cmd.OutOrStdout(), map[string]string{"id": args[0], "status": status})
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s %s\n", args[0], status)
			return nil
		},
	}
}

// printResolved prints an approval decision.
func printResolved(cmd *cobra.Command, af *apiFlags, res client.Resolved) error {
	if af.json() {
		return writeJSON(cmd.OutOrStdout(), res)
	}
	fmt.Fprintf(cmd.OutOrStdout(), "%s %s\n", res.Approval.ApprovalID, res.Approval.Decision)
	return nil
}

// readArg is a flag's value, or standard input when it is "-".
func readArg(cmd *cobra.Command, v string) (string, error) {
	if v != "-" {
		return v, nil
	}
	raw, err := io.ReadAll(cmd.InOrStdin())
	return strings.TrimSpace(string(raw)), err
}

// agentLabel is a gate's team/agent.
func agentLabel(g client.Approval) string {
	name := nameOr(g.AgentName, g.AgentID)
	if g.TeamName != nil && *g.TeamName != "" {
		return *g.TeamName + "/" + name
	}
	return name
}

// gateWhat is what waits at a gate: an agent's instruction or a tool call.
func gateWhat(g client.Approval) string {
	if g.Kind == models.ApprovalKindTool {
		tool := g.Tool
		if g.MCPServer != "" {
			tool = "mcp " + g.MCPServer + "/" + g.MCPTool + " (" + g.Reason + ")"
		}
		return tool + " " + g.Arguments
	}
	return g.Instruction
}

// forkFlags are runs fork's flags.
type forkFlags struct {
	after                                 int64
	file                                  string
	teamInstructions, prompts, modelsFlag []string
	nextTeam, nextWorker                  string
	follow                                bool
}

func (f *forkFlags) register(cmd *cobra.Command) {
	fl := cmd.Flags()
	fl.Int64Var(&f.after, "after", 0, "the event sequence to fork after (required; see runs fork-points)")
	fl.StringVarP(&f.file, "file", "f", "", "a changes object as JSON (docs/time-travel.md; - reads standard input)")
	fl.StringArrayVar(&f.teamInstructions, "team-instruction", nil, "TEAM=TEXT: the instruction of that team's turn the fork starts with (repeatable)")
	fl.StringArrayVar(&f.prompts, "agent-prompt", nil, "AGENT_ID=TEXT: the agent's system prompt in the fork (repeatable)")
	fl.StringArrayVar(&f.modelsFlag, "agent-model", nil, `AGENT_ID=MODEL: the agent's model in the fork ("" the default model; repeatable)`)
	fl.StringVar(&f.nextTeam, "next-team", "", "force the global supervisor's next dispatch (a team.finished point)")
	fl.StringVar(&f.nextWorker, "next-worker", "", "force the next team supervisor dispatch (worker name or agent_id)")
	fl.BoolVar(&f.follow, "follow", false, "stream the fork until it ends; the exit status says how it ended")
}

// request builds runs/fork's body from the flags.
func (f *forkFlags) request(cmd *cobra.Command, id string) (client.ForkRequest, error) {
	if f.after < 1 {
		return client.ForkRequest{}, errors.New("runs fork: --after SEQUENCE is required (runs fork-points lists them)")
	}
	req := client.ForkRequest{RunID: id, AfterSequence: f.after}
	var ch client.ForkChanges
	changed := false
	if f.file != "" {
		var raw []byte
		var err error
		if f.file == "-" {
			raw, err = io.ReadAll(cmd.InOrStdin())
		} else {
			raw, err = os.ReadFile(f.file)
		}
		if err != nil {
			return req, err
		}
		dec := json.NewDecoder(strings.NewReader(string(raw)))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&ch); err != nil {
			return req, fmt.Errorf("runs fork: -f %s: %w", f.file, err)
		}
		changed = true
	}
	for _, kv := range f.teamInstructions {
		team, text, ok := strings.Cut(kv, "=")
		if !ok || team == "" {
			return req, fmt.Errorf("--team-instruction: want TEAM=TEXT, got %q", kv)
		}
		if ch.TeamInstructions == nil {
			ch.TeamInstructions = map[string]string{}
		}
		ch.TeamInstructions[team] = text
		changed = true
	}
	agent := func(id string) *client.AgentChange {
		for i := range ch.Agents {
			if ch.Agents[i].AgentID == id {
				return &ch.Agents[i]
			}
		}
		ch.Agents = append(ch.Agents, client.AgentChange{AgentID: id})
		return &ch.Agents[len(ch.Agents)-1]
	}
	for _, kv := range f.prompts {
		id, text, ok := strings.Cut(kv, "=")
		if !ok || id == "" {
			return req, fmt.Errorf("--agent-prompt: want AGENT_ID=TEXT, got %q", kv)
		}
		agent(id).SystemPrompt = &text
		changed = true
	}
	for _, kv := range f.modelsFlag {
		id, model, ok := strings.Cut(kv, "=")
		if !ok || id == "" {
			return req, fmt.Errorf("--agent-model: want AGENT_ID=MODEL, got %q", kv)
		}
		agent(id).Model = &model
		changed = true
	}
	if f.nextTeam != "" {
		ch.NextTeam, changed = f.nextTeam, true
	}
	if f.nextWorker != "" {
		ch.NextWorker, changed = f.nextWorker, true
	}
	if changed {
		req.Changes = &ch
	}
	return req, nil
}

// newThreadsCommand is `executor threads`: a run and its follow-ups.
func newThreadsCommand() *cobra.Command {
	var af apiFlags
	cmd := &cobra.Command{
		Use:     "threads",
		Aliases: []string{"thread"},
		Short:   "List a thread's runs and continue it with a follow-up",
		Long: `A thread is a first run and the follow-ups started after it (docs/runs.md,
Follow-up runs): each follow-up's supervisors see the previous run's brief.
The thread's id is its first run's id; every command here also takes the id
of any run of the thread.` + clientLong,
		Args: cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error { return groupRun(cmd, args) },
	}
	af.register(cmd)

	var page, pageSize int
	list := &cobra.Command{
		Use:   "list ID",
		Short: "List a thread's runs, newest first",
		Long:  "List the runs of the thread of run ID (the thread's id or any of its runs' ids), newest first: id, status, the run it follows up, tokens, cost, creation time and task." + clientLong,
		Args:  exactArgs("thread or run id"),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := af.client()
			if err != nil {
				return err
			}
			thread, err := threadOf(cmd, c, args[0])
			if err != nil {
				return err
			}
			p, err := c.Thread(cmd.Context(), thread, page, pageSize)
			if err != nil {
				return err
			}
			if af.json() {
				return writeJSON(cmd.OutOrStdout(), p)
			}
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 0, 2, ' ', 0)
			fmt.Fprintln(tw, "ID\tSTATUS\tFOLLOWS\tTOKENS\tCOST\tCREATED\tTASK")
			for _, r := range p.Items {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%s\t%s\n", r.ID, r.Status, nameOr(r.PreviousRunID, "-"), r.Usage.TotalTokens, cost(r.Usage),
					r.CreatedAt.Local().Format("2006-01-02 15:04:05"), clip(oneLine(r.Task), 60))
			}
			tw.Flush()
			fmt.Fprintf(cmd.ErrOrStderr(), "thread %s: page %d, %d of %d\n", thread, p.Page, len(p.Items), p.Total)
			return nil
		},
	}
	list.Flags().IntVar(&page, "page", 1, "page number, from 1")
	list.Flags().IntVar(&pageSize, "page-size", 20, "runs per page (at most 100)")

	var task, runID, strategy string
	var follow bool
	var fo followOptions
	cont := &cobra.Command{
		Use:     `continue ID --task "..." [--follow [--interactive]]`,
		Aliases: []string{"follow-up"},
		Short:   "Start a follow-up of a thread's latest run",
		Long: `Start a follow-up run on the thread of run ID (the thread's id or any of
its runs' ids): the new run follows up the thread's newest run, whose brief
its supervisors see, on the same hierarchy. ('runs start --previous-run'
follows up a run you name.) The new run's id is printed alone on standard
output; with --follow it is then streamed as 'runs follow' does, with the
same exit status.` + clientLong,
		Example: `  ./bin/executor threads continue $RUN --task "Now make it shorter" --follow`,
		Args:    exactArgs("thread or run id"),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := af.client()
			if err != nil {
				return err
			}
			if strings.TrimSpace(task) == "" {
				return errors.New(`threads continue: --task "..." is required`)
			}
			if task, err = readArg(cmd, task); err != nil {
				return err
			}
			thread, err := threadOf(cmd, c, args[0])
			if err != nil {
				return err
			}
			p, err := c.Thread(cmd.Context(), thread, 1, 1)
			if err != nil {
				return err
			}
			if len(p.Items) == 0 {
				return fmt.Errorf("threads continue: thread %s has no runs", thread)
			}
			latest := p.Items[0]
			started, err := c.StartRun(cmd.Context(), client.StartRequest{HierarchyID: latest.HierarchyID, Task: task, ID: runID, PreviousRunID: latest.ID,
				MultitaskStrategy: strategy})
			if err != nil {
				return err
			}
			noteQueued(cmd, started)
			fmt.Fprintf(cmd.ErrOrStderr(), "started run %s (workflow %s), a follow-up of run %s in thread %s\n", started.ID, started.WorkflowID, latest.ID, started.ThreadID)
			if follow {
				return followRun(cmd, c, started.ID, fo)
			}
			if af.json() {
				return writeJSON(cmd.OutOrStdout(), started)
			}
			fmt.Fprintln(cmd.OutOrStdout(), started.ID)
			return nil
		},
	}
	cont.Flags().StringVar(&task, "task", "", `the follow-up's task (required; "-" reads it from standard input)`)
	cont.Flags().StringVar(&runID, "id", "", "the new run's id (default: a new UUID)")
	cont.Flags().BoolVar(&follow, "follow", false, "stream the run until it ends; the exit status says how it ended")
	cont.Flags().StringVar(&strategy, "multitask-strategy", "", "when the thread's latest run is still going: reject, enqueue (the API's default), interrupt or rollback")
	fo.register(cont)

	cmd.AddCommand(list, cont)
	return cmd
}

// threadOf is the thread of run id (a thread's id is its first run's id).
func threadOf(cmd *cobra.Command, c *client.Client, id string) (string, error) {
	raw, err := c.GetRun(cmd.Context(), id)
	if err != nil {
		return "", err
	}
	var r client.Run
	if err := json.Unmarshal(raw, &r); err != nil {
		return "", err
	}
	if r.ThreadID == "" {
		return r.ID, nil
	}
	return r.ThreadID, nil
}
