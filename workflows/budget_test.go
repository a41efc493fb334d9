package workflows_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/op-stack/executor/models"
	"github.com/op-stack/executor/workflows"
)

// budgetEvents are the system.budget events the run stored.
func budgetEvents(f *fakeActivities) []models.Event {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []models.Event
	for _, e := range f.persisted {
		if e.Event.Category == models.CategorySystem && e.Event.Action == models.ActionBudget {
			out = append(out, e)
		}
	}
	return out
}

func gsDecides(f *fakeActivities) int {
	n := 0
	for _, d := range f.decides {
		if d.Source.AgentID == "gs" {
			n++
		}
	}
	return n
}

// Worker answers cost 10 tokens, decisions 1: after the first global
// decision and the research turn's two workers (2 team decisions, 2
// answers) the run has spent 23, over a limit of 15, so the research
// supervisor is not asked again, the global supervisor neither, and it
// writes the final answer.
func TestBudgetRunTokensFinish(t *testing.T) {
	f := &fakeActivities{decisions: map[string][]models.Decision{
		"gs":   {dispatch("research", "find sources"), dispatch("writing", "write it up")},
		"ts-r": {dispatch("searcher", "search"), dispatch("analyst", "analyse")},
		"ts-w": {dispatch("writer", "write")},
	}}
	env := newEnv(t, f)
	in := runInput(testHierarchy())
	in.Options.Budget = &models.Budget{BudgetLimit: models.BudgetLimit{MaxTokens: 15}}
	env.ExecuteWorkflow(workflows.RunWorkflow, in)
	var res models.RunResult
	if err := env.GetWorkflowResult(&res); err != nil {
		t.Fatal(err)
	}
	if len(res.Teams) != 1 || res.Teams[0].TeamName != "research" {
		t.Fatalf("teams = %+v", res.Teams)
	}
	if res.FinalAnswer != "output of Global Supervisor" {
		t.Errorf("final answer = %q", res.FinalAnswer)
	}
	if n := gsDecides(f); n != 1 {
		t.Errorf("global decisions = %d, want 1", n)
	}
	if res.Usage.TotalTokens != 23+10 {
		t.Errorf("usage = %d, want 33 (the final answer allowed past the limit)", res.Usage.TotalTokens)
	}
	ev := budgetEvents(f)
	if len(ev) != 1 || ev[0].Data["scope"] != "run" || ev[0].Data["on_exceeded"] != models.BudgetFinish {
		t.Fatalf("system.budget events = %+v", ev)
	}
	if spent := ev[0].Data["spent"].(map[string]any); spent["total_tokens"] != 23 {
		t.Errorf("spent = %+v", spent)
	}
}

// A cost limit with on_exceeded fail: each worker answer costs $0.01, so
// after the research turn ($0.02) the run fails with BUDGET_EXCEEDED, its
// work kept in its result.
func TestBudgetRunCostFail(t *testing.T) {
	f := &fakeActivities{decisions: map[string][]models.Decision{
		"gs":   {dispatch("research", "find sources"), dispatch("writing", "write it up")},
		"ts-r": {dispatch("searcher", "search"), dispatch("analyst", "analyse")},
	}}
	f.respond = func(_ context.Context, in models.RespondInput) (*models.RespondResult, error) {
		return &models.RespondResult{Output: "output of " + in.Agent.Name, Model: "m", Usage: models.Usage{TotalTokens: 10, CostUSD: 0.01}}, nil
	}
	env := newEnv(t, f)
	in := runInput(testHierarchy())
	in.Options.Budget = &models.Budget{BudgetLimit: models.BudgetLimit{MaxCostUSD: 0.015}, OnExceeded: models.BudgetFail}
	env.ExecuteWorkflow(workflows.RunWorkflow, in)
	err := env.GetWorkflowError()
	var appErr *temporal.ApplicationError
	if !errors.As(err, &appErr) || appErr.Type() != models.CodeBudgetExceeded.Name {
		t.Fatalf("error = %v", err)
	}
	last := f.lastStatus()
	if last.Status != models.RunFailed || last.Result == nil || len(last.Result.Errors) != 1 || last.Result.Errors[0].ErrorCode != models.CodeBudgetExceeded.Name {
		t.Fatalf("last status = %+v", last)
	}
	if len(last.Result.Teams) != 1 {
		t.Errorf("teams kept = %+v", last.Result.Teams)
	}
	for _, r := range f.responds {
		if r.Purpose == models.PurposeFinalAnswer {
			t.Error("a failed budget wrote a final answer")
		}
	}
	if ev := budgetEvents(f); len(ev) != 1 || ev[0].Data["on_exceeded"] != models.BudgetFail {
		t.Errorf("system.budget events = %+v", ev)
	}
}

