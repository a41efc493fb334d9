package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"

	"github.com/op-stack/executor/models"
)

type runRow struct {
	ID            string `gorm:"primaryKey"`
	PublicID      string
	TenantID      string
	HierarchyID   string
	HierarchyName string
	TotalTeams    int
	WorkflowID    string
	Task          string
	ThreadID      string
	PreviousRunID string
	ScheduleID    string
	// QueueSeq is the run's place in its tenant's admission queue (0:
	// never queued; see AdmitRun).
	QueueSeq int64
	// HierarchySnapshot is the hierarchy the run ran (JSON) and
	// ExecutionConfig its execution_config (JSON); a fork starts from them.
	HierarchySnapshot  string
	ExecutionConfig    string
	ForkedFromRunID    string
	ForkedFromSequence int64
	Status             string
	Result             string
	FinalAnswer        string
	Error              string
	CreatedAt          time.Time
	StartedAt          *time.Time
	CompletedAt        *time.Time
	UpdatedAt          time.Time
}

func (runRow) TableName() string { return "execution" }

// Run is a stored run. A run has two ids (issue 23, item 8): ID, its key,
// unique across tenants, which names its workflow (models.RunWorkflowID)
// and keys everything stored of it; and PublicID, the id its tenant knows
// it by and every answer shows, unique within the tenant. They are equal
// for a run whose id was generated; a caller-chosen id is the PublicID of
// a run with a generated key, so another tenant's choice of the same id is
// neither refused nor revealed.
type Run struct {
	ID            string `json:"-"`
	PublicID      string `json:"id"`
	TenantID      string `json:"tenant_id,omitempty"`
	HierarchyID   string `json:"hierarchy_id"`
	HierarchyName string `json:"hierarchy_name"`
	TotalTeams    int    `json:"total_teams"`
	WorkflowID    string `json:"workflow_id"`
	Task          string `json:"task"`
	// ThreadID names the run's thread: the public id of its first run. A
	// run started with previous_run_id (a follow-up) inherits its previous
	// run's thread; any other run starts a thread of its own.
	ThreadID string `json:"thread_id"`
	// PreviousRunID is the public id of the run this one follows up (of
	// the same tenant); empty for the first run of a thread.
	PreviousRunID string `json:"previous_run_id,omitempty"`
	// ScheduleID names the schedule that started the run (schedules/create);
	// empty for a run started by a client.
	ScheduleID string `json:"schedule_id,omitempty"`
	// QueueSeq is the run's place in its tenant's admission queue (0:
	// never queued); not shown.
	QueueSeq int64 `json:"-"`
	// QueuePosition is, on a run AdmitRun has just queued, its place in
	// its tenant's queue (1: next); 0 otherwise (not stored).
	QueuePosition int `json:"queue_position,omitempty"`
	// ForkedFrom names the run (by public id, of the same tenant) and the
	// event this run was forked from (runs/fork); nil for a run that is no
	// fork.
	ForkedFrom *models.ForkedFrom `json:"forked_from,omitempty"`
	// ExecutionConfig is the run's execution_config as it ran; nil for a
	// run stored before it was kept.
	ExecutionConfig *ExecutionConfig `json:"execution_config,omitempty"`
	// Hierarchy is the snapshot of the hierarchy the run ran, kept for
	// forks; not shown (nil for runs stored before it was kept).
	Hierarchy *models.Hierarchy `json:"-"`
	// AnswerMessageID and UserMessageID are caller-set message ids that
	// CreateRun claims for the run (see there); not stored on the run.
	AnswerMessageID string            `json:"-"`
	UserMessageID   string            `json:"-"`
	Status          string            `json:"status"`
	Result          *models.RunResult `json:"result,omitempty"`
	FinalAnswer     string            `json:"final_answer,omitempty"`
	Error           string            `json:"error,omitempty"`
	CreatedAt       time.Time         `json:"created_at"`
	StartedAt       *time.Time        `json:"started_at"`
	CompletedAt     *time.Time        `json:"completed_at"`
	UpdatedAt       time.Time         `json:"updated_at"`
}

// ExecutionConfig is what a run was started with of spec 001's
// execution_config, kept for forks (and shown by runs/get).
type ExecutionConfig struct {
	MaxParallelTeams int            `json:"max_parallel_teams"`
	Budget           *models.Budget `json:"budget,omitempty"`
	// StreamEvents and SaveIntermediateResults are spec 001's settings as
	// given (nil: not given; see docs/api-v1.md).
	StreamEvents            *bool `json:"stream_events,omitempty"`
	SaveIntermediateResults *bool `json:"save_intermediate_results,omitempty"`
}

