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

// TestEarlyBatchWaitsForTheOneBefore: a producer's batches reach the log
// out of their order (in a worker, a signal that one coroutine's selector
// has taken is applied only when that coroutine runs, and an event
// update's handler or another team turn can apply the producer's next
// batch first). The early batch is held until the one before it is
// applied, so both are in the log, in order; one whose predecessor never
// comes is applied by the end of the run. Before the change (batch-order)
// the late batch was dropped as a repeat: its text was lost, with no gap
// in the sequences.
func TestEarlyBatchWaitsForTheOneBefore(t *testing.T) {
	for _, tc := range []struct {
		name string
		old  bool
		want string
	}{
		{"current", false, "abcz"},
		{"before-the-change", true, "bcz"},
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
				env.OnGetVersion("batch-order", workflow.DefaultVersion, 1).Return(workflow.DefaultVersion)
				env.OnGetVersion("baseline-i28", workflow.DefaultVersion, 1).Return(workflow.DefaultVersion) // the change asked on its own
			}
			stream := func(producer string, seq int, text string) models.EventBatch {
				return models.EventBatch{Producer: producer, Seq: seq, Events: []models.Event{{RunID: "run-1",
					Source: models.Source{AgentID: "w-writer", AgentType: models.AgentTypeWorker},
					Event:  models.EventKind{Category: models.CategoryLLM, Action: models.ActionStream},
					Data:   map[string]any{"agent_id": "w-writer", "content": text, "attempt": 1}}}}
			}
			const p, q = "run-run-1/temporal-run/9/1", "run-run-1/temporal-run/10/1"
			// p's second batch arrives before its first; its third after.
			env.RegisterDelayedCallback(func() { env.SignalWorkflow(models.SignalEvents, stream(p, 2, "b")) }, 10*time.Millisecond)
			env.RegisterDelayedCallback(func() { env.SignalWorkflow(models.SignalEvents, stream(p, 1, "a")) }, 20*time.Millisecond)
			env.RegisterDelayedCallback(func() { env.SignalWorkflow(models.SignalEvents, stream(p, 3, "c")) }, 30*time.Millisecond)
			// q's first batch is lost: its second is applied all the same.
			env.RegisterDelayedCallback(func() { env.SignalWorkflow(models.SignalEvents, stream(q, 2, "z")) }, 40*time.Millisecond)
			env.ExecuteWorkflow(workflows.RunWorkflow, runInput(testHierarchy()))
			if err := env.GetWorkflowError(); err != nil {
				t.Fatal(err)
			}
			var text strings.Builder
			for i, e := range f.persisted {
				if e.Sequence != int64(i+1) {
					t.Fatalf("persisted event %d has sequence %d", i, e.Sequence)
				}
				if e.Event.Action == models.ActionStream && e.Source.AgentID == "w-writer" {
					text.WriteString(e.Data["content"].(string))
				}
			}
			if text.String() != tc.want {
				t.Fatalf("streamed text in the log = %q, want %q", text.String(), tc.want)
			}
		})
	}
}
