package store

import (
	"context"
	"time"

	"gorm.io/gorm"

	"github.com/op-stack/executor/models"
)

// PurgedRun tells what PurgeRun removed that lives outside the database:
// the caller deletes the run's Temporal workflows by these names.
type PurgedRun struct {
	// WorkflowID is the run's workflow id (its children's ids start with
	// it and a "-").
	WorkflowID string
	// WebhookWorkflowIDs are the run's webhook delivery workflows.
	WebhookWorkflowIDs []string
}

// purgeTables are the tables that store a run's data under its key in a
// run_id column (issue 26, item 5); purgeTenantTables those that name the
// run by its tenant and public id. A new table keyed by run belongs in one
// of them, and in TestPurgeRun.
var (
	purgeTables       = []string{"execution_event", "event_lease", "llm_call", "llm_answer", "message", "artifact", "webhook_endpoint", "memory_item"}
	purgeTenantTables = []string{"stream_token", "webhook_delivery"}
)

// PurgeRun deletes, in one transaction, a finished run (by its key,
// Run.ID) and everything stored under its key: its events, LLM calls and
// answers, messages, artifacts, stream tokens, webhook deliveries and its
// one-off webhook endpoint. A run that has not reached a terminal status
// is refused with EXECUTION_IN_PROGRESS and nothing is deleted; an unknown
// key is EXECUTION_NOT_FOUND. Deleting is idempotent across callers: of
// two racing deletes one finds the run and the other answers not found.
// Forks and follow-ups of the run copied what they need when they
// started, so they keep working.
func (s *Store) PurgeRun(ctx context.Context, id string) (*PurgedRun, error) {
	var out *PurgedRun
	err := s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		var row runRow
		if err := tx.Where("id = ?", id).Take(&row).Error; err != nil {
			if notFound(err) {
				return models.Errorf(models.CodeExecutionNotFound, "run %q not found", id)
			}
			return err
		}
		if !models.IsTerminal(row.Status) {
			return models.Errorf(models.CodeExecutionInProgress, "run %q is %s: only a finished run can be deleted", publicIDOf(row), row.Status)
		}
		// The status is part of the delete, so a run that is not
		// terminal by now (it cannot become live again) is kept.
		res := tx.Where("id = ? AND status = ?", id, row.Status).Delete(&runRow{})
		if res.Error != nil {
			return res.Error
		}
		if res.RowsAffected == 0 {
			return models.Errorf(models.CodeExecutionNotFound, "run %q not found", id)
		}
		public, tenant := publicIDOf(row), tenantOr(row.TenantID)
		var endpoints []string
		if err := tx.Model(&WebhookDelivery{}).Where("tenant_id = ? AND run_id = ?", tenant, public).Distinct().Pluck("endpoint_id", &endpoints).Error; err != nil {
			return err
		}
		for _, table := range purgeTables {
			if err := tx.Exec("DELETE FROM "+table+" WHERE run_id = ?", id).Error; err != nil {
				return err
			}
		}
		for _, table := range purgeTenantTables {
			if err := tx.Exec("DELETE FROM "+table+" WHERE tenant_id = ? AND run_id = ?", tenant, public).Error; err != nil {
				return err
			}
		}
		out = &PurgedRun{WorkflowID: row.WorkflowID}
		for _, e := range endpoints {
			out.WebhookWorkflowIDs = append(out.WebhookWorkflowIDs, models.WebhookWorkflowID(e, public))
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// publicIDOf is a run row's public id (its key for a run stored before
// public ids).
func publicIDOf(row runRow) string {
	if row.PublicID != "" {
		return row.PublicID
	}
	return row.ID
}

// ExpiredRuns lists the keys of up to limit finished runs of tenant ("":
// of every tenant) that completed before cutoff, oldest first, for the
// retention sweeper. except names tenants to leave out (those with a
// retention of their own, when tenant is "").
func (s *Store) ExpiredRuns(ctx context.Context, tenant string, except []string, cutoff time.Time, limit int) ([]string, error) {
	q := s.db.WithContext(ctx).Model(&runRow{}).
		Where("status IN ? AND completed_at IS NOT NULL AND completed_at < ?", terminalStatuses(), cutoff.UTC())
	if tenant != "" {
		q = q.Where("tenant_id = ?", tenant)
	}
	if len(except) > 0 {
		q = q.Where("tenant_id NOT IN ?", except)
	}
	var ids []string
	err := q.Order("completed_at").Limit(limit).Pluck("id", &ids).Error
	return ids, err
}

// terminalStatuses lists the run statuses models.IsTerminal accepts.
func terminalStatuses() []string {
	var out []string
	for _, st := range models.RunStatuses {
		if models.IsTerminal(st) {
			out = append(out, st)
		}
	}
	return out
}
