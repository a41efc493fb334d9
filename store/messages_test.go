package store_test

import (
	"context"
	"strings"
	"testing"

	"github.com/op-stack/executor/models"
	"github.com/op-stack/executor/store"
	"github.com/op-stack/executor/store/storetest"
)

// TestSaveMessageIsIdempotent: saving a message again (a retried activity,
// a replay) updates the one row under its application-set id.
func TestSaveMessageIsIdempotent(t *testing.T) {
	storetest.ForEachDialect(t, func(t *testing.T, st *store.Store) {
		ctx := context.Background()
		team := "t"
		src := models.Source{AgentID: "w-1", AgentType: models.AgentTypeWorker, AgentName: "writer", TeamName: &team, Depth: 2, Path: []string{"gs", "ts", "w-1"}}
		for _, content := range []string{"first attempt", "second attempt"} {
			if err := st.SaveMessage(ctx, store.MessageFromSource("msg_1", "run-1", "", content, src)); err != nil {
				t.Fatal(err)
			}
		}
		child := models.SubAgentSource(src, &models.SubAgent{ID: "sa-1", Name: "helper"})
		if err := st.SaveMessage(ctx, store.MessageFromSource("msg_2", "run-1", "msg_1", "child", child)); err != nil {
			t.Fatal(err)
		}
		tree, err := st.MessageTree(ctx, "run-1")
		if err != nil {
			t.Fatal(err)
		}
		if len(tree) != 1 || tree[0].ID != "msg_1" || tree[0].Content != "second attempt" || *tree[0].TeamName != "t" {
			t.Fatalf("tree = %+v", tree)
		}
		if c := tree[0].Children; len(c) != 1 || c[0].ID != "msg_2" || c[0].Depth != 3 || len(c[0].Path) != 4 || c[0].AgentType != "sub_agent" {
			t.Fatalf("children = %+v", c)
		}
	})
}

// TestHydrateResultLeavesItsInputAlone: a result's previews are replaced
// by the stored answers in a copy; the input (which may be a workflow's own
// state, handed to a local activity as it is) keeps its previews.
func TestHydrateResultLeavesItsInputAlone(t *testing.T) {
	storetest.ForEachDialect(t, func(t *testing.T, st *store.Store) {
		ctx := context.Background()
		whole := strings.Repeat("a long answer ", 100)
		src := models.Source{AgentID: "w-1", AgentType: models.AgentTypeWorker, AgentName: "writer"}
		if err := st.SaveMessage(ctx, store.MessageFromSource("msg_long", "run-1", "", whole, src)); err != nil {
			t.Fatal(err)
		}
		preview := models.WorkerOutput{Name: "writer", Output: whole, MessageID: "msg_long"}.WithPreview()
		short := models.WorkerOutput{Name: "editor", Output: "short", MessageID: "msg_short"}.WithPreview()
		in := &models.RunResult{Teams: []models.TeamOutput{{TeamName: "t", Workers: []models.WorkerOutput{preview, short}}}}
		out, err := st.HydrateResult(ctx, "run-1", in)
		if err != nil {
			t.Fatal(err)
		}
		if got := out.Teams[0].Workers[0]; got.Output != whole || got.OutputTruncated {
			t.Errorf("hydrated output = %q (truncated %v), want the stored answer", got.Output, got.OutputTruncated)
		}
		if got := out.Teams[0].Workers[1]; got.Output != "short" {
			t.Errorf("short output = %q", got.Output)
		}
		if got := in.Teams[0].Workers[0]; got.Output != preview.Output || !got.OutputTruncated {
			t.Errorf("the input was changed: %q (truncated %v)", got.Output, got.OutputTruncated)
		}
	})
}

// TestNULInAnswersIsStoredSafely: a model's answer may contain NUL, which a
// PostgreSQL text column refuses; both databases store U+FFFD instead.
func TestNULInAnswersIsStoredSafely(t *testing.T) {
	storetest.ForEachDialect(t, func(t *testing.T, st *store.Store) {
		ctx := context.Background()
		src := models.Source{AgentID: "w-1", AgentType: models.AgentTypeWorker, AgentName: "writer"}
		rec := models.AnswerRecord{RunID: "run-nul", MessageID: "msg_nul", Source: src, Content: "before\x00after",
			Calls: []models.LLMCallRecord{{ID: "c1", RunID: "run-nul", Status: "ok", Error: ""}}}
		if err := st.SaveAnswer(ctx, rec); err != nil {
			t.Fatal(err)
		}
		tree, err := st.MessageTree(ctx, "run-nul")
		if err != nil {
			t.Fatal(err)
		}
		if len(tree) != 1 || tree[0].Content != "before\uFFFDafter" {
			t.Fatalf("stored %+v", tree)
		}
	})
}

// TestSaveMessageKeepsOtherRunsMessages: a message id taken by another run
// (a caller-set id, spec 003) never overwrites that run's message.
func TestSaveMessageKeepsOtherRunsMessages(t *testing.T) {
	storetest.ForEachDialect(t, func(t *testing.T, st *store.Store) {
		ctx := context.Background()
		src := models.Source{AgentID: "gs", AgentType: models.AgentTypeGlobalSupervisor, AgentName: "lead", Path: []string{"gs"}}
		if err := st.SaveMessage(ctx, store.MessageFromSource("msg-client", "run-a", "", "run a's answer", src)); err != nil {
			t.Fatal(err)
		}
		if err := st.SaveMessage(ctx, store.MessageFromSource("msg-client", "run-b", "", "run b's answer", src)); err != nil {
			t.Fatal(err)
		}
		tree, err := st.MessageTree(ctx, "run-a")
		if err != nil || len(tree) != 1 || tree[0].Content != "run a's answer" {
			t.Fatalf("run a's messages = %+v, %v", tree, err)
		}
		if tree, _ := st.MessageTree(ctx, "run-b"); len(tree) != 0 {
			t.Errorf("run b's messages = %+v", tree)
		}
	})
}
