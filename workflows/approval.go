package workflows

import (
	"fmt"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/op-stack/executor/models"
)

// Approval gates (runs with RunOptions.Approvals, see changeApprovals).
//
// A worker or team supervisor with requires_approval waits before its turn
// starts, and a worker's tool named in its approval_tools waits before
// each call, as does an MCP tool its server's approval policy or an
// "mcp:" key of approval_tools gates (RespondResult.MCPGates,
// changeMCPApprovals), until a person approves or rejects through the run's approve
// or reject update (the API's runs/approve and runs/reject, or `temporal
// workflow update execute`). Waiting is workflow.Await, or
// workflow.AwaitWithTimeout (a timer) when the gate has an approval
// timeout: no activity runs and no worker slot is held, for as long as it
// takes. The run's status reads waiting_approval while a gate is open.
//
// Gates are held by the run's workflow, so they apply to team turns run
// inside it (changeInlineTeams); sub-agents, child workflows, have none.

// approvalBook holds a run's open gates and remembers the resolved ones,
// so a second decision on the same gate is refused.
type approvalBook struct {
	w        *runWorkflow
	open     map[string]*openGate
	order    []string
	resolved map[string]bool
}

// openGate is one gate waiting for a decision.
type openGate struct {
	models.Approval
	decision *models.ApprovalResolution
}

// newApprovalBook returns the run's book, or nil for a run started before
// approvals (whose agents never wait).
func newApprovalBook(w *runWorkflow) *approvalBook {
	if !w.in.Options.Approvals {
		return nil
	}
	return &approvalBook{w: w, open: map[string]*openGate{}, resolved: map[string]bool{}}
}

// pending lists the open gates, oldest first.
func (b *approvalBook) pending() []models.Approval {
	out := []models.Approval{}
	if b == nil {
		return out
	}
	for _, id := range b.order {
		if g := b.open[id]; g != nil && g.decision == nil {
			out = append(out, g.Approval)
		}
	}
	return out
}

// waiting reports whether a gate is open.
func (b *approvalBook) waiting() bool { return b != nil && len(b.open) > 0 }

// gateTimeout is how long a gate of agent waits before its default
// decision; 0 is for ever.
func gateTimeout(agent models.Agent, o models.RunOptions) time.Duration {
	if agent.ApprovalTimeout > 0 {
		return time.Duration(agent.ApprovalTimeout) * time.Second
	}
	return o.ApprovalTimeout
}

// defaultDecision is the decision of a gate of agent whose timeout ran out.
func defaultDecision(agent models.Agent) string {
	if agent.ApprovalDefault == models.ApprovalDefaultApprove {
		return models.ApprovalApproved
	}
	return models.ApprovalRejected
}

// askAgent holds an agent's turn until it is approved or rejected and
// returns the decision, Instruction the one to use (edited or not).
func (b *approvalBook) askAgent(ctx workflow.Context, source models.Source, agent models.Agent, instruction string) (models.ApprovalResolution, error) {
	return b.ask(ctx, source, agent, models.Approval{Kind: models.ApprovalKindAgent, Instruction: instruction})
}

// askTool holds a tool call until it is approved or rejected and returns
// the decision, Arguments the ones to use (edited or not).
// An MCP tool's gate (mcp set) names its server and tool, and why it waits.
func (b *approvalBook) askTool(ctx workflow.Context, source models.Source, agent models.Agent, call models.ToolCall, mcp *models.MCPToolGate) (models.ApprovalResolution, error) {
	ap := models.Approval{Kind: models.ApprovalKindTool, Tool: call.Name, Arguments: call.Arguments}
	if mcp != nil {
		ap.MCPServer, ap.MCPTool, ap.Reason = mcp.Server, mcp.Tool, mcp.Reason
	}
	return b.ask(ctx, source, agent, ap)
}

