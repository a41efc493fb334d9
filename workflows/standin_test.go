package workflows_test

import (
	"errors"
	"strings"
	"testing"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/op-stack/executor/models"
	"github.com/op-stack/executor/workflows"
)

// standInRun runs testHierarchy with the global supervisor on model m-gs
// and the writing team's supervisor on m-ts, whose every call fails
// (retryable, so each decision uses all its 3 attempts).
func standInRun(t *testing.T, before bool) (*fakeActivities, error, models.RunResult) {
	t.Helper()
	h := testHierarchy()
	h.GlobalSupervisor.Model = "m-gs"
	h.GlobalSupervisor.Provider = "openai"
	h.Teams[1].Supervisor.Model = "m-ts"
	h.Teams[1].Supervisor.Provider = "compatible"
	h.Teams[1].Supervisor.SystemPrompt = "TS-WRITING lead writing"
	f := &fakeActivities{decisions: map[string][]models.Decision{
		"gs":   {dispatch("writing", "write it up")},
		"ts-w": {dispatch("writer", "write"), {Action: models.DecisionFinish}},
	}}
	f.failDecide = func(in models.DecideInput) error {
		if in.Supervisor.Model == "m-ts" {
			return temporal.NewApplicationError("compatible model \"m-ts\": 500 Internal Server Error", models.ErrLLMUnavailable)
		}
		return nil
	}
	env := newEnv(t, f)
	if before {
		env.OnGetVersion("supervisor-stand-in", workflow.DefaultVersion, 1).Return(workflow.DefaultVersion)
		env.OnGetVersion("baseline-i28", workflow.DefaultVersion, 1).Return(workflow.DefaultVersion) // the change asked on its own
	}
	env.ExecuteWorkflow(workflows.RunWorkflow, runInput(h))
	var res models.RunResult
	err := env.GetWorkflowError()
	if err == nil {
		if gerr := env.GetWorkflowResult(&res); gerr != nil {
			t.Fatal(gerr)
		}
	}
	return f, err, res
}

// TestSupervisorReassignedToStandIn: the writing team's supervisor's model
// fails for good (3 attempts); its routing passes to the global
// supervisor's model with the team supervisor's prompt and identity, for
// the rest of the turn, the stream says so (system.supervisor_reassigned
// with both agent_ids) and the run completes (spec 001 error recovery 3).
func TestSupervisorReassignedToStandIn(t *testing.T) {
	f, err, res := standInRun(t, false)
	if err != nil {
		t.Fatalf("run failed: %v", err)
	}
	var failed, standIn int
	for _, d := range f.decides {
		if d.Source.AgentID != "ts-w" {
			continue
		}
		switch d.Supervisor.Model {
		case "m-ts":
			failed++
		case "m-gs":
			standIn++
			if d.Supervisor.AgentID != "ts-w" || d.Supervisor.SystemPrompt != "TS-WRITING lead writing" || d.Supervisor.Provider != "openai" {
				t.Errorf("stand-in = %+v, want ts-w's prompt and identity on the global supervisor's model and provider", d.Supervisor)
			}
		}
	}
	// One failed decision (3 attempts), then the stand-in decides this
	// step and the next: the failed model is not asked again in the turn.
	if failed != 3 || standIn != 2 {
		t.Errorf("team supervisor decisions: %d on m-ts, %d on m-gs; want 3 and 2", failed, standIn)
	}
	if len(res.Teams) != 1 || res.Teams[0].Status != models.TeamCompleted || len(res.Teams[0].Workers) != 1 {
		t.Fatalf("teams = %+v", res.Teams)
	}
	var events []models.Event
	for _, e := range f.persisted {
		if e.Event.Category == models.CategorySystem && e.Event.Action == models.ActionSupervisorReassigned {
			events = append(events, e)
		}
	}
	if len(events) != 1 {
		t.Fatalf("system.supervisor_reassigned events = %+v, want 1", events)
	}
	e := events[0]
	if e.Source.AgentID != "ts-w" || e.Source.AgentType != models.AgentTypeTeamSupervisor ||
		e.Data["agent_id"] != "ts-w" || e.Data["stand_in_agent_id"] != "gs" || e.Data["team_name"] != "writing" ||
		e.Data["from_model"] != "m-ts" || e.Data["to_model"] != "m-gs" || !strings.Contains(e.Data["error"].(string), "500") {
		t.Errorf("event = %+v", e)
	}
	warned := false
	for _, w := range res.Warnings {
		warned = warned || strings.Contains(w, "routing passes to the global supervisor's model \"m-gs\"")
	}
	if !warned {
		t.Errorf("warnings = %q", res.Warnings)
	}
}

// TestSupervisorFailsBeforeStandIn: a run started before
// changeSupervisorStandIn fails its team turn with its supervisor, as its
// history says.
func TestSupervisorFailsBeforeStandIn(t *testing.T) {
	f, err, _ := standInRun(t, true)
	var appErr *temporal.ApplicationError
	if err == nil || !errors.As(err, &appErr) || appErr.Type() != models.ErrTeamFailed {
		t.Fatalf("want the run failed by its team, got %v", err)
	}
	for _, d := range f.decides {
		if d.Supervisor.Model == "m-gs" && d.Source.AgentID == "ts-w" {
			t.Errorf("a stand-in decided in a run from before the change")
		}
	}
}

// TestNoStandInOnTheSameModel: a team supervisor on the global
// supervisor's own model has no stand-in to turn to: its team fails.
func TestNoStandInOnTheSameModel(t *testing.T) {
	h := testHierarchy()
	f := &fakeActivities{decisions: map[string][]models.Decision{"gs": {dispatch("writing", "write it up")}}}
	f.failDecide = func(in models.DecideInput) error {
		if in.Source.AgentID == "ts-w" {
			return temporal.NewApplicationError("model \"m\": 500", models.ErrLLMUnavailable)
		}
		return nil
	}
	env := newEnv(t, f)
	env.ExecuteWorkflow(workflows.RunWorkflow, runInput(h))
	var appErr *temporal.ApplicationError
	if err := env.GetWorkflowError(); err == nil || !errors.As(err, &appErr) || appErr.Type() != models.ErrTeamFailed {
		t.Fatalf("want the run failed by its team, got %v", err)
	}
	for _, e := range f.persisted {
		if e.Event.Action == models.ActionSupervisorReassigned {
			t.Errorf("reassigned to the same model: %+v", e)
		}
	}
}
