// Package activities holds the run's side effects as Temporal activities:
// every LLM call, every database write, every event published. Workflows
// refer to them through a nil *Activities.
package activities

import (
	"context"
	"log/slog"
	"time"

	"go.temporal.io/sdk/activity"

	"github.com/op-stack/executor/llm"
	"github.com/op-stack/executor/models"
	"github.com/op-stack/executor/store"
)

// EventSink delivers a batch of events to a run's workflow.
type EventSink interface {
	PublishEvents(ctx context.Context, runID string, batch models.EventBatch) error
}

// ToolRunner offers and runs the registry's tools (tools.Registry).
type ToolRunner interface {
	Definitions(keys []string) []llm.ToolDef
	Execute(ctx context.Context, key, arguments string) (string, error)
}

// Activities holds the dependencies of every activity.
type Activities struct {
	Store  *store.Store
	LLM    llm.Client
	Tools  ToolRunner
	Events EventSink
	Log    *slog.Logger
	// HeartbeatInterval is how often a running LLM call heartbeats, so a
	// dead worker is noticed within the heartbeat timeout.
	HeartbeatInterval time.Duration
	// FlushInterval is the longest streamed deltas wait before they are
	// signalled to the run (DefaultFlushInterval when zero).
	FlushInterval time.Duration
}

// SetRunStatus writes a run's status; safe to retry (see
// store.SetRunStatus).
func (a *Activities) SetRunStatus(ctx context.Context, u models.RunStatusUpdate) error {
	if err := a.Store.SetRunStatus(ctx, u); err != nil {
		return err
	}
	a.logger(ctx).Info("run status", "run_id", u.RunID, "status", u.Status)
	return nil
}

func (a *Activities) logger(ctx context.Context) *slog.Logger {
	log := a.Log
	if log == nil {
		log = slog.Default()
	}
	if activity.IsActivity(ctx) {
		info := activity.GetInfo(ctx)
		log = log.With("activity", info.ActivityType.Name, "attempt", info.Attempt, "workflow_id", info.WorkflowExecution.ID)
	}
	return log
}

// PersistEvents stores events of a run's log; storing one twice is a no-op.
// The run's workflow calls it as a local activity.
func (a *Activities) PersistEvents(ctx context.Context, in models.PersistEventsInput) error {
	return a.Store.InsertEvents(ctx, in.Events)
}
