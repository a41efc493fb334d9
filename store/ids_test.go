package store_test

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"testing"

	"gorm.io/gorm"

	"github.com/op-stack/executor/models"
	"github.com/op-stack/executor/store"
	"github.com/op-stack/executor/store/storetest"
)

func pendingRun(id, tenant, answerID, userID string) *store.Run {
	return &store.Run{ID: id, TenantID: tenant, HierarchyID: "h", WorkflowID: models.RunWorkflowID(id), Task: "the task of " + id,
		AnswerMessageID: answerID, UserMessageID: userID}
}

func takenField(t *testing.T, err error) string {
	t.Helper()
	var e *models.Error
	if !errors.As(err, &e) || e.Code != models.CodeAlreadyExists {
		t.Fatalf("want an AlreadyExists error, got %v", err)
	}
	return e.Field
}

// TestCreateRunReservesMessageIDs (issue 23, items 3 and 8): a run's
// caller-set message id is claimed when the run is stored, so of two
// starts racing for it exactly one wins, and every later start in the
// tenant is refused while another tenant may use it. The final answer
// fills the reservation, which no listing shows before; a run whose
// workflow never started gives its ids back.
func TestCreateRunReservesMessageIDs(t *testing.T) {
	storetest.ForEachDialect(t, func(t *testing.T, st *store.Store) {
		ctx := context.Background()
		var wg sync.WaitGroup
		errs := make([]error, 2)
		for i := range errs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				errs[i] = st.CreateRun(ctx, pendingRun([]string{"race-1", "race-2"}[i], "a", "msg-race", ""))
			}()
		}
		wg.Wait()
		won := 0
		for _, err := range errs {
			if err == nil {
				won++
			} else if f := takenField(t, err); f != "message_id" {
				t.Fatalf("race lost on field %q", f)
			}
		}
		if won != 1 {
			t.Fatalf("%d of 2 racing starts claimed msg-race: %v", won, errs)
		}

		for i, id := range []string{"seq-1", "seq-2", "seq-3"} {
			err := st.CreateRun(ctx, pendingRun(id, "a", "msg-seq", ""))
			switch {
			case i == 0 && err != nil:
				t.Fatalf("first start: %v", err)
			case i > 0:
				if f := takenField(t, err); f != "message_id" {
					t.Fatalf("start %d refused on %q", i+1, f)
				}
				if _, err := st.GetRun(ctx, id); models.ErrorCode(err) != models.CodeExecutionNotFound {
					t.Fatalf("refused start %s left a run behind: %v", id, err)
				}
			}
		}
		// Another tenant's message ids are no obstacle.
		if err := st.CreateRun(ctx, pendingRun("b-seq", "b", "msg-seq", "msg-seq-user")); err != nil {
			t.Fatalf("tenant b reusing tenant a's message id: %v", err)
		}
		// A user message id is claimed the same way, against every message id.
		if f := takenField(t, st.CreateRun(ctx, pendingRun("b-2", "b", "", "msg-seq"))); f != "user_message_id" {
			t.Fatalf("user message id refused on %q", f)
		}

		// Before the answer: the user's message only; the reservation is hidden.
		tree, err := st.MessageTree(ctx, "b-seq")
		if err != nil || len(tree) != 1 || tree[0].ID != "msg-seq-user" || tree[0].AgentType != models.AgentTypeUser || tree[0].Content != "the task of b-seq" {
			t.Fatalf("messages before the answer = %+v, %v", tree, err)
		}
		if id, err := st.FinalAnswerMessageID(ctx, "b-seq"); err != nil || id != "" {
			t.Fatalf("final answer id before the answer = %q, %v", id, err)
		}
		gs := models.Source{AgentID: "gs", AgentType: models.AgentTypeGlobalSupervisor, AgentName: "lead", Path: []string{"gs"}}
		for range 2 { // a retried write changes nothing
			if err := st.SaveAnswer(ctx, models.AnswerRecord{RunID: "b-seq", MessageID: "msg-seq", Source: gs, Content: "b's answer"}); err != nil {
				t.Fatal(err)
			}
		}
		tree, err = st.MessageTree(ctx, "b-seq")
		if err != nil || len(tree) != 2 || tree[0].ID != "msg-seq-user" || tree[1].ID != "msg-seq" ||
			tree[1].Content != "b's answer" || tree[1].AgentType != models.AgentTypeGlobalSupervisor || tree[1].AgentID != "gs" {
			t.Fatalf("messages after the answer = %+v, %v", tree, err)
		}
		if !tree[1].CreatedAt.After(tree[0].CreatedAt) && !tree[1].CreatedAt.Equal(tree[0].CreatedAt) {
			t.Errorf("the answer is dated before the user's message: %v < %v", tree[1].CreatedAt, tree[0].CreatedAt)
		}
		if id, err := st.FinalAnswerMessageID(ctx, "b-seq"); err != nil || id != "msg-seq" {
			t.Fatalf("final answer id = %q, %v", id, err)
		}
		// Another run of the tenant cannot write over it, and tenant a's
		// run that holds msg-seq keeps its own.
		if err := st.SaveAnswer(ctx, models.AnswerRecord{RunID: "b-2", MessageID: "msg-seq", Source: gs, Content: "intruder"}); err != nil {
			t.Fatal(err)
		}
		if err := st.SaveAnswer(ctx, models.AnswerRecord{RunID: "seq-1", MessageID: "msg-seq", Source: gs, Content: "a's answer"}); err != nil {
			t.Fatal(err)
		}
		for run, want := range map[string]string{"b-seq": "b's answer", "seq-1": "a's answer"} {
			got, err := st.MessageContents(ctx, run, []string{"msg-seq"})
			if err != nil || got["msg-seq"] != want {
				t.Errorf("msg-seq read for run %s = %q, %v; want %q", run, got["msg-seq"], err, want)
			}
		}

		// A run whose workflow never started gives its message ids back.
		if err := st.CreateRun(ctx, pendingRun("gone", "a", "msg-gone", "msg-gone-user")); err != nil {
			t.Fatal(err)
		}
		if err := st.DeleteRun(ctx, "gone"); err != nil {
			t.Fatal(err)
		}
		if err := st.CreateRun(ctx, pendingRun("again", "a", "msg-gone", "msg-gone-user")); err != nil {
			t.Fatalf("ids of a deleted pending run are still taken: %v", err)
		}
	})
}

