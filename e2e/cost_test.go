package e2e

import (
	"context"
	"fmt"
	"math"
	"testing"
	"time"

	"go.temporal.io/api/workflowservice/v1"

	"github.com/op-stack/executor/config"
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
