package store_test

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/op-stack/executor/models"
	"github.com/op-stack/executor/store"
	"github.com/op-stack/executor/store/storetest"
)

// purgeFixture stores run key (known to its tenant as public) in status,
// with one row of every kind a run owns; purgeCounts reads them back.
// A finishing run drops its kept answers; one kept after (a straggling
// activity) is stored too, so status is set before it.
func purgeFixture(t *testing.T, st *store.Store, key, public, tenant, status string) {
	t.Helper()
	ctx := context.Background()
	if err := st.CreateRun(ctx, &store.Run{ID: key, PublicID: public, TenantID: tenant, HierarchyID: "h", WorkflowID: models.RunWorkflowID(key), Task: "t"}); err != nil {
		t.Fatal(err)
	}
	if err := st.InsertEvents(ctx, []models.Event{{RunID: key, Sequence: 1, Timestamp: time.Now().UTC().Format(time.RFC3339Nano), Event: models.EventKind{Category: "run", Action: "started"}, Data: map[string]any{}}}); err != nil {
		t.Fatal(err)
	}
	if err := st.RecordLLMCall(ctx, &store.LLMCall{ID: "call-" + key, RunID: key, AgentID: "a", Model: "m", Status: "ok", CreatedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	if err := st.SetRunStatus(ctx, models.RunStatusUpdate{RunID: key, Status: status, Result: &models.RunResult{}}); err != nil {
		t.Fatal(err)
	}
	if err := st.KeepAnswer(ctx, store.KeptAnswer{CallKey: "ck-" + key, Ordinal: 1, RunID: key, Fingerprint: "f", Response: "{}",
		Record: models.LLMCallRecord{ID: "kept-" + key, RunID: key, AgentID: "a", Model: "m", Status: "ok"}}); err != nil {
		t.Fatal(err)
	}
	if err := st.SaveMessage(ctx, &store.Message{ID: "msg-" + key, RunID: key, AgentID: "a", AgentType: models.AgentTypeUser, AgentName: "u", Content: "hi"}); err != nil {
		t.Fatal(err)
	}
	if err := st.SaveArtifact(ctx, &store.Artifact{RunID: key, Name: "a.txt", MediaType: "text/plain", Source: models.ArtifactSourceTool, Content: []byte("x"), Producer: "p-" + key, Attempt: 1}, 0, store.ArtifactLimits{}); err != nil {
		t.Fatal(err)
	}
	if err := st.CreateStreamToken(ctx, "hash-"+key, public, tenant, time.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	ep := &store.WebhookEndpoint{ID: "whe-" + key, TenantID: tenant, RunID: key, URL: "https://example.com/hook", Events: []string{"run.completed"}, Enabled: true}
	if err := st.CreateRunWebhook(ctx, ep, "whsec_test"); err != nil {
		t.Fatal(err)
	}
	if err := st.InsertWebhookDelivery(ctx, &store.WebhookDelivery{ID: store.WebhookDeliveryID(ep.ID, public, 1), TenantID: tenant, EndpointID: ep.ID,
		RunID: public, Sequence: 1, EventType: "run.completed", Payload: "{}", Status: store.WebhookPending}); err != nil {
		t.Fatal(err)
	}
	if err := st.PutMemory(ctx, &store.MemoryItem{TenantID: tenant, Namespace: []string{"runs", key}, Key: "fact", Value: []byte(`{"x":1}`), SearchText: "x", RunID: key}); err != nil {
		t.Fatal(err)
	}
}

// purgeCounts counts the rows of run key (public to tenant) in every table
// that stores a run's data.
func purgeCounts(t *testing.T, st *store.Store, key, public, tenant string) map[string]int64 {
	t.Helper()
	out := map[string]int64{}
	count := func(table, where string, args ...any) {
		var n int64
		if err := st.DB().Table(table).Where(where, args...).Count(&n).Error; err != nil {
			t.Fatalf("%s: %v", table, err)
		}
		out[table] = n
	}
	count("execution", "id = ?", key)
	for _, table := range []string{"execution_event", "llm_call", "llm_answer", "message", "artifact", "webhook_endpoint", "memory_item"} {
		count(table, "run_id = ?", key)
	}
	for _, table := range []string{"stream_token", "webhook_delivery"} {
		count(table, "tenant_id = ? AND run_id = ?", tenant, public)
	}
	return out
}

// TestPurgeRun: deleting a finished run removes every row stored for it
// (the run, its events, LLM calls and answers, messages, artifacts,
// stream tokens, webhook endpoint and deliveries, the memory items it
// wrote) and nothing of another
// run, even one of another tenant that uses the same public id; a live run
// is refused with EXECUTION_IN_PROGRESS and keeps everything; a second
// delete answers EXECUTION_NOT_FOUND.
func TestPurgeRun(t *testing.T) {
	storetest.ForEachDialect(t, func(t *testing.T, st *store.Store) {
		ctx := context.Background()
		if err := st.SetMCPSecretKey(bytes.Repeat([]byte{9}, 32)); err != nil {
			t.Fatal(err)
		}
		purgeFixture(t, st, "key-done", "mine", "acme", models.RunCompleted)
		purgeFixture(t, st, "key-other", "mine", "globex", models.RunCompleted)
		purgeFixture(t, st, "key-live", "live", "acme", models.RunRunning)
		for table, n := range purgeCounts(t, st, "key-done", "mine", "acme") {
			if n == 0 {
				t.Fatalf("fixture stored no %s row", table)
			}
		}

		if _, err := st.PurgeRun(ctx, "key-live"); models.ErrorCode(err) != models.CodeExecutionInProgress {
			t.Fatalf("live run: err = %v, want EXECUTION_IN_PROGRESS", err)
		}
		got, err := st.PurgeRun(ctx, "key-done")
		if err != nil {
			t.Fatal(err)
		}
		if got.WorkflowID != "run-key-done" || len(got.WebhookWorkflowIDs) != 1 || got.WebhookWorkflowIDs[0] != models.WebhookWorkflowID("whe-key-done", "mine") {
			t.Errorf("purged = %+v", got)
		}
		for table, n := range purgeCounts(t, st, "key-done", "mine", "acme") {
			if n != 0 {
				t.Errorf("%s: %d rows of the deleted run left", table, n)
			}
		}
		for _, r := range []struct{ key, public, tenant string }{{"key-other", "mine", "globex"}, {"key-live", "live", "acme"}} {
			for table, n := range purgeCounts(t, st, r.key, r.public, r.tenant) {
				if n == 0 {
					t.Errorf("run %s lost its %s rows", r.key, table)
				}
			}
		}
		if _, err := st.PurgeRun(ctx, "key-done"); models.ErrorCode(err) != models.CodeExecutionNotFound {
			t.Errorf("second delete: err = %v, want EXECUTION_NOT_FOUND", err)
		}
	})
}

// TestExpiredRuns: the retention sweep lists finished runs completed
// before the cutoff, of one tenant or of all but the excepted ones, and
// never a live run.
func TestExpiredRuns(t *testing.T) {
	storetest.ForEachDialect(t, func(t *testing.T, st *store.Store) {
		ctx := context.Background()
		for _, r := range []struct{ key, tenant, status string }{
			{"old-acme", "acme", models.RunCompleted}, {"old-globex", "globex", models.RunFailed}, {"live-acme", "acme", models.RunRunning},
		} {
			if err := st.CreateRun(ctx, &store.Run{ID: r.key, TenantID: r.tenant, HierarchyID: "h", WorkflowID: models.RunWorkflowID(r.key), Task: "t"}); err != nil {
				t.Fatal(err)
			}
			if err := st.SetRunStatus(ctx, models.RunStatusUpdate{RunID: r.key, Status: r.status, Error: "x"}); err != nil {
				t.Fatal(err)
			}
		}
		future := time.Now().Add(time.Hour)
		all, err := st.ExpiredRuns(ctx, "", nil, future, 10)
		if err != nil {
			t.Fatal(err)
		}
		if len(all) != 2 {
			t.Errorf("all tenants: %v, want old-acme and old-globex", all)
		}
		if got, _ := st.ExpiredRuns(ctx, "", []string{"globex"}, future, 10); len(got) != 1 || got[0] != "old-acme" {
			t.Errorf("except globex: %v", got)
		}
		if got, _ := st.ExpiredRuns(ctx, "globex", nil, future, 10); len(got) != 1 || got[0] != "old-globex" {
			t.Errorf("globex: %v", got)
		}
		if got, _ := st.ExpiredRuns(ctx, "", nil, time.Now().Add(-time.Hour), 10); len(got) != 0 {
			t.Errorf("cutoff before completion: %v", got)
		}
		if got, _ := st.ExpiredRuns(ctx, "", nil, future, 1); len(got) != 1 {
			t.Errorf("limit 1: %v", got)
		}
	})
}
