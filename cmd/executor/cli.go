package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/op-stack/executor/client"
	"github.com/op-stack/executor/models"
)

// Exit codes of `runs start --follow` and `runs follow`: how the run ended.
const (
	exitCompleted = 0
	exitFailed    = 2
	exitCancelled = 3
	exitTimedOut  = 4
	// exitInterrupted: the command was interrupted (Ctrl-C); the run goes on.
	exitInterrupted = 130
)

// defaultURL is where the client commands find the API when neither
// --url nor EXECUTOR_URL says: where `make run` serves it.
const defaultURL = "http://127.0.0.1:8080"

// apiFlags are the client commands' connection flags.
type apiFlags struct {
	url, apiKey string
	output      string
}

// register adds --url, --api-key and --output to cmd and its subcommands.
func (f *apiFlags) register(cmd *cobra.Command) {
	pf := cmd.PersistentFlags()
	pf.StringVar(&f.url, "url", "", "the API's address (default $EXECUTOR_URL, else "+defaultURL+")")
	pf.StringVar(&f.apiKey, "api-key", "", "API key sent as a bearer token (default $EXECUTOR_API_KEY); needed when the API runs with AUTH_MODE=required")
	pf.StringVarP(&f.output, "output", "o", "text", "output format: text or json")
}

// client builds the API client from the flags and the environment.
func (f *apiFlags) client() (*client.Client, error) {
	if f.output != "text" && f.output != "json" {
		return nil, fmt.Errorf("--output: want text or json, got %q", f.output)
	}
	u := f.url
	if u == "" {
		u = os.Getenv("EXECUTOR_URL")
	}
	if u == "" {
		u = defaultURL
	}
	key := f.apiKey
	if key == "" {
		key = os.Getenv("EXECUTOR_API_KEY")
	}
	return client.New(u, key, nil)
}

func (f *apiFlags) json() bool { return f.output == "json" }

// clientLong is the part of every client command's help that says where
// the API is.
const clientLong = `

The API is found at --url, else EXECUTOR_URL, else ` + defaultURL + `
(where 'make run' serves it); with access control on, pass a key with
--api-key or EXECUTOR_API_KEY (create one with 'executor apikeys create').`

