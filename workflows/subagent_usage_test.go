package workflows_test

import (
	"context"
	"testing"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/op-stack/executor/models"
	"github.com/op-stack/executor/workflows"
)

// failingH1 scripts the delegation hierarchy's calls at one token each: the
// writer delegates one task to h1, h1 delegates one to h2, h2 answers, and
// h1's second round fails with an error no retry mends: h1 has spent two
// tokens (its first round and h2's answer) when it fails.
func failingH1(f *fakeActivities) {
	f.respond = func(_ context.Context, in models.RespondInput) (*models.RespondResult, error) {
		one := models.Usage{TotalTokens: 1}
		first := len(in.Transcript) == 0
		switch {
		case in.Agent.AgentID == "sa-h1" && !first:
			return nil, temporal.NewNonRetryableApplicationError("h1 broke", "test", nil)
		case in.Agent.AgentID == "w-writer" && first:
			return &models.RespondResult{Model: "m", Usage: one, ToolCalls: []models.ToolCall{{ID: "c1", Name: models.DelegateToolName, Arguments: `{"name": "h1", "task": "t"}`}}}, nil
		case in.Agent.AgentID == "sa-h1":
			return &models.RespondResult{Model: "m", Usage: one, ToolCalls: []models.ToolCall{{ID: "c2", Name: models.DelegateToolName, Arguments: `{"name": "h2", "task": "t"}`}}}, nil
		}
		return &models.RespondResult{Output: "output of " + in.Agent.Name, Model: "m", Usage: one}, nil
	}
}

func delegationRun(t *testing.T, f *fakeActivities, budget *models.Budget, before bool) models.RunResult {
	t.Helper()
	env := newDelegationEnv(t, f, fanOut{target: map[string]string{"w-writer": "h1", "sa-h1": "h2"}})
	failingH1(f)
	if before {
		env.OnGetVersion("failed-sub-agent-usage", workflow.DefaultVersion, 1).Return(workflow.DefaultVersion)
		env.OnGetVersion("baseline-i28", workflow.DefaultVersion, 1).Return(workflow.DefaultVersion) // the change asked on its own
	}
	in := runInput(delegationHierarchy())
	in.Options.Budget = budget
	env.ExecuteWorkflow(workflows.RunWorkflow, in)
	var res models.RunResult
	if err := env.GetWorkflowResult(&res); err != nil {
		t.Fatal(err)
	}
	return res
}

// A worker's usage includes its sub-agents', a failed one's included: the
// team turn's usage adds its supervisor's, and the run names the
// sub-agents' part.
func TestSubAgentUsageRollsUp(t *testing.T) {
	f := &fakeActivities{decisions: map[string][]models.Decision{"gs": {dispatch("writing", "go")}, "ts-w": {dispatch("writer", "go")}}}
	res := delegationRun(t, f, nil, false)
	if len(res.Teams) != 1 || len(res.Teams[0].Workers) != 1 {
		t.Fatalf("teams = %+v", res.Teams)
	}
	w := res.Teams[0].Workers[0]
	// The writer's two rounds, and h1's two tokens reported by its failure.
	if w.Usage.TotalTokens != 4 || w.SubAgentUsage == nil || w.SubAgentUsage.TotalTokens != 2 {
		t.Errorf("writer usage %+v, sub-agent usage %+v; want 4 and 2", w.Usage, w.SubAgentUsage)
	}
	// Two team supervisor decisions (dispatch, then finish) and the writer.
	if u := res.Teams[0].Usage; u.TotalTokens != 2+4 {
		t.Errorf("team turn usage = %+v, want 6", u)
	}
	if res.SubAgentUsage.TotalTokens != 2 {
		t.Errorf("run's sub-agent usage = %+v, want 2", res.SubAgentUsage)
	}
	// Two global decisions, the team's 6 and the final answer.
	if res.Usage.TotalTokens != 2+6+1 {
		t.Errorf("run usage = %+v, want 9", res.Usage)
	}
	results := toolResults(f, "w-writer")
	if len(results) != 1 || results[0] != `error: sub-agent "h1" failed: h1 broke` {
		t.Errorf("writer's tool results = %q", results)
	}
}

// A run from before the change does not count a failed sub-agent's usage.
func TestFailedSubAgentUsageBeforeChange(t *testing.T) {
	f := &fakeActivities{decisions: map[string][]models.Decision{"gs": {dispatch("writing", "go")}, "ts-w": {dispatch("writer", "go")}}}
	res := delegationRun(t, f, nil, true)
	if w := res.Teams[0].Workers[0]; w.Usage.TotalTokens != 2 || w.SubAgentUsage != nil {
		t.Errorf("writer usage %+v, sub-agent usage %+v; want 2 and none", w.Usage, w.SubAgentUsage)
	}
}

// A failed sub-agent's spending counts against the run's budget: after the
// writer's turn the run has spent 1 + 1 + 4 = 6 tokens, over its 5, so the
// team supervisor is not asked again. Without counting the failed
// sub-agent it would have spent 4 and gone on.
func TestFailedSubAgentUsageCountsInBudget(t *testing.T) {
	f := &fakeActivities{decisions: map[string][]models.Decision{"gs": {dispatch("writing", "go")}, "ts-w": {dispatch("writer", "go")}}}
	delegationRun(t, f, &models.Budget{BudgetLimit: models.BudgetLimit{MaxTokens: 5}}, false)
	teamDecisions := 0
	for _, d := range f.decides {
		if d.Source.AgentID == "ts-w" {
			teamDecisions++
		}
	}
	if teamDecisions != 1 {
		t.Errorf("team supervisor decisions = %d, want 1", teamDecisions)
	}
	ev := budgetEvents(f)
	if len(ev) != 1 {
		t.Fatalf("system.budget events = %+v", ev)
	}
	if spent := ev[0].Data["spent"].(map[string]any); spent["total_tokens"] != 6 {
		t.Errorf("spent = %+v, want 6 tokens", spent)
	}
}
