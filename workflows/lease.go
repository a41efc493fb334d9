package workflows

import (
	"go.temporal.io/sdk/workflow"

	"github.com/op-stack/executor/models"
)

// Leased sequences (changeEventLease, docs/events.md).
//
// A streamed token used to reach a client through the run's workflow: the
// activity sent each batch as an update, and a workflow task numbered it
// before the activity could push it to the streams. Under load that task
// was most of a token's way, and most of the Temporal server's work.
// When the run waits on one LLM activity alone (its calls follow one
// another, as in sequential and routed runs and within a team's turn), the
// workflow lends it the next sequences instead: the activity numbers its
// batches itself, stores each (fenced by the lease, so a replaced attempt
// stores nothing more) and pushes it at once, and returns them all in its
// result, which the workflow appends as they are. Whatever the workflow,
// or another producer, appends meanwhile is numbered after the lease's
// events (EventLog.Deferred): the log stays one gap-free order, in the
// workflow, the database and every stream alike.

// lease lends the run's next sequences to the LLM activity about to be
// scheduled, or returns nil: without changeEventLease, while teams work in
// parallel, or while another leasable activity is under way. Every call is
// matched by endLease.
func (w *runWorkflow) lease(ctx workflow.Context) *models.EventLease {
	w.producing++
	log := &w.state.Log
	if !w.eventLeases || w.noLease || w.producing > 1 || log.LeaseFrom > 0 {
		return nil
	}
	// Batches delivered so far come before the lease.
	w.drainSignals()
	// The events the database or the streams lack go with the lease: the
	// activity stores them with its claim and pushes them with its first
	// batch. When there are too many to carry, they are stored first.
	base := min(log.Persisted, w.pushedUpTo)
	carried := w.heldAfter(base)
	if carried == nil && log.LastSequence > base {
		w.persistAll(ctx)
		base = w.pushedUpTo
		carried = w.heldAfter(base)
	}
	w.pushedUpTo = log.LastSequence
	forget := w.forget
	w.forget = nil
	return &models.EventLease{From: log.StartLease(), Events: carried, Forget: forget}
}

// endLease ends what lease began, once the activity's result (its returned
// batch) or error is in: it appends the events the activity numbered, or
// after a failure those its attempts stored (taken back from the
// database, which fences out any attempt still running), then numbers
// what was deferred meanwhile. Without a lease it applies the returned
// batch as before.
func (w *runWorkflow) endLease(ctx workflow.Context, l *models.EventLease, batch *models.EventBatch, err error) {
	w.producing--
	if l == nil {
		w.applyReturned(batch)
		return
	}
	log := &w.state.Log
	var events []models.Event
	switch {
	case batch != nil && batch.Leased:
		events = batch.Events
	case err != nil:
		// Disconnected: a cancelled run takes its lease back too.
		dctx, _ := workflow.NewDisconnectedContext(ctx)
		if lerr := workflow.ExecuteLocalActivity(storeLocalContext(dctx), a.ReleaseEventLease,
			models.ReleaseLeaseInput{RunID: w.in.RunID, Lease: *l}).Get(dctx, &events); lerr != nil {
			workflow.GetLogger(ctx).Error("take back the event lease", "run_id", w.in.RunID, "error", lerr)
		}
	}
	worker := w.state.CurrentWorker
	applied, ok := log.ApplyLeased(events)
	if !ok {
		workflow.GetLogger(ctx).Error("leased events have a gap", "run_id", w.in.RunID, "from", l.From, "last", log.LastSequence)
	}
	w.follow(applied)
	// The next lease drops the answers kept for these calls' retries: the
	// activity has completed (an activity that stored its answer record
	// itself leaves them to it; SaveAnswer drops them otherwise).
	w.forget = nil
	for _, e := range applied {
		if id, _ := e.Data["llm_call_id"].(string); id != "" && e.Event.Action == models.ActionUsage {
			w.forget = append(w.forget, id)
		}
	}
	if log.LastSequence >= l.From && (batch == nil || !batch.Unstored) {
		// The activity stored them, and what the lease carried.
		log.MarkPersisted(log.LastSequence, keepEvents)
	}
	w.pushedUpTo = max(w.pushedUpTo, log.LastSequence)
	log.EndLease()
	if w.state.CurrentWorker != worker {
		w.describe(ctx) // a team supervisor dispatched a worker
	}
	if batch != nil && !batch.Leased {
		// An activity that did not take the lease (a worker without the
		// store) returned its events unnumbered.
		w.applyReturned(batch)
	}
}
