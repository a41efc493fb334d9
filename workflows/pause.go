package workflows

import (
	"errors"
	"sort"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/op-stack/executor/models"
)

// Pause and resume (runs with RunOptions.Pausable, see changePause).
//
// A paused run lets what is in flight finish — LLM calls, tool calls,
// sub-agents' current calls — and starts nothing new: every place that
// would start a step (a global supervisor decision, a team turn, a team
// supervisor decision, a worker turn, an agent's next LLM call or tool
// call, the final answer) first waits at its execution's pauseGate. The
// run's workflow takes pause and resume as validated updates (the API's
// synchronous answer) or as signals of the same names (the CLI), and tells
// the sub-agent child workflows running under it by signal; each sub-agent
// tells its own children. Waiting is workflow.Await: no history event, and
// a cancelled run stops waiting at once.

// pauseGate holds one workflow execution's new steps while its run is
// paused. nil (a run started before pause) never holds.
type pauseGate struct {
	paused bool
	// children are the sub-agent child workflows started from this
	// execution and running now, by workflow ID.
	children map[string]bool
}

func newPauseGate(o models.RunOptions) *pauseGate {
	if !o.Pausable {
		return nil
	}
	return &pauseGate{children: map[string]bool{}}
}

// held reports whether the run is paused.
func (g *pauseGate) held() bool { return g != nil && g.paused }

// wait returns when the run is not paused, or when ctx is cancelled.
func (g *pauseGate) wait(ctx workflow.Context) error {
	if g == nil || !g.paused {
		return nil
	}
	return workflow.Await(ctx, func() bool { return !g.paused })
}

// set pauses or resumes this execution and the sub-agents running under
// it.
func (g *pauseGate) set(ctx workflow.Context, paused bool) {
	if g == nil || g.paused == paused {
		return
	}
	g.paused = paused
	ids := make([]string, 0, len(g.children))
	for id := range g.children {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		g.tell(ctx, id)
	}
}

// tell signals one child the current state (best effort: a child that has
// just ended has nothing left to hold).
func (g *pauseGate) tell(ctx workflow.Context, childID string) {
	name := models.SignalResume
	if g.paused {
		name = models.SignalPause
	}
	workflow.SignalExternalWorkflow(ctx, childID, "", name, nil)
}

// track registers a sub-agent child once it has started, telling it at
// once if the run was paused meanwhile; the returned func forgets it.
func (g *pauseGate) track(ctx workflow.Context, child workflow.ChildWorkflowFuture, childID string) func() {
	if g == nil {
		return func() {}
	}
	if err := child.GetChildWorkflowExecution().Get(ctx, nil); err != nil {
		return func() {} // it did not start; its result says why
	}
	g.children[childID] = true
	if g.paused {
		g.tell(ctx, childID)
	}
	return func() { delete(g.children, childID) }
}

// listen applies the pause and resume signals a sub-agent's caller sends.
func (g *pauseGate) listen(ctx workflow.Context) {
	if g == nil {
		return
	}
	pause := workflow.GetSignalChannel(ctx, models.SignalPause)
	resume := workflow.GetSignalChannel(ctx, models.SignalResume)
	workflow.Go(ctx, func(ctx workflow.Context) {
		sel := workflow.NewSelector(ctx)
		sel.AddReceive(pause, func(c workflow.ReceiveChannel, _ bool) { c.Receive(ctx, nil); g.set(ctx, true) })
		sel.AddReceive(resume, func(c workflow.ReceiveChannel, _ bool) { c.Receive(ctx, nil); g.set(ctx, false) })
		for ctx.Err() == nil {
			sel.Select(ctx)
		}
	})
}

// setupPause registers the run's pause and resume updates and signals.
func (w *runWorkflow) setupPause(ctx workflow.Context) error {
	validate := func(workflow.Context) error {
		if w.gate == nil {
			return temporal.NewApplicationError("the run started before pause and resume were supported", models.ErrPauseRefused)
		}
		if models.IsTerminal(w.state.Status) {
			return temporal.NewApplicationError("the run has already "+w.state.Status, models.ErrPauseRefused)
		}
		return nil
	}
	for _, u := range []struct {
		name   string
		paused bool
	}{{models.UpdatePause, true}, {models.UpdateResume, false}} {
		paused := u.paused
		if err := workflow.SetUpdateHandlerWithOptions(ctx, u.name, func(ctx workflow.Context) (string, error) {
			return w.setPaused(ctx, paused)
		}, workflow.UpdateHandlerOptions{Validator: validate}); err != nil {
			return err
		}
	}
	if w.gate == nil {
		return nil
	}
	pause := workflow.GetSignalChannel(ctx, models.SignalPause)
	resume := workflow.GetSignalChannel(ctx, models.SignalResume)
	workflow.Go(ctx, func(ctx workflow.Context) {
		sel := workflow.NewSelector(ctx)
		sel.AddReceive(pause, func(c workflow.ReceiveChannel, _ bool) {
			c.Receive(ctx, nil)
			if validate(ctx) == nil {
				_, _ = w.setPaused(ctx, true)
			}
		})
		sel.AddReceive(resume, func(c workflow.ReceiveChannel, _ bool) {
			c.Receive(ctx, nil)
			if validate(ctx) == nil {
				_, _ = w.setPaused(ctx, false)
			}
		})
		for ctx.Err() == nil {
			sel.Select(ctx)
		}
	})
	return nil
}

// setPaused pauses or resumes the run; doing it twice is doing it once. It
// returns the status it set (or, when there was nothing to do, the run's
// status): not the status once its write is done, since the run may have
// gone on, even ended, while the write's activity ran. Which status an
// update answers is no command, so replay is unchanged.
func (w *runWorkflow) setPaused(ctx workflow.Context, paused bool) (string, error) {
	s := w.state
	if w.gate.paused == paused || models.IsTerminal(s.Status) {
		return s.Status, nil
	}
	w.gate.set(ctx, paused)
	status, action := w.approvals.resumedStatus(), models.ActionResumed
	if paused {
		status, action = models.RunPaused, models.ActionPaused
	}
	s.Status = status
	w.emit(ctx, models.GlobalSupervisorSource(w.hier), models.CategoryLifecycle, action, map[string]any{"status": status})
	// Stored with the next batch at once, not when 100 have gathered.
	w.persistUpTo = s.Log.LastSequence
	if err := w.setStatus(ctx, models.RunStatusUpdate{RunID: w.in.RunID, Status: status}); err != nil {
		if errors.Is(ctx.Err(), workflow.ErrCanceled) {
			return s.Status, nil
		}
		return "", err
	}
	return status, nil
}