// A team's budget spent takes that team out of the options; the run goes
// on with the others.
func TestBudgetTeam(t *testing.T) {
	f := &fakeActivities{decisions: map[string][]models.Decision{
		"gs":   {dispatch("research", "find sources"), dispatch("writing", "write it up")},
		"ts-r": {dispatch("searcher", "search")},
		"ts-w": {dispatch("writer", "write")},
	}}
	env := newEnv(t, f)
	in := runInput(testHierarchy())
	in.Options.Budget = &models.Budget{Teams: map[string]models.BudgetLimit{"research": {MaxTokens: 5}}}
	env.ExecuteWorkflow(workflows.RunWorkflow, in)
	var res models.RunResult
	if err := env.GetWorkflowResult(&res); err != nil {
		t.Fatal(err)
	}
	if len(res.Teams) != 2 || res.Teams[1].TeamName != "writing" {
		t.Fatalf("teams = %+v", res.Teams)
	}
	var second *models.DecideInput
	for i, d := range f.decides {
		if d.Source.AgentID == "gs" && d.Iteration == 2 {
			second = &f.decides[i]
		}
	}
	if second == nil || slices.ContainsFunc(second.Options, func(o models.Option) bool { return o.Name == "research" }) {
		t.Fatalf("second decision's options = %+v", second)
	}
	ev := budgetEvents(f)
	if len(ev) != 1 || ev[0].Data["scope"] != "team" || ev[0].Data["team_name"] != "research" {
		t.Fatalf("system.budget events = %+v", ev)
	}
}

// No budget: nothing changes, no system.budget.
func TestBudgetNone(t *testing.T) {
	f := &fakeActivities{decisions: map[string][]models.Decision{
		"gs": {dispatch("research", "find sources"), dispatch("writing", "write it up")},
	}}
	env := newEnv(t, f)
	env.ExecuteWorkflow(workflows.RunWorkflow, runInput(testHierarchy()))
	var res models.RunResult
	if err := env.GetWorkflowResult(&res); err != nil {
		t.Fatal(err)
	}
	if len(res.Teams) != 2 || len(budgetEvents(f)) != 0 {
		t.Errorf("teams %d, budget events %d", len(res.Teams), len(budgetEvents(f)))
	}
}

// A run from before the change ignores its budget.
func TestBudgetBeforeChange(t *testing.T) {
	f := &fakeActivities{decisions: map[string][]models.Decision{
		"gs": {dispatch("research", "find sources"), dispatch("writing", "write it up")},
	}}
	env := newEnv(t, f)
	env.OnGetVersion("budgets", workflow.DefaultVersion, 1).Return(workflow.DefaultVersion)
	env.OnGetVersion("baseline-i28", workflow.DefaultVersion, 1).Return(workflow.DefaultVersion) // the change asked on its own
	in := runInput(testHierarchy())
	in.Options.Budget = &models.Budget{BudgetLimit: models.BudgetLimit{MaxTokens: 1}, OnExceeded: models.BudgetFail}
	env.ExecuteWorkflow(workflows.RunWorkflow, in)
	var res models.RunResult
	if err := env.GetWorkflowResult(&res); err != nil {
		t.Fatal(err)
	}
	if len(res.Teams) != 2 || len(budgetEvents(f)) != 0 {
		t.Errorf("teams %d, budget events %d", len(res.Teams), len(budgetEvents(f)))
	}
}

