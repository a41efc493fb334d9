package store_test

import (
	"context"
	"math"
	"testing"

	"github.com/op-stack/executor/store"
	"github.com/op-stack/executor/store/storetest"
)

func TestRunUsageSumsCallsAndCosts(t *testing.T) {
	storetest.ForEachDialect(t, func(t *testing.T, st *store.Store) {
		ctx := context.Background()
		cost := func(v float64) *float64 { return &v }
		for _, c := range []*store.LLMCall{
			{ID: "a/1", RunID: "r1", Status: "ok", PromptTokens: 10, CompletionTokens: 5, TotalTokens: 15, CostUSD: cost(0.25)},
			{ID: "a/2", RunID: "r1", Status: "ok", PromptTokens: 20, CompletionTokens: 10, TotalTokens: 30, CostUSD: cost(0.5),
				CachedTokens: 8, CacheWriteTokens: 2, ReasoningTokens: 4},
			{ID: "a/4", RunID: "r1", Status: "ok", CachedTokens: 1, ReasoningTokens: 1, CostUSD: cost(0)},
			{ID: "a/3", RunID: "r1", Status: "error"},
			{ID: "b/1", RunID: "r2", Status: "ok", TotalTokens: 7, CostUSD: cost(0.1)},
			{ID: "b/2", RunID: "r2", Status: "ok", TotalTokens: 3},
		} {
			if err := st.RecordLLMCall(ctx, c); err != nil {
				t.Fatal(err)
			}
		}
		got, err := st.RunUsage(ctx, "r1", "r2", "r3")
		if err != nil {
			t.Fatal(err)
		}
		r1, r2 := got["r1"], got["r2"]
		if r1.TotalTokens != 45 || r1.PromptTokens != 30 || r1.CompletionTokens != 15 || math.Abs(r1.CostUSD-0.75) > 1e-12 || r1.CostUnknown {
			t.Errorf("r1 = %+v", r1)
		}
		if r1.CachedTokens != 9 || r1.CacheWriteTokens != 2 || r1.ReasoningTokens != 5 {
			t.Errorf("r1 token details = %+v", r1)
		}
		if r2.TotalTokens != 10 || math.Abs(r2.CostUSD-0.1) > 1e-12 || !r2.CostUnknown {
			t.Errorf("r2 = %+v", r2)
		}
		if _, ok := got["r3"]; ok || len(got) != 2 {
			t.Errorf("usage = %+v", got)
		}
	})
}

// A call's team and agent path are stored and read back; a call without
// them (as stored before the columns) reads back without them.
func TestLLMCallTeamAndPath(t *testing.T) {
	storetest.ForEachDialect(t, func(t *testing.T, st *store.Store) {
		ctx := context.Background()
		for _, c := range []*store.LLMCall{
			{ID: "c/1", RunID: "r1", Status: "ok", TeamName: "research", AgentPath: []string{"gs", "ts", "w", "sa/1"}},
			{ID: "c/2", RunID: "r1", Status: "ok"},
		} {
			if err := st.RecordLLMCall(ctx, c); err != nil {
				t.Fatal(err)
			}
		}
		calls, err := st.LLMCalls(ctx, "r1")
		if err != nil || len(calls) != 2 {
			t.Fatalf("calls = %+v, %v", calls, err)
		}
		byID := map[string]store.LLMCall{calls[0].ID: calls[0], calls[1].ID: calls[1]}
		sub := byID["c/1"]
		if sub.TeamName != "research" || len(sub.AgentPath) != 4 || sub.AgentPath[3] != "sa/1" || !sub.SubAgentCall() {
			t.Errorf("sub-agent call = %+v", sub)
		}
		if old := byID["c/2"]; old.TeamName != "" || old.AgentPath != nil || old.SubAgentCall() {
			t.Errorf("call without team = %+v", old)
		}
	})
}
