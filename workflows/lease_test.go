package workflows_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"

	"github.com/op-stack/executor/models"
	"github.com/op-stack/executor/workflows"
)

// leasedRespond is a Respond that takes its lease as the real one does:
// it numbers its events from the lease's From and returns them leased.
func leasedRespond(leases *[]models.EventLease, mu *sync.Mutex) func(context.Context, models.RespondInput) (*models.RespondResult, error) {
	return func(_ context.Context, in models.RespondInput) (*models.RespondResult, error) {
		res := &models.RespondResult{Output: "output of " + in.Agent.Name, Model: "m", Usage: models.Usage{TotalTokens: 10}}
		if in.Lease == nil {
			return res, nil
		}
		mu.Lock()
		*leases = append(*leases, *in.Lease)
		mu.Unlock()
		res.Events = &models.EventBatch{Producer: "respond-" + in.Agent.AgentID, Seq: 1, Leased: true}
		for i, action := range []string{models.ActionStream, models.ActionUsage} {
			res.Events.Events = append(res.Events.Events, models.Event{
				RunID: in.RunID, Sequence: in.Lease.From + int64(i), Source: in.Source,
				Event: models.EventKind{Category: models.CategoryLLM, Action: action},
				Data:  map[string]any{"agent_id": in.Source.AgentID, "content": res.Output, "attempt": 1},
			})
		}
		return res, nil
	}
}

// checkSequences fails unless events are the sequences 1, 2, 3 …
func checkSequences(t *testing.T, events []models.Event) {
	t.Helper()
	for i, e := range events {
		if e.Sequence != int64(i+1) {
			t.Fatalf("event %d has sequence %d: the log has a gap or a repeat", i+1, e.Sequence)
		}
	}
}

