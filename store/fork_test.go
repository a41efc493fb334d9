package store_test

import (
	"context"
	"testing"

	"github.com/op-stack/executor/models"
	"github.com/op-stack/executor/store"
	"github.com/op-stack/executor/store/storetest"
)

// TestRunForks: a run keeps its hierarchy snapshot and execution_config; a
// fork is stored with its copied events and usage records at once, names
// its original, is listed by forked_from, and DeleteFork removes it with
// what it copied, leaving the original as it was.
func TestRunForks(t *testing.T) {
	storetest.ForEachDialect(t, func(t *testing.T, st *store.Store) {
		ctx := context.Background()
		h := testHierarchy(t, "acme", "forks")
		if err := st.CreateHierarchy(ctx, h); err != nil {
			t.Fatal(err)
		}
		budget := &models.Budget{BudgetLimit: models.BudgetLimit{MaxTokens: 500}}
		orig := &store.Run{ID: "f0", TenantID: "acme", HierarchyID: h.ID, WorkflowID: "run-f0", Task: "t",
			Hierarchy: h, ExecutionConfig: &store.ExecutionConfig{MaxParallelTeams: 2, Budget: budget}}
		if err := st.CreateRun(ctx, orig); err != nil {
			t.Fatal(err)
		}
		got, err := st.GetRun(ctx, "f0")
		if err != nil || got.Hierarchy == nil || got.Hierarchy.Name != h.Name || len(got.Hierarchy.Teams) != len(h.Teams) ||
			got.ExecutionConfig == nil || got.ExecutionConfig.MaxParallelTeams != 2 || got.ExecutionConfig.Budget.MaxTokens != 500 || got.ForkedFrom != nil {
			t.Fatalf("original read back: %+v, %v", got, err)
		}
		events := []models.Event{
			{RunID: "f1", Sequence: 1, Event: models.EventKind{Category: models.CategoryLifecycle, Action: models.ActionStarted}, Data: map[string]any{}},
			{RunID: "f1", Sequence: 2, Event: models.EventKind{Category: models.CategoryLLM, Action: models.ActionUsage}, Data: map[string]any{"total_tokens": 7.0}},
		}
		cost := 0.25
		calls := []*store.LLMCall{{ID: "fork:f1:2", RunID: "f1", AgentID: "gs", Purpose: "decide", Model: "m", Attempt: 1, Status: "ok", TotalTokens: 7, CostUSD: &cost}}
		fork := &store.Run{ID: "f1", TenantID: "acme", HierarchyID: h.ID, WorkflowID: "run-f1", Task: "t", Hierarchy: h,
			ForkedFrom: &models.ForkedFrom{RunID: "f0", Sequence: 2}}
		if err := st.CreateFork(ctx, fork, events, calls); err != nil {
			t.Fatal(err)
		}
		got, err = st.GetRun(ctx, "f1")
		if err != nil || got.ForkedFrom == nil || *got.ForkedFrom != (models.ForkedFrom{RunID: "f0", Sequence: 2}) || got.Status != models.RunPending {
			t.Fatalf("fork read back: %+v, %v", got, err)
		}
		if stored, err := st.RunEvents(ctx, "f1", 0); err != nil || len(stored) != 2 || stored[1].Sequence != 2 {
			t.Fatalf("fork's events: %+v, %v", stored, err)
		}
		if u, err := st.RunUsage(ctx, "f1"); err != nil || u["f1"].TotalTokens != 7 || u["f1"].CostUSD != 0.25 {
			t.Fatalf("fork's usage: %+v, %v", u, err)
		}
		list, total, err := st.ListRuns(ctx, store.RunFilter{ListFilter: store.ListFilter{Page: 1, PageSize: 10}, ForkedFrom: "f0"})
		if err != nil || total != 1 || list[0].ID != "f1" || list[0].Hierarchy != nil {
			t.Fatalf("forks of f0: %+v (%d), %v", list, total, err)
		}
		// The same id again: taken, nothing half stored.
		if err := st.CreateFork(ctx, &store.Run{ID: "f1", HierarchyID: h.ID, WorkflowID: "run-f1"}, nil, nil); models.ErrorCode(err) != models.CodeAlreadyExists {
			t.Fatalf("fork with a taken id: %v", err)
		}
		if err := st.DeleteFork(ctx, "f1"); err != nil {
			t.Fatal(err)
		}
		if _, err := st.GetRun(ctx, "f1"); models.ErrorCode(err) != models.CodeExecutionNotFound {
			t.Fatalf("deleted fork: %v", err)
		}
		if stored, _ := st.RunEvents(ctx, "f1", 0); len(stored) != 0 {
			t.Fatalf("deleted fork's events remain: %+v", stored)
		}
		if u, _ := st.RunUsage(ctx, "f1"); u["f1"].TotalTokens != 0 {
			t.Fatalf("deleted fork's usage remains: %+v", u)
		}
		if _, err := st.GetRun(ctx, "f0"); err != nil {
			t.Fatal(err)
		}
	})
}
