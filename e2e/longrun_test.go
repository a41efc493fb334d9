package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	"google.golang.org/protobuf/proto"

	"github.com/op-stack/executor/config"
	"github.com/op-stack/executor/llm/llmfake"
	"github.com/op-stack/executor/models"
)

// A long run, as TestLongRunHistoryPerCall and BenchmarkLongRun script it:
// exactly longRunCalls LLM calls on longRunHierarchy. The global supervisor
// dispatches the team "work" longRunTurns times, then finishes and writes
// the final answer (52 calls). In each of the first 49 turns the team
// supervisor dispatches w0, w1, w2 and w3 and then ends the turn (9 calls);
// in the last it dispatches w0, w1 and w2 (7 calls). That is 199 worker
// answers, 300 decisions and 1 final answer. Context sharing is on at both
// levels, as in the reference hierarchy: every agent is shown the earlier
// outputs.
const (
	longRunCalls = 500
	longRunTurns = 50
)

// Limits a single workflow execution's history must stay under in a long
// run: far below Temporal's (50 MB, 51,200 events).
const (
	maxExecutionHistoryBytes  = 10 << 20
	maxExecutionHistoryEvents = 20000
)

func longRunHierarchy() map[string]any {
	var workers []any
	for i := 0; i < 4; i++ {
		workers = append(workers, map[string]any{
			"agent_id": fmt.Sprintf("long-w%d", i), "name": fmt.Sprintf("w%d", i), "role": "work",
			"system_prompt": fmt.Sprintf("LONG-W%d You work.", i),
		})
	}
	return map[string]any{
		"name":                    "long",
		"global_supervisor_agent": map[string]any{"agent_id": "long-gs", "system_prompt": "LONG-GS You lead."},
		"enable_context_sharing":  true,
		"max_iterations":          100, // the global supervisor decides 51 times
		"teams": []any{map[string]any{
			"name":                  "work",
			"team_supervisor_agent": map[string]any{"agent_id": "long-ts", "system_prompt": "LONG-TS You lead the work."},
			"share_context":         true,
			"workers":               workers,
		}},
	}
}

// longRunRules script the long run: worker and final answers of tokens
// four-character tokens, decisions of about 30; every chunk (one token)
// after tokenDelay. The decisions are sequences, so the fake must serve
// this one run only.
func longRunRules(tokens int, tokenDelay time.Duration) []llmfake.Rule {
	answer := llmfake.Response{Content: strings.Repeat("tok ", tokens), ChunkSize: 4, TokenDelay: tokenDelay}
	respond := func(content string) llmfake.Response {
		return llmfake.Response{Content: content, ChunkSize: 4, TokenDelay: tokenDelay}
	}
	var global, team []llmfake.Response
	for turn := 1; turn <= longRunTurns; turn++ {
		global = append(global, respond(decision("dispatch", "work", fmt.Sprintf("do part %d", turn))))
		workers := 4
		if turn == longRunTurns {
			workers = 3
		}
		for w := 0; w < workers; w++ {
			team = append(team, respond(decision("dispatch", fmt.Sprintf("w%d", w), fmt.Sprintf("part %d, step %d", turn, w))))
		}
		team = append(team, respond(decision("finish", "", "")))
	}
	global = append(global, respond(decision("finish", "", "")))
	rules := []llmfake.Rule{
		{Name: "global decisions", SystemContains: "LONG-GS", HasJSONSchema: true, Responses: global},
		{Name: "final answer", SystemContains: "LONG-GS", Responses: []llmfake.Response{answer}},
		{Name: "team decisions", SystemContains: "LONG-TS", Responses: team},
	}
	for i := 0; i < 4; i++ {
		rules = append(rules, llmfake.Rule{Name: fmt.Sprintf("w%d", i), SystemContains: fmt.Sprintf("LONG-W%d ", i), Responses: []llmfake.Response{answer}})
	}
	return rules
}