// TestSubAgentIDsPerTenant (issue 23, item 8): two tenants may create a
// sub-agent with one id; each reads, updates and deletes its own. The
// version counts writes (spec 003 §7.2).
func TestSubAgentIDsPerTenant(t *testing.T) {
	storetest.ForEachDialect(t, func(t *testing.T, st *store.Store) {
		ctx := context.Background()
		for _, tenant := range []string{"a", "b"} {
			sa := testSubAgent("sa-shared", tenant, "helper-"+tenant)
			if err := st.CreateSubAgent(ctx, sa); err != nil || sa.Version != 1 {
				t.Fatalf("create in %s: %v, version %d", tenant, err, sa.Version)
			}
		}
		if f := takenField(t, st.CreateSubAgent(ctx, testSubAgent("sa-shared", "a", "third"))); f != "id" {
			t.Fatalf("an id taken in the tenant clashed on %q", f)
		}
		for i := 2; i <= 3; i++ {
			upd := testSubAgent("sa-shared", "b", "helper-b")
			if err := st.UpdateSubAgent(ctx, upd); err != nil || upd.Version != i {
				t.Fatalf("update %d: %v, version %d", i, err, upd.Version)
			}
		}
		for tenant, version := range map[string]int{"a": 1, "b": 3} {
			sa, err := st.GetSubAgent(ctx, tenant, "", "sa-shared")
			if err != nil || sa.TenantID != tenant || sa.Name != "helper-"+tenant || sa.Version != version {
				t.Fatalf("tenant %s reads %+v, %v", tenant, sa, err)
			}
		}
		// Every tenant, preferring one's own.
		if sa, err := st.GetSubAgent(ctx, "", "b", "sa-shared"); err != nil || sa.TenantID != "b" {
			t.Fatalf("all tenants preferring b: %+v, %v", sa, err)
		}
		if err := st.DeleteSubAgent(ctx, "a", "sa-shared"); err != nil {
			t.Fatal(err)
		}
		if sa, err := st.GetSubAgent(ctx, "b", "", "sa-shared"); err != nil || sa.Version != 3 {
			t.Fatalf("deleting a's sub-agent touched b's: %+v, %v", sa, err)
		}
	})
}

