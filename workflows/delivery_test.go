package workflows_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/op-stack/executor/models"
	"github.com/op-stack/executor/workflows"
)

// TestEventUpdates: event batches sent as updates (models.UpdateEvents)
// land once in the log, in order with signalled ones; each answer gives
// the batch's first sequence and the events the workflow appended since
// the last answer, so that the pushed events join up; a batch applied
// already is answered with First 0; past the per-execution limit the
// validator refuses the update (the activity then signals).
func TestEventUpdates(t *testing.T) {
	defer workflows.SetMaxEventUpdates(3)()
	f := &fakeActivities{decisions: map[string][]models.Decision{"gs": {dispatch("writing", "go")}, "ts-w": {dispatch("writer", "go")}}}
	f.respond = func(_ context.Context, in models.RespondInput) (*models.RespondResult, error) {
		if in.Agent.AgentID == "w-writer" {
			time.Sleep(300 * time.Millisecond)
		}
		return &models.RespondResult{Output: "output of " + in.Agent.Name}, nil
	}
	env := newEnv(t, f)
	// The updates come while the writer's call is under way: without an
	// event lease, as for a run's parallel teams (a lease defers them:
	// TestEventLeaseDefersUpdates).
	env.OnGetVersion("event-lease", workflow.DefaultVersion, 1).Return(workflow.DefaultVersion)
	env.OnGetVersion("baseline-i28", workflow.DefaultVersion, 1).Return(workflow.DefaultVersion) // the change asked on its own
	stream := func(producer string, seq int, text string) models.EventBatch {
		return models.EventBatch{Producer: producer, Seq: seq, Events: []models.Event{{RunID: "run-1",
			Event: models.EventKind{Category: models.CategoryLLM, Action: models.ActionStream}, Data: map[string]any{"content": text}}}}
	}
	type answer struct {
		d        models.EventDelivery
		rejected string
	}
	answers := map[string]*answer{}
	send := func(id string, b models.EventBatch) {
		a := &answer{}
		answers[id] = a
		env.UpdateWorkflow(models.UpdateEvents, id, &testsuite.TestUpdateCallback{
			OnAccept: func() {},
			OnReject: func(err error) { a.rejected = err.Error() },
			OnComplete: func(v any, err error) {
				if err != nil {
					t.Errorf("update %s: %v", id, err)
					return
				}
				a.d = v.(models.EventDelivery)
			},
		}, b)
	}
	// p#1 is signalled (its update "failed"); p#2 comes by update right
	// after: the signal is applied first.
	env.RegisterDelayedCallback(func() {
		env.SignalWorkflow(models.SignalEvents, stream("p", 1, "a"))
		send("u2", stream("p", 2, "b"))
	}, 10*time.Millisecond)
	env.RegisterDelayedCallback(func() { send("u3", stream("p", 3, "c")) }, 20*time.Millisecond)
	env.RegisterDelayedCallback(func() { send("u3-again", stream("p", 3, "c")) }, 30*time.Millisecond)
	env.RegisterDelayedCallback(func() { send("u4", stream("p", 4, "d")) }, 40*time.Millisecond)
	env.ExecuteWorkflow(workflows.RunWorkflow, runInput(testHierarchy()))
	if err := env.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}

	var kinds []string
	var text strings.Builder
	bySeq := map[int64]models.Event{}
	for i, e := range f.persisted {
		if e.Sequence != int64(i+1) {
			t.Fatalf("persisted event %d has sequence %d", i, e.Sequence)
		}
		bySeq[e.Sequence] = e
		kinds = append(kinds, e.Event.String())
		if e.Event.Action == models.ActionStream {
			text.WriteString(e.Data["content"].(string))
		}
	}
	if text.String() != "abc" {
		t.Fatalf("streamed text in the log = %q, want abc (each batch once, in order; d refused); log %v", text.String(), kinds)
	}
	u2, u3 := answers["u2"].d, answers["u3"].d
	if u2.First == 0 || bySeq[u2.First].Data["content"] != "b" {
		t.Fatalf("u2 answered first %d, which holds %v", u2.First, bySeq[u2.First].Data)
	}
	// u2's Before is everything from the start of the log up to b: the
	// workflow's own events and the signalled a.
	if n := len(u2.Before); n == 0 || u2.Before[0].Sequence != 1 || u2.Before[n-1].Sequence != u2.First-1 || u2.Before[n-1].Data["content"] != "a" {
		t.Fatalf("u2's before = %+v, want events 1..%d ending with a", u2.Before, u2.First-1)
	}
	// u3's Before is what the workflow appended between b and c.
	if bySeq[u3.First].Data["content"] != "c" || u3.First <= u2.First {
		t.Fatalf("u3 answered first %d (after u2's %d), which holds %v", u3.First, u2.First, bySeq[u3.First].Data)
	}
	if got, want := len(u3.Before), int(u3.First-u2.First-1); got != want {
		t.Fatalf("u3's before has %d events, want the %d between b and c", got, want)
	}
	for i, e := range u3.Before {
		if e.Sequence != u2.First+1+int64(i) || e.Event != bySeq[e.Sequence].Event {
			t.Fatalf("u3's before[%d] = %d %s; the log has %s there", i, e.Sequence, e.Event, bySeq[e.Sequence].Event)
		}
	}
	if again := answers["u3-again"]; again.rejected != "" || again.d.First != 0 {
		t.Fatalf("a repeated batch: %+v, want accepted with first 0", again)
	}
	if r := answers["u4"].rejected; !strings.Contains(r, "signal the batch") {
		t.Fatalf("the update past the limit: rejected %q, want the limit's refusal", r)
	}
}
