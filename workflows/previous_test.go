package workflows_test

import (
	"testing"

	"github.com/op-stack/executor/models"
	"github.com/op-stack/executor/workflows"
)

// TestFollowUpRunSeesThePreviousRun: a run with RunInput.Previous gives
// its global supervisor (decisions and final answer) and its team
// supervisors the previous run's context first; workers do not get it,
// and lifecycle.started names the previous run and the thread.
func TestFollowUpRunSeesThePreviousRun(t *testing.T) {
	f := &fakeActivities{decisions: map[string][]models.Decision{
		"gs":   {dispatch("writing", "revise it")},
		"ts-w": {dispatch("writer", "revise")},
	}}
	env := newEnv(t, f)
	in := runInput(testHierarchy())
	in.Previous = &models.PreviousRun{RunID: "run-0", ThreadID: "run-0", Status: models.RunCompleted, Context: models.PreviousRunContext(models.PreviousRunSource{
		RunID: "run-0", Status: models.RunCompleted, Task: "write a draft", FinalAnswer: "THE DRAFT",
		Teams: []models.TeamOutput{{TeamName: "writing", Status: models.TeamCompleted, Workers: []models.WorkerOutput{{Name: "writer", Output: "draft text"}}}},
	}, in.Options)}
	env.ExecuteWorkflow(workflows.RunWorkflow, in)
	if !env.IsWorkflowCompleted() || env.GetWorkflowError() != nil {
		t.Fatalf("workflow: completed %v, error %v", env.IsWorkflowCompleted(), env.GetWorkflowError())
	}
	hasPrevious := func(items []models.ContextItem) bool {
		return len(items) >= 3 && items[0].From == models.PreviousTaskLabel && items[0].Content == "write a draft" &&
			items[1].From == "previous run: team writing" && items[2].From == models.PreviousAnswerLabel && items[2].Refs[0].Text == "THE DRAFT"
	}
	var gs, ts int
	for _, d := range f.decides {
		switch d.Source.AgentID {
		case "gs":
			gs++
		case "ts-w":
			ts++
		default:
			continue
		}
		if !hasPrevious(d.Context) {
			t.Errorf("%s's decision context = %+v, want the previous run first", d.Source.AgentID, d.Context)
		}
	}
	if gs != 2 || ts != 2 {
		t.Errorf("decisions: %d global, %d team", gs, ts)
	}
	for _, r := range f.responds {
		switch r.Purpose {
		case models.PurposeFinalAnswer:
			if !hasPrevious(r.Context) || len(r.Context) != 4 || r.Context[3].From != "team writing" {
				t.Errorf("final answer context = %+v", r.Context)
			}
		default:
			for _, c := range r.Context {
				if c.From == models.PreviousTaskLabel {
					t.Errorf("worker %s sees the previous run: %+v", r.Agent.Name, r.Context)
				}
			}
		}
	}
	var started bool
	for _, e := range f.persisted {
		if e.Event.Category == models.CategoryLifecycle && e.Event.Action == models.ActionStarted {
			started = e.Data["previous_run_id"] == "run-0" && e.Data["thread_id"] == "run-0"
		}
	}
	if !started {
		t.Error("lifecycle.started does not name the previous run and the thread")
	}
}
