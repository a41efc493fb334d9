package store

import (
	"context"
	"fmt"
	"hash/crc64"
	"time"

	"gorm.io/gorm"

	"github.com/op-stack/executor/models"
)

// activeStatuses are the statuses of an admitted, unfinished run: what a
// tenant's concurrency limit counts (a queued run is not admitted yet).
var activeStatuses = []string{models.RunPending, models.RunRunning, models.RunPaused, models.RunWaitingApproval}

// unfinishedStatuses are every status but the terminal ones.
var unfinishedStatuses = append([]string{models.RunQueued}, activeStatuses...)

// Admission is how AdmitRun admits a new run (docs/queue.md).
type Admission struct {
	// Limit is how many admitted, unfinished runs the tenant may have
	// (MAX_CONCURRENT_RUNS_PER_TENANT); 0: no limit.
	Limit int
	// MaxQueued bounds the tenant's queued runs (MAX_QUEUED_RUNS_PER_TENANT);
	// a run that would queue past it is refused. 0: no bound.
	MaxQueued int
	// RejectOverLimit refuses, rather than queues, a run over Limit
	// (runs/start's on_limit "reject").
	RejectOverLimit bool
	// FollowUp says the run follows a run of its thread (Run.ThreadID is
	// that thread): it waits behind the thread's unfinished runs, or is
	// refused when Strategy is models.MultitaskReject.
	FollowUp bool
	Strategy string
}

// AdmitResult is what AdmitRun decided.
type AdmitResult struct {
	// Queued says the run was stored queued; Reason and Position (1: next)
	// say why and where (models.QueueInfo).
	Queued   bool
	Reason   string
	Position int
	// Ahead are the thread's unfinished runs the new run waits behind
	// (oldest first), which interrupt and rollback stop.
	Ahead []*Run
	// Admitted are queued runs of the tenant this transaction admitted
	// (their places had freed): the caller signals their workflows.
	Admitted []*Run
}

// admissionLock serializes admission decisions of one tenant. On
// PostgreSQL it is a transaction-scoped advisory lock on the tenant, so
// replicas sharing the database decide one after another; SQLite needs
// none, its one connection runs one transaction at a time.
func (s *Store) admissionLock(tx *gorm.DB, tenant string) error {
	if s.dialect != DialectPostgres {
		return nil
	}
	key := int64(crc64.Checksum([]byte("admission\x00"+tenant), crc64.MakeTable(crc64.ECMA)))
	if err := tx.Exec("SELECT pg_advisory_xact_lock(?)", key).Error; err != nil {
		return fmt.Errorf("lock tenant admission: %w", err)
	}
	return nil
}

// AdmitRun stores a new run (as CreateRun does) and decides, in one
// transaction under its tenant's admission lock, whether it starts now
// (status pending) or waits (status queued, at the end of the tenant's
// queue). First, queued runs whose places have freed are admitted, in
// queue order (AdmitResult.Admitted). Then the run waits when it is a
// follow-up and its thread has an unfinished run (reason thread_busy;
// strategy reject refuses it with 409 EXECUTION_IN_PROGRESS), or when its
// tenant has a.Limit admitted unfinished runs, or queued runs ahead of it
// (reason concurrency_limit; RejectOverLimit refuses it with 429). A run
// that would wait while a.MaxQueued runs of its tenant already wait is
// refused with 429. A refused run is not stored.
func (s *Store) AdmitRun(ctx context.Context, r *Run, a Admission) (AdmitResult, error) {
	var res AdmitResult
	row, err := newPendingRunRow(r)
	if err != nil {
		return res, err
	}
	taken := ""
	err = s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		res = AdmitResult{}
		if err := s.admissionLock(tx, r.TenantID); err != nil {
			return err
		}
		admitted, err := dispatchQueued(tx, r.TenantID, a.Limit)
		if err != nil {
			return err
		}
		res.Admitted = admitted
		if a.FollowUp {
			var ahead []runRow
			if err := tx.Omit("hierarchy_snapshot").Where("tenant_id = ? AND thread_id = ? AND status IN ?", r.TenantID, r.ThreadID, unfinishedStatuses).
				Order("created_at, id").Find(&ahead).Error; err != nil {
				return err
			}
			for _, ar := range ahead {
				run, err := ar.toRun()
				if err != nil {
					return err
				}
				res.Ahead = append(res.Ahead, run)
			}
			if len(ahead) > 0 {
				if a.Strategy == models.MultitaskReject {
					e := models.Errorf(models.CodeExecutionInProgress, "thread %q has an unfinished run (%s, %s); with multitask_strategy reject a follow-up starts only once it has finished", r.ThreadID, ahead[len(ahead)-1].PublicID, ahead[len(ahead)-1].Status)
					e.Field = "previous_run_id"
					return e
				}
				res.Queued, res.Reason = true, models.QueueReasonThread
			}
		}
		var queued int64
		if err := tx.Model(&runRow{}).Where("tenant_id = ? AND status = ?", r.TenantID, models.RunQueued).Count(&queued).Error; err != nil {
			return err
		}
		if !res.Queued && a.Limit > 0 {
			var active int64
			if err := tx.Model(&runRow{}).Where("tenant_id = ? AND status IN ?", r.TenantID, activeStatuses).Count(&active).Error; err != nil {
				return err
			}
			if active >= int64(a.Limit) {
				if a.RejectOverLimit {
					return models.Errorf(models.CodeRateLimited, "the tenant has %d runs pending or running, the most allowed (MAX_CONCURRENT_RUNS_PER_TENANT); retry when one ends, or start with on_limit \"queue\" to wait in the queue", active)
				}
				res.Queued, res.Reason = true, models.QueueReasonLimit
			}
		}
		if !res.Queued {
			return insertRun(tx, &row, r, &taken)
		}
		if a.MaxQueued > 0 && queued >= int64(a.MaxQueued) {
			return models.Errorf(models.CodeRateLimited, "the tenant has %d runs queued, the most allowed (MAX_QUEUED_RUNS_PER_TENANT); retry later", queued)
		}
		var last int64
		if err := tx.Model(&runRow{}).Where("tenant_id = ?", r.TenantID).Select("COALESCE(MAX(queue_seq), 0)").Scan(&last).Error; err != nil {
			return err
		}
		row.Status, row.QueueSeq = models.RunQueued, last+1
		r.Status, r.QueueSeq = models.RunQueued, last+1
		res.Position = int(queued) + 1
		return insertRun(tx, &row, r, &taken)
	})
	if err != nil {
		return AdmitResult{}, takenError(err, taken, r)
	}
	return res, nil
}

