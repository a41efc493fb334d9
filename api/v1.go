package api

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/gin-gonic/gin"
	"go.temporal.io/api/serviceerror"

	"github.com/op-stack/executor/models"
	"github.com/op-stack/executor/store"
)

// V1Prefix is the path prefix of spec 001's REST surface. It is served by
// the same store and engine as the executor API; only the shapes differ.
// docs/api-v1.md documents it.
const V1Prefix = "/api/v1"

// Spec 001's success codes.
const (
	CodeTeamCreated               = "TEAM_CREATED"
	CodeTeamInfoRetrieved         = "TEAM_INFO_RETRIEVED"
	CodeTeamUpdated               = "TEAM_UPDATED"
	CodeTeamDeleted               = "TEAM_DELETED"
	CodeExecutionStarted          = "EXECUTION_STARTED"
	CodeExecutionInfoRetrieved    = "EXECUTION_INFO_RETRIEVED"
	CodeExecutionCompleted        = "EXECUTION_COMPLETED"
	CodeExecutionCancelled        = "EXECUTION_CANCELLED"
	CodeExecutionPaused           = "EXECUTION_PAUSED"
	CodeExecutionResumed          = "EXECUTION_RESUMED"
	CodeResultsRetrieved          = "RESULTS_RETRIEVED"
	CodeFormattedResultsGenerated = "FORMATTED_RESULTS_GENERATED"
)

// routeV1 registers spec 001's endpoints. Errors on them are answered in
// spec 001's envelope by writeError (see markDialect).
func (s *Server) routeV1(g *gin.RouterGroup) {
	teams := g.Group("/hierarchical-teams", v1Resource("team_id"))
	teams.POST("", s.idempotentCreate("v1/hierarchical-teams"), s.v1CreateTeam)
	teams.GET("/:id", s.v1GetTeam)
	teams.PUT("/:id", s.v1UpdateTeam)
	teams.DELETE("/:id", s.v1DeleteTeam)
	teams.POST("/:id/execute", s.requireRuns, s.idempotentCreate("v1/hierarchical-teams/execute"), s.v1Execute)

	ex := g.Group("/executions", v1Resource("execution_id"))
	ex.GET("/:id", s.v1GetExecution)
	ex.GET("/:id/stream", s.v1StreamGET)
	ex.GET("/:id/ws", s.v1WSGET)
	ex.POST("/:id/stream-token", s.v1CreateStreamToken)
	ex.GET("/:id/results", s.v1Results)
	ex.POST("/:id/results/format", s.requireRuns, s.v1FormatResults)
	ex.POST("/:id/cancel", s.requireRuns, s.v1Cancel)
	ex.POST("/:id/pause", s.requireRuns, s.v1Pause)
	ex.POST("/:id/resume", s.requireRuns, s.v1Resume)

	g.GET("/artifacts/:id", v1Resource("artifact_id"), s.downloadArtifact)
}

// okV1 writes spec 001's success envelope.
func okV1(c *gin.Context, code, message string, data any) {
	c.JSON(http.StatusOK, v1OKBody{Success: true, Code: code, Data: data, Message: message})
}

// v1OKBody is spec 001's success envelope, in its field order.
type v1OKBody struct {
	Success bool   `json:"success"`
	Code    string `json:"code"`
	Data    any    `json:"data"`
	Message string `json:"message"`
}

// pathID is the :id path parameter, required.
func pathID(c *gin.Context, name string) (string, error) {
	id := strings.TrimSpace(c.Param("id"))
	if id == "" {
		return "", models.FieldError(name, "is required")
	}
	return id, nil
}

// decodeOptionalJSON decodes a body that may be absent: spec 001's execute
// and cancel need none. An empty body leaves dst as it is.
func decodeOptionalJSON(c *gin.Context, dst any) error {
	if c.Request.Body == nil {
		return nil
	}
	raw, err := io.ReadAll(c.Request.Body)
	if err != nil {
		return bodyError(err)
	}
	if len(bytes.TrimSpace(raw)) == 0 {
		return nil
	}
	c.Request.Body = io.NopCloser(bytes.NewReader(raw))
	return decodeJSON(c, dst)
}