// history is one workflow execution's history as Temporal stores it, with
// the child workflows it started (team turns, and their sub-agents).
type history struct {
	workflowID, runID string
	events            int
	bytes             int64 // the sum of proto.Size over its events
	start, end        time.Time
	// closed is how the execution ended ("" while it runs): "completed",
	// "continued-as-new", "terminated: <reason>", "failed: <message>", …
	closed string
	// taskFailure is the last failed workflow task's cause and message.
	taskFailure   string
	previousRunID string // the execution this one continues as new
	children      []history
}

// each calls fn on h and every descendant.
func (h history) each(fn func(history)) {
	fn(h)
	for _, c := range h.children {
		c.each(fn)
	}
}

// total is the events and bytes of h and its descendants.
func (h history) total() (events int, bytes int64) {
	h.each(func(x history) { events, bytes = events+x.events, bytes+x.bytes })
	return events, bytes
}

// fetchHistory reads one execution's whole history and its children's.
func fetchHistory(ctx context.Context, c client.Client, workflowID, runID string) (history, error) {
	h := history{workflowID: workflowID, runID: runID}
	var kids [][2]string
	it := c.GetWorkflowHistory(ctx, workflowID, runID, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		ev, err := it.Next()
		if err != nil {
			return h, fmt.Errorf("history of %s/%s: %w", workflowID, runID, err)
		}
		h.events++
		h.bytes += int64(proto.Size(ev))
		h.end = ev.GetEventTime().AsTime()
		if a := ev.GetWorkflowExecutionStartedEventAttributes(); a != nil {
			h.start = h.end
			h.previousRunID = a.GetContinuedExecutionRunId()
		}
		if a := ev.GetChildWorkflowExecutionStartedEventAttributes(); a != nil {
			kids = append(kids, [2]string{a.GetWorkflowExecution().GetWorkflowId(), a.GetWorkflowExecution().GetRunId()})
		}
		if a := ev.GetWorkflowTaskFailedEventAttributes(); a != nil {
			h.taskFailure = a.GetCause().String() + ": " + a.GetFailure().GetMessage()
		}
		switch {
		case ev.GetWorkflowExecutionCompletedEventAttributes() != nil:
			h.closed = "completed"
		case ev.GetWorkflowExecutionContinuedAsNewEventAttributes() != nil:
			h.closed = "continued-as-new"
		case ev.GetWorkflowExecutionFailedEventAttributes() != nil:
			h.closed = "failed: " + ev.GetWorkflowExecutionFailedEventAttributes().GetFailure().GetMessage()
		case ev.GetWorkflowExecutionTerminatedEventAttributes() != nil:
			h.closed = "terminated: " + ev.GetWorkflowExecutionTerminatedEventAttributes().GetReason()
		case ev.GetWorkflowExecutionCanceledEventAttributes() != nil:
			h.closed = "cancelled"
		case ev.GetWorkflowExecutionTimedOutEventAttributes() != nil:
			h.closed = "timed out"
		}
	}
	for _, k := range kids {
		child, err := fetchHistory(ctx, c, k[0], k[1])
		if err != nil {
			return h, err
		}
		h.children = append(h.children, child)
	}
	return h, nil
}

// runHistories reads every execution of a run's workflow, first to last
// (the continue-as-new chain, followed back from the latest), each with
// its team turns.
func runHistories(ctx context.Context, c client.Client, runID string) ([]history, error) {
	wid := models.RunWorkflowID(runID)
	desc, err := c.DescribeWorkflowExecution(ctx, wid, "")
	if err != nil {
		return nil, err
	}
	var chain []history
	for rid := desc.GetWorkflowExecutionInfo().GetExecution().GetRunId(); rid != ""; {
		h, err := fetchHistory(ctx, c, wid, rid)
		if err != nil {
			return nil, err
		}
		chain = append([]history{h}, chain...)
		rid = h.previousRunID
	}
	return chain, nil
}

// longRun is one measured long run.
type longRun struct {
	err        error // nil when the run completed
	calls      []llmfake.Call
	wall       time.Duration // runs/start until the workflow closed
	model      time.Duration // the fake model's time, summed over calls
	executions []history     // the run workflow's, first to last
	// execCalls[i] is the LLM calls made while executions[i] ran (its own
	// and its team turns').
	execCalls []int
}

