package api

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/gin-gonic/gin"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"

	"github.com/op-stack/executor/models"
	"github.com/op-stack/executor/store"
)

// Time travel (docs/time-travel.md): runs/fork starts a new run from the
// state a finished run had right after one of its events, as a new
// RunWorkflow seeded from what the original stored (RunInput.Fork), not
// with Temporal's reset: a reset needs the original's history to be in
// retention still, and rewrites that workflow rather than giving the fork
// an id and a stream of its own.

type forkInput struct {
	ID            string            `json:"id"`
	RunID         string            `json:"run_id"`
	AfterSequence *int64            `json:"after_sequence"`
	Changes       *forkChangesInput `json:"changes"`
}

func (in forkInput) id() (string, error) { return runIDInput{ID: in.ID, RunID: in.RunID}.id() }

// forkChangesInput is runs/fork's changes: the fork's own (models) and an
// execution_config replacing the original's whole.
type forkChangesInput struct {
	models.ForkChanges
	ExecutionConfig *executionConfigInput `json:"execution_config"`
}

// forkRun is runs/fork.
func (s *Server) forkRun(c *gin.Context) {
	in, id, valid := readIDBody[forkInput](s, c)
	if !valid {
		return
	}
	if in.AfterSequence == nil {
		s.writeError(c, models.FieldError("after_sequence", "is required: the sequence of the event to fork after (runs/fork-points lists them)"))
		return
	}
	if *in.AfterSequence < 1 {
		s.writeError(c, models.FieldError("after_sequence", "must be 1 or more, got %d", *in.AfterSequence))
		return
	}
	ctx := c.Request.Context()
	run, an, err := s.forkAnalysis(ctx, id)
	if err != nil {
		s.writeError(c, err)
		return
	}
	point, err := an.Resolve(*in.AfterSequence)
	if err != nil {
		s.writeError(c, err)
		return
	}
	fork, err := s.runs.Fork(ctx, run, an, point, in.Changes)
	if err != nil {
		s.writeError(c, err)
		return
	}
	ok(c, gin.H{"id": fork.PublicID, "workflow_id": fork.WorkflowID, "status": fork.Status, "thread_id": fork.ThreadID,
		"forked_from": fork.ForkedFrom, "fork_point": point, "requested_sequence": *in.AfterSequence})
}

// forkPoints is runs/fork-points: the points runs/fork accepts, from the
// same analysis.
func (s *Server) forkPoints(c *gin.Context) {
	id, valid := readID[runIDInput](s, c)
	if !valid {
		return
	}
	run, an, err := s.forkAnalysis(c.Request.Context(), id)
	if err != nil {
		s.writeError(c, err)
		return
	}
	ok(c, gin.H{"id": run.PublicID, "points": an.Points})
}

// forkAnalysis reads a run the caller can see (404 otherwise) that has
// finished (409 otherwise) and analyses its stored events and result for
// fork points.
func (s *Server) forkAnalysis(ctx context.Context, id string) (*store.Run, *models.ForkAnalysis, error) {
	run, err := s.visibleRun(ctx, id)
	if err != nil {
		return nil, nil, err
	}
	if !models.IsTerminal(run.Status) && s.runs != nil {
		if reconciled, err := s.runs.Reconcile(ctx, run); err == nil {
			run = reconciled
		}
	}
	if !models.IsTerminal(run.Status) {
		return nil, nil, models.Errorf(models.CodeExecutionInProgress, "run %q is still %s; it can be forked once it has finished", id, run.Status)
	}
	events, err := s.store.RunEvents(ctx, run.ID, 0)
	if err != nil {
		return nil, nil, err
	}
	return run, models.AnalyzeFork(events, run.Result), nil
}

