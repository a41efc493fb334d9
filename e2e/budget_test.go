package e2e

import (
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
