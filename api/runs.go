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
	"go.temporal.io/sdk/temporal"

	"github.com/op-stack/executor/llm"
	"github.com/op-stack/executor/models"
	"github.com/op-stack/executor/store"
)

type startInput struct {
	HierarchyID     string                `json:"hierarchy_id"`
	Task            string                `json:"task"`
	ExecutionConfig *executionConfigInput `json:"execution_config"`
}

// executionConfigInput is spec 001's execution_config of a start.
type executionConfigInput struct {
	StreamEvents            *bool `json:"stream_events"`
	SaveIntermediateResults *bool `json:"save_intermediate_results"`
	MaxParallelTeams        int   `json:"max_parallel_teams"`
}

func (in *executionConfigInput) options() (StartOptions, error) {
	if in == nil {
		return StartOptions{}, nil
	}
	if in.MaxParallelTeams < 0 {
		return StartOptions{}, models.FieldError("execution_config.max_parallel_teams", "must be 0 (the hierarchy's) or more, got %d", in.MaxParallelTeams)
	}
	return StartOptions{MaxParallelTeams: in.MaxParallelTeams}, nil
}

type runIDInput struct {
	ID    string `json:"id"`
	RunID string `json:"run_id"`
}

func (in runIDInput) id() (string, error) {
	id := strings.TrimSpace(firstNonEmpty(in.ID, in.RunID))
	if id == "" {
		return "", models.FieldError("id", "is required")
	}
	return id, nil
}

// queryTimeout bounds a workflow query made while answering a request.
const queryTimeout = 3 * time.Second

// controlTimeout bounds how long pause and resume wait for the run's
// workflow to answer.
const controlTimeout = 30 * time.Second

// startRun stores a pending run and starts its workflow with a snapshot of
// the hierarchy, so later edits never change a run in flight.
func (s *Server) startRun(c *gin.Context) {
	var in startInput
	if err := decodeJSON(c, &in); err != nil {
		s.writeError(c, err)
		return
	}
	hierarchyID := strings.TrimSpace(in.HierarchyID)
	if hierarchyID == "" {
		s.writeError(c, models.FieldError("hierarchy_id", "is required"))
		return
	}
	if strings.TrimSpace(in.Task) == "" {
		s.writeError(c, models.FieldError("task", "must not be empty"))
		return
	}
	ctx := c.Request.Context()
	h, err := s.visibleHierarchy(ctx, hierarchyID)
	if err != nil {
		s.writeError(c, err)
		return
	}
	opts, err := in.ExecutionConfig.options()
	if err != nil {
		s.writeError(c, err)
		return
	}
	run, err := s.runs.Start(ctx, h, in.Task, opts)
	if err != nil {
		s.writeError(c, err)
		return
	}
	ok(c, gin.H{"id": run.ID, "workflow_id": run.WorkflowID, "status": run.Status})
}

// Runs starts runs: the part of the API that talks to Temporal.
type Runs struct {
	Store     *store.Store
	Temporal  client.Client
	TaskQueue string
	Options   models.RunOptions
	// Models checks, before a run starts, that every agent's model routes
	// to a supported, configured provider; nil skips the check.
	Models ModelChecker
	// MaxConcurrentRuns is how many runs one tenant may have pending or
	// running; a start beyond it is refused with 429. Zero: unlimited. The
	// check counts stored runs, so starts racing on several replicas may
	// pass it together: it bounds spending, it is not exact.
	MaxConcurrentRuns int
	// TenantSearchAttribute says the namespace has the TenantId search
	// attribute (decided apart from Options.SearchAttributes, which a
	// namespace set up before tenants has without it).
	TenantSearchAttribute bool
}

// ModelChecker resolves an agent's model as the worker will
// (llm.Router.CheckRequest): an unknown provider is PROVIDER_NOT_SUPPORTED,
// one without its key MISSING_API_KEY, a disallowed base URL or region
// INVALID_CONFIG.
type ModelChecker interface {
	CheckRequest(req llm.Request) error
}

// StartOptions are per-run settings a start may give (spec 001's
// execution_config).
type StartOptions struct {
	MaxParallelTeams int
}