// runLong starts a run and waits for it to close, giving up after timeout
// or when the fake has received no call for stall (the run is then
// terminated), and reads its histories. The run's fake must serve it alone.
func (e *testEnv) runLong(hid, task string, timeout, stall time.Duration) longRun {
	e.t.Helper()
	ctx := context.Background()
	start := time.Now()
	id := e.startRun(hid, task)
	var r longRun
	r.err = e.awaitRun(id, timeout, stall)
	r.wall = time.Since(start)
	if r.err != nil {
		_ = e.temporal.TerminateWorkflow(ctx, models.RunWorkflowID(id), "", "the test gave up: "+r.err.Error())
	}
	r.calls = e.fake.Calls()
	for _, c := range r.calls {
		r.model += c.FinishedAt.Sub(c.ReceivedAt)
	}
	var err error
	if r.executions, err = runHistories(ctx, e.temporal, id); err != nil {
		e.t.Fatal(err)
	}
	// Executions run one after another and no LLM call spans two (they
	// continue as new only between team turns): a call belongs to the
	// execution that started last before it.
	r.execCalls = make([]int, len(r.executions))
	for _, c := range r.calls {
		for i := len(r.executions) - 1; i >= 0; i-- {
			if !c.ReceivedAt.Before(r.executions[i].start) {
				r.execCalls[i]++
				break
			}
		}
	}
	return r
}

// awaitRun waits for a run's workflow to close, across continue-as-new.
func (e *testEnv) awaitRun(id string, timeout, stall time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- e.temporal.GetWorkflow(ctx, models.RunWorkflowID(id), "").Get(ctx, nil) }()
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	calls, progress := 0, time.Now()
	for {
		select {
		case err := <-done:
			return err
		case <-tick.C:
			if n := len(e.fake.Calls()); n != calls {
				calls, progress = n, time.Now()
			} else if time.Since(progress) > stall {
				return fmt.Errorf("stalled: no LLM call for %v after %d calls", stall, calls)
			}
		}
	}
}

// bytesPerCall is the history bytes per LLM call of execution i, its team
// turns included; 0 when it made no call.
func (r longRun) bytesPerCall(i int) float64 {
	if r.execCalls[i] == 0 {
		return 0
	}
	_, bytes := r.executions[i].total()
	return float64(bytes) / float64(r.execCalls[i])
}

// lastFull is the index of the last execution that continued as new, or
// -1 when none did.
func (r longRun) lastFull() int {
	for i := len(r.executions) - 1; i >= 0; i-- {
		if r.executions[i].closed == "continued-as-new" {
			return i
		}
	}
	return -1
}

// growth is the history bytes per LLM call of the last execution that
// continued as new over the first's (first and last are their indexes);
// with fewer than two such executions, the final execution's over the
// first's, and 1 with a single execution.
func (r longRun) growth() (ratio float64, first, last int) {
	last = r.lastFull()
	if last <= 0 {
		last = len(r.executions) - 1
	}
	if last <= 0 || r.bytesPerCall(0) == 0 {
		return 1, 0, 0
	}
	return r.bytesPerCall(last) / r.bytesPerCall(0), 0, last
}

// totals is every history of the run: events, bytes, and the largest single
// execution by bytes and by events.
func (r longRun) totals() (events int, bytes int64, largestBytes, largestEvents history) {
	for _, x := range r.executions {
		x.each(func(h history) {
			events += h.events
			bytes += h.bytes
			if h.bytes > largestBytes.bytes {
				largestBytes = h
			}
			if h.events > largestEvents.events {
				largestEvents = h
			}
		})
	}
	return
}

