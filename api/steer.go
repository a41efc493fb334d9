package api

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/gin-gonic/gin"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"github.com/op-stack/executor/auth"
	"github.com/op-stack/executor/models"
)

// Steering a running team (see workflows/steer.go): runs/teams/cancel
// cancels one team's turn without cancelling the run; runs/redirect gives
// an agent guidance for its next prompt. Both go through a validated
// Temporal update of the run's workflow, so the answer is synchronous.

type cancelTeamInput struct {
	runIDInput
	TeamName string `json:"team_name"`
	Reason   string `json:"reason"`
}

type redirectInput struct {
	runIDInput
	AgentID string `json:"agent_id"`
	Message string `json:"message"`
}

// maxGuidanceLength bounds a redirect's message (it goes into prompts).
const maxGuidanceLength = 4000

func (s *Server) cancelTeam(c *gin.Context) {
	in, id, valid := readIDBody[cancelTeamInput](s, c)
	if !valid {
		return
	}
	team := strings.TrimSpace(in.TeamName)
	if team == "" {
		s.writeError(c, models.FieldError("team_name", "is required"))
		return
	}
	req := models.CancelTeamRequest{TeamName: team, Reason: strings.TrimSpace(in.Reason), By: principalName(c.Request.Context())}
	if err := s.steer(c.Request.Context(), id, models.UpdateCancelTeam, req, "cancel team "+fmt.Sprintf("%q", team)); err != nil {
		s.writeError(c, err)
		return
	}
	ok(c, gin.H{"id": id, "team_name": team, "status": "cancelling"})
}

func (s *Server) redirectAgent(c *gin.Context) {
	in, id, valid := readIDBody[redirectInput](s, c)
	if !valid {
		return
	}
	agentID := strings.TrimSpace(in.AgentID)
	msg := strings.TrimSpace(in.Message)
	switch {
	case agentID == "":
		s.writeError(c, models.FieldError("agent_id", "is required"))
		return
	case msg == "":
		s.writeError(c, models.FieldError("message", "must not be empty"))
		return
	case len(msg) > maxGuidanceLength:
		s.writeError(c, models.FieldError("message", "must be at most %d characters, got %d", maxGuidanceLength, len(msg)))
		return
	}
	req := models.RedirectRequest{AgentID: agentID, Message: msg, By: principalName(c.Request.Context())}
	if err := s.steer(c.Request.Context(), id, models.UpdateRedirect, req, "redirect agent "+fmt.Sprintf("%q", agentID)); err != nil {
		s.writeError(c, err)
		return
	}
	ok(c, gin.H{"id": id, "agent_id": agentID, "status": "queued"})
}

// principalName names the caller in the run's log: the API key's id or
// the token's subject.
func principalName(ctx context.Context) string {
	if p, found := auth.PrincipalFrom(ctx); found && p.KeyID != "" {
		return p.KeyID
	}
	return "operator"
}

// steer sends a steering update to a visible, live run and turns its
// validator's refusals into the API's errors.
func (s *Server) steer(ctx context.Context, id, name string, arg any, what string) error {
	run, err := s.visibleRun(ctx, id)
	if err != nil {
		return err
	}
	if models.IsTerminal(run.Status) {
		return models.Errorf(models.CodeExecutionFinished, "run %q has already %s: cannot %s", id, run.Status, what)
	}
	if s.runs == nil || s.runs.Temporal == nil {
		return models.Errorf(models.CodeUnavailable, "runs are not controlled by this process")
	}
	ctx, cancel := context.WithTimeout(ctx, controlTimeout)
	defer cancel()
	handle, err := s.runs.Temporal.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{
		WorkflowID: run.WorkflowID, UpdateName: name, Args: []any{arg}, WaitForStage: client.WorkflowUpdateStageCompleted,
	})
	if err == nil {
		err = handle.Get(ctx, nil)
	}
	if err == nil {
		return nil
	}
	var notFound *serviceerror.NotFound
	var appErr *temporal.ApplicationError
	switch {
	case errors.As(err, &notFound):
		return models.Errorf(models.CodeExecutionFinished, "run %q is no longer running", id)
	case errors.As(err, &appErr):
		switch appErr.Type() {
		case models.ErrTeamNotRunning:
			return models.Errorf(models.CodeTeamNotRunning, "cannot %s of run %q: %s", what, id, appErr.Message())
		case models.ErrUnknownTeam:
			return models.FieldError("team_name", "%s", appErr.Message())
		case models.ErrUnknownAgent:
			return models.FieldError("agent_id", "%s", appErr.Message())
		}
		// The run has ended meanwhile, or started before steering.
		return models.Errorf(models.CodeExecutionInProgress, "cannot %s of run %q: %s", what, id, appErr.Message())
	}
	if ctx.Err() != nil {
		return &models.Error{Code: models.CodeUnavailable, Message: fmt.Sprintf("the run's workflow did not answer within %s: is a worker running?", controlTimeout), Err: err}
	}
	return &models.Error{Code: models.CodeUnavailable, Message: "could not reach the run's workflow: Temporal is unavailable", Err: err}
}