// Start checks the agents' providers, stores a pending run and starts its
// workflow. If the workflow cannot be started, the run row is removed again.
func (r *Runs) Start(ctx context.Context, h *models.Hierarchy, task string, opts StartOptions) (*store.Run, error) {
	if err := r.checkModels(h); err != nil {
		return nil, err
	}
	// A run belongs to its hierarchy's tenant, whoever starts it (an admin
	// may start another tenant's hierarchy): never to a tenant the request
	// names.
	tenant := tenantOrDefault(h.TenantID)
	if r.MaxConcurrentRuns > 0 {
		n, err := r.Store.CountActiveRuns(ctx, tenant)
		if err != nil {
			return nil, err
		}
		if n >= int64(r.MaxConcurrentRuns) {
			return nil, models.Errorf(models.CodeRateLimited, "the tenant has %d runs pending or running, the most allowed (MAX_CONCURRENT_RUNS_PER_TENANT); retry when one ends", n)
		}
	}
	id := models.NewID()
	run := &store.Run{
		ID: id, HierarchyID: h.ID, HierarchyName: h.Name, TotalTeams: len(h.Teams),
		WorkflowID: models.RunWorkflowID(id), Task: task, TenantID: tenant,
	}
	if err := r.Store.CreateRun(ctx, run); err != nil {
		return nil, err
	}
	start := client.StartWorkflowOptions{
		ID:            run.WorkflowID,
		TaskQueue:     r.TaskQueue,
		StaticSummary: h.Name + ": " + oneLine(task, 200),
		StaticDetails: fmt.Sprintf("Hierarchy %s (%s), %d teams, %s.\n\nTask: %s", h.Name, h.ID, len(h.Teams), h.ExecutionMode, task),
	}
	var attrs []temporal.SearchAttributeUpdate
	if r.Options.SearchAttributes {
		attrs = append(attrs,
			models.SearchHierarchyID.ValueSet(h.ID),
			models.SearchHierarchyName.ValueSet(h.Name),
			models.SearchRunStatus.ValueSet(models.RunPending),
		)
	}
	if r.TenantSearchAttribute {
		attrs = append(attrs, models.SearchTenantID.ValueSet(tenant))
	}
	if len(attrs) > 0 {
		start.TypedSearchAttributes = temporal.NewSearchAttributes(attrs...)
	}
	_, err := r.Temporal.ExecuteWorkflow(ctx, start, models.RunWorkflowName, models.RunInput{RunID: id, Task: task, Hierarchy: *h, Options: r.runOptions(tenant, opts)})
	if err != nil {
		_ = r.Store.DeleteRun(context.WithoutCancel(ctx), id)
		return nil, &models.Error{Code: models.CodeUnavailable, Message: "could not start the run's workflow: Temporal is unavailable", Err: err}
	}
	return run, nil
}

func (r *Runs) runOptions(tenant string, opts StartOptions) models.RunOptions {
	o := r.Options
	o.Tenant = tenant
	if opts.MaxParallelTeams > 0 {
		o.MaxParallelTeams = opts.MaxParallelTeams
	}
	return o
}

// checkModels fails fast, before anything is stored, when an agent could
// not reach its model, instead of failing later mid-run.
func (r *Runs) checkModels(h *models.Hierarchy) error {
	if r.Models == nil {
		return nil
	}
	check := func(field string, a models.Agent) error {
		model := a.Model
		if model == "" {
			model = r.Options.DefaultModel
		}
		if err := r.Models.CheckRequest(llm.Request{Model: model, Provider: a.Provider, BaseURL: a.BaseURL, Region: a.Region}); err != nil {
			var e *models.Error
			if errors.As(err, &e) {
				return &models.Error{Code: e.Code, Field: field, Message: fmt.Sprintf("%s (agent_id %s): %s", field, a.AgentID, e.Message)}
			}
			return err
		}
		return nil
	}
	if err := check("global_supervisor_agent", h.GlobalSupervisor); err != nil {
		return err
	}
	for i, t := range h.Teams {
		if err := check(fmt.Sprintf("teams[%d].team_supervisor_agent", i), t.Supervisor); err != nil {
			return err
		}
		for j, w := range t.Workers {
			if err := check(fmt.Sprintf("teams[%d].workers[%d]", i, j), w); err != nil {
				return err
			}
		}
	}
	return nil
}

