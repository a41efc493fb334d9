package e2e

import (
	"context"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"go.temporal.io/api/workflowservice/v1"

	"github.com/op-stack/executor/config"
	"github.com/op-stack/executor/llm/llmfake"
	"github.com/op-stack/executor/models"
	"github.com/op-stack/executor/pricing"
)

// A run against the fake with known usage: every call is priced, the run's
// cost (its workflow's roll-up, runs/get, runs/list, runs/results) is the
// sum of its calls' costs, and the CostUsd search attribute finds it.
func TestRunCost(t *testing.T) {
	prices := pricing.Table{"test-model": {Input: 2, Output: 10}}
	e := newEnv(t, withUsage(referenceRules(nil)), withConfig(func(c *config.Config) { c.LLMPrices = prices }))
	hid := e.createHierarchy(referenceHierarchy())
	id := e.startRun(hid, "Explain quantum tunnelling")
	v := e.waitRun(id, time.Minute)
	if v.Status != models.RunCompleted {
		t.Fatalf("run ended %s: %s", v.Status, v.Error)
	}
	near := func(a, b float64) bool { return math.Abs(a-b) < 1e-9 }

	// Each call's cost is its fake usage at the table's price.
	var want float64
	var tokens int
	for _, c := range e.fake.Calls() {
		u := usageOf(c.Rule)
		want += (float64(u.PromptTokens)*2 + float64(u.CompletionTokens)*10) / 1e6
		tokens += u.TotalTokens
	}
	recorded, err := e.store.LLMCalls(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	var sum float64
	for _, c := range recorded {
		if c.CostUSD == nil {
			t.Fatalf("call %s has no cost", c.ID)
		}
		if w := (float64(c.PromptTokens)*2 + float64(c.CompletionTokens)*10) / 1e6; !near(*c.CostUSD, w) {
			t.Errorf("call %s cost %v, want %v", c.ID, *c.CostUSD, w)
		}
		sum += *c.CostUSD
	}
	if want == 0 || !near(sum, want) || len(recorded) != len(e.fake.Calls()) {
		t.Errorf("calls cost %v (%d recorded), the fake's usage prices at %v (%d calls)", sum, len(recorded), want, len(e.fake.Calls()))
	}
	// The workflow's roll-up.
	if u := v.Result.Usage; !near(u.CostUSD, sum) || u.CostUnknown || u.TotalTokens != tokens {
		t.Errorf("run result usage = %+v, want cost %v and %d tokens", u, sum, tokens)
	}
	// runs/get and runs/list.
	type usage struct {
		TotalTokens int      `json:"total_tokens"`
		CostUSD     *float64 `json:"cost_usd"`
		CostUnknown bool     `json:"cost_unknown"`
	}
	var got struct {
		Usage usage `json:"usage"`
	}
	e.mustPost("/runs/get", map[string]any{"id": id}, &got)
	if got.Usage.CostUSD == nil || !near(*got.Usage.CostUSD, sum) || got.Usage.CostUnknown || got.Usage.TotalTokens != tokens {
		t.Errorf("runs/get usage = %+v, want cost %v", got.Usage, sum)
	}
	var list struct {
		Items []struct {
			ID    string `json:"id"`
			Usage usage  `json:"usage"`
		} `json:"items"`
	}
	e.mustPost("/runs/list", map[string]any{"hierarchy_id": hid}, &list)
	if len(list.Items) != 1 || list.Items[0].Usage.CostUSD == nil || !near(*list.Items[0].Usage.CostUSD, sum) {
		t.Errorf("runs/list = %+v", list.Items)
	}
	// runs/results.
	var r struct {
		Metrics struct {
			TotalCostUSD float64 `json:"total_cost_usd"`
			CostUnknown  bool    `json:"cost_unknown"`
		} `json:"metrics"`
		UsageByAgent map[string]struct {
			CostUSD float64 `json:"cost_usd"`
		} `json:"usage_by_agent"`
	}
	e.mustPost("/runs/results", map[string]any{"id": id}, &r)
	var byAgent float64
	for _, a := range r.UsageByAgent {
		byAgent += a.CostUSD
	}
	if !near(r.Metrics.TotalCostUSD, sum) || r.Metrics.CostUnknown || !near(byAgent, sum) {
		t.Errorf("results cost = %+v, by agent %v; want %v", r.Metrics, byAgent, sum)
	}

	// The search attributes (visibility is eventually consistent).
	run, err := e.store.GetRun(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	query := fmt.Sprintf(`WorkflowId = %q AND CostUsd > 0 AND TotalTokens = %d`, run.WorkflowID, tokens)
	deadline := time.Now().Add(20 * time.Second)
	for {
		resp, err := e.temporal.ListWorkflow(context.Background(), &workflowservice.ListWorkflowExecutionsRequest{Query: query})
		if err != nil {
			t.Fatal(err)
		}
		if len(resp.GetExecutions()) > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no workflow for %s", query)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// A worker that delegates: the sub-agent's calls are recorded with the
// worker's team and their path, so the team's cost in the results includes
// them; usage_by_sub_agent, the worker's and the run's sub_agent_usage and
// the workflow's team turn usage show them.
func TestSubAgentCost(t *testing.T) {
	prices := pricing.Table{"test-model": {Input: 2, Output: 10}}
	rules := []llmfake.Rule{
		{Name: "searcher after", SystemContains: "W-SEARCHER", HasToolResult: true, Responses: contentResponses("searcher: done")},
		{Name: "searcher first", SystemContains: "W-SEARCHER", Responses: []llmfake.Response{
			{ToolCalls: []llmfake.ToolCall{toolCall("delegate", `{"name": "helper", "task": "look it up"}`)}},
		}},
		{Name: "helper", SystemContains: "SUB-HELPER", Responses: contentResponses("helper: found it")},
	}
	e := newEnv(t, withUsage(append(rules, referenceRules(nil)...)), withConfig(func(c *config.Config) { c.LLMPrices = prices }))
	e.mustPost("/subagents/create", map[string]any{"id": "sa-helper", "name": "helper", "system_prompt": "SUB-HELPER You look things up."}, nil)
	body := referenceHierarchy()
	searcher := body["teams"].([]any)[0].(map[string]any)["workers"].([]any)[0].(map[string]any)
	searcher["sub_agents"] = []string{"helper"}
	id := e.startRun(e.createHierarchy(body), "delegate")
	v := e.waitRun(id, time.Minute)
	if v.Status != models.RunCompleted {
		t.Fatalf("run ended %s: %s", v.Status, v.Error)
	}
	near := func(a, b float64) bool { return math.Abs(a-b) < 1e-9 }

	calls, err := e.store.LLMCalls(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	var research, sub float64
	var subTokens, researchCalls int
	for _, c := range calls {
		if c.CostUSD == nil {
			t.Fatalf("call %s has no cost", c.ID)
		}
		if c.AgentID == "sa-helper" {
			if c.TeamName != "research" || len(c.AgentPath) != 4 || c.AgentPath[2] != "w-searcher" || c.AgentPath[3] != "sa-helper" {
				t.Errorf("sub-agent call %s: team %q, path %v", c.ID, c.TeamName, c.AgentPath)
			}
			sub += *c.CostUSD
			subTokens += c.TotalTokens
		}
		switch c.AgentID {
		case "ts-research", "w-searcher", "w-analyst", "sa-helper":
			research += *c.CostUSD
			researchCalls++
			if c.TeamName != "research" {
				t.Errorf("call %s of %s has team %q", c.ID, c.AgentID, c.TeamName)
			}
		case "gs-1":
			if c.TeamName != "" || len(c.AgentPath) != 1 {
				t.Errorf("global supervisor call %s: team %q, path %v", c.ID, c.TeamName, c.AgentPath)
			}
		}
	}
	if sub == 0 {
		t.Fatal("no sub-agent call recorded")
	}

	var r struct {
		TeamResults map[string]struct {
			TeamName string `json:"team_name"`
			Metrics  struct {
				CostUSD      float64 `json:"cost_usd"`
				APICallsMade int     `json:"api_calls_made"`
			} `json:"metrics"`
			Agents map[string]struct {
				SubAgentUsage struct {
					CostUSD    float64 `json:"cost_usd"`
					TokensUsed int     `json:"tokens_used"`
				} `json:"sub_agent_usage"`
			} `json:"agents"`
		} `json:"team_results"`
		Metrics struct {
			SubAgentUsage struct {
				CostUSD float64 `json:"cost_usd"`
			} `json:"sub_agent_usage"`
		} `json:"metrics"`
		UsageBySubAgent map[string]struct {
			CostUSD float64  `json:"cost_usd"`
			Teams   []string `json:"teams"`
			Callers []string `json:"callers"`
		} `json:"usage_by_sub_agent"`
	}
	e.mustPost("/runs/results", map[string]any{"id": id}, &r)
	found := false
	for _, tr := range r.TeamResults {
		if tr.TeamName != "research" {
			continue
		}
		found = true
		if !near(tr.Metrics.CostUSD, research) || tr.Metrics.APICallsMade != researchCalls {
			t.Errorf("research metrics = %+v, want cost %v over %d calls (sub-agent included)", tr.Metrics, research, researchCalls)
		}
		if s := tr.Agents["w-searcher"].SubAgentUsage; !near(s.CostUSD, sub) || s.TokensUsed != subTokens {
			t.Errorf("searcher's sub_agent_usage = %+v, want cost %v", s, sub)
		}
	}
	if !found {
		t.Fatalf("no research team in %+v", r.TeamResults)
	}
	if !near(r.Metrics.SubAgentUsage.CostUSD, sub) {
		t.Errorf("metrics.sub_agent_usage = %+v, want %v", r.Metrics.SubAgentUsage, sub)
	}
	if h := r.UsageBySubAgent["sa-helper"]; !near(h.CostUSD, sub) || len(h.Teams) != 1 || h.Teams[0] != "research" || len(h.Callers) != 1 || h.Callers[0] != "w-searcher" {
		t.Errorf("usage_by_sub_agent = %+v", r.UsageBySubAgent)
	}

	// The workflow's roll-up: the research turn's usage holds its
	// supervisor, its workers and the sub-agent.
	res := v.Result
	if res.SubAgentUsage.TotalTokens != subTokens || !near(res.SubAgentUsage.CostUSD, sub) {
		t.Errorf("run's sub_agent_usage = %+v, want %d tokens", res.SubAgentUsage, subTokens)
	}
	for _, turn := range res.Teams {
		if turn.TeamName != "research" {
			continue
		}
		if !near(turn.Usage.CostUSD, research) {
			t.Errorf("research turn usage = %+v, want cost %v", turn.Usage, research)
		}
		for _, w := range turn.Workers {
			if w.AgentID == "w-searcher" && (w.SubAgentUsage == nil || w.SubAgentUsage.TotalTokens != subTokens) {
				t.Errorf("searcher's sub_agent_usage = %+v", w.SubAgentUsage)
			}
		}
	}
}

// detailedUsageOf is rule i's usage with cached prompt tokens and
// reasoning tokens in its details.
func detailedUsageOf(i int) llmfake.Usage {
	n := i + 1
	return llmfake.Usage{PromptTokens: 100 * n, CompletionTokens: 10 * n, TotalTokens: 110 * n,
		PromptTokensDetails:     &llmfake.PromptTokensDetails{CachedTokens: 40 * n},
		CompletionTokensDetails: &llmfake.CompletionTokensDetails{ReasoningTokens: 4 * n}}
}

// A run whose calls report cached and reasoning tokens: each call stores
// them and is priced at their rates, and the run's cost (workflow, runs/get,
// runs/list, results) is the sum of its calls, cached and reasoning parts
// included; llm.usage and the Markdown report show the counts.
func TestRunCostCachedAndReasoning(t *testing.T) {
	price := pricing.Price{Input: 2, CachedInput: 0.5, Output: 10, Reasoning: 20}
	rules := referenceRules(nil)
	for i := range rules {
		for j := range rules[i].Responses {
			rules[i].Responses[j].Usage = detailedUsageOf(i)
		}
	}
	e := newEnv(t, rules, withConfig(func(c *config.Config) { c.LLMPrices = pricing.Table{"test-model": price} }))
	id := e.startRun(e.createHierarchy(referenceHierarchy()), "Explain quantum tunnelling")
	v := e.waitRun(id, time.Minute)
	if v.Status != models.RunCompleted {
		t.Fatalf("run ended %s: %s", v.Status, v.Error)
	}
	near := func(a, b float64) bool { return math.Abs(a-b) < 1e-9 }
	costOf := func(prompt, cached, completion, reasoning int) float64 {
		return (float64(prompt-cached)*2 + float64(cached)*0.5 + float64(completion-reasoning)*10 + float64(reasoning)*20) / 1e6
	}

	// What the fake reported, priced by hand.
	var want float64
	var cached, reasoning int
	for _, c := range e.fake.Calls() {
		u := detailedUsageOf(c.Rule)
		want += costOf(u.PromptTokens, u.Cached(), u.CompletionTokens, u.Reasoning())
		cached += u.Cached()
		reasoning += u.Reasoning()
	}
	recorded, err := e.store.LLMCalls(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	var sum float64
	for _, c := range recorded {
		if c.CachedTokens == 0 || c.ReasoningTokens == 0 || c.CostUSD == nil {
			t.Fatalf("call %s: cached %d, reasoning %d, cost %v", c.ID, c.CachedTokens, c.ReasoningTokens, c.CostUSD)
		}
		if w := costOf(c.PromptTokens, c.CachedTokens, c.CompletionTokens, c.ReasoningTokens); !near(*c.CostUSD, w) {
			t.Errorf("call %s cost %v, want %v", c.ID, *c.CostUSD, w)
		}
		sum += *c.CostUSD
	}
	if want == 0 || !near(sum, want) || len(recorded) != len(e.fake.Calls()) {
		t.Errorf("calls cost %v (%d recorded), the fake's usage prices at %v (%d calls)", sum, len(recorded), want, len(e.fake.Calls()))
	}
	// Priced on prompt and completion tokens alone, the run would cost more.
	if u := v.Result.Usage; !near(u.CostUSD, sum) || u.CachedTokens != cached || u.ReasoningTokens != reasoning {
		t.Errorf("run result usage = %+v, want cost %v, %d cached, %d reasoning", u, sum, cached, reasoning)
	}
	type usage struct {
		CachedTokens    int     `json:"cached_tokens"`
		ReasoningTokens int     `json:"reasoning_tokens"`
		CostUSD         float64 `json:"cost_usd"`
	}
	var got struct {
		Usage usage `json:"usage"`
	}
	e.mustPost("/runs/get", map[string]any{"id": id}, &got)
	if !near(got.Usage.CostUSD, sum) || got.Usage.CachedTokens != cached || got.Usage.ReasoningTokens != reasoning {
		t.Errorf("runs/get usage = %+v, want cost %v, %d cached, %d reasoning", got.Usage, sum, cached, reasoning)
	}
	var list struct {
		Items []struct {
			Usage usage `json:"usage"`
		} `json:"items"`
	}
	e.mustPost("/runs/list", map[string]any{"hierarchy_id": v.HierarchyID}, &list)
	if len(list.Items) != 1 || !near(list.Items[0].Usage.CostUSD, sum) || list.Items[0].Usage.CachedTokens != cached {
		t.Errorf("runs/list = %+v", list.Items)
	}
	var r struct {
		Metrics struct {
			TotalCostUSD    float64 `json:"total_cost_usd"`
			CachedTokens    int     `json:"cached_tokens"`
			ReasoningTokens int     `json:"reasoning_tokens"`
		} `json:"metrics"`
	}
	e.mustPost("/runs/results", map[string]any{"id": id}, &r)
	if !near(r.Metrics.TotalCostUSD, sum) || r.Metrics.CachedTokens != cached || r.Metrics.ReasoningTokens != reasoning {
		t.Errorf("results metrics = %+v", r.Metrics)
	}
	var md struct {
		Content string `json:"content"`
	}
	e.mustPost("/runs/results", map[string]any{"id": id, "format": "markdown"}, &md)
	for _, row := range []string{fmt.Sprintf("| Cached prompt tokens | %d |", cached), fmt.Sprintf("| Reasoning tokens | %d |", reasoning)} {
		if !strings.Contains(md.Content, row) {
			t.Errorf("the Markdown report lacks %q:\n%s", row, md.Content)
		}
	}
	// llm.usage carries the counts of each call.
	var onStream int
	for _, m := range e.streamAll(id) {
		if m.Type != "llm.usage" {
			continue
		}
		c, _ := m.Event.Data["cached_tokens"].(float64)
		r, _ := m.Event.Data["reasoning_tokens"].(float64)
		if c == 0 || r == 0 {
			t.Errorf("llm.usage without the details: %v", m.Event.Data)
		}
		onStream += int(c)
	}
	if onStream != cached {
		t.Errorf("llm.usage events carry %d cached tokens, want %d", onStream, cached)
	}
}
