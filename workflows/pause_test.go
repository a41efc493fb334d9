package workflows_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"

	"github.com/op-stack/executor/models"
	"github.com/op-stack/executor/workflows"
)

// slowWriter makes the writer's LLM call last until the test has paused
// the run (and a moment more), so the pause lands while it is in flight.
type slowWriter struct {
	started, paused atomic.Bool
}

func (w *slowWriter) install(f *fakeActivities) {
	f.respond = func(_ context.Context, in models.RespondInput) (*models.RespondResult, error) {
		if in.Agent.AgentID == "w-writer" {
			w.started.Store(true)
			for !w.paused.Load() {
				time.Sleep(5 * time.Millisecond)
			}
			time.Sleep(100 * time.Millisecond)
		}
		return &models.RespondResult{Output: "output of " + in.Agent.Name, Usage: models.Usage{TotalTokens: 10}}, nil
	}
}

// whenWriterStarted calls do once the writer's call is in flight.
func (w *slowWriter) whenWriterStarted(env *testsuite.TestWorkflowEnvironment, do func()) {
	var check func()
	check = func() {
		if !w.started.Load() {
			env.RegisterDelayedCallback(check, time.Millisecond)
			return
		}
		do()
	}
	env.RegisterDelayedCallback(check, time.Millisecond)
}

func (f *fakeActivities) calls() (decides, responds int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.decides), len(f.responds)
}

// update sends a pause or resume update and records its answer.
func update(env *testsuite.TestWorkflowEnvironment, name string, answers *[]string) {
	env.UpdateWorkflow(name, name+"-"+time.Now().String(), &testsuite.TestUpdateCallback{
		OnAccept: func() {},
		OnReject: func(err error) { *answers = append(*answers, "rejected: "+err.Error()) },
		OnComplete: func(v any, err error) {
			if err != nil {
				*answers = append(*answers, "error: "+err.Error())
				return
			}
			*answers = append(*answers, v.(string))
		},
	})
}

// TestPauseHoldsNewStepsUntilResume pauses a run while a worker's LLM call
// is in flight: the call finishes, no decision or LLM call starts until the
// run is resumed, and the run then completes. A second pause is answered
// as the first; the status goes running → paused → running → completed,
// with lifecycle.paused and lifecycle.resumed in the log.
func TestPauseHoldsNewStepsUntilResume(t *testing.T) {
	f := &fakeActivities{decisions: map[string][]models.Decision{"gs": {dispatch("writing", "go")}, "ts-w": {dispatch("writer", "go")}}}
	writer := &slowWriter{}
	writer.install(f)
	env := newEnv(t, f)
	var answers []string
	writer.whenWriterStarted(env, func() {
		update(env, models.UpdatePause, &answers)
		update(env, models.UpdatePause, &answers)
		writer.paused.Store(true)
	})
	var atResume [2]int
	var progress models.Progress
	env.RegisterDelayedCallback(func() {
		atResume[0], atResume[1] = f.calls()
		if v, err := env.QueryWorkflow(models.QueryProgress); err == nil {
			_ = v.Get(&progress)
		}
		update(env, models.UpdateResume, &answers)
	}, time.Hour)
	env.ExecuteWorkflow(workflows.RunWorkflow, runInput(testHierarchy()))
	if err := env.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}
	// While paused: the global and team decisions and the writer's call
	// (in flight when the pause came) only.
	if atResume != [2]int{2, 1} {
		t.Errorf("calls when resumed (decides, responds) = %v, want [2 1]", atResume)
	}
	if progress.Status != models.RunPaused {
		t.Errorf("progress while paused = %+v", progress)
	}
	decides, responds := f.calls()
	if decides != 4 || responds != 2 {
		t.Errorf("calls at the end = %d decides, %d responds", decides, responds)
	}
	if got := strings.Join(answers, ","); got != "paused,paused,running" {
		t.Errorf("update answers = %s", got)
	}
	var statuses []string
	for _, s := range f.statuses {
		statuses = append(statuses, s.Status)
	}
	if got := strings.Join(statuses, ","); got != "running,paused,running,completed" {
		t.Errorf("statuses = %s", got)
	}
	var lifecycle []string
	for _, e := range f.persisted {
		if e.Event.Category == models.CategoryLifecycle {
			lifecycle = append(lifecycle, e.Event.Action)
		}
	}
	if got := strings.Join(lifecycle, ","); got != "started,paused,resumed,completed" {
		t.Errorf("lifecycle events = %s", got)
	}
}

