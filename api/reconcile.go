package api

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"

	"github.com/op-stack/executor/models"
	"github.com/op-stack/executor/store"
	"github.com/op-stack/executor/webhooks"
)

// reconcileTimeout bounds the Temporal calls of one reconciliation.
const reconcileTimeout = 10 * time.Second

// Reconcile brings a run whose workflow ended without running its own
// cleanup — terminated by an operator (`temporal workflow terminate`) or
// stopped by Temporal's execution timeout — to a terminal state consistent
// on both sides: the events its workflow still held are stored, a
// lifecycle.failed event from "system" says why (no agent decided it), the
// run is marked failed and counted in executor_runs_finished_total. A run whose
// workflow is still running, or ended normally, is returned unchanged.
func (r *Runs) Reconcile(ctx context.Context, run *store.Run) (*store.Run, error) {
	if r == nil || r.Temporal == nil || models.IsTerminal(run.Status) {
		return run, nil
	}
	ctx, cancel := context.WithTimeout(ctx, reconcileTimeout)
	defer cancel()
	desc, err := r.Temporal.DescribeWorkflowExecution(ctx, run.WorkflowID, "")
	if err != nil {
		var notFound *serviceerror.NotFound
		if errors.As(err, &notFound) {
			return run, nil // not started yet, or already deleted by retention
		}
		return run, err
	}
	info := desc.GetWorkflowExecutionInfo()
	var reason string
	switch info.GetStatus() {
	case enumspb.WORKFLOW_EXECUTION_STATUS_TERMINATED:
		reason = "terminated"
		if why := r.terminationReason(ctx, run.WorkflowID); why != "" {
			reason += ": " + why
		}
	case enumspb.WORKFLOW_EXECUTION_STATUS_TIMED_OUT:
		reason = "the workflow execution timed out"
	default:
		return run, nil
	}

	// The workflow persisted its log in batches; take what it held after
	// the last stored event (a closed workflow still answers queries).
	last, err := r.Store.LastEventSequence(ctx, run.ID)
	if err != nil {
		return run, err
	}
	for {
		resp, err := r.Temporal.QueryWorkflow(ctx, run.WorkflowID, "", models.QueryEvents, models.EventQuery{After: last})
		if err != nil {
			break // no worker to answer: what was stored stays, the end is added below
		}
		var page models.EventPage
		if err := resp.Get(&page); err != nil || len(page.Events) == 0 || page.FirstAvailable > last+1 {
			break
		}
		if err := r.Store.InsertEvents(ctx, page.Events); err != nil {
			return run, err
		}
		if err := webhooks.Dispatch(ctx, r.Store, r.Webhooks, page.Events); err != nil {
			slog.Default().WarnContext(ctx, "webhooks of a reconciled run", "run_id", run.ID, "error", err)
		}
		last = page.Events[len(page.Events)-1].Sequence
		if !page.More {
			break
		}
	}
	msg := fmt.Sprintf("the run's workflow was %s", reason)
	end := models.Event{
		RunID: run.ID, Sequence: last + 1, Timestamp: models.FormatTimestamp(time.Now()),
		Source: models.Source{AgentID: "system", AgentType: models.AgentTypeSystem, AgentName: "system"},
		Event:  models.EventKind{Category: models.CategoryLifecycle, Action: models.ActionFailed},
		Data:   map[string]any{"error": msg, "error_code": models.CodeExecutionFailed.Name},
	}
	if err := r.Store.InsertEvents(ctx, []models.Event{end}); err != nil {
		return run, err
	}
	// No workflow stored this end, so no activity announced it: the
	// webhooks that want run.failed are told from here. A failure to queue
	// them does not keep the run from ending (they are logged).
	if err := webhooks.Dispatch(ctx, r.Store, r.Webhooks, []models.Event{end}); err != nil {
		slog.Default().WarnContext(ctx, "webhooks of a reconciled run", "run_id", run.ID, "error", err)
	}
	changed, err := r.Store.UpdateRunStatus(ctx, models.RunStatusUpdate{RunID: run.ID, Status: models.RunFailed, Result: run.Result, Error: msg})
	if err != nil {
		return run, err
	}
	if changed {
		// No worker wrote this end, so none counted it; of several
		// replicas reconciling the same run, only the one whose write
		// changed the row does.
		r.Metrics.RunFinished(models.RunFailed)
	}
	// No worker wrote this end, so none dispatched the tenant's queue.
	r.RunEnded(ctx, run.ID)
	return r.Store.GetRun(ctx, run.ID)
}