// CreateRun stores a new run as pending, in the default tenant when
// r.TenantID is empty, and in a thread of its own when r.ThreadID is. In
// the same transaction it claims the run's caller-set message ids in its
// tenant: r.AnswerMessageID is reserved for the final answer and
// r.UserMessageID stores the task as the user's message (spec 003). A
// taken run id or message id is an AlreadyExists error whose Field is
// "id", "message_id" or "user_message_id", and nothing is stored; of two
// starts racing for one id, exactly one succeeds. Run ids are taken per
// tenant (r.PublicID, which defaults to r.ID); r.ID must be a new key.
func (s *Store) CreateRun(ctx context.Context, r *Run) error {
	row, err := newPendingRunRow(r)
	if err != nil {
		return err
	}
	taken := ""
	err = s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		return insertRun(tx, &row, r, &taken)
	})
	return takenError(err, taken, r)
}

// insertRun inserts a new run's row and claims its message ids in tx;
// taken names what was being claimed when an insert fails.
func insertRun(tx *gorm.DB, row *runRow, r *Run, taken *string) error {
	*taken = "id"
	if err := tx.Create(row).Error; err != nil {
		return err
	}
	if r.AnswerMessageID != "" {
		*taken = "message_id"
		if err := tx.Create(&messageRow{TenantID: r.TenantID, ID: r.AnswerMessageID, RunID: r.ID, AgentID: "", AgentType: reservedAgentType,
			Path: "[]", CreatedAt: row.CreatedAt, UpdatedAt: row.CreatedAt}).Error; err != nil {
			return err
		}
	}
	if r.UserMessageID != "" {
		*taken = "user_message_id"
		path, _ := json.Marshal([]string{models.AgentTypeUser})
		if err := tx.Create(&messageRow{TenantID: r.TenantID, ID: r.UserMessageID, RunID: r.ID, AgentID: models.AgentTypeUser,
			AgentType: models.AgentTypeUser, AgentName: models.AgentTypeUser, Path: string(path), Content: withoutNUL(r.Task),
			CreatedAt: row.CreatedAt, UpdatedAt: row.CreatedAt}).Error; err != nil {
			return err
		}
	}
	return nil
}

// takenError turns a duplicate key met claiming taken (see insertRun)
// into the AlreadyExists error CreateRun documents.
func takenError(err error, taken string, r *Run) error {
	if errors.Is(err, gorm.ErrDuplicatedKey) {
		// A caller-set id (spec 003) that is taken: the message says no
		// more than that. Run and message ids are the tenant's own.
		what := map[string]string{"id": "run id", "message_id": "message id", "user_message_id": "user message id"}[taken]
		id := map[string]string{"id": r.PublicID, "message_id": r.AnswerMessageID, "user_message_id": r.UserMessageID}[taken]
		e := models.Errorf(models.CodeAlreadyExists, "%s %q is taken", what, id)
		e.Field = taken
		return e
	}
	return err
}

// newPendingRunRow makes r a new pending run, in the default tenant when
// r.TenantID is empty and in a thread of its own when r.ThreadID is, and
// returns its row.
func newPendingRunRow(r *Run) (runRow, error) {
	now := time.Now().UTC()
	r.CreatedAt, r.UpdatedAt, r.Status = now, now, models.RunPending
	r.TenantID = tenantOr(r.TenantID)
	if r.PublicID == "" {
		r.PublicID = r.ID
	}
	if r.ThreadID == "" {
		r.ThreadID = r.PublicID
	}
	row := runRow{
		ID: r.ID, PublicID: r.PublicID, TenantID: r.TenantID, HierarchyID: r.HierarchyID, HierarchyName: r.HierarchyName, TotalTeams: r.TotalTeams, WorkflowID: r.WorkflowID,
		Task: r.Task, ThreadID: r.ThreadID, PreviousRunID: r.PreviousRunID, ScheduleID: r.ScheduleID, Status: r.Status, CreatedAt: now, UpdatedAt: now,
	}
	if r.Hierarchy != nil {
		raw, err := json.Marshal(r.Hierarchy)
		if err != nil {
			return row, err
		}
		row.HierarchySnapshot = string(raw)
	}
	if r.ExecutionConfig != nil {
		raw, err := json.Marshal(r.ExecutionConfig)
		if err != nil {
			return row, err
		}
		row.ExecutionConfig = string(raw)
	}
	if f := r.ForkedFrom; f != nil {
		row.ForkedFromRunID, row.ForkedFromSequence = f.RunID, f.Sequence
	}
	return row, nil
}