// traceQueries records the SQL and the rows of every query st makes while
// fn runs.
func traceQueries(t *testing.T, st *store.Store, fn func()) []string {
	t.Helper()
	var mu sync.Mutex
	var out []string
	name := "trace:" + t.Name()
	record := func(db *gorm.DB) {
		mu.Lock()
		defer mu.Unlock()
		out = append(out, db.Statement.SQL.String()+" → rows "+strconv.FormatInt(db.Statement.RowsAffected, 10))
	}
	if err := st.DB().Callback().Query().After("gorm:query").Register(name, record); err != nil {
		t.Fatal(err)
	}
	fn()
	if err := st.DB().Callback().Query().Remove(name); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestOtherTenantsIDTakesTheUnknownIDPath (issue 23, item 8): loading a run,
// a hierarchy or a sub-agent of another tenant runs exactly the statements,
// and reads exactly the rows (none), of loading an unknown id, and fails
// with the same error: nothing of the other tenant's object is read, so
// its existence takes no longer to deny.
func TestOtherTenantsIDTakesTheUnknownIDPath(t *testing.T) {
	storetest.ForEachDialect(t, func(t *testing.T, st *store.Store) {
		ctx := context.Background()
		h := testHierarchy(t, "a", "a's")
		h.ID = "h-a"
		if err := st.CreateHierarchy(ctx, h); err != nil {
			t.Fatal(err)
		}
		if err := st.CreateRun(ctx, pendingRun("run-a", "a", "", "")); err != nil {
			t.Fatal(err)
		}
		if err := st.CreateSubAgent(ctx, testSubAgent("sa-a", "a", "helper")); err != nil {
			t.Fatal(err)
		}
		for _, c := range []struct {
			kind  string
			owned string
			load  func(id string) error
		}{
			{"run", "run-a", func(id string) error { _, err := st.GetTenantRun(ctx, "b", "b", id); return err }},
			{"hierarchy", "h-a", func(id string) error { _, err := st.GetTenantHierarchy(ctx, "b", id); return err }},
			{"sub-agent", "sa-a", func(id string) error { _, err := st.GetSubAgent(ctx, "b", "b", id); return err }},
		} {
			// The same length, so the statements' text can be compared whole.
			unknown := "zz" + c.owned[2:]
			var otherErr, unknownErr error
			other := traceQueries(t, st, func() { otherErr = c.load(c.owned) })
			none := traceQueries(t, st, func() { unknownErr = c.load(unknown) })
			if otherErr == nil || unknownErr == nil || models.ErrorCode(otherErr) != models.ErrorCode(unknownErr) {
				t.Fatalf("%s: errors differ: %v / %v", c.kind, otherErr, unknownErr)
			}
			if len(other) == 0 || len(other) != len(none) {
				t.Fatalf("%s: another tenant's id ran %d queries, an unknown id %d:\n%v\n%v", c.kind, len(other), len(none), other, none)
			}
			for i := range other {
				if other[i] != none[i] {
					t.Errorf("%s: query %d differs:\n  other tenant: %s\n  unknown:      %s", c.kind, i, other[i], none[i])
				}
			}
			// The owner still reads it.
			if err := map[string]func() error{
				"run":       func() error { _, err := st.GetTenantRun(ctx, "a", "a", c.owned); return err },
				"hierarchy": func() error { _, err := st.GetTenantHierarchy(ctx, "a", c.owned); return err },
				"sub-agent": func() error { _, err := st.GetSubAgent(ctx, "a", "a", c.owned); return err },
			}[c.kind](); err != nil {
				t.Errorf("%s: the owner cannot read it: %v", c.kind, err)
			}
		}
	})
}

// TestRunIDsPerTenant (issue 23, item 8): a run's public id is unique in
// its tenant only. Two tenants store runs under one public id (with keys
// of their own), each reads its own by it, a principal of every tenant
// reads its own tenant's first, the run's key reads it whatever its
// public id, and a run a process older than migration 00026 wrote (no
// public id) is read by its key as its public id.
func TestRunIDsPerTenant(t *testing.T) {
	storetest.ForEachDialect(t, func(t *testing.T, st *store.Store) {
		ctx := context.Background()
		for _, tenant := range []string{"a", "b"} {
			r := pendingRun("key-"+tenant, tenant, "", "")
			r.PublicID = "shared"
			if err := st.CreateRun(ctx, r); err != nil {
				t.Fatalf("tenant %s: %v", tenant, err)
			}
			if r.ThreadID != "shared" {
				t.Errorf("tenant %s's thread = %q, want its public id", tenant, r.ThreadID)
			}
		}
		again := pendingRun("key-a2", "a", "", "")
		again.PublicID = "shared"
		if f := takenField(t, st.CreateRun(ctx, again)); f != "id" {
			t.Fatalf("a's second 'shared' refused on %q", f)
		}
		if _, err := st.GetRun(ctx, "key-a2"); models.ErrorCode(err) != models.CodeExecutionNotFound {
			t.Fatalf("the refused run was stored: %v", err)
		}
		for _, c := range []struct{ tenant, prefer, wantKey string }{
			{"a", "a", "key-a"}, {"b", "b", "key-b"}, {"", "b", "key-b"}, {"", "a", "key-a"},
		} {
			r, err := st.GetTenantRun(ctx, c.tenant, c.prefer, "shared")
			if err != nil || r.ID != c.wantKey || r.PublicID != "shared" {
				t.Fatalf("GetTenantRun(%q, %q, shared) = %+v, %v; want key %s", c.tenant, c.prefer, r, err, c.wantKey)
			}
		}
		if _, err := st.GetTenantRun(ctx, "c", "c", "shared"); models.ErrorCode(err) != models.CodeExecutionNotFound {
			t.Fatalf("tenant c reads another's run: %v", err)
		}
		if r, err := st.GetRun(ctx, "key-b"); err != nil || r.PublicID != "shared" || r.TenantID != "b" {
			t.Fatalf("GetRun(key-b) = %+v, %v", r, err)
		}
		// A key is no public id: tenant a cannot reach its run by key.
		if _, err := st.GetTenantRun(ctx, "a", "a", "key-a"); models.ErrorCode(err) != models.CodeExecutionNotFound {
			t.Fatalf("a run read by its key as a public id: %v", err)
		}

		old := pendingRun("old-run", "a", "", "")
		if err := st.CreateRun(ctx, old); err != nil {
			t.Fatal(err)
		}
		if err := st.DB().Exec("UPDATE execution SET public_id = NULL WHERE id = ?", "old-run").Error; err != nil {
			t.Fatal(err)
		}
		r, err := st.GetTenantRun(ctx, "a", "a", "old-run")
		if err != nil || r.ID != "old-run" || r.PublicID != "old-run" {
			t.Fatalf("a run without a public id reads as %+v, %v", r, err)
		}
	})
}
