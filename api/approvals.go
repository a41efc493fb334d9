package api

import (
	"context"
	"encoding/json"
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

// approvalConfig is an agent's approval gate settings, the same on both
// REST surfaces (flattened into the agent's object): requires_approval
// holds a worker's or team supervisor's turn, approval_tools holds each
// call of those tools of a worker; approval_timeout (seconds) and
// approval_default ("approve" or "reject") decide a gate nobody decided.
type approvalConfig struct {
	RequiresApproval bool     `json:"requires_approval,omitempty"`
	ApprovalTools    []string `json:"approval_tools,omitempty"`
	ApprovalTimeout  int      `json:"approval_timeout,omitempty"`
	ApprovalDefault  string   `json:"approval_default,omitempty"`
}

// maxApprovalTimeout bounds approval_timeout: a year, in seconds.
const maxApprovalTimeout = 366 * 24 * 3600

// apply checks the settings and sets them on a. Only a worker's tools can
// be gated, and only tools it has (for MCP tools, see mcpApprovalKey); the
// global supervisor has no gates.
func (c approvalConfig) apply(field string, a *models.Agent, worker bool) error {
	if c.ApprovalTimeout < 0 || c.ApprovalTimeout > maxApprovalTimeout {
		return models.FieldError(field+".approval_timeout", "must be between 0 and %d seconds, got %d", maxApprovalTimeout, c.ApprovalTimeout)
	}
	d := strings.TrimSpace(c.ApprovalDefault)
	if d != "" && d != models.ApprovalDefaultApprove && d != models.ApprovalDefaultReject {
		return models.FieldError(field+".approval_default", "must be %q or %q, got %q", models.ApprovalDefaultApprove, models.ApprovalDefaultReject, c.ApprovalDefault)
	}
	a.RequiresApproval, a.ApprovalTimeout, a.ApprovalDefault = c.RequiresApproval, c.ApprovalTimeout, d
	a.ApprovalTools = nil
	if !worker {
		return nil
	}
	for _, t := range c.ApprovalTools {
		t = strings.TrimSpace(t)
		if t == "" || contains(a.ApprovalTools, t) {
			continue
		}
		if models.IsMCPToolKey(t) {
			if err := mcpApprovalKey(field+".approval_tools", t, a.Tools); err != nil {
				return err
			}
		} else if !contains(a.Tools, t) {
			return models.FieldError(field+".approval_tools", "names %q, which is not one of the worker's tools", t)
		}
		a.ApprovalTools = append(a.ApprovalTools, t)
	}
	return nil
}

// mcpApprovalKey checks an "mcp:<server>/<tool>" or "mcp:<server>/*" key
// of approval_tools: well formed, and naming tools the worker has (one of
// its tool keys covers the tool, or, for "*", names the server). The
// worker's own keys are checked against the tenant's servers with its
// tools, so a covered key names a known server.
func mcpApprovalKey(field, key string, tools []string) error {
	server, tool, ok := models.ParseMCPToolKey(key)
	if !ok {
		return models.FieldError(field, "%q is not an MCP tool key; write mcp:<server>/<tool> or mcp:<server>/*", key)
	}
	for _, k := range tools {
		s, t, ok := models.ParseMCPToolKey(k)
		if ok && s == server && (tool == models.MCPAllTools || t == models.MCPAllTools || t == tool) {
			return nil
		}
	}
	return models.FieldError(field, "names %q, which is not one of the worker's tools (add mcp:%s/%s or mcp:%s/* to its tools)", key, server, tool, server)
}

// noGate refuses approval settings on the global supervisor, which has no
// gate (its teams' supervisors and workers do).
func noGate(field string, a models.Agent) error {
	if a.RequiresApproval || a.ApprovalTimeout != 0 || a.ApprovalDefault != "" {
		return models.FieldError(field+".requires_approval", "the global supervisor has no approval gate; set requires_approval on a team supervisor or a worker")
	}
	return nil
}

// approvalConfigOf is a's settings as the API returns them.
func approvalConfigOf(a models.Agent) approvalConfig {
	return approvalConfig{RequiresApproval: a.RequiresApproval, ApprovalTools: a.ApprovalTools, ApprovalTimeout: a.ApprovalTimeout, ApprovalDefault: a.ApprovalDefault}
}

// approvalInput is the body of runs/approve and runs/reject.
type approvalInput struct {
	runIDInput
	ApprovalID  string          `json:"approval_id"`
	Comment     string          `json:"comment"`
	Instruction *string         `json:"instruction"`
	Arguments   json.RawMessage `json:"arguments"`
}

// listApprovals answers a run's pending approvals (the workflow's
// approvals query); a finished run has none.
func (s *Server) listApprovals(c *gin.Context) {
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
	pending := []models.Approval{}
	if !models.IsTerminal(run.Status) {
		if s.runs == nil || s.runs.Temporal == nil {
			s.writeError(c, models.Errorf(models.CodeUnavailable, "runs are not controlled by this process"))
			return
		}
		qctx, cancel := context.WithTimeout(ctx, controlTimeout)
		defer cancel()
		resp, err := s.runs.Temporal.QueryWorkflow(qctx, run.WorkflowID, "", models.QueryApprovals)
		if err == nil {
			err = resp.Get(&pending)
		}
		if err != nil {
			var notFound *serviceerror.NotFound
			var queryFailed *serviceerror.QueryFailed
			switch {
			case errors.As(err, &notFound):
				// Ended meanwhile: nothing is pending.
			case errors.As(err, &queryFailed):
				// A run started before approval gates has none.
			default:
				s.writeError(c, &models.Error{Code: models.CodeUnavailable, Message: "could not query the run's workflow: is a worker running?", Err: err})
				return
			}
		}
	}
	ok(c, gin.H{"id": id, "status": run.Status, "approvals": pending})
}

// approveRun and rejectRun resolve one of a run's pending approvals.
func (s *Server) approveRun(c *gin.Context) { s.resolveApproval(c, true) }
func (s *Server) rejectRun(c *gin.Context)  { s.resolveApproval(c, false) }

func (s *Server) resolveApproval(c *gin.Context, approve bool) {
	in, id, valid := readIDBody[approvalInput](s, c)
	if !valid {
		return
	}
	// The run first: another tenant's run is not found, whatever the body.
	ctx := c.Request.Context()
	run, err := s.visibleRun(ctx, id)
	if err != nil {
		s.writeError(c, err)
		return
	}
	d := models.ApprovalDecision{
		ApprovalID: strings.TrimSpace(in.ApprovalID), Comment: strings.TrimSpace(in.Comment),
		Instruction: in.Instruction, Arguments: in.Arguments, By: approver(c.Request.Context()),
	}
	if d.ApprovalID == "" {
		s.writeError(c, models.FieldError("approval_id", "is required"))
		return
	}
	if !approve {
		if d.Comment == "" {
			s.writeError(c, models.FieldError("comment", "is required to reject (the supervisor is told why)"))
			return
		}
		if d.Instruction != nil || len(in.Arguments) > 0 {
			s.writeError(c, models.FieldError("instruction", "an instruction or arguments can be edited only on approval"))
			return
		}
	}
	if d.Instruction != nil && len(in.Arguments) > 0 {
		s.writeError(c, models.FieldError("arguments", "give an instruction (an agent's turn) or arguments (a tool call), not both"))
		return
	}
	if d.Instruction != nil && strings.TrimSpace(*d.Instruction) == "" {
		s.writeError(c, models.FieldError("instruction", "must not be empty when given"))
		return
	}
	if _, err := d.ArgumentsText(); err != nil {
		s.writeError(c, err)
		return
	}
	if models.IsTerminal(run.Status) {
		s.writeError(c, models.Errorf(models.CodeExecutionFinished, "run %q has already %s", id, run.Status))
		return
	}
	if s.runs == nil || s.runs.Temporal == nil {
		s.writeError(c, models.Errorf(models.CodeUnavailable, "runs are not controlled by this process"))
		return
	}
	name := models.UpdateReject
	if approve {
		name = models.UpdateApprove
	}
	uctx, cancel := context.WithTimeout(ctx, controlTimeout)
	defer cancel()
	handle, err := s.runs.Temporal.UpdateWorkflow(uctx, client.UpdateWorkflowOptions{
		WorkflowID: run.WorkflowID, UpdateName: name, Args: []any{d}, WaitForStage: client.WorkflowUpdateStageCompleted,
	})
	var res models.ApprovalResolution
	if err == nil {
		err = handle.Get(uctx, &res)
	}
	if err != nil {
		var notFound *serviceerror.NotFound
		var appErr *temporal.ApplicationError
		switch {
		case errors.As(err, &notFound):
			s.writeError(c, models.Errorf(models.CodeExecutionFinished, "run %q is no longer running", id))
		case errors.As(err, &appErr) && appErr.Type() == models.ErrApprovalUnknown:
			s.writeError(c, models.FieldError("approval_id", "%s", appErr.Message()))
		case errors.As(err, &appErr):
			// Already resolved, or an edit the gate does not take.
			s.writeError(c, models.Errorf(models.CodeExecutionInProgress, "approval %q cannot be resolved: %s", d.ApprovalID, appErr.Message()))
		case uctx.Err() != nil:
			s.writeError(c, &models.Error{Code: models.CodeUnavailable, Message: fmt.Sprintf("the run's workflow did not answer within %s: is a worker running?", controlTimeout), Err: err})
		default:
			s.writeError(c, &models.Error{Code: models.CodeUnavailable, Message: "could not reach the run's workflow: Temporal is unavailable", Err: err})
		}
		return
	}
	ok(c, gin.H{"id": id, "approval": res})
}

// approver names who decides: the API key's id or the OIDC subject,
// with how they authenticated ("api_key:ak_…", "oidc:alice"); without
// access control, "anonymous".
func approver(ctx context.Context) string {
	p, found := auth.PrincipalFrom(ctx)
	if !found || p.Method == auth.MethodNone || p.Method == "" {
		return "anonymous"
	}
	return string(p.Method) + ":" + p.KeyID
}