// DeleteRun removes a run that never started (its workflow could not be
// started), with the message ids it claimed and its one-off webhook, so no pending run or claim is
// left behind.
func (s *Store) DeleteRun(ctx context.Context, id string) error {
	return s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		res := tx.Where("id = ? AND status IN ?", id, []string{models.RunPending, models.RunQueued}).Delete(&runRow{})
		if res.Error != nil || res.RowsAffected == 0 {
			return res.Error
		}
		if err := tx.Where("run_id = ?", id).Delete(&webhookEndpointRow{}).Error; err != nil {
			return err
		}
		return tx.Where("run_id = ? AND agent_type IN ?", id, []string{reservedAgentType, models.AgentTypeUser}).Delete(&messageRow{}).Error
	})
}

// GetRun loads one run by its key (Run.ID), as the workflow, its
// activities and the event streams know it.
func (s *Store) GetRun(ctx context.Context, id string) (*Run, error) {
	var row runRow
	if err := s.db.WithContext(ctx).Where("id = ?", id).Take(&row).Error; err != nil {
		if notFound(err) {
			return nil, models.Errorf(models.CodeExecutionNotFound, "run %q not found", id)
		}
		return nil, err
	}
	return row.toRun()
}

// GetTenantRun loads the run that tenant knows by id (its Run.PublicID).
// With tenant "" (a principal that sees every tenant), a run of any tenant
// is found, prefer's first when two tenants use the same id. The tenant is
// part of the query, so an unknown id and another tenant's take the same
// path and answer the same error (issue 23, item 8).
func (s *Store) GetTenantRun(ctx context.Context, tenant, prefer, id string) (*Run, error) {
	var row runRow
	// A run written by a process older than migration 00026 has no
	// public_id: its key is its id.
	q := s.db.WithContext(ctx).Where("(public_id = ? OR (public_id IS NULL AND id = ?))", id, id)
	if tenant != "" {
		q = q.Where("tenant_id = ?", tenant)
	} else {
		q = q.Order(clause.OrderBy{Expression: clause.Expr{SQL: "CASE WHEN tenant_id = ? THEN 0 ELSE 1 END, created_at", Vars: []any{tenantOr(prefer)}, WithoutParentheses: true}})
	}
	if err := q.Take(&row).Error; err != nil {
		if notFound(err) {
			return nil, models.Errorf(models.CodeExecutionNotFound, "run %q not found", id)
		}
		return nil, err
	}
	return row.toRun()
}

// RunFilter selects runs to list (ListFilter.Tenant: of one tenant).
type RunFilter struct {
	ListFilter
	HierarchyID string
	Status      string
	// ThreadID selects the runs of one thread (see Run.ThreadID).
	ThreadID string
	// ForkedFrom selects the forks of one run.
	ForkedFrom string
	// ScheduleID selects the runs one schedule started.
	ScheduleID string
}

// ListRuns returns one page of runs, newest first, and the total count.
func (s *Store) ListRuns(ctx context.Context, f RunFilter) ([]*Run, int64, error) {
	q := f.scope(s.db.WithContext(ctx).Model(&runRow{}))
	if f.HierarchyID != "" {
		q = q.Where("hierarchy_id = ?", f.HierarchyID)
	}
	if f.Status != "" {
		q = q.Where("status = ?", f.Status)
	}
	if f.ThreadID != "" {
		q = q.Where("thread_id = ?", f.ThreadID)
	}
	if f.ForkedFrom != "" {
		q = q.Where("forked_from_run_id = ?", f.ForkedFrom)
	}
	if f.ScheduleID != "" {
		q = q.Where("schedule_id = ?", f.ScheduleID)
	}
	var total int64
	if err := q.Count(&total).Error; err != nil {
		return nil, 0, err
	}
	var rows []runRow
	// A listing shows no snapshot: it is left unread.
	if err := q.Omit("hierarchy_snapshot").Order("created_at DESC, id").Offset(f.offset()).Limit(f.PageSize).Find(&rows).Error; err != nil {
		return nil, 0, err
	}
	out := make([]*Run, 0, len(rows))
	for _, row := range rows {
		r, err := row.toRun()
		if err != nil {
			return nil, 0, err
		}
		out = append(out, r)
	}
	return out, total, nil
}

