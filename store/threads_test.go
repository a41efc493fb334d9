package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/op-stack/executor/models"
	"github.com/op-stack/executor/store"
	"github.com/op-stack/executor/store/storetest"
)

// TestRunThreads: a run without a thread starts its own (thread_id is its
// id), a follow-up keeps the thread and names its previous run, both are
// read back by runs/get's and runs/list's queries, and the list filters by
// thread.
func TestRunThreads(t *testing.T) {
	storetest.ForEachDialect(t, func(t *testing.T, st *store.Store) {
		ctx := context.Background()
		h := testHierarchy(t, "acme", "threads")
		if err := st.CreateHierarchy(ctx, h); err != nil {
			t.Fatal(err)
		}
		first := &store.Run{ID: "t1", TenantID: "acme", HierarchyID: h.ID, WorkflowID: "run-t1", Task: "first"}
		if err := st.CreateRun(ctx, first); err != nil {
			t.Fatal(err)
		}
		if first.ThreadID != "t1" || first.PreviousRunID != "" {
			t.Fatalf("first run: thread %q previous %q", first.ThreadID, first.PreviousRunID)
		}
		time.Sleep(2 * time.Millisecond) // distinct created_at: newest first
		second := &store.Run{ID: "t2", TenantID: "acme", HierarchyID: h.ID, WorkflowID: "run-t2", Task: "second", ThreadID: "t1", PreviousRunID: "t1"}
		other := &store.Run{ID: "o1", TenantID: "acme", HierarchyID: h.ID, WorkflowID: "run-o1", Task: "other"}
		for _, r := range []*store.Run{second, other} {
			if err := st.CreateRun(ctx, r); err != nil {
				t.Fatal(err)
			}
		}
		got, err := st.GetRun(ctx, "t2")
		if err != nil || got.ThreadID != "t1" || got.PreviousRunID != "t1" {
			t.Fatalf("get t2: %v %+v", err, got)
		}
		if got, err := st.GetRun(ctx, "o1"); err != nil || got.ThreadID != "o1" || got.PreviousRunID != "" {
			t.Fatalf("get o1: %v %+v", err, got)
		}
		runs, total, err := st.ListRuns(ctx, store.RunFilter{ListFilter: store.ListFilter{Page: 1, PageSize: 10, Tenant: "acme"}, ThreadID: "t1"})
		if err != nil || total != 2 || len(runs) != 2 || runs[0].ID != "t2" || runs[1].ID != "t1" {
			t.Fatalf("thread t1: %v %d %+v", err, total, runs)
		}
		if runs[0].PreviousRunID != "t1" || runs[1].ThreadID != "t1" {
			t.Fatalf("listed thread fields: %+v %+v", runs[0], runs[1])
		}
		if _, total, _ := st.ListRuns(ctx, store.RunFilter{ListFilter: store.ListFilter{Page: 1, PageSize: 10, Tenant: "other"}, ThreadID: "t1"}); total != 0 {
			t.Fatalf("another tenant sees %d runs of the thread", total)
		}

		// The final answer's message is found by run.
		if id, err := st.FinalAnswerMessageID(ctx, "t1"); err != nil || id != "" {
			t.Fatalf("no answer yet: %q %v", id, err)
		}
		gs := models.GlobalSupervisorSource(h)
		if err := st.SaveMessage(ctx, store.MessageFromSource("m-final", "t1", "", "the answer", gs)); err != nil {
			t.Fatal(err)
		}
		if id, err := st.FinalAnswerMessageID(ctx, "t1"); err != nil || id != "m-final" {
			t.Fatalf("final answer message: %q %v", id, err)
		}
	})
}

// TestMigrateThreadsKeepsRuns: runs stored before 00011 become threads of
// their own, and the migration goes down and up again on both dialects.
func TestMigrateThreadsKeepsRuns(t *testing.T) {
	for _, dialect := range []string{store.DialectSQLite, store.DialectPostgres} {
		t.Run(dialect, func(t *testing.T) {
			ctx := context.Background()
			var (
				st  *store.Store
				err error
			)
			if dialect == store.DialectSQLite {
				st, err = store.Open("", t.TempDir()+"/executor.db")
			} else {
				st, err = store.Open(storetest.PostgresURL(t), "")
			}
			if err != nil {
				t.Fatal(err)
			}
			defer st.Close()
			if err := st.MigrateTo(ctx, 9); err != nil {
				t.Fatal(err)
			}
			now := time.Now().UTC()
			if err := st.Exec(ctx, `INSERT INTO execution (id, hierarchy_id, workflow_id, task, status, created_at, updated_at) VALUES ('old', 'h1', 'run-old', 't', 'completed', ?, ?)`, now, now); err != nil {
				t.Fatal(err)
			}
			if _, err := st.Migrate(ctx, nil); err != nil {
				t.Fatal(err)
			}
			if r, err := st.GetRun(ctx, "old"); err != nil || r.ThreadID != "old" || r.PreviousRunID != "" {
				t.Fatalf("old run: %v %+v", err, r)
			}
			runs, total, err := st.ListRuns(ctx, store.RunFilter{ListFilter: store.ListFilter{Page: 1, PageSize: 10}, ThreadID: "old"})
			if err != nil || total != 1 || runs[0].ID != "old" {
				t.Fatalf("old run's thread: %v %d %+v", err, total, runs)
			}
			if err := st.MigrateDownTo(ctx, 9); err != nil {
				t.Fatalf("down: %v", err)
			}
			if err := st.Exec(ctx, "SELECT thread_id FROM execution"); err == nil {
				t.Fatal("execution.thread_id survived the down migration")
			}
			if _, err := st.Migrate(ctx, nil); err != nil {
				t.Fatalf("up again: %v", err)
			}
		})
	}
}
