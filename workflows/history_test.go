package workflows_test

import (
	"context"
	"errors"
	"sort"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/workflow"

	"github.com/op-stack/executor/models"
	"github.com/op-stack/executor/workflows"
)

// continuedInput is the next execution's input of a workflow that
// continued as new.
func continuedInput(t *testing.T, err error) models.RunInput {
	t.Helper()
	var can *workflow.ContinueAsNewError
	if !errors.As(err, &can) {
		t.Fatalf("want continue-as-new, got %v", err)
	}
	var next models.RunInput
	if err := converter.GetDefaultDataConverter().FromPayloads(can.Input, &next); err != nil {
		t.Fatal(err)
	}
	return next
}

// TestContinueAsNewInsideATeamTurn: the history grows long while the
// research turn's first worker works; the turn stops before its
// supervisor's next decision, the run continues as new carrying it, and
// the next execution carries on with it (the analyst's turn sees the
// searcher's output) without dispatching the team again.
func TestContinueAsNewInsideATeamTurn(t *testing.T) {
	f := &fakeActivities{decisions: map[string][]models.Decision{
		"gs":   {dispatch("research", "find sources")},
		"ts-r": {dispatch("searcher", "search")},
	}}
	env := newEnv(t, f)
	f.respond = func(_ context.Context, in models.RespondInput) (*models.RespondResult, error) {
		env.SetContinueAsNewSuggested(true) // a long stream's signals
		return &models.RespondResult{Output: "output of " + in.Agent.Name}, nil
	}
	in := runInput(testHierarchy())
	env.ExecuteWorkflow(workflows.RunWorkflow, in)
	next := continuedInput(t, env.GetWorkflowError())
	if next.State == nil || len(next.State.Suspended) != 1 {
		t.Fatalf("carried state = %+v", next.State)
	}
	st := next.State.Suspended[0]
	if st.Output.TeamName != "research" || st.Output.Turn != 1 || st.Iteration != 1 || len(st.Outputs) != 1 || st.Outputs[0].Name != "searcher" || st.Input.Instruction != "find sources" {
		t.Fatalf("suspended turn = %+v", st)
	}

	f2 := &fakeActivities{decisions: map[string][]models.Decision{
		"ts-r": {dispatch("analyst", "analyse")},
	}}
	env2 := newEnv(t, f2)
	env2.ExecuteWorkflow(workflows.RunWorkflow, next)
	var res models.RunResult
	if err := env2.GetWorkflowResult(&res); err != nil {
		t.Fatal(err)
	}
	if len(res.Teams) != 1 || res.Teams[0].TeamName != "research" || res.Teams[0].Turn != 1 || len(res.Teams[0].Workers) != 2 || res.Teams[0].Workers[1].Name != "analyst" {
		t.Fatalf("teams = %+v", res.Teams)
	}
	if got := dispatched(f2, "dispatch.team"); len(got) != 0 {
		t.Errorf("the carried turn was dispatched again: %v", got)
	}
	// The team supervisor's decision after the resume sees the searcher.
	if d := f2.decides[0]; d.Source.AgentID != "ts-r" || strings.Join(d.Completed, ",") != "searcher" || d.Iteration != 2 {
		t.Errorf("first decision after the resume = %+v", d)
	}
}

// TestContinueAsNewInsideParallelTurns: with b and c at work together the
// history grows long; both stop between steps, the run continues as new
// carrying both, and the next execution finishes them and d.
func TestContinueAsNewInsideParallelTurns(t *testing.T) {
	scripts := func() map[string][]models.Decision {
		return map[string][]models.Decision{
			"ts-a": {dispatch("worker-a", "x")}, "ts-b": {dispatch("worker-b", "x")}, "ts-c": {dispatch("worker-c", "x")}, "ts-d": {dispatch("worker-d", "x")},
		}
	}
	f := &fakeActivities{decisions: scripts()}
	env := newEnv(t, f)
	f.respond = func(_ context.Context, in models.RespondInput) (*models.RespondResult, error) {
		switch in.Agent.AgentID {
		case "w-b":
			env.SetContinueAsNewSuggested(true)
		case "w-c":
			time.Sleep(200 * time.Millisecond) // at work when the run starts draining
		}
		return &models.RespondResult{Output: "output of " + in.Agent.Name}, nil
	}
	env.ExecuteWorkflow(workflows.RunWorkflow, runInput(diamond(models.ExecutionModeParallel)))
	next := continuedInput(t, env.GetWorkflowError())
	var names []string
	for _, s := range next.State.Suspended {
		names = append(names, s.Output.TeamName)
	}
	sort.Strings(names)
	if strings.Join(names, ",") != "b,c" {
		t.Fatalf("suspended turns = %v", names)
	}
	f2 := &fakeActivities{decisions: map[string][]models.Decision{}}
	env2 := newEnv(t, f2)
	env2.ExecuteWorkflow(workflows.RunWorkflow, next)
	var res models.RunResult
	if err := env2.GetWorkflowResult(&res); err != nil {
		t.Fatal(err)
	}
	var done []string
	for _, tm := range res.Teams {
		if tm.Status == models.TeamCompleted {
			done = append(done, tm.TeamName)
		}
	}
	sort.Strings(done)
	if strings.Join(done, ",") != "a,b,c,d" {
		t.Errorf("completed teams = %v (%+v)", done, res.Teams)
	}
	if got := strings.Join(dispatched(f2, "dispatch.team"), ","); got != "d" {
		t.Errorf("dispatched after the resume: %s", got)
	}
}

// TestContinueAsNewAfterManySignals: however long its history is allowed
// to grow, an execution that has taken continueAsNewSignals signals
// (5,000, half Temporal's limit; 50 here) continues as new at its next
// step.
func TestContinueAsNewAfterManySignals(t *testing.T) {
	f := &fakeActivities{decisions: map[string][]models.Decision{
		"gs":   {dispatch("research", "find sources")},
		"ts-r": {dispatch("searcher", "search")},
	}}
	var sent, working atomic.Bool
	f.respond = func(_ context.Context, in models.RespondInput) (*models.RespondResult, error) {
		if in.Agent.AgentID == "w-search" {
			working.Store(true)
		}
		for in.Agent.AgentID == "w-search" && !sent.Load() {
			time.Sleep(5 * time.Millisecond)
		}
		return &models.RespondResult{Output: "output of " + in.Agent.Name}, nil
	}
	defer workflows.SetContinueAsNewSignals(50)()
	env := newEnv(t, f)
	// The signals go once the worker's call is under way, so that they
	// arrive inside the team turn however the machine's load times the
	// test environment's clock; until then the callback looks again.
	var send func()
	send = func() {
		if !working.Load() {
			env.RegisterDelayedCallback(send, time.Millisecond)
			return
		}
		for i := 1; i <= 50; i++ {
			env.SignalWorkflow(models.SignalEvents, models.EventBatch{Producer: "p", Seq: i, Events: []models.Event{{RunID: "run-1",
				Event: models.EventKind{Category: "llm", Action: "stream"}, Data: map[string]any{"content": "x"}}}})
		}
		sent.Store(true)
	}
	env.RegisterDelayedCallback(send, time.Millisecond)
	in := runInput(testHierarchy())
	in.Options.ContinueAsNewAfter = 1 << 30
	env.ExecuteWorkflow(workflows.RunWorkflow, in)
	next := continuedInput(t, env.GetWorkflowError())
	if len(next.State.Suspended) != 1 || next.State.Suspended[0].Output.TeamName != "research" {
		t.Fatalf("carried state = %+v", next.State)
	}
}