// v1ExecuteInput is the body of POST /hierarchical-teams/{id}/execute.
// Spec 001 has no task field: Task is this service's addition; without it
// the task is the top supervisor's user_prompt, else the team's
// description.
type v1ExecuteInput struct {
	ExecutionConfig *struct {
		// StreamEvents false turns spec 001's event stream of the
		// execution off (default: the team's enable_streaming);
		// SaveIntermediateResults false keeps only the final output in
		// the execution's results (docs/api-v1.md).
		StreamEvents            *bool `json:"stream_events"`
		SaveIntermediateResults *bool `json:"save_intermediate_results"`
		MaxParallelTeams        *int  `json:"max_parallel_teams"`
		// Budget is as runs/start's, checked by Runs.Start.
		Budget *models.Budget `json:"budget"`
	} `json:"execution_config"`
	Task string `json:"task"`
	// ExecutionID and MessageID are optional caller-set ids (spec 003):
	// the execution's id and the id of its final answer's message.
	ExecutionID *string `json:"execution_id"`
	MessageID   *string `json:"message_id"`
	// UserMessageID is the id under which the task is stored as the
	// user's message (spec 003 §6.4), as runs/start's.
	UserMessageID *string `json:"user_message_id"`
	// PreviousRunID makes the execution a follow-up of a finished
	// execution of the same team (as runs/start's previous_run_id).
	PreviousRunID *string `json:"previous_run_id"`
	// OnLimit and MultitaskStrategy are runs/start's (docs/queue.md).
	OnLimit           *string `json:"on_limit"`
	MultitaskStrategy *string `json:"multitask_strategy"`
}

func (s *Server) v1Execute(c *gin.Context) {
	id, err := pathID(c, "team_id")
	if err != nil {
		s.writeError(c, err)
		return
	}
	var in v1ExecuteInput
	if err := decodeOptionalJSON(c, &in); err != nil {
		s.writeError(c, err)
		return
	}
	var opts StartOptions
	if ec := in.ExecutionConfig; ec != nil {
		opts.Budget = ec.Budget
		opts.StreamEvents, opts.SaveIntermediateResults = ec.StreamEvents, ec.SaveIntermediateResults
	}
	if ec := in.ExecutionConfig; ec != nil && ec.MaxParallelTeams != nil {
		if *ec.MaxParallelTeams < 0 {
			s.writeError(c, models.FieldError("execution_config.max_parallel_teams", "must be 0 (the team's setting) or more, got %d", *ec.MaxParallelTeams))
			return
		}
		opts.MaxParallelTeams = *ec.MaxParallelTeams
	}
	if err := callerIDs(&opts, "execution_id", in.ExecutionID, "message_id", in.MessageID, "user_message_id", in.UserMessageID); err != nil {
		s.writeError(c, err)
		return
	}
	ctx := c.Request.Context()
	h, err := s.visibleHierarchy(ctx, id)
	if err != nil {
		s.writeError(c, err)
		return
	}
	task := strings.TrimSpace(firstNonEmpty(in.Task, h.GlobalSupervisor.UserPrompt, h.Description))
	if task == "" {
		s.writeError(c, models.FieldError("task", "is required: the team has no top_supervisor_config.user_prompt or description to use as the task"))
		return
	}
	if err = queueOptions(&opts, in.OnLimit, in.MultitaskStrategy, in.PreviousRunID != nil); err != nil {
		s.writeError(c, err)
		return
	}
	if opts.Previous, err = s.previousRun(ctx, "previous_run_id", in.PreviousRunID, h); err != nil {
		s.writeError(c, err)
		return
	}
	run, err := s.runs.Start(ctx, h, task, opts)
	if err != nil {
		// The start names the engine's fields (teams[0].workers[1]); this
		// surface's clients know spec 001's.
		s.writeError(c, v1FieldError(err))
		return
	}
	var streamURL any // null: streaming is off for this execution
	if runStreams(run) {
		streamURL = V1Prefix + "/executions/" + run.PublicID + "/stream"
	}
	okV1(c, CodeExecutionStarted, "execution started", gin.H{
		"execution_id": run.PublicID,
		"team_id":      h.ID,
		"status":       "started",
		"started_at":   run.CreatedAt,
		"task":         task,
		"thread_id":    run.ThreadID,
		"stream_url":   streamURL,
		"results_url":  V1Prefix + "/executions/" + run.PublicID + "/results",
		// The mean of the team's latest completed executions; null before
		// the first one.
		"estimated_duration": s.estimatedDuration(ctx, run),
	})
}

