package e2e

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/op-stack/executor/llm/llmfake"
	"github.com/op-stack/executor/models"
)

// budgetRules are the reference run's rules with known usage: every
// supervisor call reports 10 tokens, every worker answer 100.
func budgetRules() []llmfake.Rule {
	rules := referenceRules(nil)
	for i := range rules {
		n := 10
		if len(rules[i].SystemContains) > 2 && rules[i].SystemContains[:2] == "W-" {
			n = 100
		}
		for j := range rules[i].Responses {
			rules[i].Responses[j].Usage = llmfake.Usage{PromptTokens: n / 2, CompletionTokens: n / 2, TotalTokens: n}
		}
	}
	return rules
}

// TestBudgetStopsRun: a token budget of 200 is spent by the research turn
// (the global decision 10, two research decisions 20 — with every worker
// done the team ends without asking — two workers 200: 230), so writing is never dispatched. On runs/start (finish) the global
// supervisor writes the final answer; on spec 001's execute (fail) the run
// fails with BUDGET_EXCEEDED. Unknown team names are refused on both.
func TestBudgetStopsRun(t *testing.T) {
	e := newEnv(t, budgetRules())
	hid := e.createHierarchy(referenceHierarchy())

	if status, env := e.post("/runs/start", map[string]any{"hierarchy_id": hid, "task": "budget", "execution_config": map[string]any{
		"budget": map[string]any{"teams": map[string]any{"nope": map[string]any{"max_tokens": 5}}},
	}}); status != http.StatusBadRequest || env.ErrorCode != models.CodeInvalidParameters.Name {
		t.Errorf("unknown team: %d %+v", status, env)
	}
	if status, env := e.doV1("POST", "/hierarchical-teams/"+hid+"/execute", map[string]any{"task": "budget", "execution_config": map[string]any{
		"budget": map[string]any{"max_tokens": -1},
	}}); status != http.StatusBadRequest || env.Success {
		t.Errorf("negative max_tokens: %d %+v", status, env)
	}

	check := func(surface, id, want string) runView {
		t.Helper()
		v := e.waitRun(id, time.Minute)
		if v.Status != want || v.Result == nil || len(v.Result.Teams) != 1 || v.Result.Teams[0].TeamName != "research" {
			t.Fatalf("%s: run ended %s (%s), result %+v", surface, v.Status, v.Error, v.Result)
		}
		var budget []models.Event
		for _, ev := range e.storedEvents(id) {
			if ev.Event.Category == models.CategorySystem && ev.Event.Action == models.ActionBudget {
				budget = append(budget, ev)
			}
		}
		if len(budget) != 1 || budget[0].Data["scope"] != "run" {
			t.Fatalf("%s: system.budget events = %+v", surface, budget)
		}
		if spent, _ := budget[0].Data["spent"].(map[string]any); spent == nil || spent["total_tokens"] != float64(230) {
			t.Errorf("%s: spent = %+v", surface, budget[0].Data["spent"])
		}
		return v
	}

	var out struct {
		ID string `json:"id"`
	}
	e.mustPost("/runs/start", map[string]any{"hierarchy_id": hid, "task": "budget", "execution_config": map[string]any{
		"budget": map[string]any{"max_tokens": 200},
	}}, &out)
	v := check("runs/start", out.ID, models.RunCompleted)
	if v.FinalAnswer != "FINAL ANSWER: tunnelling explained." || v.Result.Usage.TotalTokens != 240 {
		t.Errorf("final answer %q, usage %+v", v.FinalAnswer, v.Result.Usage)
	}
	if n := len(callsMatching(e.fake.Calls(), "W-WRITER")); n != 0 {
		t.Errorf("the writer was called %d times", n)
	}

	e.fake.SetRules(budgetRules()...)
	var ex struct {
		ExecutionID string `json:"execution_id"`
	}
	e.mustV1("POST", "/hierarchical-teams/"+hid+"/execute", map[string]any{"task": "budget", "execution_config": map[string]any{
		"budget": map[string]any{"max_tokens": 200, "on_exceeded": "fail"},
	}}, "EXECUTION_STARTED", &ex)
	v = check("/api/v1", ex.ExecutionID, models.RunFailed)
	if len(v.Result.Errors) != 1 || v.Result.Errors[0].ErrorCode != models.CodeBudgetExceeded.Name {
		t.Errorf("errors = %+v", v.Result.Errors)
	}
	// Spec 001's stream carries system.budget as execution_budget, before
	// the end, and its execution view the run's cost totals.
	var budgetMsgs []v1StreamMsg
	msgs := e.readV1Stream(e.openV1Stream(ex.ExecutionID, 0, false))
	for _, m := range msgs {
		if m.Type == "execution_budget" {
			budgetMsgs = append(budgetMsgs, m)
		}
	}
	if len(budgetMsgs) != 1 || budgetMsgs[0].Data["scope"] != "run" || budgetMsgs[0].Data["on_exceeded"] != models.BudgetFail ||
		budgetMsgs[0].Data["source_type"] != "system" || msgs[len(msgs)-1].Type != "execution_completed" {
		t.Errorf("/api/v1 stream budget events = %+v", budgetMsgs)
	} else if spent, _ := budgetMsgs[0].Data["spent"].(map[string]any); spent["total_tokens"] != float64(230) {
		t.Errorf("execution_budget spent = %+v", budgetMsgs[0].Data["spent"])
	}
	var view struct {
		Usage struct {
			TotalTokens int  `json:"total_tokens"`
			CostUnknown bool `json:"cost_unknown"`
		} `json:"usage"`
	}
	e.mustV1("GET", "/executions/"+ex.ExecutionID, nil, "EXECUTION_INFO_RETRIEVED", &view)
	if view.Usage.TotalTokens != 230 {
		t.Errorf("execution view usage = %+v, want its calls' 230 tokens", view.Usage)
	}

	// A hierarchy's default budget: stored, shown, used by a run that
	// gives none.
	e.fake.SetRules(budgetRules()...)
	withBudget := referenceHierarchy()
	withBudget["budget"] = map[string]any{"teams": map[string]any{"nope": map[string]any{"max_tokens": 5}}}
	if status, env := e.post("/hierarchies/create", withBudget); status != http.StatusBadRequest || env.ErrorCode != models.CodeInvalidParameters.Name || !strings.Contains(env.Message, "budget.teams.nope") {
		t.Errorf("hierarchy with an unknown team's budget: %d %+v", status, env)
	}
	withBudget["budget"] = map[string]any{"max_tokens": 200}
	hid2 := e.createHierarchy(withBudget)
	var got models.Hierarchy
	e.mustPost("/hierarchies/get", map[string]any{"hierarchy_id": hid2}, &got)
	if got.Budget == nil || got.Budget.MaxTokens != 200 {
		t.Fatalf("hierarchies/get budget = %+v", got.Budget)
	}
	check("hierarchy default", e.startRun(hid2, "budget"), models.RunCompleted)
}

