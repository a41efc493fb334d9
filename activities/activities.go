// Package activities holds the run's side effects as Temporal activities:
// every LLM call, every database write, every event published. Workflows
// refer to them through a nil *Activities.
package activities

import (
	"context"
	"encoding/json"
	"github.com/op-stack/executor/pricing"
	"log/slog"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/trace"
	"go.temporal.io/sdk/activity"

	"github.com/op-stack/executor/a2aremote"
	"github.com/op-stack/executor/llm"
	"github.com/op-stack/executor/mcp"
	"github.com/op-stack/executor/memory"
	"github.com/op-stack/executor/models"
	"github.com/op-stack/executor/notify"
	"github.com/op-stack/executor/store"
	"github.com/op-stack/executor/telemetry"
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
	Store *store.Store
	LLM   llm.Client
	Tools ToolRunner
	// MCP offers and runs the tenants' MCP tools (agents' "mcp:" tool
	// keys); nil offers none.
	MCP *mcp.Toolbox
	// A2A calls the remote A2A agents of workers that name one (their
	// "a2a" setting); nil refuses such workers' turns.
	A2A    *a2aremote.Client
	Events EventSink
	Log    *slog.Logger
	// HeartbeatInterval is how often a running LLM call heartbeats, so a
	// dead worker is noticed within the heartbeat timeout.
	HeartbeatInterval time.Duration
	// FlushInterval is the longest streamed deltas wait before they are
	// signalled to the run (DefaultFlushInterval when zero).
	FlushInterval time.Duration
	// Metrics counts LLM calls, tokens, published events and finished
	// runs; nil records nothing.
	Metrics *telemetry.Metrics
	// Notifier tells the API's stream pollers that a run has news (events
	// signalled, a status written), so they query its workflow at once
	// instead of on a fast timer; nil notifies nobody.
	Notifier notify.Notifier
	// updatesOff is set once the Temporal server has refused an event
	// update as unsupported: batches then go by signal only.
	updatesOff atomic.Bool
	// slowUpdatesUntil (unix nanoseconds) holds batches to signals after
	// an update was slow (see slowUpdate).
	slowUpdatesUntil atomic.Int64
	// deliveryEWMA (nanoseconds) is the moving average of the process's
	// event update latencies, which the flush interval follows (see
	// flushInterval).
	deliveryEWMA atomic.Int64
	// Webhooks delivers run events to the tenants' webhook endpoints;
	// nil delivers none.
	Webhooks *Webhooks
	// ArtifactLimits bound the files agents produce (ARTIFACT_MAX_BYTES,
	// ARTIFACT_RUN_MAX_BYTES); zero values do not limit.
	ArtifactLimits store.ArtifactLimits
	// Prices turns a call's usage into its cost (LLM_PRICES_FILE over the
	// built-in list prices); nil uses pricing.Defaults.
	Prices pricing.Table
	// RunEnded is told of every run whose terminal status SetRunStatus
	// writes: it admits the run's tenant's queued runs that now fit
	// (api.Runs.RunEnded, docs/queue.md); nil admits none.
	RunEnded func(ctx context.Context, runID string)
	// Memory runs the memory tools (memory_search, memory_save) within
	// the run's declared namespaces; nil answers them with an error.
	Memory *memory.Service
}

// cost is what a call of model with usage u cost; ok is false when the
// model has no price (the cost is unknown, never 0).
func (a *Activities) cost(model string, u llm.Usage) (usd float64, ok bool) {
	prices := a.Prices
	if prices == nil {
		prices = pricing.Defaults
	}
	return prices.Cost(model, pricing.Usage{
		Input: u.PromptTokens, Output: u.CompletionTokens,
		CachedInput: u.CachedTokens, CacheWrite: u.CacheWriteTokens, Reasoning: u.ReasoningTokens,
	})
}