// CountActiveRuns counts tenant's runs that are pending or running ("" is
// the default tenant, as in CreateRun).
func (s *Store) CountActiveRuns(ctx context.Context, tenant string) (int64, error) {
	var n int64
	err := s.db.WithContext(ctx).Model(&runRow{}).
		Where("tenant_id = ? AND status IN ?", tenantOr(tenant), []string{models.RunPending, models.RunRunning, models.RunPaused, models.RunWaitingApproval}).
		Count(&n).Error
	return n, err
}

// SetRunStatus applies a status update idempotently: a run in a terminal
// status is never changed again, started_at is set once, and writing the
// same update twice leaves the same row.
func (s *Store) SetRunStatus(ctx context.Context, u models.RunStatusUpdate) error {
	_, err := s.UpdateRunStatus(ctx, u)
	return err
}

// UpdateRunStatus is SetRunStatus that also says whether this write changed
// the run: false when the run was already terminal. Of several processes
// finishing the same run, exactly one sees true, so it alone counts it.
func (s *Store) UpdateRunStatus(ctx context.Context, u models.RunStatusUpdate) (bool, error) {
	now := time.Now().UTC()
	updates := map[string]any{"status": u.Status, "updated_at": now}
	switch u.Status {
	case models.RunPaused, models.RunWaitingApproval:
	case models.RunRunning:
		updates["started_at"] = gorm.Expr("COALESCE(started_at, ?)", now)
	case models.RunCompleted, models.RunFailed, models.RunCancelled, models.RunTimedOut:
		updates["completed_at"] = now
		updates["started_at"] = gorm.Expr("COALESCE(started_at, ?)", now)
		updates["error"] = withoutNUL(u.Error)
		if u.Result != nil {
			drop, err := s.dropsIntermediate(ctx, u.RunID)
			if err != nil {
				return false, err
			}
			if drop {
				u.Result = withoutIntermediate(u.Result)
			}
			raw, err := json.Marshal(u.Result)
			if err != nil {
				return false, err
			}
			updates["result"] = string(raw)
			updates["final_answer"] = withoutNUL(u.Result.FinalAnswer)
		}
	default:
		return false, fmt.Errorf("unknown run status %q", u.Status)
	}
	res := s.db.WithContext(ctx).Model(&runRow{}).
		Where("id = ? AND status NOT IN ?", u.RunID, []string{models.RunCompleted, models.RunFailed, models.RunCancelled, models.RunTimedOut}).
		Updates(updates)
	if res.Error != nil {
		return false, res.Error
	}
	if res.RowsAffected == 0 {
		// Either already terminal (a retry or a late update: fine) or unknown.
		var n int64
		if err := s.db.WithContext(ctx).Model(&runRow{}).Where("id = ?", u.RunID).Count(&n).Error; err != nil {
			return false, err
		}
		if n == 0 {
			return false, models.Errorf(models.CodeExecutionNotFound, "run %q not found", u.RunID)
		}
	}
	if res.RowsAffected > 0 && models.IsTerminal(u.Status) {
		// The run's answers kept for retried attempts (those SaveAnswer did
		// not drop: runs that store their answers in the activity) are of
		// no use once it has ended. Best effort: the status is written.
		s.db.WithContext(ctx).Where("run_id = ?", u.RunID).Delete(&keptAnswerRow{})
	}
	return res.RowsAffected > 0, nil
}

