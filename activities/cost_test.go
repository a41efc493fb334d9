package activities

import (
	"context"
	"math"
	"testing"

	"github.com/op-stack/executor/llm"
	"github.com/op-stack/executor/models"
	"github.com/op-stack/executor/pricing"
)

type pricedLLM struct{ model string }

func (u pricedLLM) Stream(_ context.Context, req llm.Request, onDelta func(llm.Delta)) (*llm.Response, error) {
	onDelta(llm.Delta{Content: "ok"})
	model := u.model
	if model == "" {
		model = req.Model
	}
	return &llm.Response{Content: "ok", Model: model, Provider: "fake",
		Usage: llm.Usage{PromptTokens: 1000, CompletionTokens: 500, TotalTokens: 1500}}, nil
}

func costInput(model string) models.RespondInput {
	return models.RespondInput{
		RunID: "r1", Purpose: models.PurposeWorker, Task: "t", DeferWrites: true,
		Agent:      models.Agent{AgentID: "w-1", Name: "writer", Model: model},
		Source:     models.Source{AgentID: "w-1", AgentType: models.AgentTypeWorker, AgentName: "writer"},
		RunOptions: models.RunOptions{Tenant: "acme"},
	}
}

func TestRespondPricesTheCall(t *testing.T) {
	sink := &fakeSink{}
	acts := &Activities{LLM: pricedLLM{}, Events: sink, Prices: pricing.Table{"priced": {Input: 2, Output: 10}}}
	res, err := acts.Respond(context.Background(), costInput("priced"))
	if err != nil {
		t.Fatal(err)
	}
	want := (1000*2 + 500*10) / 1e6
	if math.Abs(res.Usage.CostUSD-want) > 1e-12 || res.Usage.CostUnknown || res.Usage.TotalTokens != 1500 {
		t.Errorf("usage = %+v, want cost %v", res.Usage, want)
	}
	if len(res.Calls) != 1 || res.Calls[0].CostUSD == nil || math.Abs(*res.Calls[0].CostUSD-want) > 1e-12 {
		t.Errorf("calls = %+v", res.Calls)
	}
	usage := withAction(sink.events(models.CategoryLLM), models.ActionUsage)
	if len(usage) != 1 || usage[0].Data["agent_id"] != "w-1" || usage[0].Data["total_tokens"] != 1500 ||
		usage[0].Data["cost_usd"] != want || usage[0].Data["model"] != "priced" {
		t.Errorf("llm.usage events = %+v", usage)
	}
}

func TestRespondWithoutAPriceHasAnUnknownCost(t *testing.T) {
	sink := &fakeSink{}
	// The model that answered is priced, not the one asked for.
	acts := &Activities{LLM: pricedLLM{model: "mystery-model"}, Events: sink, Prices: pricing.Table{"priced": {Input: 2, Output: 10}}}
	res, err := acts.Respond(context.Background(), costInput("priced"))
	if err != nil {
		t.Fatal(err)
	}
	if !res.Usage.CostUnknown || res.Usage.CostUSD != 0 {
		t.Errorf("usage = %+v, want an unknown cost", res.Usage)
	}
	if len(res.Calls) != 1 || res.Calls[0].CostUSD != nil {
		t.Errorf("calls = %+v, want no cost", res.Calls)
	}
	usage := withAction(sink.events(models.CategoryLLM), models.ActionUsage)
	if len(usage) != 1 || usage[0].Data["cost_unknown"] != true || usage[0].Data["cost_usd"] != nil {
		t.Errorf("llm.usage events = %+v", usage)
	}
}

// A call's record carries its agent's team and path: a sub-agent's, the
// team of the worker that delegated to it.
func TestCallRecordCarriesTeamAndPath(t *testing.T) {
	acts := &Activities{LLM: pricedLLM{}, Events: &fakeSink{}, Prices: pricing.Table{}}
	in := costInput("priced")
	team := "research"
	in.Source = models.SubAgentSource(models.Source{AgentID: "w-1", AgentType: models.AgentTypeWorker, TeamName: &team, Depth: 2, Path: []string{"gs", "ts", "w-1"}},
		&models.SubAgent{ID: "sa-1", Name: "lookup"})
	res, err := acts.Respond(context.Background(), in)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Calls) != 1 {
		t.Fatalf("calls = %+v", res.Calls)
	}
	if c := res.Calls[0]; c.TeamName != "research" || len(c.AgentPath) != 4 || c.AgentPath[3] != "sa-1" {
		t.Errorf("call record = %+v", c)
	}
}

type detailedLLM struct{}

func (detailedLLM) Stream(_ context.Context, req llm.Request, onDelta func(llm.Delta)) (*llm.Response, error) {
	onDelta(llm.Delta{Content: "ok"})
	return &llm.Response{Content: "ok", Model: req.Model, Provider: "fake", Usage: llm.Usage{
		PromptTokens: 1000, CompletionTokens: 500, TotalTokens: 1500, CachedTokens: 400, CacheWriteTokens: 100, ReasoningTokens: 200}}, nil
}

// Cached, cache-write and reasoning tokens are priced at their own rates,
// recorded on the call and sent on llm.usage.
func TestRespondPricesCachedAndReasoningTokens(t *testing.T) {
	sink := &fakeSink{}
	acts := &Activities{LLM: detailedLLM{}, Events: sink, Prices: pricing.Table{"priced": {Input: 2, CachedInput: 0.5, CacheWrite: 2.5, Output: 10, Reasoning: 12}}}
	res, err := acts.Respond(context.Background(), costInput("priced"))
	if err != nil {
		t.Fatal(err)
	}
	want := (500*2 + 400*0.5 + 100*2.5 + 300*10 + 200*12) / 1e6
	if math.Abs(res.Usage.CostUSD-want) > 1e-12 || res.Usage.CachedTokens != 400 || res.Usage.CacheWriteTokens != 100 || res.Usage.ReasoningTokens != 200 {
		t.Errorf("usage = %+v, want cost %v", res.Usage, want)
	}
	if len(res.Calls) != 1 {
		t.Fatalf("calls = %+v", res.Calls)
	}
	if c := res.Calls[0]; c.CachedTokens != 400 || c.CacheWriteTokens != 100 || c.ReasoningTokens != 200 || c.CostUSD == nil || math.Abs(*c.CostUSD-want) > 1e-12 {
		t.Errorf("call = %+v", c)
	}
	usage := withAction(sink.events(models.CategoryLLM), models.ActionUsage)
	if len(usage) != 1 || usage[0].Data["cached_tokens"] != 400 || usage[0].Data["cache_write_tokens"] != 100 ||
		usage[0].Data["reasoning_tokens"] != 200 || usage[0].Data["cost_usd"] != want {
		t.Errorf("llm.usage events = %+v", usage)
	}
}
