package activities

import (
	"context"
	"fmt"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"

	"github.com/op-stack/executor/models"
)

// SignalSink delivers event batches as signals to the run's workflow, by
// workflow ID only, so delivery follows the run across continue-as-new.
type SignalSink struct{ Client client.Client }

// PublishEvents implements EventSink.
func (s SignalSink) PublishEvents(ctx context.Context, runID string, batch models.EventBatch) error {
	return s.Client.SignalWorkflow(ctx, models.RunWorkflowID(runID), "", models.SignalEvents, batch)
}

// publisher sends one activity attempt's events to its run. Each batch it
// sends carries the attempt as producer and a per-attempt sequence number,
// which the workflow uses to apply a re-sent batch once.
type publisher struct {
	a        *Activities
	runID    string
	producer string
	seq      int
	attempt  int32
	calls    int // LLM calls made by this attempt, for their record ids
}

func (a *Activities) newPublisher(ctx context.Context, runID string) *publisher {
	p := &publisher{a: a, runID: runID, producer: "local", attempt: 1}
	if activity.IsActivity(ctx) {
		info := activity.GetInfo(ctx)
		p.producer = fmt.Sprintf("%s/%s/%d", info.WorkflowExecution.ID, info.ActivityID, info.Attempt)
		p.attempt = info.Attempt
	}
	return p
}

// event builds an event; the workflow assigns its sequence.
func (p *publisher) event(source models.Source, category, action string, data map[string]any) models.Event {
	if data == nil {
		data = map[string]any{}
	}
	return models.Event{
		RunID:     p.runID,
		Timestamp: models.FormatTimestamp(time.Now()),
		Source:    source,
		Event:     models.EventKind{Category: category, Action: action},
		Data:      data,
	}
}

// send publishes events as one batch. A failure is logged, not returned:
// an undelivered event must not fail the LLM call that caused it.
func (p *publisher) send(ctx context.Context, events ...models.Event) {
	if len(events) == 0 || p.a.Events == nil {
		return
	}
	p.seq++
	batch := models.EventBatch{Producer: p.producer, Seq: p.seq, Events: events}
	if err := p.a.Events.PublishEvents(ctx, p.runID, batch); err != nil && ctx.Err() == nil {
		p.a.logger(ctx).Warn("publish events", "run_id", p.runID, "events", len(events), "error", err)
	}
}
