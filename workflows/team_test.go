package workflows_test

import (
	"testing"

	"github.com/op-stack/executor/models"
	"github.com/op-stack/executor/workflows"
)

// TestTeamWorkflowResult: a TeamWorkflow child's result names its team,
// says how the turn ended, when it started and ended, and what it used,
// instead of the empty team_id and status and null times the Web UI
// showed.
func TestTeamWorkflowResult(t *testing.T) {
	h := testHierarchy()
	team := h.Teams[1] // writing: one worker
	f := &fakeActivities{decisions: map[string][]models.Decision{team.Supervisor.AgentID: {dispatch("writer", "write it")}}}
	env := newEnv(t, f)
	in := runInput(h)
	env.ExecuteWorkflow(workflows.TeamWorkflow, models.TeamInput{
		RunID: in.RunID, RootAgentID: h.GlobalSupervisor.AgentID, Turn: 1, Task: in.Task,
		Team: team, Instruction: "write the report", MaxIterations: 5, Options: in.Options,
	})
	if err := env.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}
	var res models.TeamResult
	if err := env.GetWorkflowResult(&res); err != nil {
		t.Fatal(err)
	}
	out := res.Output
	if out.TeamID == "" || out.TeamID != team.ID || out.TeamName != "writing" || out.Status != models.TeamCompleted {
		t.Errorf("team_id %q (want %q), team_name %q, status %q", out.TeamID, team.ID, out.TeamName, out.Status)
	}
	if out.StartedAt == nil || out.CompletedAt == nil || out.CompletedAt.Before(*out.StartedAt) {
		t.Errorf("started_at %v completed_at %v", out.StartedAt, out.CompletedAt)
	}
	// The fake's worker answer uses 10 tokens, each decision 1 (dispatch,
	// finish).
	if len(out.Workers) != 1 || out.Usage.TotalTokens != 12 {
		t.Errorf("workers %d, usage %+v; want 1 worker and 12 tokens", len(out.Workers), out.Usage)
	}
}