// runView is runs/get's answer.
type runView struct {
	*store.Run
	Progress progressView `json:"progress"`
}

type progressView struct {
	CurrentTeam          string   `json:"current_team"`
	CurrentWorker        string   `json:"current_worker"`
	ActiveAgentID        string   `json:"active_agent_id"`
	CompletedTeams       []string `json:"completed_teams"`
	TotalTeams           int      `json:"total_teams"`
	CompletionPercentage int      `json:"completion_percentage"`
}

func (s *Server) getRun(c *gin.Context) {
	id, valid := readID[runIDInput](s, c)
	if !valid {
		return
	}
	run, err := s.visibleRun(c.Request.Context(), id)
	if err != nil {
		s.writeError(c, err)
		return
	}
	if reconciled, err := s.runs.Reconcile(c.Request.Context(), run); err == nil {
		run = reconciled
	} else {
		s.log.Warn("reconcile run", "run_id", id, "error", err)
	}
	ok(c, s.viewRun(c.Request.Context(), run))
}

// viewRun adds the progress: from the workflow while the run is live, from
// the stored result once it has ended.
func (s *Server) viewRun(ctx context.Context, run *store.Run) runView {
	v := runView{Run: run, Progress: progressView{TotalTeams: run.TotalTeams, CompletedTeams: []string{}}}
	if run.Result != nil {
		for _, t := range run.Result.Teams {
			if !contains(v.Progress.CompletedTeams, t.TeamName) {
				v.Progress.CompletedTeams = append(v.Progress.CompletedTeams, t.TeamName)
			}
		}
	}
	if !models.IsTerminal(run.Status) && s.runs != nil {
		qctx, cancel := context.WithTimeout(ctx, queryTimeout)
		defer cancel()
		if p, err := s.queryProgress(qctx, run.WorkflowID); err == nil {
			v.Progress.CurrentTeam, v.Progress.CurrentWorker, v.Progress.ActiveAgentID = p.CurrentTeam, p.CurrentWorker, p.ActiveAgentID
			v.Progress.CompletedTeams = p.CompletedTeams
		} else {
			s.log.Debug("progress query", "run_id", run.ID, "error", err)
		}
	}
	if v.Progress.TotalTeams > 0 {
		v.Progress.CompletionPercentage = min(100, 100*len(v.Progress.CompletedTeams)/v.Progress.TotalTeams)
	}
	if run.Status == models.RunCompleted {
		v.Progress.CompletionPercentage = 100
	}
	return v
}

func (s *Server) queryProgress(ctx context.Context, workflowID string) (models.Progress, error) {
	var p models.Progress
	resp, err := s.runs.Temporal.QueryWorkflow(ctx, workflowID, "", models.QueryProgress)
	if err != nil {
		return p, err
	}
	return p, resp.Get(&p)
}

type listRunsInput struct {
	pageInput
	HierarchyID string `json:"hierarchy_id"`
	Status      string `json:"status"`
}

func (s *Server) listRuns(c *gin.Context) {
	var in listRunsInput
	f, valid := s.readPage(c, &in)
	if !valid {
		return
	}
	if in.Status != "" && !contains(models.RunStatuses, in.Status) {
		s.writeError(c, models.FieldError("status", "must be one of %s; got %q", strings.Join(models.RunStatuses, ", "), in.Status))
		return
	}
	f.Tenant = tenantFilter(c.Request.Context())
	runs, total, err := s.store.ListRuns(c.Request.Context(), store.RunFilter{ListFilter: f, HierarchyID: strings.TrimSpace(in.HierarchyID), Status: in.Status})
	if err != nil {
		s.writeError(c, err)
		return
	}
	ok(c, gin.H{"items": runs, "total": total, "page": f.Page, "page_size": f.PageSize})
}