// startBudgetedRun starts a run with a token budget of 200 whose searcher
// delegates to the sub-agent helper (max_depth 2), which delegates to
// itself; the inner helper's next delegation is refused (depth), and then
// both helpers fail on a 401, each after one 10-token call. The searcher
// answers; its turn has spent 100 + 100 + 20 (the failed helpers'
// spending), so after the research turn the run has spent 10 + 10 + 220 =
// 240 and the budget ends it: the global supervisor writes the final
// answer. TestRecordReplayHistories records it as the budgeted set.
func startBudgetedRun(t *testing.T) (*testEnv, string) {
	t.Helper()
	ten := llmfake.Usage{PromptTokens: 5, CompletionTokens: 5, TotalTokens: 10}
	hundred := llmfake.Usage{PromptTokens: 50, CompletionTokens: 50, TotalTokens: 100}
	rules := []llmfake.Rule{
		{Name: "helper after", SystemContains: "SUB-HELPER", HasToolResult: true, Responses: []llmfake.Response{{Status: 401}}},
		{Name: "helper first", SystemContains: "SUB-HELPER", Responses: []llmfake.Response{
			{ToolCalls: []llmfake.ToolCall{delegateCall("helper", "dig")}, Usage: ten},
		}},
		{Name: "searcher after", SystemContains: "W-SEARCHER", HasToolResult: true, Responses: []llmfake.Response{{Content: "searcher: done without help", Usage: hundred}}},
		{Name: "searcher first", SystemContains: "W-SEARCHER", Responses: []llmfake.Response{
			{ToolCalls: []llmfake.ToolCall{delegateCall("helper", "look it up")}, Usage: hundred},
		}},
	}
	e := newEnv(t, append(rules, budgetRules()...))
	e.mustPost("/subagents/create", map[string]any{"id": "sa-helper", "name": "helper", "system_prompt": "SUB-HELPER You help.", "max_depth": 2, "sub_agents": []string{"helper"}}, nil)
	body := referenceHierarchy()
	body["teams"].([]any)[0].(map[string]any)["workers"].([]any)[0].(map[string]any)["sub_agents"] = []string{"helper"}
	var out struct {
		ID string `json:"id"`
	}
	e.mustPost("/runs/start", map[string]any{"hierarchy_id": e.createHierarchy(body), "task": "budget with a failing helper", "execution_config": map[string]any{
		"budget": map[string]any{"max_tokens": 200},
	}}, &out)
	return e, out.ID
}

