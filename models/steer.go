package models

// Steering a running team (see workflows/steer.go): an operator cancels one
// team's turn without cancelling the run, or gives an agent guidance that
// its next prompt carries.
const (
	// UpdateCancelTeam cancels one running team's turn (a validated
	// Temporal update taking a CancelTeamRequest; the answer is the
	// team's name). UpdateRedirect queues guidance for an agent
	// (RedirectRequest; the answer is the agent's id).
	UpdateCancelTeam = "cancel_team"
	UpdateRedirect   = "redirect"

	// TeamCancelled is the status of a team turn an operator cancelled:
	// the run goes on, and the teams that depend on it are skipped.
	TeamCancelled = "cancelled"

	// ActionRedirect (dispatch.redirect) records guidance given to an
	// agent; ActionTeamCancelled (dispatch.team_cancelled) a team turn
	// cancelled by an operator. Their source is the operator.
	ActionRedirect      = "redirect"
	ActionTeamCancelled = "team_cancelled"

	// AgentTypeOperator is the source of what a person did to a run.
	AgentTypeOperator = "operator"
)

// CancelTeamRequest is the argument of the cancel_team update.
type CancelTeamRequest struct {
	TeamName string `json:"team_name"`
	Reason   string `json:"reason,omitempty"`
	// By names who asked: the API key id or token subject (the API sets
	// it; "operator" when absent, e.g. from the CLI).
	By string `json:"by,omitempty"`
}

// RedirectRequest is the argument of the redirect update.
type RedirectRequest struct {
	AgentID string `json:"agent_id"`
	Message string `json:"message"`
	By      string `json:"by,omitempty"`
}

// OperatorSource is the source of an operator's event.
func OperatorSource(by string) Source {
	if by == "" {
		by = "operator"
	}
	return Source{AgentID: by, AgentType: AgentTypeOperator, AgentName: by}
}
