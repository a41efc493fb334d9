package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"

	"github.com/op-stack/executor/config"
	"github.com/op-stack/executor/llm/llmfake"
	"github.com/op-stack/executor/models"
)

// Temporal's per-execution limits.
const (
	maxSignalsPerExecution = 10000
	maxUpdatesPerExecution = 2000
	maxEventsPerExecution  = 51200
)

// TestHistoryLimitsWorstCase streams long answers in one-character chunks,
// flushed every 2 ms (so each call is a signal every few milliseconds),
// from two teams at work at once, one of whose workers delegates to a
// sub-agent that delegates again. Together the two team turns send the run
// more than Temporal's 10,000 signals: without continue-as-new inside a
// team turn (CONTINUE_AS_NEW_AFTER, lowered here, was only looked at
// between turns) one execution would take them all. The run completes;
// every execution of it, and of its sub-agents, stays under the limits.
func TestHistoryLimitsWorstCase(t *testing.T) {
	if testing.Short() {
		t.Skip("long")
	}
	// 2,500 one-character chunks a call, 1 ms apart. A call's signals are
	// paced after its first 300 (activities' signalGap), so the test needs
	// many calls: 12 workers a team, about 13,000–15,000 signals in all on
	// an idle machine, enough that a loaded one still passes 10,000.
	long := strings.Repeat("x", 2500)
	const workersPerTeam = 12
	stream := []llmfake.Response{{Content: long, ChunkSize: 1, TokenDelay: time.Millisecond}}
	rules := []llmfake.Rule{
		{Name: "outer after", SystemContains: "SUB-OUTER", HasToolResult: true, Responses: stream},
		{Name: "outer first", SystemContains: "SUB-OUTER", Responses: []llmfake.Response{{ToolCalls: []llmfake.ToolCall{delegateCall("inner", "go deeper")}}}},
		{Name: "inner", SystemContains: "SUB-INNER", Responses: stream},
		{Name: "delegating worker after", SystemContains: "W-LEFT-1", HasToolResult: true, Responses: stream},
		{Name: "delegating worker first", SystemContains: "W-LEFT-1", Responses: []llmfake.Response{{ToolCalls: []llmfake.ToolCall{delegateCall("outer", "dig")}}}},
		{Name: "final", SystemContains: "GS-WORST", Responses: contentResponses("worst case done")},
	}
	var teams []any
	for _, side := range []string{"LEFT", "RIGHT"} {
		var workers []any
		var decisions []string
		for i := 1; i <= workersPerTeam; i++ {
			name := fmt.Sprintf("%s-%d", strings.ToLower(side), i)
			w := map[string]any{"agent_id": "w-" + name, "name": name, "system_prompt": fmt.Sprintf("W-%s-%d You write at length.", side, i)}
			if side == "LEFT" && i == 1 {
				w["sub_agents"] = []string{"outer"}
			}
			workers = append(workers, w)
			decisions = append(decisions, decision("dispatch", name, "write"))
			rules = append(rules, llmfake.Rule{Name: "worker " + name, SystemContains: fmt.Sprintf("W-%s-%d ", side, i), Responses: stream})
		}
		rules = append(rules, llmfake.Rule{Name: "supervisor " + side, SystemContains: "TS-" + side, Responses: contentResponses(decisions...)})
		teams = append(teams, map[string]any{
			"name": strings.ToLower(side), "prevent_duplicate": true, "workers": workers,
			"team_supervisor_agent": map[string]any{"agent_id": "ts-" + strings.ToLower(side), "system_prompt": "TS-" + side},
		})
	}
	e := newEnv(t, rules, withConfig(func(c *config.Config) {
		c.ContinueAsNewAfter = 1000
		c.EventFlushInterval = 2 * time.Millisecond
	}))
	e.mustPost("/subagents/create", map[string]any{"name": "inner", "system_prompt": "SUB-INNER You dig deeper."}, nil)
	e.mustPost("/subagents/create", map[string]any{"name": "outer", "system_prompt": "SUB-OUTER You dig.", "sub_agents": []string{"inner"}}, nil)
	hid := e.createHierarchy(map[string]any{
		"name": "worst", "execution_mode": "parallel", "max_parallel_teams": 2, "max_iterations": 2 * workersPerTeam,
		"global_supervisor_agent": map[string]any{"agent_id": "gs-worst", "system_prompt": "GS-WORST"},
		"teams":                   teams,
	})
	start := time.Now()
	id := e.startRun(hid, "write at length")
	ctx := context.Background()
	if err := e.temporal.GetWorkflow(ctx, models.RunWorkflowID(id), "").Get(ctx, nil); err != nil {
		t.Fatalf("%v\n%s", err, lastEvents(t, e, models.RunWorkflowID(id)))
	}
	elapsed := time.Since(start)
	v := e.waitRun(id, 30*time.Second)
	if v.Status != models.RunCompleted || len(v.Result.Teams) != 2 {
		t.Fatalf("run ended %s (%s), teams %+v", v.Status, v.Error, v.Result.Teams)
	}
	for _, tm := range v.Result.Teams {
		if tm.Status != models.TeamCompleted || len(tm.Workers) != workersPerTeam {
			t.Errorf("team %s: %s with %d workers", tm.TeamName, tm.Status, len(tm.Workers))
		}
	}

	// Nothing was lost across the executions: the stored log is gap-free
	// and holds every worker's whole answer.
	text := map[string]int{}
	for i, ev := range e.storedEvents(id) {
		if ev.Sequence != int64(i+1) {
			t.Fatalf("stored event %d has sequence %d", i, ev.Sequence)
		}
		if ev.Event.String() == "llm.stream" {
			text[ev.Source.AgentID] += len(ev.Data["content"].(string))
		}
	}
	for _, side := range []string{"left", "right"} {
		for i := 1; i <= workersPerTeam; i++ {
			if got := text[fmt.Sprintf("w-%s-%d", side, i)]; got != len(long) {
				t.Errorf("worker %s-%d streamed %d characters, want %d", side, i, got, len(long))
			}
		}
	}

	// Every execution: the run's continue-as-new chain and the sub-agents.
	var resp []execution
	waitFor(t, 10*time.Second, "visibility to list the executions", func() bool {
		resp = e.executions(fmt.Sprintf("WorkflowId STARTS_WITH 'run-%s'", id))
		return len(resp) > 0 && resp[0].status != enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING
	})
	// Event batches come as updates (models.UpdateEvents) and, past an
	// execution's update budget or when an update fails, as signals: both
	// count towards the load the test is about, each against its own limit.
	runs, subs, signals, updates, most, mostUpdates := 0, 0, 0, 0, 0, 0
	for _, x := range resp {
		events, sigs, ups := e.countHistory(x.workflowID, x.runID)
		switch x.typ {
		case models.RunWorkflowName:
			runs++
			signals += sigs
			updates += ups
			most = max(most, sigs)
			mostUpdates = max(mostUpdates, ups)
		case models.SubAgentWorkflowName:
			subs++
		}
		if sigs >= maxSignalsPerExecution || ups >= maxUpdatesPerExecution || events >= maxEventsPerExecution {
			t.Errorf("%s/%s: %d events, %d signals, %d updates", x.workflowID, x.runID, events, sigs, ups)
		}
	}
	t.Logf("%d signals and %d event updates in all in %v, over %d run executions (at most %d signals and %d updates in one); %d sub-agent executions",
		signals, updates, elapsed.Round(time.Millisecond), runs, most, mostUpdates, subs)
	// Without continue-as-new inside team turns one execution would take
	// them all: past its 10,000 signals, or its 2,000 updates, or both in
	// part.
	if float64(signals)/maxSignalsPerExecution+float64(updates)/maxUpdatesPerExecution <= 1 {
		t.Errorf("only %d signals and %d updates in all: the test does not reach the limits it is about", signals, updates)
	}
	if subs != 2 {
		t.Errorf("%d sub-agent executions, want 2 (outer, inner)", subs)
	}
	// Two team turns, and more executions than the turns alone would make:
	// the run continued as new inside them.
	if runs < 3 {
		t.Errorf("%d run executions: the run did not continue as new inside its team turns", runs)
	}
}