// v1ProgressView is spec 001's progress: teams by id.
type v1ProgressView struct {
	CurrentTeam          string   `json:"current_team"`
	CurrentTeamName      string   `json:"current_team_name"`
	CurrentAgentID       string   `json:"current_agent_id"`
	CompletedTeams       []string `json:"completed_teams"`
	TotalTeams           int      `json:"total_teams"`
	CompletionPercentage int      `json:"completion_percentage"`
}

func (s *Server) v1GetExecution(c *gin.Context) {
	id, err := pathID(c, "execution_id")
	if err != nil {
		s.writeError(c, err)
		return
	}
	ctx := c.Request.Context()
	run, err := s.visibleRun(ctx, id)
	if err != nil {
		s.writeError(c, err)
		return
	}
	v := s.viewRun(ctx, run)
	s.markOffline(ctx, &v)
	ids := s.teamIDsByName(ctx, run)
	p := v1ProgressView{
		CurrentTeam: lookupID(ids, v.Progress.CurrentTeam), CurrentTeamName: v.Progress.CurrentTeam,
		CurrentAgentID: v.Progress.ActiveAgentID, CompletedTeams: []string{},
		TotalTeams: v.Progress.TotalTeams, CompletionPercentage: v.Progress.CompletionPercentage,
	}
	for _, name := range v.Progress.CompletedTeams {
		p.CompletedTeams = append(p.CompletedTeams, lookupID(ids, name))
	}
	data := gin.H{
		"execution_id": run.PublicID,
		"team_id":      run.HierarchyID,
		"team_name":    run.HierarchyName,
		"task":         run.Task,
		"status":       run.Status,
		"created_at":   run.CreatedAt,
		"started_at":   run.StartedAt,
		"updated_at":   run.UpdatedAt,
		"completed_at": run.CompletedAt,
		"progress":     p,
		"thread_id":    run.ThreadID,
		// The cost totals, summed from the run's recorded calls as
		// runs/get's usage is (docs/cost-and-budgets.md).
		"usage": usageView(s.runUsage(ctx, run.ID)[run.ID]),
		// See estimatedRemaining; null when nothing honest can be said.
		"estimated_remaining_time": s.estimatedRemaining(ctx, run, p.CompletionPercentage, time.Now()),
	}
	if run.Error != "" {
		data["error"] = run.Error
		if v.ErrorCode != "" {
			data["error_code"] = v.ErrorCode
		}
	}
	if run.PreviousRunID != "" {
		data["previous_run_id"] = run.PreviousRunID
	}
	if v.Offline {
		data["offline"] = true
	}
	okV1(c, CodeExecutionInfoRetrieved, "execution info retrieved", data)
}

// teamIDsByName maps the run's team names to team ids: from the run's own
// result first (the ids the run used), then from the stored hierarchy.
func (s *Server) teamIDsByName(ctx context.Context, run *store.Run) map[string]string {
	ids := map[string]string{}
	if h, err := s.store.GetHierarchy(ctx, run.HierarchyID); err == nil {
		for _, t := range h.Teams {
			ids[t.Name] = t.ID
		}
	}
	if run.Result != nil {
		for _, t := range run.Result.Teams {
			if t.TeamID != "" {
				ids[t.TeamName] = t.TeamID
			}
		}
	}
	return ids
}

// lookupID is a team's id, or its name when the id is unknown (the
// hierarchy was edited or deleted since the run started).
func lookupID(ids map[string]string, name string) string {
	if id, ok := ids[name]; ok && id != "" {
		return id
	}
	return name
}