// TestBudgetCountsFailedSubAgents: what failed sub-agents spent counts in
// their caller's usage and so in the run's budget (see startBudgetedRun).
func TestBudgetCountsFailedSubAgents(t *testing.T) {
	e, id := startBudgetedRun(t)
	v := e.waitRun(id, time.Minute)
	if v.Status != models.RunCompleted || v.Result == nil || len(v.Result.Teams) != 1 {
		t.Fatalf("run ended %s (%s), result %+v", v.Status, v.Error, v.Result)
	}
	if n := len(callsMatching(e.fake.Calls(), "SUB-HELPER")); n != 4 {
		t.Errorf("helper calls = %d, want 4 (two helpers, each one call and one 401)", n)
	}
	searcher := v.Result.Teams[0].Workers[0]
	if searcher.AgentID != "w-searcher" || searcher.Usage.TotalTokens != 220 || searcher.SubAgentUsage == nil || searcher.SubAgentUsage.TotalTokens != 20 {
		t.Errorf("searcher = %+v, sub-agent usage %+v; want 220 with 20 from the failed helpers", searcher, searcher.SubAgentUsage)
	}
	if u := v.Result.Teams[0].Usage; u.TotalTokens != 10+220 {
		t.Errorf("research turn usage = %+v, want 230 (one decision and the searcher)", u)
	}
	var budget []models.Event
	for _, ev := range e.storedEvents(id) {
		if ev.Event.Category == models.CategorySystem && ev.Event.Action == models.ActionBudget {
			budget = append(budget, ev)
		}
	}
	if len(budget) != 1 {
		t.Fatalf("system.budget events = %+v", budget)
	}
	if spent, _ := budget[0].Data["spent"].(map[string]any); spent["total_tokens"] != float64(240) {
		t.Errorf("spent = %+v, want 240", budget[0].Data["spent"])
	}
	if n := len(callsMatching(e.fake.Calls(), "W-ANALYST")) + len(callsMatching(e.fake.Calls(), "W-WRITER")); n != 0 {
		t.Errorf("%d calls after the budget was spent", n)
	}
	// The failed helpers' calls are recorded in the research team.
	calls, err := e.store.LLMCalls(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	helper := 0
	for _, c := range calls {
		if c.AgentID == "sa-helper" {
			helper++
			if c.TeamName != "research" || !c.SubAgentCall() {
				t.Errorf("helper call %s: team %q, path %v", c.ID, c.TeamName, c.AgentPath)
			}
		}
	}
	if helper != 4 {
		t.Errorf("helper calls recorded = %d, want 4", helper)
	}
}

// startAgentFailRun starts a run whose searcher may spend 50 tokens, with
// on_exceeded "fail": its 100-token answer spends that (budgetRules).
func startAgentFailRun(t *testing.T) (*testEnv, string) {
	t.Helper()
	e := newEnv(t, budgetRules())
	var out struct {
		ID string `json:"id"`
	}
	e.mustPost("/runs/start", map[string]any{"hierarchy_id": e.createHierarchy(referenceHierarchy()), "task": "agent budget", "execution_config": map[string]any{
		"budget": map[string]any{"agents": map[string]any{"w-searcher": map[string]any{"max_tokens": 50}}, "on_exceeded": "fail"},
	}}, &out)
	return e, out.ID
}

// TestBudgetAgentFailsRun (issue 27): an agent-scope budget with
// on_exceeded "fail" fails the run with BUDGET_EXCEEDED naming the agent,
// before the research supervisor's next decision: neither the analyst nor
// the writer is called and no final answer is written. Before, the
// searcher was only skipped and the run completed.
func TestBudgetAgentFailsRun(t *testing.T) {
	e, id := startAgentFailRun(t)
	v := e.waitRun(id, time.Minute)
	if v.Status != models.RunFailed || v.Result == nil || len(v.Result.Errors) != 1 ||
		v.Result.Errors[0].ErrorCode != models.CodeBudgetExceeded.Name || !strings.Contains(v.Result.Errors[0].Message, "w-searcher") {
		t.Fatalf("run ended %s (%s), result %+v", v.Status, v.Error, v.Result)
	}
	for _, who := range []string{"W-ANALYST", "W-WRITER"} {
		if n := len(callsMatching(e.fake.Calls(), who)); n != 0 {
			t.Errorf("%s was called %d times after the searcher's budget was spent", who, n)
		}
	}
	var budget []models.Event
	for _, ev := range e.storedEvents(id) {
		if ev.Event.Category == models.CategorySystem && ev.Event.Action == models.ActionBudget {
			budget = append(budget, ev)
		}
	}
	if len(budget) != 1 || budget[0].Data["scope"] != "agent" || budget[0].Data["agent_id"] != "w-searcher" || budget[0].Data["on_exceeded"] != models.BudgetFail {
		t.Fatalf("system.budget events = %+v", budget)
	}
}
