package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
)

// scheduleOut is the part of a schedule the text output shows.
type scheduleOut struct {
	ID          string   `json:"id"`
	HierarchyID string   `json:"hierarchy_id"`
	Task        string   `json:"task"`
	Cron        []string `json:"cron"`
	Intervals   []struct {
		Every  string `json:"every"`
		Offset string `json:"offset"`
	} `json:"intervals"`
	TimeZone string `json:"time_zone"`
	Jitter   string `json:"jitter"`
	Overlap  string `json:"overlap"`
	Paused   bool   `json:"paused"`
	Note     string `json:"note"`
	Info     struct {
		NumActions        int         `json:"num_actions"`
		NumSkippedOverlap int         `json:"num_skipped_overlap"`
		Running           []string    `json:"running_workflow_ids"`
		NextActionTimes   []time.Time `json:"next_action_times"`
	} `json:"info"`
}

func (s scheduleOut) spec() string {
	parts := append([]string{}, s.Cron...)
	for _, iv := range s.Intervals {
		p := "every " + iv.Every
		if iv.Offset != "" && iv.Offset != "0s" {
			p += " +" + iv.Offset
		}
		parts = append(parts, p)
	}
	return strings.Join(parts, "; ")
}

func (s scheduleOut) next() string {
	if s.Paused {
		return "paused"
	}
	if len(s.Info.NextActionTimes) == 0 {
		return "-"
	}
	return s.Info.NextActionTimes[0].Local().Format(time.RFC3339)
}

// scheduleFlags are the fields of a schedule that create and update take;
// only the flags given go in the body.
type scheduleFlags struct {
	task, timeZone, jitter, overlap, note string
	cron, every                           []string
	paused                                bool
}

func (f *scheduleFlags) register(cmd *cobra.Command, create bool) {
	fl := cmd.Flags()
	fl.StringVar(&f.task, "task", "", "the task every run is given")
	fl.StringArrayVar(&f.cron, "cron", nil, `a cron expression, e.g. "0 9 * * MON-FRI" or @daily (repeatable)`)
	fl.StringArrayVar(&f.every, "every", nil, "an interval, e.g. 15m, or 15m+5m with an offset (repeatable)")
	fl.StringVar(&f.timeZone, "time-zone", "", "the IANA time zone cron expressions are read in, e.g. Europe/Paris (default UTC)")
	fl.StringVar(&f.jitter, "jitter", "", "a random delay up to this before each action, e.g. 2m")
	fl.StringVar(&f.overlap, "overlap", "", "an action while the last run is going: skip (default), buffer_one, buffer_all, cancel_other or allow_all")
	fl.StringVar(&f.note, "note", "", "a note kept with the schedule")
	if create {
		fl.BoolVar(&f.paused, "paused", false, "create it paused")
	}
}

// body is the request body of the flags given on cmd.
func (f *scheduleFlags) body(cmd *cobra.Command) (map[string]any, error) {
	b := map[string]any{}
	changed := cmd.Flags().Changed
	for flag, v := range map[string]string{"task": f.task, "time-zone": f.timeZone, "jitter": f.jitter, "overlap": f.overlap, "note": f.note} {
		if changed(flag) {
			b[strings.ReplaceAll(flag, "-", "_")] = v
		}
	}
	if changed("cron") || changed("every") {
		b["cron"] = append([]string{}, f.cron...)
		intervals := []map[string]string{}
		for _, e := range f.every {
			every, offset, _ := strings.Cut(e, "+")
			iv := map[string]string{"every": strings.TrimSpace(every)}
			if offset != "" {
				iv["offset"] = strings.TrimSpace(offset)
			}
			intervals = append(intervals, iv)
		}
		b["intervals"] = intervals
	}
	if f.paused {
		b["paused"] = true
	}
	return b, nil
}