func newHierarchiesCommand() *cobra.Command {
	var af apiFlags
	cmd := &cobra.Command{
		Use:     "hierarchies",
		Aliases: []string{"hierarchy", "h"},
		Short:   "Create, show and list hierarchies through the API",
		Long:    "Create, show and list hierarchies (a global supervisor over teams of agents) through the API." + clientLong,
		Args:    cobra.ArbitraryArgs,
		RunE:    func(cmd *cobra.Command, args []string) error { return groupRun(cmd, args) },
	}
	af.register(cmd)

	var file string
	create := &cobra.Command{
		Use:   "create -f FILE",
		Short: "Create a hierarchy from a JSON file and print its id",
		Long: `Create a hierarchy from its JSON body (the body of POST
/api/executor/v1/hierarchies/create; docs/hierarchies.md describes it) read
from FILE, or from standard input with -f -. The new hierarchy's id is
printed alone on standard output; a refused body is reported with the
field at fault.` + clientLong,
		Example: "  H=$(./bin/executor hierarchies create -f examples/research.json)\n  ./bin/executor hierarchies get $H",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := af.client()
			if err != nil {
				return err
			}
			if file == "" {
				return errors.New("hierarchies create: -f FILE is required (- reads standard input)")
			}
			var raw []byte
			if file == "-" {
				raw, err = io.ReadAll(cmd.InOrStdin())
			} else {
				raw, err = os.ReadFile(file)
			}
			if err != nil {
				return err
			}
			if !json.Valid(raw) {
				return fmt.Errorf("hierarchies create: %s is not valid JSON", file)
			}
			id, err := c.CreateHierarchy(cmd.Context(), raw)
			if err != nil {
				return err
			}
			if af.json() {
				return writeJSON(cmd.OutOrStdout(), map[string]string{"hierarchy_id": id})
			}
			fmt.Fprintln(cmd.OutOrStdout(), id)
			return nil
		},
	}
	create.Flags().StringVarP(&file, "file", "f", "", "the hierarchy's JSON body (- for standard input)")

	get := &cobra.Command{
		Use:   "get ID",
		Short: "Show a hierarchy: its teams and every agent with its agent_id",
		Long:  "Show a hierarchy as a tree of its agents, each with its agent_id (the id that tags the agent's events); -o json prints it as the API returns it." + clientLong,
		Args:  exactArgs("hierarchy id"),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := af.client()
			if err != nil {
				return err
			}
			raw, err := c.GetHierarchy(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			if af.json() {
				return writeJSON(cmd.OutOrStdout(), raw)
			}
			var h models.Hierarchy
			if err := json.Unmarshal(raw, &h); err != nil {
				return err
			}
			printHierarchy(cmd.OutOrStdout(), &h)
			return nil
		},
	}

	var page, pageSize int
	list := &cobra.Command{
		Use:   "list",
		Short: "List hierarchies, newest first",
		Long:  "List hierarchies, newest first, a page at a time." + clientLong,
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := af.client()
			if err != nil {
				return err
			}
			p, err := c.ListHierarchies(cmd.Context(), page, pageSize)
			if err != nil {
				return err
			}
			if af.json() {
				return writeJSON(cmd.OutOrStdout(), p)
			}
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 0, 2, ' ', 0)
			fmt.Fprintln(tw, "ID\tNAME\tMODE\tCREATED\tDESCRIPTION")
			for _, h := range p.Items {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", h.ID, h.Name, h.ExecutionMode, h.CreatedAt.Local().Format(time.DateTime), clip(oneLine(h.Description), 60))
			}
			tw.Flush()
			fmt.Fprintf(cmd.ErrOrStderr(), "page %d, %d of %d\n", p.Page, len(p.Items), p.Total)
			return nil
		},
	}
	list.Flags().IntVar(&page, "page", 1, "page number, from 1")
	list.Flags().IntVar(&pageSize, "page-size", 20, "hierarchies per page (at most 100)")

	cmd.AddCommand(create, get, list)
	return cmd
}

// printHierarchy draws h as a tree with every agent_id.
func printHierarchy(w io.Writer, h *models.Hierarchy) {
	fmt.Fprintf(w, "%s  %s  (%s, created %s)\n", h.ID, h.Name, h.ExecutionMode, h.CreatedAt.Local().Format(time.DateTime))
	fmt.Fprintf(w, "└─ global supervisor %s  agent_id %s\n", nameOr(h.GlobalSupervisor.Name, "supervisor"), h.GlobalSupervisor.AgentID)
	for i, t := range h.Teams {
		branch, indent := "├─", "│  "
		if i == len(h.Teams)-1 {
			branch, indent = "└─", "   "
		}
		fmt.Fprintf(w, "   %s team %s\n", branch, t.Name)
		fmt.Fprintf(w, "   %s├─ team supervisor %s  agent_id %s\n", indent, nameOr(t.Supervisor.Name, "supervisor"), t.Supervisor.AgentID)
		for j, wk := range t.Workers {
			b := "├─"
			if j == len(t.Workers)-1 {
				b = "└─"
			}
			model := ""
			if wk.Model != "" {
				model = "  model " + wk.Model
			}
			fmt.Fprintf(w, "   %s%s worker %s  agent_id %s%s\n", indent, b, wk.Name, wk.AgentID, model)
		}
	}
}

func nameOr(name, fallback string) string {
	if name == "" {
		return fallback
	}
	return name
}