// TestEventLease: each LLM call of a sequential run gets the run's next
// sequences; the workflow appends what it returned as numbered, numbers
// its own events after them, and stores only its own (the activity stored
// the leased ones).
func TestEventLease(t *testing.T) {
	f := &fakeActivities{decisions: map[string][]models.Decision{"gs": {dispatch("writing", "go")}, "ts-w": {dispatch("writer", "go")}}}
	var mu sync.Mutex
	var leases []models.EventLease
	f.respond = leasedRespond(&leases, &mu)
	env := newEnv(t, f)
	env.ExecuteWorkflow(workflows.RunWorkflow, runInput(testHierarchy()))
	mustComplete(t, env)
	v, err := env.QueryWorkflow(models.QueryEvents, models.EventQuery{})
	if err != nil {
		t.Fatal(err)
	}
	var page models.EventPage
	if err := v.Get(&page); err != nil {
		t.Fatal(err)
	}
	checkSequences(t, page.Events)
	if page.LeaseFrom != 0 {
		t.Errorf("a lease is still out after the run: from %d", page.LeaseFrom)
	}
	if len(leases) != 2 {
		t.Fatalf("%d leased calls, want 2 (the writer and the final answer)", len(leases))
	}
	leased := map[int64]bool{}
	for _, l := range leases {
		e := page.Events[l.From-1]
		if e.Event.Action != models.ActionStream || e.Data["content"] == "" {
			t.Errorf("event %d is %v, want the leased call's llm.stream", l.From, e.Event)
		}
		leased[l.From], leased[l.From+1] = true, true
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	stored := map[int64]bool{}
	for _, e := range f.persisted {
		if leased[e.Sequence] {
			t.Errorf("the workflow stored leased event %d again", e.Sequence)
		}
		stored[e.Sequence] = true
	}
	for _, e := range page.Events {
		if !stored[e.Sequence] && !leased[e.Sequence] {
			// Carried by a lease, the activity stored it.
			carried := false
			for _, l := range leases {
				for _, c := range l.Events {
					carried = carried || c.Sequence == e.Sequence
				}
			}
			if !carried {
				t.Errorf("event %d (%v) was never stored", e.Sequence, e.Event)
			}
		}
	}
}

// TestEventLeaseTakenBack: when the leased call fails, the workflow takes
// the lease back from the store (ReleaseEventLease), appends what the
// attempts stored under it, and numbers the run's failure after it.
func TestEventLeaseTakenBack(t *testing.T) {
	f := &fakeActivities{decisions: map[string][]models.Decision{"gs": {dispatch("writing", "go")}, "ts-w": {dispatch("writer", "go")}}}
	var from int64
	f.respond = func(_ context.Context, in models.RespondInput) (*models.RespondResult, error) {
		if in.Lease != nil {
			from = in.Lease.From
		}
		return nil, temporal.NewNonRetryableApplicationError("HTTP 401: invalid key", models.ErrLLMRejected, nil)
	}
	env := newEnv(t, f)
	var released []models.ReleaseLeaseInput
	env.OnActivity(a.ReleaseEventLease, mock.Anything, mock.Anything).Return(func(_ context.Context, in models.ReleaseLeaseInput) ([]models.Event, error) {
		released = append(released, in)
		return []models.Event{{RunID: in.RunID, Sequence: in.Lease.From, Event: models.EventKind{Category: models.CategoryLLM, Action: models.ActionStream}, Data: map[string]any{"content": "partial"}}}, nil
	})
	env.ExecuteWorkflow(workflows.RunWorkflow, runInput(testHierarchy()))
	if env.GetWorkflowError() == nil {
		t.Fatal("run succeeded")
	}
	if len(released) != 1 || from == 0 || released[0].Lease.From != from {
		t.Fatalf("lease from %d, taken back %+v", from, released)
	}
	v, err := env.QueryWorkflow(models.QueryEvents, models.EventQuery{})
	if err != nil {
		t.Fatal(err)
	}
	var page models.EventPage
	if err := v.Get(&page); err != nil {
		t.Fatal(err)
	}
	checkSequences(t, page.Events)
	if got := page.Events[from-1]; got.Data["content"] != "partial" {
		t.Errorf("event %d is %v %v, want the failed call's stored text", from, got.Event, got.Data)
	}
	if last := page.Events[len(page.Events)-1]; last.Event.Action != models.ActionFailed || last.Sequence <= from {
		t.Errorf("last event %d %v, want lifecycle.failed after the lease", last.Sequence, last.Event)
	}
}

// TestEventLeaseDefersUpdates: an event batch that reaches the run by
// update while an activity holds the lease (a tool's, say) is taken but
// not numbered (its answer says first 0, so the activity announces it
// instead of pushing); it is numbered after the leased events, in order.
func TestEventLeaseDefersUpdates(t *testing.T) {
	f := &fakeActivities{decisions: map[string][]models.Decision{"gs": {dispatch("writing", "go")}, "ts-w": {dispatch("writer", "go")}}}
	var mu sync.Mutex
	var leases []models.EventLease
	leased := leasedRespond(&leases, &mu)
	f.respond = func(ctx context.Context, in models.RespondInput) (*models.RespondResult, error) {
		if in.Agent.AgentID == "w-writer" {
			time.Sleep(300 * time.Millisecond)
		}
		return leased(ctx, in)
	}
	env := newEnv(t, f)
	var answer models.EventDelivery
	answered := false
	env.RegisterDelayedCallback(func() {
		env.UpdateWorkflow(models.UpdateEvents, "u1", &testsuite.TestUpdateCallback{
			OnAccept: func() {}, OnReject: func(err error) { t.Errorf("update refused: %v", err) },
			OnComplete: func(v any, err error) {
				if err == nil {
					answer, answered = v.(models.EventDelivery), true
				}
			},
		}, models.EventBatch{Producer: "tool/1", Seq: 1, Events: []models.Event{{RunID: "run-1",
			Event: models.EventKind{Category: models.CategoryLLM, Action: models.ActionToolResult}, Data: map[string]any{"content": "t"}}}})
	}, 100*time.Millisecond)
	env.ExecuteWorkflow(workflows.RunWorkflow, runInput(testHierarchy()))
	mustComplete(t, env)
	if !answered || answer.First != 0 {
		t.Fatalf("update during the lease answered %+v (answered %v), want first 0", answer, answered)
	}
	v, err := env.QueryWorkflow(models.QueryEvents, models.EventQuery{})
	if err != nil {
		t.Fatal(err)
	}
	var page models.EventPage
	if err := v.Get(&page); err != nil {
		t.Fatal(err)
	}
	checkSequences(t, page.Events)
	var writer models.EventLease
	for _, l := range leases {
		if page.Events[l.From-1].Source.AgentID == "w-writer" {
			writer = l
		}
	}
	if writer.From == 0 {
		t.Fatal("the writer's call had no lease")
	}
	// The writer's leased events are From and From+1; the tool's result
	// comes right after them.
	if e := page.Events[writer.From+1]; e.Event.Action != models.ActionToolResult {
		t.Errorf("event %d after the writer's lease is %v, want the deferred llm.tool_result", e.Sequence, e.Event)
	}
}