// cancelRun asks the run's workflow to cancel. The workflow stops its LLM
// calls and records the run as cancelled; cancelling a cancelled run again
// succeeds, cancelling a finished one is a conflict.
func (s *Server) cancelRun(c *gin.Context) {
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
	switch run.Status {
	case models.RunCancelled:
		ok(c, gin.H{"id": id, "status": run.Status})
		return
	case models.RunCompleted, models.RunFailed, models.RunTimedOut:
		s.writeError(c, models.Errorf(models.CodeExecutionInProgress, "run %q has already %s and cannot be cancelled", id, run.Status))
		return
	}
	if err := s.runs.Temporal.CancelWorkflow(ctx, run.WorkflowID, ""); err != nil {
		var notFound *serviceerror.NotFound
		if errors.As(err, &notFound) {
			s.writeError(c, models.Errorf(models.CodeExecutionInProgress, "run %q is no longer running", id))
			return
		}
		s.writeError(c, &models.Error{Code: models.CodeUnavailable, Message: "could not cancel the run: Temporal is unavailable", Err: err})
		return
	}
	ok(c, gin.H{"id": id, "status": "cancelling"})
}

// pauseRun and resumeRun pause and resume a run (see setPaused).
func (s *Server) pauseRun(c *gin.Context)  { s.setPausedRun(c, true) }
func (s *Server) resumeRun(c *gin.Context) { s.setPausedRun(c, false) }

func (s *Server) setPausedRun(c *gin.Context, paused bool) {
	id, valid := readID[runIDInput](s, c)
	if !valid {
		return
	}
	status, err := s.setPaused(c.Request.Context(), id, paused)
	if err != nil {
		s.writeError(c, err)
		return
	}
	ok(c, gin.H{"id": id, "status": status})
}

// setPaused pauses or resumes a run through its workflow's pause or resume
// update and returns the run's status after: "paused" or "running".
// Pausing a paused run, or resuming a running one, changes nothing and
// answers the same; a run that has ended is a conflict. In-flight LLM
// calls finish; nothing new starts until the run is resumed.
func (s *Server) setPaused(ctx context.Context, id string, paused bool) (string, error) {
	run, err := s.visibleRun(ctx, id)
	if err != nil {
		return "", err
	}
	verb := "resumed"
	if paused {
		verb = "paused"
	}
	if models.IsTerminal(run.Status) {
		return "", models.Errorf(models.CodeExecutionInProgress, "run %q has already %s and cannot be %s", id, run.Status, verb)
	}
	if s.runs == nil || s.runs.Temporal == nil {
		return "", models.Errorf(models.CodeUnavailable, "runs are not controlled by this process")
	}
	name := models.UpdateResume
	if paused {
		name = models.UpdatePause
	}
	// The workflow answers within a workflow task; without a worker it
	// never does, and the caller is told so rather than kept waiting.
	ctx, cancel := context.WithTimeout(ctx, controlTimeout)
	defer cancel()
	handle, err := s.runs.Temporal.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{
		WorkflowID: run.WorkflowID, UpdateName: name, WaitForStage: client.WorkflowUpdateStageCompleted,
	})
	var status string
	if err == nil {
		err = handle.Get(ctx, &status)
	}
	if err != nil {
		var notFound *serviceerror.NotFound
		var appErr *temporal.ApplicationError
		switch {
		case errors.As(err, &notFound):
			return "", models.Errorf(models.CodeExecutionInProgress, "run %q is no longer running", id)
		case errors.As(err, &appErr):
			// The workflow's validator refused: the run has ended meanwhile,
			// or started before pause was supported.
			return "", models.Errorf(models.CodeExecutionInProgress, "run %q cannot be %s: %s", id, verb, appErr.Message())
		}
		if ctx.Err() != nil {
			return "", &models.Error{Code: models.CodeUnavailable, Message: fmt.Sprintf("the run's workflow did not answer within %s: is a worker running?", controlTimeout), Err: err}
		}
		return "", &models.Error{Code: models.CodeUnavailable, Message: "could not reach the run's workflow: Temporal is unavailable", Err: err}
	}
	return status, nil
}

func oneLine(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > n {
		return string(r[:n]) + "…"
	}
	return s
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