func newRunsCommand() *cobra.Command {
	var af apiFlags
	cmd := &cobra.Command{
		Use:     "runs",
		Aliases: []string{"run", "r"},
		Short:   "Start, follow, show, list and cancel runs through the API",
		Long:    "Start, follow, show, list and cancel runs (one hierarchy working on one task) through the API." + clientLong,
		Args:    cobra.ArbitraryArgs,
		RunE:    func(cmd *cobra.Command, args []string) error { return groupRun(cmd, args) },
	}
	af.register(cmd)

	var fo followOptions
	var hierarchy, task, runID, previous, strategy, onLimit string
	var follow bool
	start := &cobra.Command{
		Use:   `start --hierarchy ID --task "..." [--follow]`,
		Short: "Start a run; with --follow, stream its agents' text until it ends",
		Long: `Start a run of a hierarchy on a task. The run's id is printed alone on
standard output, so that RUN=$(executor runs start ...) captures it.

With --follow it then streams the run: each agent's text as it is written,
prefixed [team/agent] (coloured on a terminal unless NO_COLOR is set),
dispatches, tool calls and their results, retries (the text they replace is
marked superseded), approvals, and how the run ended. A dropped connection
is resumed where it stopped. The exit status says how the run ended:
0 completed, 2 failed, 3 cancelled, 4 timed out (1: the command itself
failed; 130: interrupted, the run goes on).` + clientLong,
		Example: `  RUN=$(./bin/executor runs start --hierarchy $H --task "Explain quantum tunnelling")
  ./bin/executor runs start --hierarchy $H --task "Explain quantum tunnelling" --follow`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := af.client()
			if err != nil {
				return err
			}
			if strings.TrimSpace(hierarchy) == "" || strings.TrimSpace(task) == "" {
				return errors.New(`runs start: --hierarchy ID and --task "..." are required`)
			}
			if task == "-" {
				raw, err := io.ReadAll(cmd.InOrStdin())
				if err != nil {
					return err
				}
				task = string(raw)
			}
			started, err := c.StartRun(cmd.Context(), client.StartRequest{HierarchyID: hierarchy, Task: task, ID: runID, PreviousRunID: previous, MultitaskStrategy: strategy, OnLimit: onLimit})
			if err != nil {
				return err
			}
			if !follow {
				if af.json() {
					return writeJSON(cmd.OutOrStdout(), started)
				}
				fmt.Fprintln(cmd.OutOrStdout(), started.ID)
				if started.Status == "queued" {
					fmt.Fprintf(cmd.ErrOrStderr(), "run %s is queued at position %d: it starts when a place frees (docs/queue.md)\n", started.ID, started.QueuePosition)
				}
				fmt.Fprintf(cmd.ErrOrStderr(), "started run %s (workflow %s); follow it with: executor runs follow %s\n", started.ID, started.WorkflowID, started.ID)
				return nil
			}
			fmt.Fprintf(cmd.ErrOrStderr(), "started run %s (workflow %s)\n", started.ID, started.WorkflowID)
			return followRun(cmd, c, started.ID, fo)
		},
	}
	start.Flags().StringVar(&hierarchy, "hierarchy", "", "id of the hierarchy to run (required)")
	start.Flags().StringVar(&task, "task", "", `the task (required; "-" reads it from standard input)`)
	start.Flags().StringVar(&runID, "id", "", "the run's id (default: a new UUID)")
	start.Flags().StringVar(&previous, "previous-run", "", "follow up this run: the supervisors see its brief, and the new run joins its thread")
	start.Flags().StringVar(&strategy, "multitask-strategy", "", "with --previous-run, when its thread has a run unfinished: reject, enqueue (default), interrupt or rollback")
	start.Flags().StringVar(&onLimit, "on-limit", "", `over the tenant's concurrent-run limit: "queue" (default) waits queued, "reject" fails`)
	start.Flags().BoolVar(&follow, "follow", false, "stream the run until it ends; the exit status says how it ended")
	fo.register(start)

	followCmd := &cobra.Command{
		Use:   "follow ID",
		Short: "Stream a run's agents' text until it ends; the exit status says how",
		Long: `Stream a run as 'runs start --follow' does, from its first event (or after
--after N). A run that has ended is replayed from its stored events. Exit
status: 0 completed, 2 failed, 3 cancelled, 4 timed out.` + clientLong,
		Args: exactArgs("run id"),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := af.client()
			if err != nil {
				return err
			}
			return followRun(cmd, c, args[0], fo)
		},
	}
	fo.register(followCmd)
	followCmd.Flags().Int64Var(&fo.after, "after", 0, "continue after this event sequence number")

	get := &cobra.Command{
		Use:   "get ID",
		Short: "Show a run: status, progress, usage and final answer",
		Long:  "Show a run: its status, hierarchy, task, times, progress, token usage and cost, and its final answer or error; -o json prints it as the API returns it." + clientLong,
		Args:  exactArgs("run id"),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := af.client()
			if err != nil {
				return err
			}
			raw, err := c.GetRun(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			if af.json() {
				return writeJSON(cmd.OutOrStdout(), raw)
			}
			var r client.Run
			if err := json.Unmarshal(raw, &r); err != nil {
				return err
			}
			printRun(cmd.OutOrStdout(), r)
			return nil
		},
	}

	var lf client.RunFilter
	list := &cobra.Command{
		Use:   "list",
		Short: "List runs, newest first, with status, hierarchy, cost and time",
		Long:  "List runs, newest first: id, status, hierarchy, tokens, cost, start time and task; filter by hierarchy, status or thread." + clientLong,
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := af.client()
			if err != nil {
				return err
			}
			p, err := c.ListRuns(cmd.Context(), lf)
			if err != nil {
				return err
			}
			if af.json() {
				return writeJSON(cmd.OutOrStdout(), p)
			}
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 0, 2, ' ', 0)
			fmt.Fprintln(tw, "ID\tSTATUS\tHIERARCHY\tTOKENS\tCOST\tCREATED\tTASK")
			for _, r := range p.Items {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%s\t%s\n", r.ID, r.Status, nameOr(r.HierarchyName, r.HierarchyID), r.Usage.TotalTokens,
					cost(r.Usage), r.CreatedAt.Local().Format(time.DateTime), clip(oneLine(r.Task), 60))
			}
			tw.Flush()
			fmt.Fprintf(cmd.ErrOrStderr(), "page %d, %d of %d\n", p.Page, len(p.Items), p.Total)
			return nil
		},
	}
	list.Flags().StringVar(&lf.HierarchyID, "hierarchy", "", "only this hierarchy's runs")
	list.Flags().StringVar(&lf.Status, "status", "", "only runs in this status: "+strings.Join(models.RunStatuses, ", "))
	list.Flags().StringVar(&lf.ThreadID, "thread", "", "only this thread's runs (follow-ups of one first run)")
	list.Flags().IntVar(&lf.Page, "page", 1, "page number, from 1")
	list.Flags().IntVar(&lf.PageSize, "page-size", 20, "runs per page (at most 100)")

	var ef client.EventFilter
	var types []string
	events := &cobra.Command{
		Use:   "events ID",
		Short: "Print a run's stored events, one a line",
		Long: `Print a run's stored event log, one event a line: sequence, time, type,
[team/agent] and what it says; -o json prints each event as a JSON line.
Every page is fetched unless --limit is given.` + clientLong,
		Args: exactArgs("run id"),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := af.client()
			if err != nil {
				return err
			}
			f := ef
			f.Types = types
			all := f.Limit == 0
			if all {
				f.Limit = 1000
			}
			out := cmd.OutOrStdout()
			for {
				p, err := c.Events(cmd.Context(), args[0], f)
				if err != nil {
					return err
				}
				for _, ev := range p.Events {
					if af.json() {
						raw, _ := json.Marshal(ev)
						fmt.Fprintf(out, "%s\n", raw)
						continue
					}
					fmt.Fprintln(out, eventLine(ev))
				}
				if !all || !p.HasMore {
					return nil
				}
				f.After = p.NextAfter
			}
		},
	}
	events.Flags().Int64Var(&ef.After, "after", 0, "only events after this sequence number")
	events.Flags().IntVar(&ef.Limit, "limit", 0, "at most this many events (at most 1000; default: all)")
	events.Flags().StringVar(&ef.AgentID, "agent", "", "only this agent_id's events")
	events.Flags().StringSliceVar(&types, "type", nil, "only events of these types, e.g. llm.tool_call,dispatch.worker (repeatable)")

	cancel := &cobra.Command{
		Use:   "cancel ID",
		Short: "Cancel a run",
		Long:  "Ask a run to cancel: its agents stop, and it ends cancelled moments later (follow it to see). Cancelling a cancelled run again succeeds; a finished run cannot be cancelled." + clientLong,
		Args:  exactArgs("run id"),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := af.client()
			if err != nil {
				return err
			}
			status, err := c.CancelRun(cmd.Context(), args[0])
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

	cmd.AddCommand(start, followCmd, get, list, events, cancel)
	return cmd
}

