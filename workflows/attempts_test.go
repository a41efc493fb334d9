package workflows_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"go.temporal.io/sdk/workflow"

	"github.com/op-stack/executor/models"
	"github.com/op-stack/executor/workflows"
)

// TestRepeatedAttemptsAreAnnounced: the writer's LLM activity streams in
// attempt 1, is replaced by attempt 2 whose own llm.retry was lost, and
// attempt 1 (which never learnt it was replaced) keeps streaming. The log
// announces attempt 2 before its text and drops attempt 1's late text; a
// run started before the change applies the batches as they come.
func TestRepeatedAttemptsAreAnnounced(t *testing.T) {
	for _, tc := range []struct {
		name string
		old  bool
		want string
	}{
		{"current", false, "llm.stream:old llm.retry llm.stream:new"},
		{"before-the-change", true, "llm.stream:old llm.stream:new llm.stream:late"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := &fakeActivities{decisions: map[string][]models.Decision{"gs": {dispatch("writing", "go")}, "ts-w": {dispatch("writer", "go")}}}
			f.respond = func(_ context.Context, in models.RespondInput) (*models.RespondResult, error) {
				if in.Agent.AgentID == "w-writer" {
					time.Sleep(300 * time.Millisecond)
				}
				return &models.RespondResult{Output: "output of " + in.Agent.Name}, nil
			}
			env := newEnv(t, f)
			if tc.old {
				env.OnGetVersion("attempt-order", workflow.DefaultVersion, 1).Return(workflow.DefaultVersion)
				env.OnGetVersion("baseline-i28", workflow.DefaultVersion, 1).Return(workflow.DefaultVersion) // the change asked on its own
			}
			const activity = "run-run-1/temporal-run/9"
			stream := func(attempt, text string) models.EventBatch {
				return models.EventBatch{Producer: activity + "/" + attempt, Seq: 1, Events: []models.Event{{RunID: "run-1",
					Source: models.Source{AgentID: "w-writer", AgentType: models.AgentTypeWorker},
					Event:  models.EventKind{Category: models.CategoryLLM, Action: models.ActionStream},
					Data:   map[string]any{"agent_id": "w-writer", "content": text, "attempt": 1}}}}
			}
			late := stream("1", "late")
			late.Seq = 2
			env.RegisterDelayedCallback(func() { env.SignalWorkflow(models.SignalEvents, stream("1", "old")) }, 10*time.Millisecond)
			env.RegisterDelayedCallback(func() { env.SignalWorkflow(models.SignalEvents, stream("2", "new")) }, 20*time.Millisecond)
			env.RegisterDelayedCallback(func() { env.SignalWorkflow(models.SignalEvents, late) }, 30*time.Millisecond)
			env.ExecuteWorkflow(workflows.RunWorkflow, runInput(testHierarchy()))
			if err := env.GetWorkflowError(); err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, e := range f.persisted {
				if e.Source.AgentID != "w-writer" || e.Event.Category != models.CategoryLLM {
					continue
				}
				s := e.Event.String()
				if c, _ := e.Data["content"].(string); c != "" {
					s += ":" + c
				}
				got = append(got, s)
			}
			if strings.Join(got, " ") != tc.want {
				t.Errorf("writer's events = %v, want %s", got, tc.want)
			}
		})
	}
}