// TestCancelWhilePaused cancels a paused run: it stops waiting and ends
// cancelled without another call.
func TestCancelWhilePaused(t *testing.T) {
	f := &fakeActivities{decisions: map[string][]models.Decision{"gs": {dispatch("writing", "go")}, "ts-w": {dispatch("writer", "go")}}}
	writer := &slowWriter{}
	writer.install(f)
	env := newEnv(t, f)
	var answers []string
	writer.whenWriterStarted(env, func() {
		update(env, models.UpdatePause, &answers)
		writer.paused.Store(true)
	})
	env.RegisterDelayedCallback(env.CancelWorkflow, time.Hour)
	env.ExecuteWorkflow(workflows.RunWorkflow, runInput(testHierarchy()))
	var canceled *temporal.CanceledError
	if err := env.GetWorkflowError(); !errors.As(err, &canceled) {
		t.Fatalf("want a cancelled workflow, got %v", err)
	}
	if f.lastStatus().Status != models.RunCancelled {
		t.Errorf("status = %+v", f.lastStatus())
	}
	if decides, responds := f.calls(); decides != 2 || responds != 1 {
		t.Errorf("calls = %d decides, %d responds", decides, responds)
	}
}

// TestPauseSignalPausesToo: `temporal workflow signal --name pause` and
// `--name resume` do what the updates do.
func TestPauseSignalPausesToo(t *testing.T) {
	f := &fakeActivities{decisions: map[string][]models.Decision{"gs": {dispatch("writing", "go")}, "ts-w": {dispatch("writer", "go")}}}
	writer := &slowWriter{}
	writer.install(f)
	env := newEnv(t, f)
	writer.whenWriterStarted(env, func() {
		env.SignalWorkflow(models.SignalPause, nil)
		writer.paused.Store(true)
	})
	var atResume [2]int
	env.RegisterDelayedCallback(func() {
		atResume[0], atResume[1] = f.calls()
		env.SignalWorkflow(models.SignalResume, nil)
	}, time.Hour)
	env.ExecuteWorkflow(workflows.RunWorkflow, runInput(testHierarchy()))
	if err := env.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}
	if atResume != [2]int{2, 1} {
		t.Errorf("calls when resumed = %v", atResume)
	}
	if f.lastStatus().Status != models.RunCompleted {
		t.Errorf("status = %+v", f.lastStatus())
	}
}

// TestPauseReachesNestedSubAgents: the run is paused while a sub-agent of
// a sub-agent makes its LLM call. The call finishes; its caller, a
// sub-agent child workflow told by signal, makes no further call, nor
// does the worker above it, until the run is resumed.
func TestPauseReachesNestedSubAgents(t *testing.T) {
	script := fanOut{calls: map[string]int{"w-writer": 1, "sa-h1": 1}, target: map[string]string{"w-writer": "h1", "sa-h1": "h2"}}
	f := &fakeActivities{decisions: map[string][]models.Decision{"gs": {dispatch("writing", "go")}, "ts-w": {dispatch("writer", "go")}}}
	env := newDelegationEnv(t, f, script)
	var started, paused atomic.Bool
	f.respond = func(ctx context.Context, in models.RespondInput) (*models.RespondResult, error) {
		if in.Agent.AgentID == "sa-h2" {
			started.Store(true)
			for !paused.Load() {
				time.Sleep(5 * time.Millisecond)
			}
			time.Sleep(100 * time.Millisecond)
		}
		return script.respond(ctx, in)
	}
	var answers []string
	var check func()
	check = func() {
		if !started.Load() {
			env.RegisterDelayedCallback(check, time.Millisecond)
			return
		}
		// The call ends only once the run has taken the pause (the update
		// completed, which passes it on to the sub-agents), however slowly
		// a loaded machine runs the test environment.
		env.UpdateWorkflow(models.UpdatePause, "pause-nested", &testsuite.TestUpdateCallback{
			OnAccept: func() {},
			OnReject: func(err error) { answers = append(answers, "rejected: "+err.Error()) },
			OnComplete: func(v any, err error) {
				if err != nil {
					answers = append(answers, "error: "+err.Error())
				} else {
					answers = append(answers, v.(string))
				}
				paused.Store(true)
			},
		})
	}
	env.RegisterDelayedCallback(check, time.Millisecond)
	var atResume int
	env.RegisterDelayedCallback(func() {
		_, atResume = f.calls()
		update(env, models.UpdateResume, &answers)
	}, time.Hour)
	env.ExecuteWorkflow(workflows.RunWorkflow, runInput(delegationHierarchy()))
	mustComplete(t, env)
	// Writer (delegates), h1 (delegates), h2: then nothing while paused.
	if atResume != 3 {
		t.Errorf("%d LLM calls when resumed, want 3", atResume)
	}
	// Then h1's and the writer's answers and the final answer.
	if _, responds := f.calls(); responds != 6 {
		t.Errorf("%d LLM calls in all, want 6", responds)
	}
	// The resume answers the run's status once its status write is done;
	// the resumed run's last steps are instant here and may finish first.
	if got := strings.Join(answers, ","); got != "paused,running" && got != "paused,completed" {
		t.Errorf("update answers = %s", got)
	}
}