func (b *approvalBook) ask(ctx workflow.Context, source models.Source, agent models.Agent, ap models.Approval) (models.ApprovalResolution, error) {
	w := b.w
	ap.ApprovalID = randomID(ctx, "apr_", 8)
	ap.AgentID, ap.AgentName, ap.AgentType, ap.TeamName = source.AgentID, source.AgentName, source.AgentType, source.TeamName
	now := workflow.Now(ctx)
	ap.RequestedAt = models.FormatTimestamp(now)
	timeout := gateTimeout(agent, w.in.Options)
	if timeout > 0 {
		ap.TimeoutAt = models.FormatTimestamp(now.Add(timeout))
		ap.DefaultDecision = defaultDecision(agent)
	}
	g := &openGate{Approval: ap}
	first := len(b.open) == 0
	b.open[ap.ApprovalID] = g
	b.order = append(b.order, ap.ApprovalID)
	w.emit(ctx, source, models.CategoryApproval, models.ActionRequested, approvalData(ap))
	w.persistUpTo = w.state.Log.LastSequence // stored at once: people are waiting on it
	if first {
		if err := b.setStatus(ctx, models.RunRunning, models.RunWaitingApproval); err != nil {
			return models.ApprovalResolution{}, err
		}
	}
	decided := func() bool { return g.decision != nil }
	if timeout > 0 {
		ok, err := workflow.AwaitWithTimeout(ctx, timeout, decided)
		if err != nil {
			b.abandon(ap.ApprovalID)
			return models.ApprovalResolution{}, err
		}
		if !ok {
			b.decide(ctx, g, models.ApprovalDecision{
				ApprovalID: ap.ApprovalID, By: models.ApprovalTimeoutActor,
				Comment: fmt.Sprintf("no decision within the approval timeout of %s", timeout),
			}, ap.DefaultDecision)
		}
	} else if err := workflow.Await(ctx, decided); err != nil {
		b.abandon(ap.ApprovalID)
		return models.ApprovalResolution{}, err
	}
	res := *g.decision
	b.close(ap.ApprovalID)
	w.emit(ctx, source, models.CategoryApproval, models.ActionResolved, resolutionData(res))
	w.persistUpTo = w.state.Log.LastSequence
	if len(b.open) == 0 {
		if err := b.setStatus(ctx, models.RunWaitingApproval, models.RunRunning); err != nil {
			return res, err
		}
	}
	return res, nil
}

// close forgets an open gate, remembering it as resolved.
func (b *approvalBook) close(id string) {
	delete(b.open, id)
	b.resolved[id] = true
	for i, open := range b.order {
		if open == id {
			b.order = append(b.order[:i:i], b.order[i+1:]...)
			break
		}
	}
}

// abandon closes a gate whose turn was cancelled while it waited (the
// run cancelled or timed out): it is no longer pending, and a run with no
// other gate open is no longer waiting on people. The status is not
// written here (the context is cancelled); the run's next status write,
// its end as a rule, follows.
func (b *approvalBook) abandon(id string) {
	b.close(id)
	if len(b.open) == 0 && b.w.state.Status == models.RunWaitingApproval {
		b.w.state.Status = models.RunRunning
	}
}

// decide resolves g (once).
func (b *approvalBook) decide(ctx workflow.Context, g *openGate, d models.ApprovalDecision, decision string) models.ApprovalResolution {
	if g.decision != nil {
		return *g.decision
	}
	by := d.By
	if by == "" {
		by = "unknown"
	}
	res := models.ApprovalResolution{
		ApprovalID: g.ApprovalID, Kind: g.Kind, AgentID: g.AgentID, Decision: decision,
		Comment: d.Comment, By: by, At: models.FormatTimestamp(workflow.Now(ctx)),
		Instruction: g.Instruction, Arguments: g.Arguments,
	}
	if decision == models.ApprovalApproved {
		if d.Instruction != nil && *d.Instruction != g.Instruction {
			res.Instruction, res.Edited = *d.Instruction, true
		}
		if args, _ := d.ArgumentsText(); args != "" && args != g.Arguments {
			res.Arguments, res.Edited = args, true
		}
	}
	g.decision = &res
	return res
}

// setStatus moves the run's status from one to to, when it is from (a
// paused run stays paused; resuming it finds the open gates).
func (b *approvalBook) setStatus(ctx workflow.Context, from, to string) error {
	w := b.w
	if w.state.Status != from {
		return nil
	}
	w.state.Status = to
	w.persistUpTo = w.state.Log.LastSequence
	return w.setStatus(ctx, models.RunStatusUpdate{RunID: w.in.RunID, Status: to})
}

// resumedStatus is the status of a run resumed from a pause.
func (b *approvalBook) resumedStatus() string {
	if b.waiting() {
		return models.RunWaitingApproval
	}
	return models.RunRunning
}