func (row runRow) toRun() (*Run, error) {
	r := &Run{
		ID: row.ID, PublicID: row.PublicID, TenantID: row.TenantID, HierarchyID: row.HierarchyID, HierarchyName: row.HierarchyName, TotalTeams: row.TotalTeams, WorkflowID: row.WorkflowID,
		Task: row.Task, ThreadID: row.ThreadID, PreviousRunID: row.PreviousRunID, ScheduleID: row.ScheduleID, QueueSeq: row.QueueSeq, Status: row.Status, FinalAnswer: row.FinalAnswer, Error: row.Error,
		CreatedAt: row.CreatedAt.UTC(), StartedAt: utcPtr(row.StartedAt), CompletedAt: utcPtr(row.CompletedAt), UpdatedAt: row.UpdatedAt.UTC(),
	}
	if r.PublicID == "" {
		r.PublicID = r.ID // written by a process older than 00026
	}
	if r.ThreadID == "" {
		r.ThreadID = r.PublicID // written before the migration's backfill
	}
	if row.ForkedFromRunID != "" {
		r.ForkedFrom = &models.ForkedFrom{RunID: row.ForkedFromRunID, Sequence: row.ForkedFromSequence}
	}
	if row.HierarchySnapshot != "" {
		r.Hierarchy = &models.Hierarchy{}
		if err := json.Unmarshal([]byte(row.HierarchySnapshot), r.Hierarchy); err != nil {
			return nil, fmt.Errorf("run %s hierarchy snapshot: %w", row.ID, err)
		}
	}
	if row.ExecutionConfig != "" {
		r.ExecutionConfig = &ExecutionConfig{}
		if err := json.Unmarshal([]byte(row.ExecutionConfig), r.ExecutionConfig); err != nil {
			return nil, fmt.Errorf("run %s execution_config: %w", row.ID, err)
		}
	}
	if row.Result != "" {
		r.Result = &models.RunResult{}
		if err := json.Unmarshal([]byte(row.Result), r.Result); err != nil {
			return nil, fmt.Errorf("run %s result: %w", row.ID, err)
		}
	}
	return r, nil
}

func utcPtr(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	u := t.UTC()
	return &u
}

// LLMCall is one LLM call attempt's record.
type LLMCall struct {
	ID               string `gorm:"primaryKey"`
	RunID            string
	AgentID          string
	Purpose          string
	Model            string
	Provider         string
	Attempt          int
	Status           string
	PromptTokens     int
	CompletionTokens int
	TotalTokens      int
	// CachedTokens and CacheWriteTokens are the parts of PromptTokens read
	// from and written to the provider's cache, ReasoningTokens the part of
	// CompletionTokens spent reasoning (0 for calls stored before them).
	CachedTokens     int
	CacheWriteTokens int
	ReasoningTokens  int
	LatencyMs        int64
	FirstTokenMs     int64
	Error            string
	// CostUSD is the call's cost in US dollars; NULL when the call failed
	// or its model has no price.
	CostUSD *float64 `gorm:"column:cost_usd"`
	// TeamName is the team the call was made in ('' for the global
	// supervisor's calls and calls stored before the column); a
	// sub-agent's calls carry the team of the worker that delegated.
	TeamName string
	// AgentPath is the agent's path of agent_ids from the global
	// supervisor; nil for calls stored before the column.
	AgentPath []string `gorm:"serializer:json"`
	CreatedAt time.Time
}

// SubAgentCall tells whether the call was a sub-agent's: its path runs
// below a worker (global supervisor, team supervisor, worker, sub-agent…).
func (c LLMCall) SubAgentCall() bool { return len(c.AgentPath) > 3 }

func (LLMCall) TableName() string { return "llm_call" }

// RecordLLMCall stores a call; recording the same call id again is a no-op.
func (s *Store) RecordLLMCall(ctx context.Context, c *LLMCall) error {
	return recordLLMCall(s.db.WithContext(ctx), c)
}

func recordLLMCall(db *gorm.DB, c *LLMCall) error {
	if c.CreatedAt.IsZero() {
		c.CreatedAt = time.Now().UTC()
	}
	return db.Clauses(clause.OnConflict{DoNothing: true}).Create(c).Error
}

// LLMCallFromRecord is the row of a usage record.
func LLMCallFromRecord(r models.LLMCallRecord) *LLMCall {
	return &LLMCall{
		ID: r.ID, RunID: r.RunID, AgentID: r.AgentID, Purpose: r.Purpose, Model: r.Model, Provider: r.Provider,
		Attempt: r.Attempt, Status: r.Status, PromptTokens: r.PromptTokens, CompletionTokens: r.CompletionTokens,
		TotalTokens: r.TotalTokens, LatencyMs: r.LatencyMs, FirstTokenMs: r.FirstTokenMs, Error: r.Error,
		CostUSD: r.CostUSD, TeamName: r.TeamName, AgentPath: r.AgentPath,
		CachedTokens: r.CachedTokens, CacheWriteTokens: r.CacheWriteTokens, ReasoningTokens: r.ReasoningTokens,
	}
}