type execution struct {
	workflowID, runID, typ string
	status                 enumspb.WorkflowExecutionStatus
}

// executions lists the workflow executions a visibility query matches,
// newest first.
func (e *testEnv) executions(query string) []execution {
	e.t.Helper()
	var out []execution
	req := listRequest(query)
	for {
		resp, err := e.temporal.ListWorkflow(context.Background(), req)
		if err != nil {
			e.t.Fatal(err)
		}
		for _, info := range resp.Executions {
			out = append(out, execution{
				workflowID: info.GetExecution().GetWorkflowId(), runID: info.GetExecution().GetRunId(),
				typ: info.GetType().GetName(), status: info.GetStatus(),
			})
		}
		if len(resp.NextPageToken) == 0 {
			return out
		}
		req.NextPageToken = resp.NextPageToken
	}
}

// countHistory counts an execution's history events and the signals among
// them.
func (e *testEnv) countHistory(workflowID, runID string) (events, signals, updates int) {
	e.t.Helper()
	it := e.temporal.GetWorkflowHistory(context.Background(), workflowID, runID, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		ev, err := it.Next()
		if err != nil {
			e.t.Fatal(err)
		}
		events++
		switch ev.GetEventType() {
		case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED:
			signals++
		case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED:
			updates++
		}
	}
	return events, signals, updates
}