// An agent's budget spent takes that worker out of its team supervisor's
// options; the turn goes on with the others.
func TestBudgetAgent(t *testing.T) {
	f := &fakeActivities{decisions: map[string][]models.Decision{
		"gs":   {dispatch("research", "find sources")},
		"ts-r": {dispatch("searcher", "search"), dispatch("analyst", "analyse")},
	}}
	env := newEnv(t, f)
	in := runInput(testHierarchy())
	in.Options.Budget = &models.Budget{Agents: map[string]models.BudgetLimit{"w-search": {MaxTokens: 5}}}
	env.ExecuteWorkflow(workflows.RunWorkflow, in)
	var res models.RunResult
	if err := env.GetWorkflowResult(&res); err != nil {
		t.Fatal(err)
	}
	if len(res.Teams) != 1 || len(res.Teams[0].Workers) != 2 {
		t.Fatalf("teams = %+v", res.Teams)
	}
	var second *models.DecideInput
	for i, d := range f.decides {
		if d.Source.AgentID == "ts-r" && d.Iteration == 2 {
			second = &f.decides[i]
		}
	}
	if second == nil || len(second.Options) != 1 || second.Options[0].Name != "analyst" {
		t.Fatalf("second team decision's options = %+v", second)
	}
	ev := budgetEvents(f)
	if len(ev) != 1 || ev[0].Data["scope"] != "agent" || ev[0].Data["agent_id"] != "w-search" || ev[0].Data["on_exceeded"] != "skip_agent" {
		t.Fatalf("system.budget events = %+v", ev)
	}
}

// Routed mode with two teams at work at once: each turn counts its own
// spending with the run's. The test environment ends the two turns'
// activities in either order: research alone stops after its analyst (23
// tokens); when writing (12) ends first, the global supervisor is asked
// again while research is at work, and research, counting the run's 14,
// stops after its searcher. Either way at most the worker calls in flight
// pass the limit and the final answer follows.
func TestBudgetRoutedParallel(t *testing.T) {
	both := dispatch("research", "find sources")
	both.Also = []models.DispatchTarget{{Target: "writing", Instruction: "write"}}
	f := &fakeActivities{decisions: map[string][]models.Decision{
		"gs":   {both, dispatch("writing", "again")},
		"ts-r": {dispatch("searcher", "search"), dispatch("analyst", "analyse")},
		"ts-w": {dispatch("writer", "write")},
	}}
	env := newEnv(t, f)
	in := runInput(testHierarchy())
	in.Options.MaxParallelTeams = 2
	in.Options.Budget = &models.Budget{BudgetLimit: models.BudgetLimit{MaxTokens: 15}}
	env.ExecuteWorkflow(workflows.RunWorkflow, in)
	var res models.RunResult
	if err := env.GetWorkflowResult(&res); err != nil {
		t.Fatal(err)
	}
	workers := 0
	for _, tm := range res.Teams {
		workers += len(tm.Workers)
	}
	if workers < 2 || workers > 3 || res.FinalAnswer == "" {
		t.Fatalf("teams = %+v, final answer %q", res.Teams, res.FinalAnswer)
	}
	if n := gsDecides(f); n != len(res.Teams)-1 {
		t.Errorf("global decisions = %d with %d team turns", n, len(res.Teams))
	}
	if ev := budgetEvents(f); len(ev) != 1 || ev[0].Data["scope"] != "run" {
		t.Errorf("system.budget events = %+v", ev)
	}
}

// An agent's budget spent with on_exceeded "fail" fails the run, as the
// name says, instead of only taking the worker out of the options: the
// turn ends before its supervisor's next decision, nobody writes a final
// answer, and the run ends failed with BUDGET_EXCEEDED naming the agent.
func TestBudgetAgentFail(t *testing.T) {
	f := &fakeActivities{decisions: map[string][]models.Decision{
		"gs":   {dispatch("research", "find sources"), dispatch("writing", "write it up")},
		"ts-r": {dispatch("searcher", "search"), dispatch("analyst", "analyse")},
		"ts-w": {dispatch("writer", "write")},
	}}
	env := newEnv(t, f)
	in := runInput(testHierarchy())
	in.Options.Budget = &models.Budget{Agents: map[string]models.BudgetLimit{"w-search": {MaxTokens: 5}}, OnExceeded: models.BudgetFail}
	env.ExecuteWorkflow(workflows.RunWorkflow, in)
	var appErr *temporal.ApplicationError
	if err := env.GetWorkflowError(); !errors.As(err, &appErr) || appErr.Type() != models.CodeBudgetExceeded.Name {
		t.Fatalf("error = %v, want a %s failure", err, models.CodeBudgetExceeded.Name)
	}
	last := f.lastStatus()
	if last.Status != models.RunFailed || last.Result == nil || len(last.Result.Errors) != 1 ||
		last.Result.Errors[0].ErrorCode != models.CodeBudgetExceeded.Name || !strings.Contains(last.Result.Errors[0].Message, "w-search") {
		t.Fatalf("last status = %+v", last)
	}
	for _, d := range f.decides {
		if d.Source.AgentID == "ts-r" && d.Iteration == 2 {
			t.Errorf("the research supervisor was asked again after w-search's budget was spent: %+v", d.Options)
		}
	}
	for _, r := range f.responds {
		if r.Purpose == models.PurposeFinalAnswer || r.Agent.AgentID == "w-analyst" || r.Agent.AgentID == "w-writer" {
			t.Errorf("a failed budget went on with %s (%s)", r.Agent.AgentID, r.Purpose)
		}
	}
	ev := budgetEvents(f)
	if len(ev) != 1 || ev[0].Data["scope"] != "agent" || ev[0].Data["agent_id"] != "w-search" || ev[0].Data["on_exceeded"] != models.BudgetFail {
		t.Fatalf("system.budget events = %+v", ev)
	}
}

