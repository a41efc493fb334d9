package models

import (
	"encoding/json"
	"strings"
)

// Approval gates (issue 14): a worker or team supervisor with
// requires_approval waits for a person before its turn starts; a worker's
// tool named in its approval_tools waits before each call. The run's
// workflow holds the open gates, answers QueryApprovals, and takes
// UpdateApprove and UpdateReject (validated: an unknown or already
// resolved approval is refused).
const (
	// CategoryApproval is the category of approval.requested and
	// approval.resolved events.
	CategoryApproval = "approval"
	ActionRequested  = "requested"
	ActionResolved   = "resolved"

	// RunWaitingApproval is a run with at least one open approval gate
	// (and not paused): it holds no worker slot while it waits.
	RunWaitingApproval = "waiting_approval"

	// QueryApprovals returns the run's pending approvals ([]Approval).
	QueryApprovals = "approvals"
	// UpdateApprove and UpdateReject resolve one approval
	// (ApprovalDecision in, ApprovalResolution out).
	UpdateApprove = "approve"
	UpdateReject  = "reject"

	// Kinds of gate.
	ApprovalKindAgent = "agent"
	ApprovalKindTool  = "tool"

	// Decisions.
	ApprovalApproved = "approved"
	ApprovalRejected = "rejected"

	// Agent.ApprovalDefault values: what a gate decides when its
	// approval_timeout runs out.
	ApprovalDefaultApprove = "approve"
	ApprovalDefaultReject  = "reject"

	// ApprovalTimeoutActor is who decided a gate whose timeout ran out.
	ApprovalTimeoutActor = "timeout"
)

// Approval is one open gate, as QueryApprovals and approval.requested show
// it.
type Approval struct {
	ApprovalID string `json:"approval_id"`
	// Kind is "agent" (a turn about to start: Instruction) or "tool" (a
	// tool call about to run: Tool, Arguments).
	Kind        string  `json:"kind"`
	AgentID     string  `json:"agent_id"`
	AgentName   string  `json:"agent_name"`
	AgentType   string  `json:"agent_type"`
	TeamName    *string `json:"team_name"`
	Instruction string  `json:"instruction,omitempty"`
	Tool        string  `json:"tool,omitempty"`
	Arguments   string  `json:"arguments,omitempty"`
	// MCPServer and MCPTool name an MCP tool call's server and the tool
	// on it (Tool is the function name the model called), and Reason why
	// it waits: the agent's approval_tools, or the server's approval
	// policy met by the tool's annotations (models.MCPToolGate).
	MCPServer   string `json:"mcp_server,omitempty"`
	MCPTool     string `json:"mcp_tool,omitempty"`
	Reason      string `json:"reason,omitempty"`
	RequestedAt string `json:"requested_at"`
	// TimeoutAt and DefaultDecision are set when the gate has an
	// approval_timeout: at TimeoutAt it resolves as DefaultDecision.
	TimeoutAt       string `json:"timeout_at,omitempty"`
	DefaultDecision string `json:"default_decision,omitempty"`
}

// ApprovalDecision is the argument of UpdateApprove and UpdateReject.
// Instruction (an agent gate) and Arguments (a tool gate: a JSON object,
// or a string holding one) replace what was asked, on approval only. By
// names who decided; the API sets it from the caller's key or subject.
type ApprovalDecision struct {
	ApprovalID  string          `json:"approval_id"`
	Comment     string          `json:"comment,omitempty"`
	Instruction *string         `json:"instruction,omitempty"`
	Arguments   json.RawMessage `json:"arguments,omitempty"`
	By          string          `json:"by,omitempty"`
}

// ArgumentsText is the edited tool arguments as the tool call carries
// them (a JSON text); "" when none were given.
func (d ApprovalDecision) ArgumentsText() (string, error) {
	raw := strings.TrimSpace(string(d.Arguments))
	if raw == "" || raw == "null" {
		return "", nil
	}
	var text string
	if err := json.Unmarshal([]byte(raw), &text); err == nil {
		raw = strings.TrimSpace(text)
	}
	var obj map[string]any
	if err := json.Unmarshal([]byte(raw), &obj); err != nil {
		return "", FieldError("arguments", "must be a JSON object (or a string holding one)")
	}
	return raw, nil
}

// ApprovalResolution is a resolved gate: the update's answer and the data
// of approval.resolved.
type ApprovalResolution struct {
	ApprovalID  string `json:"approval_id"`
	Kind        string `json:"kind"`
	AgentID     string `json:"agent_id"`
	Decision    string `json:"decision"`
	Comment     string `json:"comment,omitempty"`
	By          string `json:"by"`
	At          string `json:"at"`
	Instruction string `json:"instruction,omitempty"`
	Arguments   string `json:"arguments,omitempty"`
	// Edited says the instruction or arguments were changed on approval.
	Edited bool `json:"edited,omitempty"`
}