// terminationReason reads the reason given to `temporal workflow terminate`.
func (r *Runs) terminationReason(ctx context.Context, workflowID string) string {
	it := r.Temporal.GetWorkflowHistory(ctx, workflowID, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_CLOSE_EVENT)
	for it.HasNext() {
		ev, err := it.Next()
		if err != nil {
			return ""
		}
		if attrs := ev.GetWorkflowExecutionTerminatedEventAttributes(); attrs != nil {
			return attrs.GetReason()
		}
	}
	return ""
}

// ReconcileStale reconciles every run still running or pending in the
// database whose row has not changed for quiet: a run whose workflow was
// terminated is then marked failed without waiting for someone to read it
// (runs/list showed such a run running for ever). It returns how many runs
// it changed.
func (r *Runs) ReconcileStale(ctx context.Context, quiet time.Duration) (int, error) {
	changed := 0
	for _, status := range []string{models.RunRunning, models.RunPaused, models.RunWaitingApproval, models.RunPending, models.RunQueued} {
		for page := 1; ; page++ {
			runs, _, err := r.Store.ListRuns(ctx, store.RunFilter{ListFilter: store.ListFilter{Page: page, PageSize: 100}, Status: status})
			if err != nil {
				return changed, err
			}
			for _, run := range runs {
				if time.Since(run.UpdatedAt) < quiet {
					continue
				}
				after, err := r.Reconcile(ctx, run)
				if err != nil {
					return changed, fmt.Errorf("reconcile run %s: %w", run.ID, err)
				}
				if after.Status != run.Status {
					changed++
				}
			}
			if len(runs) < 100 {
				break
			}
		}
	}
	return changed, nil
}

// ReconcileEvery runs ReconcileStale every interval until ctx ends, for
// runs quiet for at least interval. Several API replicas may all run it:
// reconciling a run twice stores its end once.
func (r *Runs) ReconcileEvery(ctx context.Context, interval time.Duration, log *slog.Logger) {
	if r == nil || r.Temporal == nil || interval <= 0 {
		return
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		n, err := r.ReconcileStale(ctx, interval)
		switch {
		case err != nil && ctx.Err() == nil:
			log.Warn("reconcile runs", "error", err)
		case n > 0:
			log.Info("reconciled runs whose workflows ended without them", "runs", n)
		}
	}
}

// ReconcileEvery reconciles the server's stale runs every interval until ctx
// ends (see Runs.ReconcileEvery).
func (s *Server) ReconcileEvery(ctx context.Context, interval time.Duration) {
	if s.store != nil {
		go s.sweepIdempotencyKeys(ctx, interval)
	}
	s.runs.ReconcileEvery(ctx, interval, s.log)
}

// sweepIdempotencyKeys deletes expired Idempotency-Key records on the
// reconciler's interval, so the table holds only keys still honoured.
func (s *Server) sweepIdempotencyKeys(ctx context.Context, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if n, err := s.store.DeleteExpiredIdempotencyKeys(ctx, time.Now()); err != nil {
				s.log.WarnContext(ctx, "sweeping expired idempotency keys failed", "error", err)
			} else if n > 0 {
				s.log.DebugContext(ctx, "swept expired idempotency keys", "deleted", n)
			}
		}
	}
}
