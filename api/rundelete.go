package api

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/gin-gonic/gin"
	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"

	"github.com/op-stack/executor/models"
)

// deleteRun is runs/delete {"id"} (docs/runs.md): it deletes a finished
// run of the caller's tenant and everything stored of it (Runs.Delete). A
// run that is still live is EXECUTION_IN_PROGRESS (409).
func (s *Server) deleteRun(c *gin.Context) {
	id, valid := readID[runIDInput](s, c)
	if !valid {
		return
	}
	ctx := c.Request.Context()
	run, err := s.visibleRun(ctx, id)
	if err != nil {
		s.writeError(c, err)
		return
	}
	// A run stored as live whose workflow has ended (terminated, timed
	// out) is recorded as ended first, as runs/get would.
	if reconciled, err := s.runs.Reconcile(ctx, run); err == nil {
		run = reconciled
	} else {
		s.log.Warn("reconcile run", "run_id", id, "error", err)
	}
	if !models.IsTerminal(run.Status) {
		s.writeError(c, models.Errorf(models.CodeExecutionInProgress, "run %q is %s: only a finished run can be deleted (cancel it first)", id, run.Status))
		return
	}
	if err := s.runs.Delete(ctx, run.ID); err != nil {
		s.writeError(c, err)
		return
	}
	ok(c, gin.H{"id": id, "deleted": true})
}

// Delete deletes the finished run key (store.Run.ID) everywhere the
// service stores it: its rows (store.PurgeRun, in one transaction), then,
// best effort, its Temporal workflow executions (the run's, its team
// turns' and sub-agents' children, and its webhook deliveries'), whose
// histories hold its task and answers. A workflow already gone is fine; a
// Temporal failure is logged and leaves the history to the namespace's
// own retention, since the run's data in the database is gone by then
// and a retry would find no run. A live run is EXECUTION_IN_PROGRESS.
func (r *Runs) Delete(ctx context.Context, key string) error {
	purged, err := r.Store.PurgeRun(ctx, key)
	if err != nil {
		return err
	}
	if r.Temporal == nil {
		return nil
	}
	ctx = context.WithoutCancel(ctx)
	// Every execution is deleted by its run id: a workflow that
	// continued as new has several, and a delete without a run id
	// reaches the latest only. Temporal drops a closed execution's
	// history some seconds after accepting the delete.
	execs, err := r.runExecutions(ctx, purged.WorkflowID, true)
	if err != nil {
		r.logger().Warn("list a deleted run's workflows", "workflow_id", purged.WorkflowID, "error", err)
		execs = append(execs, &commonpb.WorkflowExecution{WorkflowId: purged.WorkflowID})
	}
	for _, id := range purged.WebhookWorkflowIDs {
		more, err := r.runExecutions(ctx, id, false)
		if err != nil {
			r.logger().Warn("list a deleted run's webhook workflows", "workflow_id", id, "error", err)
		}
		execs = append(execs, more...)
	}
	for _, e := range execs {
		if err := r.deleteWorkflow(ctx, e); err != nil {
			r.logger().Warn("delete a deleted run's workflow", "workflow_id", e.GetWorkflowId(), "run_id", e.GetRunId(), "error", err)
		}
	}
	return nil
}

// runExecutions lists the executions (every run id) of workflow id and,
// with children, of the run's children (team turns "<id>-team-N",
// sub-agents "<parent>-sub-…": every one starts with id and a "-").
func (r *Runs) runExecutions(ctx context.Context, id string, children bool) ([]*commonpb.WorkflowExecution, error) {
	prefix := id + "-"
	query := fmt.Sprintf("WorkflowId = %q", id)
	if children {
		query += fmt.Sprintf(" OR WorkflowId STARTS_WITH %q", prefix)
	}
	var out []*commonpb.WorkflowExecution
	var token []byte
	for {
		resp, err := r.Temporal.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{
			Namespace: r.namespace(), PageSize: 100, NextPageToken: token, Query: query,
		})
		if err != nil {
			return out, err
		}
		for _, e := range resp.GetExecutions() {
			// STARTS_WITH is a prefix match of the visibility store; the
			// check keeps it exact whatever the store does.
			if x := e.GetExecution(); x.GetWorkflowId() == id || (children && strings.HasPrefix(x.GetWorkflowId(), prefix)) {
				out = append(out, x)
			}
		}
		if token = resp.GetNextPageToken(); len(token) == 0 {
			return out, nil
		}
	}
}

