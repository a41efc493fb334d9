package workflows_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"

	"github.com/op-stack/executor/models"
	"github.com/op-stack/executor/workflows"
)

// queuedRun runs testHierarchy started queued: its admission check
// answers "not yet" until admitAt, when the admit signal is sent (with
// signal) or only the poll finds it admitted (without). cancelAt > 0
// cancels the run then instead. It returns the fake activities, how many
// checks ran, and whether the store held lifecycle.queued before the
// admission.
func queuedRun(t *testing.T, signal bool, admitAt, cancelAt time.Duration) (*fakeActivities, int64, bool) {
	t.Helper()
	f := &fakeActivities{decisions: map[string][]models.Decision{"gs": {dispatch("writing", "go")}, "ts-w": {dispatch("writer", "go")}}}
	env := newEnv(t, f)
	var admitted atomic.Bool
	var checks atomic.Int64
	env.OnActivity(models.ActivityCheckAdmission, mock.Anything, mock.Anything).Return(func(_ context.Context, in models.AdmissionInput) (models.AdmissionResult, error) {
		checks.Add(1)
		if !admitted.Load() {
			return models.AdmissionResult{}, nil
		}
		return models.AdmissionResult{Admitted: true, Previous: &models.PreviousRun{RunID: "prev-1", ThreadID: "prev-1", Status: models.RunCompleted, Context: []models.ContextItem{{From: "previous run", Content: "PREVIOUS CONTEXT"}}}}, nil
	})
	storedQueued := false
	if cancelAt > 0 {
		env.RegisterDelayedCallback(env.CancelWorkflow, cancelAt)
	} else {
		env.RegisterDelayedCallback(func() {
			f.mu.Lock()
			for _, e := range f.persisted {
				storedQueued = storedQueued || (e.Event.Category == models.CategoryLifecycle && e.Event.Action == models.ActionQueued)
			}
			f.mu.Unlock()
			admitted.Store(true)
			if signal {
				env.SignalWorkflow(models.SignalAdmit, nil)
			}
		}, admitAt)
	}
	in := runInput(testHierarchy())
	in.Queue = &models.QueueInfo{Reason: models.QueueReasonLimit, Position: 3}
	env.ExecuteWorkflow(workflows.RunWorkflow, in)
	if cancelAt == 0 {
		mustComplete(t, env)
	}
	return f, checks.Load(), storedQueued
}

// TestQueuedRunWaitsForAdmission: a run started queued announces
// lifecycle.queued first (stored at once: the run is idle), does nothing
// until admitted, then starts as any run, following the previous run the
// admission check names; an admit signal wakes it at once, without one
// its poll every 30 s finds it admitted.
func TestQueuedRunWaitsForAdmission(t *testing.T) {
	for _, signal := range []bool{true, false} {
		f, checks, storedQueued := queuedRun(t, signal, 10*time.Minute+time.Second, 0)
		if !storedQueued {
			t.Errorf("signal %v: lifecycle.queued was not stored while the run waited", signal)
		}
		var actions []string
		for _, e := range f.persisted {
			if e.Event.Category == models.CategoryLifecycle {
				actions = append(actions, e.Event.Action)
			}
		}
		if len(actions) < 3 || actions[0] != models.ActionQueued || actions[1] != models.ActionStarted || actions[len(actions)-1] != models.ActionCompleted {
			t.Fatalf("signal %v: lifecycle events %v, want queued, started, …, completed", signal, actions)
		}
		first := f.persisted[0]
		if first.Data["position"] != float64(3) && first.Data["position"] != 3 || first.Data["reason"] != models.QueueReasonLimit {
			t.Errorf("lifecycle.queued data = %v", first.Data)
		}
		for _, e := range f.persisted {
			if e.Event.Action == models.ActionStarted && e.Data["previous_run_id"] != "prev-1" {
				t.Errorf("lifecycle.started data = %v, want the admitted previous run", e.Data)
			}
		}
		// One check at once, one per 30 s poll over ten minutes (and one
		// for the signal).
		if checks < 20 || checks > 23 {
			t.Errorf("signal %v: %d admission checks over ten minutes, want one at start and one per 30 s", signal, checks)
		}
		if !contextShows(f, "PREVIOUS CONTEXT") {
			t.Errorf("signal %v: the supervisors did not see the previous run's context", signal)
		}
	}
}

func contextShows(f *fakeActivities, s string) bool {
	for _, d := range f.decides {
		for _, c := range d.Context {
			if strings.Contains(c.Content, s) {
				return true
			}
		}
	}
	return false
}

// TestQueuedRunCancelled: a queued run cancelled while it waits ends
// cancelled, without starting.
func TestQueuedRunCancelled(t *testing.T) {
	f, _, _ := queuedRun(t, false, 0, 5*time.Minute)
	last := f.statuses[len(f.statuses)-1]
	if last.Status != models.RunCancelled {
		t.Fatalf("statuses %+v, want cancelled last", f.statuses)
	}
	for _, e := range f.persisted {
		if e.Event.Action == models.ActionStarted {
			t.Error("a run cancelled while queued started")
		}
	}
}
