package client

import (
	"context"
	"encoding/json"

	"github.com/op-stack/executor/models"
)

// Steering a run (docs/steering.md), approval gates, time travel
// (docs/time-travel.md) and deleting a run: the runs routes besides start,
// get, list, events and cancel.

type (
	// Approval is one open approval gate of a run, as runs/approvals
	// lists it: an agent's turn about to start (Kind "agent",
	// Instruction) or a tool call about to run (Kind "tool", Tool,
	// Arguments as JSON text).
	Approval = models.Approval
	// ApprovalResolution is a resolved gate as runs/approve and
	// runs/reject answer it.
	ApprovalResolution = models.ApprovalResolution
	// ForkPoint is a point a finished run can be forked from: right after
	// its event Sequence.
	ForkPoint = models.ForkPoint
	// ForkedFrom names the run and the event a fork started from.
	ForkedFrom = models.ForkedFrom
	// AgentChange replaces an agent's system prompt and/or model in a
	// fork.
	AgentChange = models.AgentChange
)

// Approvals is runs/approvals' answer: the run's status and its open
// gates (none once it has finished).
type Approvals struct {
	ID        string     `json:"id"`
	Status    string     `json:"status"`
	Approvals []Approval `json:"approvals"`
}

// ListApprovals returns a run's open approval gates.
func (c *Client) ListApprovals(ctx context.Context, runID string) (Approvals, error) {
	var out Approvals
	err := c.Call(ctx, "/runs/approvals", map[string]string{"id": runID}, &out)
	return out, err
}

// Decision is what to do with an approval gate (runs/approve, runs/reject).
type Decision struct {
	// RunID and ApprovalID name the gate (required).
	RunID      string `json:"id"`
	ApprovalID string `json:"approval_id"`
	// Comment is told to the supervisor; it is required to reject.
	Comment string `json:"comment,omitempty"`
	// Instruction, on approval of an agent's turn, replaces the
	// instruction the agent gets.
	Instruction *string `json:"instruction,omitempty"`
	// Arguments, on approval of a tool call, replace the arguments the
	// tool runs with (a JSON object).
	Arguments json.RawMessage `json:"arguments,omitempty"`
}

// Resolved is the answer of runs/approve and runs/reject.
type Resolved struct {
	ID       string             `json:"id"`
	Approval ApprovalResolution `json:"approval"`
}

// Approve approves a gate, with d.Instruction or d.Arguments when the
// approver edits what the agent or tool gets. A gate already resolved is
// an *APIError with status 409.
func (c *Client) Approve(ctx context.Context, d Decision) (Resolved, error) {
	var out Resolved
	err := c.Call(ctx, "/runs/approve", d, &out)
	return out, err
}

// Reject rejects a gate with a comment (required: the supervisor reads it
// as the agent's answer).
func (c *Client) Reject(ctx context.Context, runID, approvalID, comment string) (Resolved, error) {
	var out Resolved
	err := c.Call(ctx, "/runs/reject", Decision{RunID: runID, ApprovalID: approvalID, Comment: comment}, &out)
	return out, err
}

// PauseRun pauses a run (model calls in flight finish, nothing new
// starts) and returns the status the API answered.
func (c *Client) PauseRun(ctx context.Context, runID string) (string, error) {
	return c.statusChange(ctx, "/runs/pause", runID)
}

// ResumeRun resumes a paused run and returns the status the API answered.
func (c *Client) ResumeRun(ctx context.Context, runID string) (string, error) {
	return c.statusChange(ctx, "/runs/resume", runID)
}

func (c *Client) statusChange(ctx context.Context, path, runID string) (string, error) {
	var out struct {
		Status string `json:"status"`
	}
	err := c.Call(ctx, path, map[string]string{"id": runID}, &out)
	return out.Status, err
}

// CancelTeam cancels one team's turn (the run goes on without it) and
// returns the status the API answered ("cancelling").
func (c *Client) CancelTeam(ctx context.Context, runID, teamName, reason string) (string, error) {
	var out struct {
		Status string `json:"status"`
	}
	err := c.Call(ctx, "/runs/teams/cancel", map[string]string{"id": runID, "team_name": teamName, "reason": reason}, &out)
	return out.Status, err
}

// Redirect queues guidance for an agent's next prompt and returns the
// status the API answered ("queued").
func (c *Client) Redirect(ctx context.Context, runID, agentID, message string) (string, error) {
	var out struct {
		Status string `json:"status"`
	}
	err := c.Call(ctx, "/runs/redirect", map[string]string{"id": runID, "agent_id": agentID, "message": message}, &out)
	return out.Status, err
}

// ForkChanges is what a fork changes (docs/time-travel.md, Changes); every
// field is optional.
type ForkChanges struct {
	models.ForkChanges
	// ExecutionConfig, when set, replaces the original's execution_config
	// whole (runs/start's execution_config as JSON).
	ExecutionConfig json.RawMessage `json:"execution_config,omitempty"`
}

// ForkRequest is runs/fork's body.
type ForkRequest struct {
	// RunID is the finished run to fork.
	RunID string `json:"id"`
	// AfterSequence is the event to fork after (ForkPoints lists them; a
	// sequence inside a worker's answer forks from the dispatch that began
	// it).
	AfterSequence int64        `json:"after_sequence"`
	Changes       *ForkChanges `json:"changes,omitempty"`
}

// Forked is runs/fork's answer: the fork, started.
type Forked struct {
	Started
	ForkedFrom        ForkedFrom `json:"forked_from"`
	ForkPoint         ForkPoint  `json:"fork_point"`
	RequestedSequence int64      `json:"requested_sequence"`
}

// ForkRun starts a new run from the state a finished run had right after
// one of its events. The original is untouched.
func (c *Client) ForkRun(ctx context.Context, req ForkRequest) (Forked, error) {
	var out Forked
	err := c.Call(ctx, "/runs/fork", req, &out)
	return out, err
}

// ForkPoints lists the points a finished run can be forked from, in
// sequence order; a run still going is an *APIError with status 409.
func (c *Client) ForkPoints(ctx context.Context, runID string) ([]ForkPoint, error) {
	var out struct {
		Points []ForkPoint `json:"points"`
	}
	err := c.Call(ctx, "/runs/fork-points", map[string]string{"id": runID}, &out)
	return out.Points, err
}

// DeleteRun deletes a finished run and everything stored of it (events,
// messages, usage, artifacts, deliveries, its Temporal histories); a run
// still going is an *APIError with status 409.
func (c *Client) DeleteRun(ctx context.Context, runID string) error {
	return c.Call(ctx, "/runs/delete", map[string]string{"id": runID}, nil)
}

// Thread lists the runs of a thread (a first run and its follow-ups),
// newest first. threadID is the thread's first run's id (Run.ThreadID).
func (c *Client) Thread(ctx context.Context, threadID string, page, pageSize int) (Page[Run], error) {
	return c.ListRuns(ctx, RunFilter{ThreadID: threadID, Page: page, PageSize: pageSize})
}
