package store_test

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/op-stack/executor/models"
	"github.com/op-stack/executor/store"
	"github.com/op-stack/executor/store/storetest"
)

// TestAdmitRunQueue: over the limit a run is stored queued, in order; the
// queue's bound and on_limit reject refuse with 429; a run's end lets
// DispatchQueued admit the oldest queued run; a follow-up waits behind its
// thread's unfinished run, or is refused with strategy reject.
func TestAdmitRunQueue(t *testing.T) {
	storetest.ForEachDialect(t, func(t *testing.T, st *store.Store) {
		ctx := context.Background()
		tenant := "acme-" + t.Name()
		adm := store.Admission{Limit: 2, MaxQueued: 2}
		mk := func(id string) *store.Run {
			return &store.Run{ID: id + "-" + t.Name(), PublicID: id, TenantID: tenant, HierarchyID: "h", WorkflowID: "run-" + id + t.Name(), Task: "t"}
		}
		runs := map[string]*store.Run{}
		for i, id := range []string{"r1", "r2", "r3", "r4"} {
			runs[id] = mk(id)
			res, err := st.AdmitRun(ctx, runs[id], adm)
			if err != nil {
				t.Fatal(err)
			}
			wantQueued := i >= 2
			if res.Queued != wantQueued || (wantQueued && (res.Position != i-1 || res.Reason != models.QueueReasonLimit)) {
				t.Fatalf("%s: %+v, want queued=%v position %d", id, res, wantQueued, i-1)
			}
			if got, _ := st.GetRun(ctx, runs[id].ID); (got.Status == models.RunQueued) != wantQueued {
				t.Fatalf("%s stored %s", id, got.Status)
			}
		}
		if _, err := st.AdmitRun(ctx, mk("r5"), adm); models.ErrorCode(err) != models.CodeRateLimited {
			t.Fatalf("past the queue bound: %v, want RATE_LIMIT_EXCEEDED", err)
		}
		if _, err := st.AdmitRun(ctx, mk("r6"), store.Admission{Limit: 2, RejectOverLimit: true}); models.ErrorCode(err) != models.CodeRateLimited {
			t.Fatalf("on_limit reject: %v, want RATE_LIMIT_EXCEEDED", err)
		}
		if _, err := st.GetTenantRun(ctx, tenant, "", "r5"); models.ErrorCode(err) != models.CodeExecutionNotFound {
			t.Fatalf("a refused run is stored: %v", err)
		}
		// Nothing freed: nothing admitted.
		if got, err := st.DispatchQueued(ctx, tenant, 2); err != nil || len(got) != 0 {
			t.Fatalf("dispatch with no place = %v, %v", got, err)
		}
		if err := st.SetRunStatus(ctx, models.RunStatusUpdate{RunID: runs["r1"].ID, Status: models.RunCompleted}); err != nil {
			t.Fatal(err)
		}
		got, err := st.DispatchQueued(ctx, tenant, 2)
		if err != nil || len(got) != 1 || got[0].PublicID != "r3" || got[0].Status != models.RunPending {
			t.Fatalf("dispatch after r1 ended = %+v, %v, want r3 (the oldest queued)", got, err)
		}
		// A follow-up of r2 (running) waits behind it; reject refuses.
		f := mk("f1")
		f.ThreadID, f.PreviousRunID = "r2", "r2"
		if _, err := st.AdmitRun(ctx, f, store.Admission{Limit: 2, FollowUp: true, Strategy: models.MultitaskReject}); models.ErrorCode(err) != models.CodeExecutionInProgress {
			t.Fatalf("reject on a busy thread: %v, want EXECUTION_IN_PROGRESS", err)
		}
		res, err := st.AdmitRun(ctx, f, store.Admission{Limit: 2, FollowUp: true, Strategy: models.MultitaskEnqueue})
		if err != nil || !res.Queued || res.Reason != models.QueueReasonThread || len(res.Ahead) != 1 || res.Ahead[0].PublicID != "r2" {
			t.Fatalf("enqueue on a busy thread = %+v, %v", res, err)
		}
		// r2 ends: r4 (limit) and f1 (its thread is free) both fit under
		// an unlimited dispatch, in queue order.
		if err := st.SetRunStatus(ctx, models.RunStatusUpdate{RunID: runs["r2"].ID, Status: models.RunFailed}); err != nil {
			t.Fatal(err)
		}
		got, err = st.DispatchQueued(ctx, tenant, 0)
		if err != nil || len(got) != 2 || got[0].PublicID != "r4" || got[1].PublicID != "f1" {
			t.Fatalf("dispatch after r2 ended = %+v, %v, want r4 then f1", got, err)
		}
		if tenants, err := st.QueuedTenants(ctx); err != nil || containsString(tenants, tenant) {
			t.Fatalf("queued tenants = %v, %v", tenants, err)
		}
	})
}

func containsString(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// TestAdmitRunConcurrent: starts racing on one tenant never admit more
// than the limit (the decision is made under the tenant's lock, so it
// holds across API replicas sharing the database), and the rest queue
// with distinct places.
func TestAdmitRunConcurrent(t *testing.T) {
	storetest.ForEachDialect(t, func(t *testing.T, st *store.Store) {
		ctx := context.Background()
		tenant := "race-" + t.Name()
		const n, limit = 40, 5
		var wg sync.WaitGroup
		errs := make(chan error, n)
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				id := fmt.Sprintf("c%d-%s", i, t.Name())
				_, err := st.AdmitRun(ctx, &store.Run{ID: id, TenantID: tenant, HierarchyID: "h", WorkflowID: "run-" + id, Task: "t"}, store.Admission{Limit: limit})
				errs <- err
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				t.Fatal(err)
			}
		}
		list, _, err := st.ListRuns(ctx, store.RunFilter{ListFilter: store.ListFilter{Page: 1, PageSize: 100, Tenant: tenant}})
		if err != nil {
			t.Fatal(err)
		}
		pending, seqs := 0, map[int64]bool{}
		for _, r := range list {
			switch r.Status {
			case models.RunPending:
				pending++
			case models.RunQueued:
				if seqs[r.QueueSeq] {
					t.Errorf("queue place %d given twice", r.QueueSeq)
				}
				seqs[r.QueueSeq] = true
			}
		}
		if pending != limit || len(seqs) != n-limit {
			t.Fatalf("%d pending and %d queued of %d, want %d and %d", pending, len(seqs), len(list), limit, n-limit)
		}
	})
}