// validate refuses a decision on an unknown or resolved gate, or one that
// edits what its gate does not ask.
func (b *approvalBook) validate(d models.ApprovalDecision, approve bool) error {
	if b == nil {
		return temporal.NewApplicationError("the run started before approval gates were supported", models.ErrApprovalUnknown)
	}
	if b.resolved[d.ApprovalID] || (b.open[d.ApprovalID] != nil && b.open[d.ApprovalID].decision != nil) {
		return temporal.NewApplicationError(fmt.Sprintf("approval %q has already been resolved", d.ApprovalID), models.ErrApprovalRefused)
	}
	g := b.open[d.ApprovalID]
	if g == nil {
		return temporal.NewApplicationError(fmt.Sprintf("the run has no pending approval %q", d.ApprovalID), models.ErrApprovalUnknown)
	}
	if !approve && (d.Instruction != nil || len(d.Arguments) > 0) {
		return temporal.NewApplicationError("a rejection takes a comment, not an instruction or arguments", models.ErrApprovalRefused)
	}
	if d.Instruction != nil && g.Kind != models.ApprovalKindAgent {
		return temporal.NewApplicationError(fmt.Sprintf("approval %q is a tool call: edit its arguments, not an instruction", d.ApprovalID), models.ErrApprovalRefused)
	}
	if len(d.Arguments) > 0 {
		if g.Kind != models.ApprovalKindTool {
			return temporal.NewApplicationError(fmt.Sprintf("approval %q is an agent's turn: edit its instruction, not arguments", d.ApprovalID), models.ErrApprovalRefused)
		}
		if _, err := d.ArgumentsText(); err != nil {
			return temporal.NewApplicationError("arguments must be a JSON object (or a string holding one)", models.ErrApprovalRefused)
		}
	}
	return nil
}

// setupApprovals registers the run's approvals query and its approve and
// reject updates.
func (w *runWorkflow) setupApprovals(ctx workflow.Context) error {
	if err := workflow.SetQueryHandler(ctx, models.QueryApprovals, func() ([]models.Approval, error) {
		return w.approvals.pending(), nil
	}); err != nil {
		return err
	}
	for _, u := range []struct {
		name     string
		decision string
	}{{models.UpdateApprove, models.ApprovalApproved}, {models.UpdateReject, models.ApprovalRejected}} {
		decision := u.decision
		approve := decision == models.ApprovalApproved
		if err := workflow.SetUpdateHandlerWithOptions(ctx, u.name, func(ctx workflow.Context, d models.ApprovalDecision) (models.ApprovalResolution, error) {
			if d.By == "" {
				d.By = "temporal"
			}
			g := w.approvals.open[d.ApprovalID]
			if g == nil {
				// Only a replay skips the validator; it never gets here.
				return models.ApprovalResolution{}, w.approvals.validate(d, approve)
			}
			return w.approvals.decide(ctx, g, d, decision), nil
		}, workflow.UpdateHandlerOptions{Validator: func(_ workflow.Context, d models.ApprovalDecision) error {
			return w.approvals.validate(d, approve)
		}}); err != nil {
			return err
		}
	}
	return nil
}

// approvalData is the data of approval.requested.
func approvalData(ap models.Approval) map[string]any {
	data := map[string]any{
		"approval_id": ap.ApprovalID, "kind": ap.Kind, "agent_id": ap.AgentID,
		"requested_at": ap.RequestedAt,
	}
	if ap.Kind == models.ApprovalKindAgent {
		data["instruction"] = ap.Instruction
	} else {
		data["tool"], data["arguments"] = ap.Tool, ap.Arguments
		if ap.MCPServer != "" {
			data["mcp_server"], data["mcp_tool"], data["reason"] = ap.MCPServer, ap.MCPTool, ap.Reason
		}
	}
	if ap.TimeoutAt != "" {
		data["timeout_at"], data["default_decision"] = ap.TimeoutAt, ap.DefaultDecision
	}
	return data
}

// resolutionData is the data of approval.resolved.
func resolutionData(r models.ApprovalResolution) map[string]any {
	data := map[string]any{
		"approval_id": r.ApprovalID, "kind": r.Kind, "agent_id": r.AgentID,
		"decision": r.Decision, "comment": r.Comment, "decided_by": r.By, "decided_at": r.At,
	}
	if r.Edited {
		data["edited"] = true
		if r.Kind == models.ApprovalKindAgent {
			data["instruction"] = r.Instruction
		} else {
			data["arguments"] = r.Arguments
		}
	}
	return data
}

// rejectionText is what the supervisor or the model is told of a
// rejected gate.
func rejectionText(r models.ApprovalResolution) string {
	text := "rejected by " + r.By
	if r.Comment != "" {
		text += ": " + r.Comment
	}
	return text
}
