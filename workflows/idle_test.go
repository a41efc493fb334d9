package workflows_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"go.temporal.io/sdk/workflow"

	"github.com/op-stack/executor/models"
	"github.com/op-stack/executor/workflows"
)

// pausedStore runs testHierarchy, pauses it while the writer's LLM call is
// in flight and lets that call end during the pause, returning the events
// it streamed (an llm.stream and an llm.usage) in its result. An hour into
// the pause it reads the run's log (the events query) and what the store
// holds, then resumes. It returns the last sequence of each then, and
// whether the store held the writer's llm.usage.
func pausedStore(t *testing.T, before bool) (logged, stored int64, usageStored bool) {
	t.Helper()
	f := &fakeActivities{decisions: map[string][]models.Decision{"gs": {dispatch("writing", "go")}, "ts-w": {dispatch("writer", "go")}}}
	writer := &slowWriter{}
	writer.install(f)
	slow := f.respond
	f.respond = func(ctx context.Context, in models.RespondInput) (*models.RespondResult, error) {
		res, err := slow(ctx, in)
		if err == nil && in.Agent.AgentID == "w-writer" && in.ReturnEvents {
			res.Events = &models.EventBatch{Producer: "respond-writer", Seq: 1, Events: []models.Event{
				{RunID: in.RunID, Source: in.Source, Event: models.EventKind{Category: models.CategoryLLM, Action: models.ActionStream},
					Data: map[string]any{"agent_id": "w-writer", "content": res.Output, "attempt": 1}},
				{RunID: in.RunID, Source: in.Source, Event: models.EventKind{Category: models.CategoryLLM, Action: models.ActionUsage},
					Data: map[string]any{"agent_id": "w-writer", "model": "m", "total_tokens": 10}},
			}}
		}
		return res, err
	}
	env := newEnv(t, f)
	if before {
		env.OnGetVersion("idle-flush", workflow.DefaultVersion, 1).Return(workflow.DefaultVersion)
		env.OnGetVersion("baseline-i28", workflow.DefaultVersion, 1).Return(workflow.DefaultVersion) // the change asked on its own
	}
	var answers []string
	writer.whenWriterStarted(env, func() {
		update(env, models.UpdatePause, &answers)
		writer.paused.Store(true)
	})
	env.RegisterDelayedCallback(func() {
		v, err := env.QueryWorkflow(models.QueryEvents, models.EventQuery{})
		if err != nil {
			t.Errorf("events query: %v", err)
		} else {
			var page models.EventPage
			if err := v.Get(&page); err != nil {
				t.Error(err)
			}
			logged = page.LastSequence
		}
		f.mu.Lock()
		for _, e := range f.persisted {
			stored = max(stored, e.Sequence)
			if e.Source.AgentID == "w-writer" && e.Event.Action == models.ActionUsage {
				usageStored = true
			}
		}
		f.mu.Unlock()
		update(env, models.UpdateResume, &answers)
	}, time.Hour)
	env.ExecuteWorkflow(workflows.RunWorkflow, runInput(testHierarchy()))
	mustComplete(t, env)
	return logged, stored, usageStored
}

// TestPausedRunStoresEventsAtOnce: events a paused run appends (here the
// end of the writer's call, in flight when the pause came) are stored at
// once, not when 100 have gathered: an hour into the pause the store holds
// the whole log (issue 23, item 4).
func TestPausedRunStoresEventsAtOnce(t *testing.T) {
	logged, stored, usage := pausedStore(t, false)
	if logged == 0 || stored != logged || !usage {
		t.Errorf("an hour into the pause: log up to %d, store up to %d (writer's llm.usage stored: %v); want the whole log stored", logged, stored, usage)
	}
}

// TestPausedRunBeforeIdleFlush: a run started before changeIdleFlush keeps
// storing in batches, as its history says: the writer's last events wait
// for the resume.
func TestPausedRunBeforeIdleFlush(t *testing.T) {
	logged, stored, usage := pausedStore(t, true)
	if stored >= logged || usage {
		t.Errorf("an hour into the pause: log up to %d, store up to %d (writer's llm.usage stored: %v); want the writer's end not yet stored", logged, stored, usage)
	}
}

// TestApprovalWaitStoresEventsAtOnce: in parallel mode the writer's turn
// waits for approval while the research team's searcher is still at work;
// what the searcher appends then is stored at once: an hour into the wait
// the store holds the whole log.
func TestApprovalWaitStoresEventsAtOnce(t *testing.T) {
	h := approvalHierarchy(func(w *models.Agent) { w.RequiresApproval = true })
	h.ExecutionMode, h.ExecutionOrder = models.ExecutionModeParallel, []string{"research", "writing"}
	f := &fakeActivities{decisions: map[string][]models.Decision{"ts-r": {dispatch("searcher", "search")}, "ts-w": {dispatch("writer", "write it")}}}
	var gateOpen atomic.Bool
	f.respond = func(_ context.Context, in models.RespondInput) (*models.RespondResult, error) {
		res := &models.RespondResult{Output: "output of " + in.Agent.Name, Model: "m", Usage: models.Usage{TotalTokens: 10}}
		if in.Agent.AgentID == "w-search" {
			for !gateOpen.Load() {
				time.Sleep(5 * time.Millisecond)
			}
			res.Events = &models.EventBatch{Producer: "respond-searcher", Seq: 1, Events: []models.Event{
				{RunID: in.RunID, Source: in.Source, Event: models.EventKind{Category: models.CategoryLLM, Action: models.ActionUsage},
					Data: map[string]any{"agent_id": "w-search", "model": "m", "total_tokens": 10}},
			}}
		}
		return res, nil
	}
	env := newEnv(t, f)
	var check func()
	check = func() {
		if len(approvals(t, env)) == 0 {
			env.RegisterDelayedCallback(check, time.Millisecond)
			return
		}
		gateOpen.Store(true)
	}
	env.RegisterDelayedCallback(check, time.Millisecond)
	var logged, stored int64
	usage := false
	var answers []decision
	env.RegisterDelayedCallback(func() {
		v, err := env.QueryWorkflow(models.QueryEvents, models.EventQuery{})
		if err != nil {
			t.Fatalf("events query: %v", err)
		}
		var page models.EventPage
		if err := v.Get(&page); err != nil {
			t.Fatal(err)
		}
		logged = page.LastSequence
		f.mu.Lock()
		for _, e := range f.persisted {
			stored = max(stored, e.Sequence)
			usage = usage || (e.Source.AgentID == "w-search" && e.Event.Action == models.ActionUsage)
		}
		f.mu.Unlock()
		open := approvals(t, env)
		if len(open) != 1 {
			t.Fatalf("open approvals = %+v", open)
		}
		resolve(env, models.UpdateApprove, models.ApprovalDecision{ApprovalID: open[0].ApprovalID, By: "test"}, &answers)
	}, time.Hour)
	env.ExecuteWorkflow(workflows.RunWorkflow, runInput(h))
	mustComplete(t, env)
	if logged == 0 || stored != logged || !usage {
		t.Errorf("an hour into the approval wait: log up to %d, store up to %d (searcher's llm.usage stored: %v); want the whole log stored", logged, stored, usage)
	}
}
