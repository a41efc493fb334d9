package store_test

import (
	"context"
	"testing"

	"github.com/op-stack/executor/models"
	"github.com/op-stack/executor/store"
	"github.com/op-stack/executor/store/storetest"
)

// TestSaveIntermediateResultsFalse (issue 23 item 16): a run started with
// spec 001's save_intermediate_results false keeps only its final output
// once it ends: its result has no worker answers and its workers' stored
// messages lose their text; another run keeps both.
func TestSaveIntermediateResultsFalse(t *testing.T) {
	storetest.ForEachDialect(t, func(t *testing.T, st *store.Store) {
		ctx := context.Background()
		no := false
		team := "research"
		worker := models.Source{AgentID: "w-1", AgentType: models.AgentTypeWorker, AgentName: "searcher", TeamName: &team}
		finish := func(id string, ec *store.ExecutionConfig) *store.Run {
			t.Helper()
			if err := st.CreateRun(ctx, &store.Run{ID: id, HierarchyID: "h", WorkflowID: "wf-" + id, Task: "t", ExecutionConfig: ec}); err != nil {
				t.Fatal(err)
			}
			if err := st.SaveMessage(ctx, store.MessageFromSource("msg-"+id, id, "", "SEARCH OUTPUT", worker)); err != nil {
				t.Fatal(err)
			}
			result := &models.RunResult{FinalAnswer: "FINAL", Teams: []models.TeamOutput{{TeamName: team, Status: models.TeamCompleted, Workers: []models.WorkerOutput{
				{AgentID: "w-1", Name: "searcher", Output: "SEARCH OUTPUT", MessageID: "msg-" + id, ToolsUsed: []string{"calculator"}},
			}}}}
			for _, u := range []models.RunStatusUpdate{{RunID: id, Status: models.RunRunning}, {RunID: id, Status: models.RunCompleted, Result: result}} {
				if err := st.SetRunStatus(ctx, u); err != nil {
					t.Fatal(err)
				}
			}
			if result.Teams[0].Workers[0].Output != "SEARCH OUTPUT" {
				t.Errorf("the caller's result was changed")
			}
			run, err := st.GetRun(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			return run
		}
		messageText := func(runID string) string {
			tree, err := st.MessageTree(ctx, runID)
			if err != nil || len(tree) != 1 {
				t.Fatalf("messages of %s: %v %v", runID, tree, err)
			}
			return tree[0].Content
		}

		dropped := finish("run-drop", &store.ExecutionConfig{SaveIntermediateResults: &no})
		w := dropped.Result.Teams[0].Workers[0]
		if w.Output != "" || w.MessageID != "" || w.ToolsUsed[0] != "calculator" || dropped.Result.FinalAnswer != "FINAL" || dropped.FinalAnswer != "FINAL" {
			t.Errorf("result without intermediate results = %+v (final %q)", w, dropped.Result.FinalAnswer)
		}
		if got := messageText("run-drop"); got != "" {
			t.Errorf("the worker's message kept %q", got)
		}

		kept := finish("run-keep", nil)
		if kept.Result.Teams[0].Workers[0].Output != "SEARCH OUTPUT" || messageText("run-keep") != "SEARCH OUTPUT" {
			t.Errorf("a run with the default lost its intermediate results: %+v", kept.Result.Teams[0].Workers[0])
		}
	})
}