// A team's budget spent with on_exceeded "fail" fails the run too.
func TestBudgetTeamFail(t *testing.T) {
	f := &fakeActivities{decisions: map[string][]models.Decision{
		"gs":   {dispatch("research", "find sources"), dispatch("writing", "write it up")},
		"ts-r": {dispatch("searcher", "search")},
		"ts-w": {dispatch("writer", "write")},
	}}
	env := newEnv(t, f)
	in := runInput(testHierarchy())
	in.Options.Budget = &models.Budget{Teams: map[string]models.BudgetLimit{"research": {MaxTokens: 5}}, OnExceeded: models.BudgetFail}
	env.ExecuteWorkflow(workflows.RunWorkflow, in)
	var appErr *temporal.ApplicationError
	if err := env.GetWorkflowError(); !errors.As(err, &appErr) || appErr.Type() != models.CodeBudgetExceeded.Name {
		t.Fatalf("error = %v, want a %s failure", err, models.CodeBudgetExceeded.Name)
	}
	if n := gsDecides(f); n != 1 {
		t.Errorf("global decisions = %d, want 1", n)
	}
	last := f.lastStatus()
	if last.Status != models.RunFailed || last.Result == nil || len(last.Result.Errors) != 1 || !strings.Contains(last.Result.Errors[0].Message, "research") {
		t.Fatalf("last status = %+v", last)
	}
	ev := budgetEvents(f)
	if len(ev) != 1 || ev[0].Data["scope"] != "team" || ev[0].Data["on_exceeded"] != models.BudgetFail {
		t.Fatalf("system.budget events = %+v", ev)
	}
}

// A run from before the change "scoped-budget-fail" keeps skipping the
// agent whose budget is spent, on_exceeded "fail" or not.
func TestBudgetAgentFailBeforeChange(t *testing.T) {
	f := &fakeActivities{decisions: map[string][]models.Decision{
		"gs":   {dispatch("research", "find sources")},
		"ts-r": {dispatch("searcher", "search"), dispatch("analyst", "analyse")},
	}}
	env := newEnv(t, f)
	env.OnGetVersion("scoped-budget-fail", workflow.DefaultVersion, 1).Return(workflow.DefaultVersion)
	env.OnGetVersion("baseline-i28", workflow.DefaultVersion, 1).Return(workflow.DefaultVersion) // the change asked on its own
	in := runInput(testHierarchy())
	in.Options.Budget = &models.Budget{Agents: map[string]models.BudgetLimit{"w-search": {MaxTokens: 5}}, OnExceeded: models.BudgetFail}
	env.ExecuteWorkflow(workflows.RunWorkflow, in)
	var res models.RunResult
	if err := env.GetWorkflowResult(&res); err != nil {
		t.Fatal(err)
	}
	if len(res.Teams) != 1 || len(res.Teams[0].Workers) != 2 {
		t.Fatalf("teams = %+v", res.Teams)
	}
	if ev := budgetEvents(f); len(ev) != 1 || ev[0].Data["on_exceeded"] != "skip_agent" {
		t.Fatalf("system.budget events = %+v", ev)
	}
}
