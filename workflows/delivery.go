package workflows

import (
	"encoding/json"
	"fmt"

	"go.temporal.io/sdk/workflow"

	"github.com/op-stack/executor/models"
)

// Event batches by update (models.UpdateEvents).
//
// An activity that streams sends its batches as a Temporal update rather
// than a signal. The update costs the run the same one workflow task, and
// its answer says which sequences the batch got, so the activity can hand
// the sequenced events straight to the API's streams (notify.Pusher): a
// token reaches a client without the query a signalled batch needs, which
// would be a second task through the same worker. Signals stay: an activity
// whose update fails (a server without updates, the limits below, a worker
// of an older version) signals the same batch, and the log applies each
// batch once by its producer and number, whichever way it came.

// Temporal takes at most 2,000 updates per execution and 10 in flight at
// once (history.maxTotalUpdates, history.maxInFlightUpdates). Past
// maxEventUpdates the validator refuses event batches, which then come as
// signals, so updates stay free for the API's own (pause, approvals,
// steering); at continueAsNewUpdates a run that can continue as new between
// steps does (historyLong).
var (
	maxEventUpdates      = 1500
	continueAsNewUpdates = 1000
)

// deliveryBeforeLimit bounds EventDelivery.Before, which the update's
// answer records in the history: a gap it leaves out costs a stream one
// query.
const (
	deliveryBeforeEvents = 64
	deliveryBeforeBytes  = 32 << 10
)

// setupDelivery registers the UpdateEvents handler.
func (w *runWorkflow) setupDelivery(ctx workflow.Context) error {
	w.pushedUpTo = w.state.Log.LastSequence
	return workflow.SetUpdateHandlerWithOptions(ctx, models.UpdateEvents,
		func(ctx workflow.Context, batch models.EventBatch) (models.EventDelivery, error) {
			return w.deliver(ctx, batch), nil
		},
		workflow.UpdateHandlerOptions{Validator: func(ctx workflow.Context, batch models.EventBatch) error {
			if w.updatesSeen >= maxEventUpdates {
				return fmt.Errorf("event updates: this execution has taken %d; signal the batch", w.updatesSeen)
			}
			if len(batch.Events) == 0 || batch.Producer == "" {
				return fmt.Errorf("event updates: empty batch")
			}
			return nil
		}},
	)
}

// deliver applies an updated batch and says where it went.
func (w *runWorkflow) deliver(ctx workflow.Context, batch models.EventBatch) models.EventDelivery {
	w.updatesSeen++
	// Batches signalled before this update (an earlier batch of the same
	// activity whose update failed, among others) come first: applied
	// after it, the log would drop them as repeats.
	w.drainSignals()
	var d models.EventDelivery
	if first := w.state.Log.LastSequence + 1; w.pushedUpTo < first-1 {
		d.Before = w.heldAfter(w.pushedUpTo)
	}
	worker := w.state.CurrentWorker
	if applied := w.applyBatch(batch); len(applied) > 0 {
		d.First = applied[0].Sequence
	} else {
		d.Before = nil // nothing new to join up with
	}
	w.pushedUpTo = w.state.Log.LastSequence
	if w.state.CurrentWorker != worker {
		w.describe(ctx) // a team supervisor dispatched a worker
	}
	return d
}

// heldAfter returns the log's events after seq if the log still holds them
// all and they are few and small enough to carry, else nil.
func (w *runWorkflow) heldAfter(seq int64) []models.Event {
	log := &w.state.Log
	if seq+1 < log.FirstSequence() || log.LastSequence-seq > deliveryBeforeEvents {
		return nil
	}
	events := log.Events[seq+1-log.FirstSequence():]
	size := 0
	for _, e := range events {
		raw, err := json.Marshal(e)
		if err != nil {
			return nil
		}
		if size += len(raw); size > deliveryBeforeBytes {
			return nil
		}
	}
	return append([]models.Event(nil), events...)
}
