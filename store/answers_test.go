package store_test

import (
	"context"
	"testing"

	"github.com/op-stack/executor/models"
	"github.com/op-stack/executor/store"
	"github.com/op-stack/executor/store/storetest"
)

// A kept answer is found by its call key and ordinal, writes its usage
// record at once and once, keeps the first of two answers for one call,
// and goes when the workflow stores the answer.
func TestKeptAnswers(t *testing.T) {
	storetest.ForEachDialect(t, func(t *testing.T, st *store.Store) {
		ctx := context.Background()
		rec := models.LLMCallRecord{ID: "run-r1/x/5/1/1", RunID: "r1", AgentID: "w", Purpose: "worker", Model: "m", Status: "ok", Attempt: 1, TotalTokens: 9}
		k := store.KeptAnswer{CallKey: "run-r1/x/5", Ordinal: 1, RunID: "r1", Fingerprint: "f1", Response: `{"content":"kept"}`, Record: rec}
		if got, err := st.KeptAnswerFor(ctx, k.CallKey, 1); err != nil || got != nil {
			t.Fatalf("before keeping: %+v, %v", got, err)
		}
		if err := st.KeepAnswer(ctx, k); err != nil {
			t.Fatal(err)
		}
		// A second attempt running at once received its own answer: its
		// request is recorded, the first answer stays the kept one.
		rec2 := rec
		rec2.ID, rec2.Attempt = "run-r1/x/5/2/1", 2
		if err := st.KeepAnswer(ctx, store.KeptAnswer{CallKey: k.CallKey, Ordinal: 1, RunID: "r1", Fingerprint: "f1", Response: `{"content":"second"}`, Record: rec2}); err != nil {
			t.Fatal(err)
		}
		got, err := st.KeptAnswerFor(ctx, k.CallKey, 1)
		if err != nil || got == nil {
			t.Fatalf("kept answer: %+v, %v", got, err)
		}
		if got.Response != k.Response || got.Fingerprint != "f1" || got.Record.ID != rec.ID || got.Record.TotalTokens != 9 {
			t.Errorf("kept answer = %+v", got)
		}
		if other, _ := st.KeptAnswerFor(ctx, k.CallKey, 2); other != nil {
			t.Errorf("ordinal 2: %+v", other)
		}
		// The workflow stores the same record again: still one row each.
		if err := st.SaveAnswer(ctx, models.AnswerRecord{RunID: "r1", Calls: []models.LLMCallRecord{rec}}); err != nil {
			t.Fatal(err)
		}
		calls, err := st.LLMCalls(ctx, "r1")
		if err != nil || len(calls) != 2 {
			t.Fatalf("llm_call rows = %d (%v), want 2 (two requests)", len(calls), err)
		}
		if n, err := st.KeptAnswers(ctx, "r1"); err != nil || n != 0 {
			t.Errorf("kept answers after SaveAnswer = %d, %v", n, err)
		}
	})
}

// A run's kept answers go when it ends.
func TestKeptAnswersGoWhenTheRunEnds(t *testing.T) {
	storetest.ForEachDialect(t, func(t *testing.T, st *store.Store) {
		ctx := context.Background()
		run := &store.Run{ID: "r-ends", HierarchyID: "h", WorkflowID: "run-r-ends", Task: "t"}
		if err := st.CreateRun(ctx, run); err != nil {
			t.Fatal(err)
		}
		rec := models.LLMCallRecord{ID: "c/1", RunID: run.ID, Status: "ok"}
		if err := st.KeepAnswer(ctx, store.KeptAnswer{CallKey: "k", Ordinal: 1, RunID: run.ID, Response: "{}", Record: rec}); err != nil {
			t.Fatal(err)
		}
		if err := st.SetRunStatus(ctx, models.RunStatusUpdate{RunID: run.ID, Status: models.RunCompleted}); err != nil {
			t.Fatal(err)
		}
		if n, err := st.KeptAnswers(ctx, run.ID); err != nil || n != 0 {
			t.Errorf("kept answers after the run ended = %d, %v", n, err)
		}
	})
}
