package workflows

import (
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/op-stack/executor/models"
)

// admissionPoll is how often a queued run asks the store whether it has
// been admitted when no admit signal came: a lost signal (its sender died
// between the store's decision and the signal) never strands a run.
var admissionPoll = 30 * time.Second

// waitAdmission holds a run started queued (changeAdmissionQueue) until
// it is admitted: it announces lifecycle.queued (once, not again after
// continue-as-new), then asks the store (ActivityCheckAdmission, which
// also admits what fits of the tenant) at once, on every admit signal and
// every admissionPoll. The run is idle meanwhile, so its events are
// stored at once. Once admitted, a follow-up takes its previous run's
// context from the answer: the run it follows had no final answer when
// this one was queued. A cancel while queued ends the run cancelled.
func (w *runWorkflow) waitAdmission(ctx workflow.Context) error {
	s := w.state
	if s.Status == models.RunPending {
		s.Status = models.RunQueued
		data := map[string]any{"reason": w.in.Queue.Reason, "position": w.in.Queue.Position}
		if w.in.Options.ThreadID != "" {
			data["thread_id"] = w.in.Options.ThreadID
		}
		w.emit(ctx, models.GlobalSupervisorSource(w.hier), models.CategoryLifecycle, models.ActionQueued, data)
	}
	w.queued = true
	defer func() { w.queued = false }()
	admit := workflow.GetSignalChannel(ctx, models.SignalAdmit)
	actx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: 30 * time.Second,
		RetryPolicy:         &temporal.RetryPolicy{InitialInterval: time.Second, BackoffCoefficient: 2, MaximumInterval: admissionPoll},
	})
	for {
		var res models.AdmissionResult
		if err := w.await(ctx, workflow.ExecuteActivity(actx, models.ActivityCheckAdmission, models.AdmissionInput{RunID: w.in.RunID}), &res); err != nil {
			return err
		}
		if res.Admitted {
			if res.Previous != nil {
				w.in.Previous = res.Previous
			}
			s.Status = models.RunPending
			return nil
		}
		tctx, cancelTimer := workflow.WithCancel(ctx)
		timer := workflow.NewTimer(tctx, admissionPoll)
		woken := false
		sel := workflow.NewSelector(ctx)
		sel.AddReceive(w.signals, func(c workflow.ReceiveChannel, _ bool) { w.applyOne(ctx, c) })
		sel.AddReceive(admit, func(c workflow.ReceiveChannel, _ bool) { c.Receive(ctx, nil); woken = true })
		sel.AddFuture(timer, func(workflow.Future) { woken = true })
		for !woken {
			sel.Select(ctx)
		}
		cancelTimer()
		for admit.ReceiveAsync(nil) {
			// One check answers every admit signal received so far.
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := w.continueAsNewIfLong(ctx); err != nil {
			return err
		}
	}
}