// Fork stores and starts a fork of run at point with changes (nil: none):
// the original's hierarchy snapshot and execution_config with the changes
// applied, checked as a start's are; the events up to the point and the
// usage records of the calls among them copied under the fork's id; and a
// RunWorkflow seeded with the state at the point.
func (r *Runs) Fork(ctx context.Context, run *store.Run, an *models.ForkAnalysis, point models.ForkPoint, changes *forkChangesInput) (*store.Run, error) {
	h, err := r.forkHierarchy(ctx, run)
	if err != nil {
		return nil, err
	}
	if changes == nil {
		changes = &forkChangesInput{}
	}
	// The fork names its original as the tenant knows it.
	seed := an.Seed(run.PublicID, point)
	if err := models.ApplyForkChanges(seed, point, changes.ForkChanges, h, run.Task); err != nil {
		return nil, err
	}
	var opts StartOptions
	if cfg := run.ExecutionConfig; cfg != nil {
		opts.MaxParallelTeams, opts.Budget = cfg.MaxParallelTeams, cfg.Budget
	}
	if changes.ExecutionConfig != nil {
		if opts, err = changes.ExecutionConfig.options(); err != nil {
			var e *models.Error
			if errors.As(err, &e) {
				e.Field, e.Message = "changes."+e.Field, "changes."+e.Message
			}
			return nil, err
		}
		if err := models.CheckBudget(opts.Budget, "changes.execution_config.budget", h); err != nil {
			return nil, err
		}
		if opts.Budget == nil {
			opts.Budget = h.Budget // as a start's: the hierarchy's default
		}
	}
	offline, err := r.checkModels(h)
	if err != nil {
		return nil, err
	}
	tenant := tenantOrDefault(run.TenantID)
	if err := r.checkConcurrency(ctx, tenant); err != nil {
		return nil, err
	}
	id := models.NewID()
	fork := &store.Run{
		ID: id, HierarchyID: run.HierarchyID, HierarchyName: h.Name, TotalTeams: len(h.Teams),
		WorkflowID: models.RunWorkflowID(id), Task: run.Task, TenantID: tenant,
		ThreadID: run.ThreadID, PreviousRunID: run.PreviousRunID,
		Hierarchy: h, ExecutionConfig: &store.ExecutionConfig{MaxParallelTeams: opts.MaxParallelTeams, Budget: opts.Budget},
		ForkedFrom: &seed.From,
	}
	var previous *models.PreviousRun
	if run.PreviousRunID != "" {
		// A follow-up's fork follows up the same run (of the same tenant).
		p, err := r.Store.GetTenantRun(ctx, tenant, tenant, run.PreviousRunID)
		if err != nil {
			return nil, err
		}
		if previous, err = r.previousInput(ctx, p, run.ThreadID); err != nil {
			return nil, err
		}
	}
	events, calls := forkCopies(an, id, point.Sequence)
	if err := r.Store.CreateFork(ctx, fork, events, calls); err != nil {
		return nil, err
	}
	start := client.StartWorkflowOptions{
		ID:            fork.WorkflowID,
		TaskQueue:     r.TaskQueue,
		StaticSummary: fmt.Sprintf("%s: fork of %s at %d: %s", h.Name, run.PublicID, point.Sequence, oneLine(run.Task, 160)),
		StaticDetails: fmt.Sprintf("Hierarchy %s (%s), %d teams, %s.\n\nTask: %s\n\nForked from run %s (workflow %s) after event %d (%s, team %s).",
			h.Name, h.ID, len(h.Teams), h.ExecutionMode, run.Task, run.PublicID, run.WorkflowID, point.Sequence, point.Kind, point.TeamName),
	}
	start.TypedSearchAttributes = r.startSearchAttributes(h, tenant, run.PublicID)
	_, err = r.Temporal.ExecuteWorkflow(ctx, start, models.RunWorkflowName, models.RunInput{
		RunID: id, Task: run.Task, Hierarchy: *h, Options: r.runOptions(tenant, opts, firstNonEmpty(fork.ThreadID, fork.PublicID, fork.ID)), OfflineAgents: offline, Previous: previous, Fork: seed,
	})
	if err != nil {
		_ = r.Store.DeleteFork(context.WithoutCancel(ctx), id)
		var started *serviceerror.WorkflowExecutionAlreadyStarted
		if errors.As(err, &started) {
			return nil, &models.Error{Code: models.CodeAlreadyExists, Message: fmt.Sprintf("run id %q is taken", id), Err: err}
		}
		return nil, &models.Error{Code: models.CodeUnavailable, Message: "could not start the fork's workflow: Temporal is unavailable", Err: err}
	}
	return fork, nil
}

// forkHierarchy is the fork's copy of the hierarchy its original ran: the
// stored snapshot, or for a run stored before snapshots were kept, its
// hierarchy as stored now.
func (r *Runs) forkHierarchy(ctx context.Context, run *store.Run) (*models.Hierarchy, error) {
	if run.Hierarchy != nil {
		h := *run.Hierarchy // a fresh copy: decoded for this request
		return &h, nil
	}
	h, err := r.Store.GetHierarchy(ctx, run.HierarchyID)
	if err != nil {
		if models.ErrorCode(err) == models.CodeHierarchyNotFound {
			return nil, models.Errorf(models.CodeExecutionInProgress, "run %q was stored before runs kept their hierarchy, and its hierarchy %q is deleted: it cannot be forked", run.PublicID, run.HierarchyID)
		}
		return nil, err
	}
	return h, nil
}

// checkConcurrency refuses a start beyond MaxConcurrentRuns (429).
func (r *Runs) checkConcurrency(ctx context.Context, tenant string) error {
	if r.MaxConcurrentRuns <= 0 {
		return nil
	}
	n, err := r.Store.CountActiveRuns(ctx, tenant)
	if err != nil {
		return err
	}
	if n >= int64(r.MaxConcurrentRuns) {
		return models.Errorf(models.CodeRateLimited, "the tenant has %d runs pending or running, the most allowed (MAX_CONCURRENT_RUNS_PER_TENANT); retry when one ends", n)
	}
	return nil
}

// forkCopies are what a fork copies from its original up to the fork
// point: the events, the same but for their run_id, and a usage record
// for each call their llm.usage events report (tokens, cost, model, agent
// and purpose; latencies are not copied).
func forkCopies(an *models.ForkAnalysis, forkID string, upTo int64) ([]models.Event, []*store.LLMCall) {
	var events []models.Event
	var calls []*store.LLMCall
	for _, e := range an.Events() {
		if e.Sequence > upTo {
			break
		}
		e.RunID = forkID
		events = append(events, e)
		if e.Event.Category != models.CategoryLLM || e.Event.Action != models.ActionUsage {
			continue
		}
		u := models.UsageOfEvent(e)
		model, _ := e.Data["model"].(string)
		purpose, _ := e.Data["purpose"].(string)
		call := &store.LLMCall{
			ID: fmt.Sprintf("fork:%s:%d", forkID, e.Sequence), RunID: forkID, AgentID: e.Source.AgentID, Purpose: purpose,
			Model: model, Attempt: 1, Status: "ok",
			PromptTokens: u.PromptTokens, CompletionTokens: u.CompletionTokens, TotalTokens: u.TotalTokens,
		}
		if strings.EqualFold(model, "offline") {
			call.Provider = "offline"
		}
		if !u.CostUnknown {
			cost := u.CostUSD
			call.CostUSD = &cost
		}
		if t, err := time.Parse(models.TimestampLayout, e.Timestamp); err == nil {
			call.CreatedAt = t
		}
		calls = append(calls, call)
	}
	return events, calls
}
