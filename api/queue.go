package api

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.temporal.io/api/serviceerror"

	"github.com/op-stack/executor/models"
	"github.com/op-stack/executor/store"
)

// The admission queue and thread policies (issue 26, items 3 and 4;
// docs/queue.md). The store decides admission (store.AdmitRun,
// store.DispatchQueued) under a per-tenant lock; this file tells the
// admitted runs' workflows, answers their CheckAdmission activity, and
// stops the runs a follow-up interrupts or rolls back.

// rollbackWait bounds how long a rollback waits for a cancelled run to
// end before deleting it.
const rollbackWait = 2 * time.Minute

// signalAdmitted tells the workflows of runs the store has just admitted
// that they may start. A lost signal is no harm: a queued workflow asks the
// store on its own every 30 s.
func (r *Runs) signalAdmitted(ctx context.Context, runs []*store.Run) {
	if r.Temporal == nil {
		return
	}
	ctx = context.WithoutCancel(ctx)
	for _, run := range runs {
		if err := r.Temporal.SignalWorkflow(ctx, run.WorkflowID, "", models.SignalAdmit, nil); err != nil {
			var notFound *serviceerror.NotFound
			if !errors.As(err, &notFound) {
				r.logger().Warn("signal an admitted run", "run_id", run.ID, "error", err)
			}
		}
	}
}

// Dispatch admits the queued runs of tenant whose places have freed and
// tells their workflows.
func (r *Runs) Dispatch(ctx context.Context, tenant string) error {
	admitted, err := r.Store.DispatchQueued(ctx, tenant, r.MaxConcurrentRuns)
	r.signalAdmitted(ctx, admitted)
	return err
}

// RunEnded dispatches the queue of the tenant of run key, which has just
// ended (the worker's SetRunStatus activity and Reconcile call it). A
// failure is logged: the queued runs' own checks and the workers' sweep
// dispatch again.
func (r *Runs) RunEnded(ctx context.Context, key string) {
	run, err := r.Store.GetRun(ctx, key)
	if err == nil {
		err = r.Dispatch(ctx, run.TenantID)
	}
	if err != nil {
		r.logger().Warn("dispatch queued runs after a run ended", "run_id", key, "error", err)
	}
}

// CheckAdmission is the activity of a queued run's workflow
// (models.ActivityCheckAdmission): it admits what fits of the run's tenant,
// then answers whether the run is admitted and, for an admitted follow-up,
// the context of the run it follows, built now that it has ended. A run
// deleted meanwhile answers admitted, so its workflow goes on to end.
func (r *Runs) CheckAdmission(ctx context.Context, in models.AdmissionInput) (models.AdmissionResult, error) {
	run, err := r.Store.GetRun(ctx, in.RunID)
	if models.ErrorCode(err) == models.CodeExecutionNotFound {
		return models.AdmissionResult{Admitted: true}, nil
	}
	if err != nil {
		return models.AdmissionResult{}, err
	}
	if run.Status == models.RunQueued {
		admitted, err := r.Store.DispatchQueued(ctx, run.TenantID, r.MaxConcurrentRuns)
		if err != nil {
			return models.AdmissionResult{}, err
		}
		var others []*store.Run
		for _, a := range admitted {
			if a.ID == run.ID {
				run.Status = a.Status
			} else {
				others = append(others, a)
			}
		}
		r.signalAdmitted(ctx, others)
	}
	if run.Status == models.RunQueued {
		return models.AdmissionResult{}, nil
	}
	res := models.AdmissionResult{Admitted: true}
	if run.PreviousRunID != "" {
		p, err := r.Store.GetTenantRun(ctx, run.TenantID, "", run.PreviousRunID)
		switch {
		case models.ErrorCode(err) == models.CodeExecutionNotFound:
			// Deleted meanwhile (runs/delete, retention): the run starts
			// without its context rather than not at all.
		case err != nil:
			return models.AdmissionResult{}, err
		default:
			if res.Previous, err = r.previousInput(ctx, p, run.ThreadID); err != nil {
				return models.AdmissionResult{}, err
			}
		}
	}
	return res, nil
}

// SweepQueueEvery dispatches, every interval until ctx ends, the queue of
// every tenant with queued runs: a safety net under the dispatch at each
// run's end (a worker that died between a run's end and its dispatch).
// Workers run it.
func (r *Runs) SweepQueueEvery(ctx context.Context, interval time.Duration) {
	if interval <= 0 {
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
		tenants, err := r.Store.QueuedTenants(ctx)
		if err != nil {
			r.logger().Warn("list tenants with queued runs", "error", err)
			continue
		}
		for _, tenant := range tenants {
			if err := r.Dispatch(ctx, tenant); err != nil && ctx.Err() == nil {
				r.logger().Warn("dispatch queued runs", "tenant", tenant, "error", err)
			}
		}
	}
}

// rollbackPrevious is the run a rollback follow-up follows: the run it
// named, or, when that is one of the runs it rolls back, the latest run
// before them ("" for none).
func (r *Runs) rollbackPrevious(ctx context.Context, named *store.Run, ahead []*store.Run) string {
	gone := map[string]bool{}
	for _, a := range ahead {
		gone[a.PublicID] = true
	}
	p := named
	for p != nil && gone[p.PublicID] {
		if p.PreviousRunID == "" {
			return ""
		}
		next, err := r.Store.GetTenantRun(ctx, p.TenantID, "", p.PreviousRunID)
		if err != nil {
			return ""
		}
		p = next
	}
	if p == nil {
		return ""
	}
	return p.PublicID
}

// stopAhead applies a follow-up's interrupt or rollback to the unfinished
// runs of its thread it waits behind: each is cancelled (a run at work
// stops at once, keeping what it finished; a queued one ends before it
// starts); with rollback each is then deleted, once it has ended, in the
// background (bounded by rollbackWait). The follow-up starts when they have
// all ended (it is queued behind them).
func (r *Runs) stopAhead(ctx context.Context, strategy string, ahead []*store.Run) {
	if r.Temporal == nil || (strategy != models.MultitaskInterrupt && strategy != models.MultitaskRollback) {
		return
	}
	ctx = context.WithoutCancel(ctx)
	for _, run := range ahead {
		if err := r.Temporal.CancelWorkflow(ctx, run.WorkflowID, ""); err != nil {
			var notFound *serviceerror.NotFound
			if !errors.As(err, &notFound) {
				r.logger().Warn("cancel a run for a follow-up", "run_id", run.ID, "strategy", strategy, "error", err)
			}
		}
	}
	if strategy != models.MultitaskRollback {
		return
	}
	go func() {
		ctx, cancel := context.WithTimeout(ctx, rollbackWait)
		defer cancel()
		for _, run := range ahead {
			if err := r.deleteWhenEnded(ctx, run); err != nil {
				r.logger().Warn("roll back a run", "run_id", run.ID, "error", err)
			}
		}
	}()
}

// deleteWhenEnded waits for run to end (reconciling it, should its
// workflow have ended without it) and deletes it.
func (r *Runs) deleteWhenEnded(ctx context.Context, run *store.Run) error {
	for {
		cur, err := r.Store.GetRun(ctx, run.ID)
		if models.ErrorCode(err) == models.CodeExecutionNotFound {
			return nil
		}
		if err != nil {
			return err
		}
		if cur, err = r.Reconcile(ctx, cur); err == nil && models.IsTerminal(cur.Status) {
			return r.Delete(ctx, run.ID)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("run %s did not end within %s: %w", run.ID, rollbackWait, ctx.Err())
		case <-time.After(250 * time.Millisecond):
		}
	}
}