// SetRunStatus writes a run's status; safe to retry (see
// store.SetRunStatus). A terminal status is counted in the run metrics once
// per run: store.SetRunStatus never overwrites a terminal status but does
// not say whether it wrote, so the stored status is read first and a run
// that is already terminal (a retried activity, a late update) is not
// counted again. Only two attempts running at once could both count it.
func (a *Activities) SetRunStatus(ctx context.Context, u models.RunStatusUpdate) error {
	// The workflow's result holds previews of long answers; the stored
	// result holds them whole.
	var err error
	if u.Result, err = a.Store.HydrateResult(ctx, u.RunID, u.Result); err != nil {
		return err
	}
	countable := false
	if a.Metrics != nil && models.IsTerminal(u.Status) {
		// A failed read must not fail the status write: count the write
		// then, as the run was most likely not terminal yet.
		prev, err := a.Store.GetRun(ctx, u.RunID)
		countable = err != nil || !models.IsTerminal(prev.Status)
	}
	if err := a.Store.SetRunStatus(ctx, u); err != nil {
		return err
	}
	if countable {
		a.Metrics.RunFinished(u.Status)
	}
	// The workflow writes a status after the event that announces it, so
	// this wakes the streams to read that event: it pushes the log's
	// stored tail (a terminal status's, the terminal event last: every
	// event is stored by then). Any other status's event may not be stored
	// yet: the streams are told to ask the run as well.
	if !a.pushTail(ctx, u.RunID) || !models.IsTerminal(u.Status) {
		a.notifyRun(ctx, u.RunID)
	}
	if a.RunEnded != nil && models.IsTerminal(u.Status) {
		// After the write: the run no longer counts against its tenant's
		// limit, so its place goes to the oldest queued run.
		a.RunEnded(ctx, u.RunID)
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
	// With tracing on, the SDK's interceptor puts the activity's span in
	// its context; the trace id ties the log line to the run's trace.
	if sc := trace.SpanContextFromContext(ctx); sc.IsValid() {
		log = log.With("trace_id", sc.TraceID().String())
	}
	return log
}

// runLogger is logger with the run and the agent an activity works for, so
// a run's log lines can be found by run_id and agent_id.
func (a *Activities) runLogger(ctx context.Context, runID string, source models.Source) *slog.Logger {
	log := a.logger(ctx).With("run_id", runID)
	if source.AgentID != "" {
		log = log.With("agent_id", source.AgentID)
	}
	return log
}

// PersistEvents stores events of a run's log; storing one twice is a no-op.
// The run's workflow calls it as a local activity.
func (a *Activities) PersistEvents(ctx context.Context, in models.PersistEventsInput) error {
	if err := a.Store.InsertEvents(ctx, in.Events); err != nil {
		return err
	}
	// Stored, the events are pushed to the streams: the run's own events
	// between its LLM calls reach clients without a query. A stream that
	// has them already skips them. Not from an event that changes the
	// run's status on: a client that reads lifecycle.completed may fork
	// the run at once, one that reads approval.requested may read the run
	// as waiting; those go once the status is written (SetRunStatus).
	events := in.Events
	for i, e := range events {
		if models.IsStatusEvent(e.Event) {
			events = events[:i]
			break
		}
	}
	a.push(ctx, events)
	// Stored first, so a delivery never announces an event that
	// runs/events does not have yet.
	return a.queueWebhooks(ctx, in.Events)
}

// SaveAnswer stores what an LLM activity that deferred its writes returned:
// the usage records and, for a turn's final answer, the message. The
// workflows run it as a local activity that retries until the database
// answers, so a database outage delays a run and never repeats a model
// call; storing a record twice stores it once.
func (a *Activities) SaveAnswer(ctx context.Context, rec models.AnswerRecord) error {
	return a.Store.SaveAnswer(ctx, rec)
}

// push hands stored events of one run to the API's streams (notify.Pusher);
// a no-op without a Pusher or events.
func (a *Activities) push(ctx context.Context, events []models.Event) bool {
	p, ok := a.Notifier.(notify.Pusher)
	if !ok || len(events) == 0 {
		return false
	}
	payload, err := json.Marshal(events)
	if err != nil {
		return false
	}
	p.Push(ctx, events[0].RunID, payload)
	return true
}

// terminalTail is how many of a finished run's last stored events its
// terminal status write pushes: the terminal event and what the workflow
// stored with it.
const terminalTail = 16

// pushTail pushes the run's last stored events; false when it could not.
func (a *Activities) pushTail(ctx context.Context, runID string) bool {
	if _, ok := a.Notifier.(notify.Pusher); !ok {
		return false
	}
	last, err := a.Store.LastEventSequence(ctx, runID)
	if err != nil || last == 0 {
		return false
	}
	events, err := a.Store.ListEvents(ctx, runID, store.EventFilter{After: max(0, last-terminalTail), Limit: terminalTail})
	if err != nil {
		return false
	}
	return a.push(ctx, events)
}