// summary describes the run in one line.
func (r longRun) summary() string {
	events, bytes, big, long := r.totals()
	ratio, first, last := r.growth()
	status := "completed"
	if r.err != nil {
		status = "did not complete: " + r.err.Error()
	}
	return fmt.Sprintf("%d LLM calls, %s; wall %.1f s, model %.1f s; %d executions of the run workflow (%d continue-as-new); history %d events, %.2f MB in all; bytes per LLM call: %.1f kB in execution %d, %.1f kB in execution %d (x%.2f); largest history %s (%.2f MB), longest %s (%d events)",
		len(r.calls), status, r.wall.Seconds(), r.model.Seconds(), len(r.executions), max(len(r.executions)-1, 0), events, mb(bytes),
		r.bytesPerCall(first)/1000, first+1, r.bytesPerCall(last)/1000, last+1, ratio,
		big.workflowID, mb(big.bytes), long.workflowID, long.events)
}

// executionLines describe each execution of the run, a line each.
func (r longRun) executionLines() []string {
	var lines []string
	for i, x := range r.executions {
		ev, by := x.total()
		line := fmt.Sprintf("execution %d/%d %s: %d LLM calls, %d team turns; %d events, %.2f MB (%d events, %.2f MB its own); %.1f kB per LLM call",
			i+1, len(r.executions), x.closed, r.execCalls[i], len(x.children), ev, mb(by), x.events, mb(x.bytes), r.bytesPerCall(i)/1000)
		if x.closed != "completed" && x.taskFailure != "" {
			line += "; last workflow task failure: " + x.taskFailure
		}
		lines = append(lines, line)
	}
	return lines
}

// executionsLine describes the executions in one line: LLM calls and kB
// of history per call of each.
func (r longRun) executionsLine() string {
	parts := make([]string, len(r.executions))
	for i := range r.executions {
		parts[i] = fmt.Sprintf("%d calls %.0f kB/call", r.execCalls[i], r.bytesPerCall(i)/1000)
	}
	return "executions: " + strings.Join(parts, "; ")
}

func mb(bytes int64) float64 { return float64(bytes) / 1e6 }

// TestLongRunHistoryPerCall runs 500 LLM calls with 1,000-token answers
// (streamed at once), continuing as new every 1,000 history events, and
// checks that Temporal's history does not grow with the length of the run:
// the history bytes per LLM call of the last execution that continued as
// new are at most 1.5 times the first's, and no single execution (the
// run's or a team turn's) exceeds 10 MB or 20,000 events.
func TestLongRunHistoryPerCall(t *testing.T) {
	if testing.Short() {
		t.Skip("long")
	}
	e := newEnv(t, longRunRules(1000, 0), withConfig(func(c *config.Config) { c.ContinueAsNewAfter = 1000 }))
	hid := e.createHierarchy(longRunHierarchy())
	r := e.runLong(hid, "long run", 15*time.Minute, 2*time.Minute)
	t.Log(r.summary())
	for _, line := range r.executionLines() {
		t.Log("  " + line)
	}
	if r.err != nil {
		reason := ""
		if n := len(r.executions); n > 0 {
			reason = r.executions[n-1].closed
		}
		t.Errorf("the run did not complete after %d LLM calls: %v (last execution: %s)", len(r.calls), r.err, reason)
	} else if len(r.calls) < longRunCalls {
		t.Errorf("%d LLM calls, want %d", len(r.calls), longRunCalls)
	}
	for _, x := range r.executions {
		x.each(func(h history) {
			if h.bytes > maxExecutionHistoryBytes || h.events > maxExecutionHistoryEvents {
				t.Errorf("%s/%s has %d history events, %.2f MB (limits: %d events, %.0f MB)",
					h.workflowID, h.runID, h.events, mb(h.bytes), maxExecutionHistoryEvents, mb(maxExecutionHistoryBytes))
			}
		})
	}
	last := r.lastFull()
	if last < 1 {
		t.Fatalf("%d executions continued as new; comparing the first with a later one needs 2", last+1)
	}
	first, later := r.bytesPerCall(0), r.bytesPerCall(last)
	if later > 1.5*first {
		t.Errorf("history grows with the run: %.1f kB per LLM call in execution %d (continued as new after %d calls), %.1f kB in the first (x%.2f, limit x1.5)",
			later/1000, last+1, r.execCalls[last], first/1000, later/first)
	}
}