// exactArgs requires one argument, naming it when missing.
func exactArgs(what string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) != 1 {
			return fmt.Errorf("%s: exactly one argument, the %s, is required (got %d)", cmd.CommandPath(), what, len(args))
		}
		return nil
	}
}

// followRun follows a run to its end and turns how it ended into the exit
// status.
func followRun(cmd *cobra.Command, c *client.Client, id string, fo followOptions) error {
	p := newPrinter(cmd.OutOrStdout(), fo)
	stderr := cmd.ErrOrStderr()
	ctx := cmd.Context()
	_, err := c.Follow(ctx, id, client.FollowOptions{
		After: fo.after,
		OnReconnect: func(after int64, cause error) {
			p.breakLine()
			fmt.Fprintf(stderr, "stream interrupted (%v); resuming after event %d\n", cause, after)
		},
	}, p.print)
	p.breakLine()
	if err != nil {
		if ctx.Err() != nil {
			return exitError{code: exitInterrupted, msg: fmt.Sprintf("interrupted; run %s goes on: executor runs follow %s (or cancel it: executor runs cancel %s)", id, id, id)}
		}
		return err
	}
	// The terminal event is stored before the run's status: read the
	// status the run ended with (a run that timed out ends with
	// lifecycle.failed).
	var r client.Run
	for range 50 {
		raw, err := c.GetRun(context.WithoutCancel(ctx), id)
		if err != nil {
			return err
		}
		if err := json.Unmarshal(raw, &r); err != nil {
			return err
		}
		if models.IsTerminal(r.Status) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	p.summary(r)
	switch r.Status {
	case models.RunCompleted:
		return nil
	case models.RunFailed:
		return exitError{code: exitFailed}
	case models.RunCancelled:
		return exitError{code: exitCancelled}
	case models.RunTimedOut:
		return exitError{code: exitTimedOut}
	}
	return exitError{code: 1, msg: fmt.Sprintf("run %s ended its stream but is %s", id, r.Status)}
}

// printRun prints a run for people.
func printRun(w io.Writer, r client.Run) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "id\t%s\n", r.ID)
	fmt.Fprintf(tw, "status\t%s\n", r.Status)
	fmt.Fprintf(tw, "hierarchy\t%s (%s)\n", r.HierarchyName, r.HierarchyID)
	fmt.Fprintf(tw, "task\t%s\n", oneLine(r.Task))
	fmt.Fprintf(tw, "created\t%s\n", r.CreatedAt.Local().Format(time.DateTime))
	if r.StartedAt != nil {
		fmt.Fprintf(tw, "started\t%s\n", r.StartedAt.Local().Format(time.DateTime))
	}
	if r.CompletedAt != nil {
		took := ""
		if r.StartedAt != nil {
			took = fmt.Sprintf(" (took %s)", r.CompletedAt.Sub(*r.StartedAt).Round(time.Millisecond))
		}
		fmt.Fprintf(tw, "ended\t%s%s\n", r.CompletedAt.Local().Format(time.DateTime), took)
	}
	fmt.Fprintf(tw, "tokens\t%d (prompt %d, completion %d)\n", r.Usage.TotalTokens, r.Usage.PromptTokens, r.Usage.CompletionTokens)
	fmt.Fprintf(tw, "cost\t%s\n", cost(r.Usage))
	if r.Error != "" {
		fmt.Fprintf(tw, "error\t%s\n", oneLine(r.Error))
	}
	tw.Flush()
	if r.FinalAnswer != "" {
		fmt.Fprintf(w, "\n%s\n", strings.TrimRight(r.FinalAnswer, "\n"))
	}
}

func cost(u client.Usage) string {
	if u.CostUnknown {
		return fmt.Sprintf("≥ $%.4f (some models have no price)", u.CostUSD)
	}
	return fmt.Sprintf("$%.4f", u.CostUSD)
}

func clip(s string, n int) string {
	if r := []rune(s); len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return s
}

func writeJSON(w io.Writer, v any) error {
	if raw, ok := v.(json.RawMessage); ok {
		var x any
		if err := json.Unmarshal(raw, &x); err != nil {
			return err
		}
		v = x
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