// deleteWorkflow deletes one workflow execution and its history; one
// already gone is no error. A running one (a webhook delivery still
// retrying) is terminated by the delete.
func (r *Runs) deleteWorkflow(ctx context.Context, e *commonpb.WorkflowExecution) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	_, err := r.Temporal.WorkflowService().DeleteWorkflowExecution(ctx, &workflowservice.DeleteWorkflowExecutionRequest{
		Namespace: r.namespace(), WorkflowExecution: e,
	})
	var notFound *serviceerror.NotFound
	if errors.As(err, &notFound) {
		return nil
	}
	return err
}

func (r *Runs) namespace() string {
	if r.Namespace == "" {
		return "default"
	}
	return r.Namespace
}

func (r *Runs) logger() *slog.Logger {
	if r.Log == nil {
		return slog.Default()
	}
	return r.Log
}

// DeleteExpired deletes up to limit finished runs that completed before
// their tenant's retention cutoff (store.ExpiredRuns), with Delete, and
// returns how many it deleted. Another replica deleting the same run
// first is no error (the run is then not found).
func (r *Runs) DeleteExpired(ctx context.Context, p RetentionPolicy, now time.Time, limit int) (int, error) {
	deleted := 0
	sweep := func(tenant string, except []string, keep time.Duration) error {
		if keep <= 0 || deleted >= limit {
			return nil
		}
		keys, err := r.Store.ExpiredRuns(ctx, tenant, except, now.Add(-keep), limit-deleted)
		if err != nil {
			return err
		}
		for _, key := range keys {
			switch err := r.Delete(ctx, key); {
			case err == nil:
				deleted++
			case models.ErrorCode(err) == models.CodeExecutionNotFound:
			default:
				return err
			}
		}
		return nil
	}
	var own []string
	for tenant, keep := range p.Tenants {
		own = append(own, tenant)
		if err := sweep(tenant, nil, keep); err != nil {
			return deleted, err
		}
	}
	return deleted, sweep("", own, p.Default)
}

// RetentionPolicy is how long finished runs are kept (RUN_RETENTION and
// RUN_RETENTION_TENANTS): Default for every tenant without a period of its
// own in Tenants. Zero keeps runs for ever.
type RetentionPolicy struct {
	Default time.Duration
	Tenants map[string]time.Duration
}

// Enabled tells whether any run can expire under the policy.
func (p RetentionPolicy) Enabled() bool {
	if p.Default > 0 {
		return true
	}
	for _, d := range p.Tenants {
		if d > 0 {
			return true
		}
	}
	return false
}

// retentionBatch is how many expired runs one sweep deletes at most, so
// a sweep after a long pause (or a newly shortened period) stays short.
const retentionBatch = 100

// SweepRetentionEvery deletes, every interval until ctx ends, the finished
// runs whose tenant's retention period has passed (DeleteExpired). Every
// worker sweeps: two replicas meeting the same run delete it once, the
// other finds it gone.
func (r *Runs) SweepRetentionEvery(ctx context.Context, p RetentionPolicy, interval time.Duration) {
	if !p.Enabled() || interval <= 0 {
		return
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if n, err := r.DeleteExpired(ctx, p, time.Now(), retentionBatch); err != nil {
				r.logger().WarnContext(ctx, "deleting expired runs failed", "error", err, "deleted", n)
			} else if n > 0 {
				r.logger().InfoContext(ctx, "deleted expired runs", "deleted", n)
			}
		}
	}
}