func (s *Server) v1Results(c *gin.Context) {
	id, err := pathID(c, "execution_id")
	if err != nil {
		s.writeError(c, err)
		return
	}
	format, err := negotiateResultFormat(c, c.Query("format"))
	if err != nil {
		s.writeError(c, err)
		return
	}
	shape, err := outputFormat("output_format", c.Query("output_format"))
	if err != nil {
		s.writeError(c, err)
		return
	}
	run, data, err := s.loadResults(c.Request.Context(), id, format)
	if err != nil {
		s.writeError(c, err)
		return
	}
	data = shapeRunResults(run, data, shape)
	// Spec 001's example answers a completed run with EXECUTION_COMPLETED.
	code := CodeResultsRetrieved
	if run.Status == models.RunCompleted {
		code = CodeExecutionCompleted
	}
	if format == FormatXML {
		// format=xml or Accept: application/xml: an XML document, spec
		// 001's envelope with the results in <data>, not XML text inside
		// JSON (issue 23).
		writeXMLBody(c, http.StatusOK, v1OKBody{Success: true, Code: code, Data: data, Message: "execution results retrieved"})
		return
	}
	okV1(c, code, "execution results retrieved", data)
}

func (s *Server) v1FormatResults(c *gin.Context) {
	id, err := pathID(c, "execution_id")
	if err != nil {
		s.writeError(c, err)
		return
	}
	var in formatInputBody
	if err := decodeJSON(c, &in); err != nil {
		s.writeError(c, err)
		return
	}
	out, err := s.formatResults(c.Request.Context(), id, in)
	if err != nil {
		s.writeError(c, err)
		return
	}
	okV1(c, CodeFormattedResultsGenerated, "formatted results generated", out)
}

func (s *Server) v1Cancel(c *gin.Context) {
	id, err := pathID(c, "execution_id")
	if err != nil {
		s.writeError(c, err)
		return
	}
	var ignored struct{}
	if err := decodeOptionalJSON(c, &ignored); err != nil {
		s.writeError(c, err)
		return
	}
	status, err := s.cancelRunByID(c.Request.Context(), id)
	if err != nil {
		s.writeError(c, err)
		return
	}
	okV1(c, CodeExecutionCancelled, "execution cancellation requested", gin.H{"execution_id": id, "status": status})
}

func (s *Server) v1Pause(c *gin.Context)  { s.v1SetPaused(c, true) }
func (s *Server) v1Resume(c *gin.Context) { s.v1SetPaused(c, false) }

// v1SetPaused pauses or resumes an execution (see setPaused); the body,
// if any, is ignored.
func (s *Server) v1SetPaused(c *gin.Context, paused bool) {
	id, err := pathID(c, "execution_id")
	if err != nil {
		s.writeError(c, err)
		return
	}
	var ignored struct{}
	if err := decodeOptionalJSON(c, &ignored); err != nil {
		s.writeError(c, err)
		return
	}
	status, err := s.setPaused(c.Request.Context(), id, paused)
	if err != nil {
		s.writeError(c, err)
		return
	}
	code, msg := CodeExecutionResumed, "execution resumed"
	if paused {
		code, msg = CodeExecutionPaused, "execution paused"
	}
	okV1(c, code, msg, gin.H{"execution_id": id, "status": status})
}

// cancelRunByID asks a run's workflow to cancel and returns the status to
// report: "cancelling", or "cancelled" when it already is. Cancelling a run
// that has ended otherwise is a conflict. (runs/cancel applies the same
// rules.)
func (s *Server) cancelRunByID(ctx context.Context, id string) (string, error) {
	run, err := s.visibleRun(ctx, id)
	if err != nil {
		return "", err
	}
	switch run.Status {
	case models.RunCancelled:
		return run.Status, nil
	case models.RunCompleted, models.RunFailed, models.RunTimedOut:
		return "", models.Errorf(models.CodeExecutionFinished, "execution %q has already %s and cannot be cancelled", id, run.Status)
	}
	if s.runs.Temporal == nil {
		return "", models.Errorf(models.CodeUnavailable, "runs are not controlled by this process")
	}
	if err := s.runs.Temporal.CancelWorkflow(ctx, run.WorkflowID, ""); err != nil {
		var notFound *serviceerror.NotFound
		if errors.As(err, &notFound) {
			return "", models.Errorf(models.CodeExecutionFinished, "execution %q is no longer running", id)
		}
		return "", &models.Error{Code: models.CodeUnavailable, Message: "could not cancel the execution: Temporal is unavailable", Err: err}
	}
	return "cancelling", nil
}