// DispatchQueued admits, under tenant's admission lock, the queued runs
// whose places have freed (see dispatchQueued) and returns them: their
// workflows are to be signalled. It runs when a run ends, when a queued
// run's workflow asks, and in the workers' sweep.
func (s *Store) DispatchQueued(ctx context.Context, tenant string, limit int) ([]*Run, error) {
	var out []*Run
	err := s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		if err := s.admissionLock(tx, tenantOr(tenant)); err != nil {
			return err
		}
		var err error
		out, err = dispatchQueued(tx, tenantOr(tenant), limit)
		return err
	})
	return out, err
}

// dispatchQueued admits tenant's queued runs in queue order while the
// tenant has fewer than limit (0: no limit) admitted unfinished runs. A
// run whose thread has an admitted unfinished run, or an earlier queued
// one, is passed over (a thread runs one run at a time, in order); any
// other run that does not fit stops the pass, so runs start in order.
// The caller holds the tenant's admission lock.
func dispatchQueued(tx *gorm.DB, tenant string, limit int) ([]*Run, error) {
	var queued []runRow
	if err := tx.Omit("hierarchy_snapshot").Where("tenant_id = ? AND status = ?", tenant, models.RunQueued).Order("queue_seq, created_at, id").Find(&queued).Error; err != nil {
		return nil, err
	}
	if len(queued) == 0 {
		return nil, nil
	}
	var active []runRow
	if err := tx.Select("id", "thread_id").Where("tenant_id = ? AND status IN ?", tenant, activeStatuses).Find(&active).Error; err != nil {
		return nil, err
	}
	busy := map[string]bool{}
	for _, a := range active {
		busy[a.ThreadID] = true
	}
	n := len(active)
	var out []*Run
	now := time.Now().UTC()
	for _, q := range queued {
		if busy[q.ThreadID] {
			continue
		}
		busy[q.ThreadID] = true
		if limit > 0 && n >= limit {
			break
		}
		res := tx.Model(&runRow{}).Where("id = ? AND status = ?", q.ID, models.RunQueued).Updates(map[string]any{"status": models.RunPending, "updated_at": now})
		if res.Error != nil {
			return nil, res.Error
		}
		if res.RowsAffected == 0 {
			continue
		}
		n++
		q.Status = models.RunPending
		run, err := q.toRun()
		if err != nil {
			return nil, err
		}
		out = append(out, run)
	}
	return out, nil
}

// QueuedTenants lists the tenants that have queued runs (the workers'
// sweep dispatches each).
func (s *Store) QueuedTenants(ctx context.Context) ([]string, error) {
	var out []string
	err := s.db.WithContext(ctx).Model(&runRow{}).Where("status = ?", models.RunQueued).Distinct("tenant_id").Pluck("tenant_id", &out).Error
	return out, err
}

// SetPreviousRun makes the queued run key follow previous (a public id,
// "" for none) instead: a rollback follow-up follows the run before the
// ones it rolls back.
func (s *Store) SetPreviousRun(ctx context.Context, key, previous string) error {
	return s.db.WithContext(ctx).Model(&runRow{}).Where("id = ?", key).Update("previous_run_id", previous).Error
}