func newSchedulesCommand() *cobra.Command {
	var af apiFlags
	cmd := &cobra.Command{
		Use:     "schedules",
		Aliases: []string{"schedule"},
		Short:   "Create, show, list, pause, trigger, update and delete schedules through the API",
		Long: `Schedules start runs of a hierarchy with a task on their own, on cron
expressions or intervals (docs/schedules.md). They are Temporal Schedules:
they go on whether or not the executor's processes are up, and each action
is an ordinary run ('executor runs list' shows it).` + clientLong,
		Args: cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error { return groupRun(cmd, args) },
	}
	af.register(cmd)

	// show prints a schedule answered by path.
	show := func(cmd *cobra.Command, path string, body any) error {
		c, err := af.client()
		if err != nil {
			return err
		}
		raw, err := c.CallRaw(cmd.Context(), path, body)
		if err != nil {
			return err
		}
		if af.json() {
			return writeJSON(cmd.OutOrStdout(), raw)
		}
		var s scheduleOut
		if err := json.Unmarshal(raw, &s); err != nil {
			return err
		}
		printSchedule(cmd.OutOrStdout(), s)
		return nil
	}

	var cf scheduleFlags
	create := &cobra.Command{
		Use:   "create HIERARCHY_ID --task TASK (--cron EXPR | --every DURATION)... [flags]",
		Short: "Schedule runs of a hierarchy and print the schedule's id",
		Example: `  ./bin/executor schedules create $H --task "Write the morning report" --cron "0 9 * * MON-FRI" --time-zone Europe/Paris --jitter 2m
  ./bin/executor schedules create $H --task "Check the queue" --every 15m+5m --overlap buffer_one`,
		Long: "Schedule runs of one of the tenant's hierarchies; the new schedule's id is printed alone on standard output." + clientLong,
		Args: exactArgs("hierarchy's id"),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := af.client()
			if err != nil {
				return err
			}
			if !cmd.Flags().Changed("cron") && !cmd.Flags().Changed("every") {
				return errors.New("schedules create: give --cron or --every")
			}
			body, err := cf.body(cmd)
			if err != nil {
				return err
			}
			body["hierarchy_id"] = args[0]
			raw, err := c.CallRaw(cmd.Context(), "/schedules/create", body)
			if err != nil {
				return err
			}
			if af.json() {
				return writeJSON(cmd.OutOrStdout(), raw)
			}
			var s scheduleOut
			if err := json.Unmarshal(raw, &s); err != nil {
				return err
			}
			fmt.Fprintln(cmd.OutOrStdout(), s.ID)
			fmt.Fprintf(cmd.ErrOrStderr(), "scheduled %s; next run %s\n", s.spec(), s.next())
			return nil
		},
	}
	cf.register(create, true)

	var hierarchy string
	list := &cobra.Command{
		Use:   "list",
		Short: "List the tenant's schedules",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := af.client()
			if err != nil {
				return err
			}
			raw, err := c.CallRaw(cmd.Context(), "/schedules/list", map[string]any{"hierarchy_id": hierarchy, "page_size": 100})
			if err != nil {
				return err
			}
			if af.json() {
				return writeJSON(cmd.OutOrStdout(), raw)
			}
			var page struct {
				Items []scheduleOut `json:"items"`
				Total int           `json:"total"`
			}
			if err := json.Unmarshal(raw, &page); err != nil {
				return err
			}
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 0, 2, ' ', 0)
			fmt.Fprintln(tw, "ID\tHIERARCHY\tSPEC\tOVERLAP\tACTIONS\tNEXT\tTASK")
			for _, s := range page.Items {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%s\t%s\n", s.ID, s.HierarchyID, clip(s.spec(), 40), s.Overlap, s.Info.NumActions, s.next(), clip(s.Task, 40))
			}
			tw.Flush()
			fmt.Fprintf(cmd.ErrOrStderr(), "%d schedules\n", page.Total)
			return nil
		},
	}
	list.Flags().StringVar(&hierarchy, "hierarchy", "", "only this hierarchy's schedules")

	get := &cobra.Command{
		Use:   "get ID",
		Short: "Show a schedule",
		Args:  exactArgs("schedule's id"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return show(cmd, "/schedules/get", map[string]any{"id": args[0]})
		},
	}

	var note string
	control := func(name, short string) *cobra.Command {
		c := &cobra.Command{
			Use:   name + " ID",
			Short: short,
			Args:  exactArgs("schedule's id"),
			RunE: func(cmd *cobra.Command, args []string) error {
				return show(cmd, "/schedules/"+name, map[string]any{"id": args[0], "note": note})
			},
		}
		c.Flags().StringVar(&note, "note", "", "why (kept with the schedule)")
		return c
	}

	var overlap string
	trigger := &cobra.Command{
		Use:   "trigger ID",
		Short: "Take the schedule's action now (a run starts unless its overlap policy skips it)",
		Args:  exactArgs("schedule's id"),
		RunE: func(cmd *cobra.Command, args []string) error {
			body := map[string]any{"id": args[0]}
			if overlap != "" {
				body["overlap"] = overlap
			}
			return show(cmd, "/schedules/trigger", body)
		},
	}
	trigger.Flags().StringVar(&overlap, "overlap", "", "this action's overlap policy (default: the schedule's)")

	var uf scheduleFlags
	update := &cobra.Command{
		Use:   "update ID [flags]",
		Short: "Change a schedule: only the flags given change (--cron or --every replace both)",
		Args:  exactArgs("schedule's id"),
		RunE: func(cmd *cobra.Command, args []string) error {
			body, err := uf.body(cmd)
			if err != nil {
				return err
			}
			body["id"] = args[0]
			return show(cmd, "/schedules/update", body)
		},
	}
	uf.register(update, false)

	del := &cobra.Command{
		Use:   "delete ID",
		Short: "Delete a schedule (its runs stay)",
		Args:  exactArgs("schedule's id"),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := af.client()
			if err != nil {
				return err
			}
			raw, err := c.CallRaw(cmd.Context(), "/schedules/delete", map[string]any{"id": args[0]})
			if err != nil {
				return err
			}
			if af.json() {
				return writeJSON(cmd.OutOrStdout(), raw)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s deleted\n", args[0])
			return nil
		},
	}

	cmd.AddCommand(create, list, get, control("pause", "Pause a schedule"), control("unpause", "Unpause a schedule"), trigger, update, del)
	return cmd
}

func printSchedule(w io.Writer, s scheduleOut) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "id\t%s\n", s.ID)
	fmt.Fprintf(tw, "hierarchy\t%s\n", s.HierarchyID)
	fmt.Fprintf(tw, "task\t%s\n", s.Task)
	fmt.Fprintf(tw, "spec\t%s\n", s.spec())
	if s.TimeZone != "" {
		fmt.Fprintf(tw, "time zone\t%s\n", s.TimeZone)
	}
	if s.Jitter != "" && s.Jitter != "0s" {
		fmt.Fprintf(tw, "jitter\t%s\n", s.Jitter)
	}
	fmt.Fprintf(tw, "overlap\t%s\n", s.Overlap)
	fmt.Fprintf(tw, "paused\t%t\n", s.Paused)
	if s.Note != "" {
		fmt.Fprintf(tw, "note\t%s\n", s.Note)
	}
	fmt.Fprintf(tw, "actions\t%d (%d skipped by overlap, %d running)\n", s.Info.NumActions, s.Info.NumSkippedOverlap, len(s.Info.Running))
	fmt.Fprintf(tw, "next\t%s\n", s.next())
	tw.Flush()
}