// LLMCalls returns a run's recorded calls in order.
// RunUsedOffline tells whether any successful LLM call of the run was
// answered by the built-in offline model (provider "offline").
func (s *Store) RunUsedOffline(ctx context.Context, runID string) (bool, error) {
	var n int64
	err := s.db.WithContext(ctx).Model(&LLMCall{}).Where("run_id = ? AND provider = ? AND status = ?", runID, "offline", "ok").Limit(1).Count(&n).Error
	return n > 0, err
}

func (s *Store) LLMCalls(ctx context.Context, runID string) ([]LLMCall, error) {
	var calls []LLMCall
	err := s.db.WithContext(ctx).Where("run_id = ?", runID).Order("created_at, id").Find(&calls).Error
	return calls, err
}

// RunUsage sums the recorded LLM calls of runs: tokens and cost per run.
// A successful call without a cost (its model has no price) makes its
// run's cost unknown. Runs without calls are left out.
func (s *Store) RunUsage(ctx context.Context, runIDs ...string) (map[string]models.Usage, error) {
	out := map[string]models.Usage{}
	if len(runIDs) == 0 {
		return out, nil
	}
	var rows []struct {
		RunID            string
		PromptTokens     int
		CompletionTokens int
		TotalTokens      int
		CachedTokens     int
		CacheWriteTokens int
		ReasoningTokens  int
		CostUSD          *float64
		Unpriced         int
	}
	err := s.db.WithContext(ctx).Model(&LLMCall{}).
		Select("run_id, SUM(prompt_tokens) AS prompt_tokens, SUM(completion_tokens) AS completion_tokens, SUM(total_tokens) AS total_tokens, "+
			"SUM(cached_tokens) AS cached_tokens, SUM(cache_write_tokens) AS cache_write_tokens, SUM(reasoning_tokens) AS reasoning_tokens, "+
			"SUM(cost_usd) AS cost_usd, SUM(CASE WHEN status = 'ok' AND cost_usd IS NULL THEN 1 ELSE 0 END) AS unpriced").
		Where("run_id IN ?", runIDs).Group("run_id").Scan(&rows).Error
	if err != nil {
		return nil, err
	}
	for _, r := range rows {
		u := models.Usage{PromptTokens: r.PromptTokens, CompletionTokens: r.CompletionTokens, TotalTokens: r.TotalTokens, CostUnknown: r.Unpriced > 0,
			CachedTokens: r.CachedTokens, CacheWriteTokens: r.CacheWriteTokens, ReasoningTokens: r.ReasoningTokens}
		if r.CostUSD != nil {
			u.CostUSD = *r.CostUSD
		}
		out[r.RunID] = u
	}
	return out, nil
}

// dropsIntermediate tells whether a run was started with spec 001's
// execution_config.save_intermediate_results false and has not ended yet
// (its terminal write is the one that drops them, once). Intermediate
// results are its agents' answers: they are the run's working context
// while it runs, and are not kept after it.
func (s *Store) dropsIntermediate(ctx context.Context, runID string) (bool, error) {
	var rows []runRow
	if err := s.db.WithContext(ctx).Select("execution_config", "status").Where("id = ?", runID).Limit(1).Find(&rows).Error; err != nil {
		return false, err
	}
	if len(rows) == 0 || rows[0].ExecutionConfig == "" || models.IsTerminal(rows[0].Status) {
		return false, nil
	}
	var ec ExecutionConfig
	if err := json.Unmarshal([]byte(rows[0].ExecutionConfig), &ec); err != nil {
		return false, fmt.Errorf("run %s execution_config: %w", runID, err)
	}
	if ec.SaveIntermediateResults == nil || *ec.SaveIntermediateResults {
		return false, nil
	}
	// The workers' and sub-agents' stored answers (spec 003's messages)
	// keep their place in the run's message tree, without their text.
	err := s.db.WithContext(ctx).Model(&messageRow{}).
		Where("run_id = ? AND agent_type IN ?", runID, []string{models.AgentTypeWorker, models.AgentTypeSubAgent}).
		Updates(map[string]any{"content": "", "updated_at": time.Now().UTC()}).Error
	return true, err
}

// withoutIntermediate is r without its workers' answers: statuses, tools
// and usage stay, the final answer stays.
func withoutIntermediate(r *models.RunResult) *models.RunResult {
	out := *r
	out.Teams = models.CloneTeams(r.Teams)
	for i := range out.Teams {
		for j := range out.Teams[i].Workers {
			w := &out.Teams[i].Workers[j]
			w.Output, w.OutputChars, w.OutputTruncated, w.MessageID = "", 0, false, ""
		}
	}
	return &out
}
