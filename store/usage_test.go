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
			{ID: "a/2", RunID: "r1", Status: "ok", PromptTokens: 20, CompletionTokens: 10, TotalTokens: 30, CostUSD: cost(0.5)},
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
		if r2.TotalTokens != 10 || math.Abs(r2.CostUSD-0.1) > 1e-12 || !r2.CostUnknown {
			t.Errorf("r2 = %+v", r2)
		}
		if _, ok := got["r3"]; ok || len(got) != 2 {
			t.Errorf("usage = %+v", got)
		}
	})
}
