package store_test

import (
	"bytes"
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/op-stack/executor/auth"
	"github.com/op-stack/executor/models"
	"github.com/op-stack/executor/store"
	"github.com/op-stack/executor/store/storetest"
)

func testHierarchy(t *testing.T, tenant, name string) *models.Hierarchy {
	t.Helper()
	h := &models.Hierarchy{
		ID: models.NewID(), TenantID: tenant, Name: name,
		GlobalSupervisor: models.Agent{SystemPrompt: "lead"},
		Teams: []models.Team{{Name: "team", Supervisor: models.Agent{SystemPrompt: "sup"},
			Workers: []models.Agent{{Name: "w", SystemPrompt: "work"}}}},
	}
	h.Normalize()
	if err := h.Validate(); err != nil {
		t.Fatal(err)
	}
	return h
}

func testSubAgent(id, tenant, name string) *models.SubAgent {
	return &models.SubAgent{ID: id, TenantID: tenant, Name: name, SystemPrompt: "help", MaxDepth: 3, MaxIterations: 10, Enabled: true}
}

// TestTenantOwnership: objects keep the tenant they are created in (the
// default one when none is given), an update does not change it, and
// listings with a tenant show that tenant's objects only.
func TestTenantOwnership(t *testing.T) {
	storetest.ForEachDialect(t, func(t *testing.T, st *store.Store) {
		ctx := context.Background()
		ha, hd := testHierarchy(t, "acme", "a"), testHierarchy(t, "", "d")
		for _, h := range []*models.Hierarchy{ha, hd} {
			if err := st.CreateHierarchy(ctx, h); err != nil {
				t.Fatal(err)
			}
		}
		if hd.TenantID != auth.DefaultTenant {
			t.Fatalf("created without a tenant: %q", hd.TenantID)
		}
		got, err := st.GetHierarchy(ctx, ha.ID)
		if err != nil || got.TenantID != "acme" {
			t.Fatalf("get: %v %+v", err, got)
		}
		upd := testHierarchy(t, "", "a2")
		upd.ID = ha.ID
		if err := st.UpdateHierarchy(ctx, upd); err != nil {
			t.Fatal(err)
		}
		if got, _ := st.GetHierarchy(ctx, ha.ID); got.TenantID != "acme" || upd.TenantID != "acme" {
			t.Fatalf("update changed the tenant: %q %q", got.TenantID, upd.TenantID)
		}
		list, total, err := st.ListHierarchies(ctx, store.ListFilter{Page: 1, PageSize: 10, Tenant: "acme"})
		if err != nil || total != 1 || len(list) != 1 || list[0].ID != ha.ID || list[0].TenantID != "acme" {
			t.Fatalf("acme hierarchies: %v %d %+v", err, total, list)
		}
		if _, total, _ := st.ListHierarchies(ctx, store.ListFilter{Page: 1, PageSize: 10}); total != 2 {
			t.Fatalf("all hierarchies: %d", total)
		}

		for _, r := range []*store.Run{
			{ID: "r1", TenantID: "acme", HierarchyID: ha.ID, WorkflowID: "wf1", Task: "x"},
			{ID: "r2", TenantID: "acme", HierarchyID: ha.ID, WorkflowID: "wf2", Task: "x"},
			{ID: "r3", HierarchyID: hd.ID, WorkflowID: "wf3", Task: "x"},
		} {
			if err := st.CreateRun(ctx, r); err != nil {
				t.Fatal(err)
			}
		}
		if r, err := st.GetRun(ctx, "r3"); err != nil || r.TenantID != auth.DefaultTenant {
			t.Fatalf("r3: %v %+v", err, r)
		}
		runs, total, err := st.ListRuns(ctx, store.RunFilter{ListFilter: store.ListFilter{Page: 1, PageSize: 10, Tenant: "acme"}})
		if err != nil || total != 2 || len(runs) != 2 || runs[0].TenantID != "acme" {
			t.Fatalf("acme runs: %v %d %+v", err, total, runs)
		}
		if _, total, _ := st.ListRuns(ctx, store.RunFilter{ListFilter: store.ListFilter{Page: 1, PageSize: 10}}); total != 3 {
			t.Fatalf("all runs: %d", total)
		}
		if err := st.SetRunStatus(ctx, models.RunStatusUpdate{RunID: "r1", Status: models.RunRunning}); err != nil {
			t.Fatal(err)
		}
		if err := st.SetRunStatus(ctx, models.RunStatusUpdate{RunID: "r2", Status: models.RunCompleted}); err != nil {
			t.Fatal(err)
		}
		for tenant, want := range map[string]int64{"acme": 1, auth.DefaultTenant: 1, "other": 0} {
			if n, err := st.CountActiveRuns(ctx, tenant); err != nil || n != want {
				t.Errorf("CountActiveRuns(%s) = %d, %v; want %d", tenant, n, err, want)
			}
		}

		if err := st.CreateSubAgent(ctx, testSubAgent("sa-a", "acme", "helper")); err != nil {
			t.Fatal(err)
		}
		if err := st.CreateSubAgent(ctx, testSubAgent("sa-d", "", "other")); err != nil {
			t.Fatal(err)
		}
		subs, total, err := st.ListSubAgents(ctx, store.ListFilter{Page: 1, PageSize: 10, Tenant: "acme"})
		if err != nil || total != 1 || subs[0].ID != "sa-a" || subs[0].TenantID != "acme" {
			t.Fatalf("acme sub-agents: %v %d %+v", err, total, subs)
		}
		if sa, err := st.GetSubAgent(ctx, "", "", "sa-d"); err != nil || sa.TenantID != auth.DefaultTenant {
			t.Fatalf("sa-d: %v %+v", err, sa)
		}
	})
}

// TestSubAgentNamesPerTenant: two tenants may use one name; one tenant
// may not use it twice, on create or on update.
func TestSubAgentNamesPerTenant(t *testing.T) {
	storetest.ForEachDialect(t, func(t *testing.T, st *store.Store) {
		ctx := context.Background()
		for _, sa := range []*models.SubAgent{testSubAgent("a1", "a", "helper"), testSubAgent("b1", "b", "helper"), testSubAgent("a2", "a", "other")} {
			if err := st.CreateSubAgent(ctx, sa); err != nil {
				t.Fatalf("create %s: %v", sa.ID, err)
			}
		}
		err := st.CreateSubAgent(ctx, testSubAgent("a3", "a", "helper"))
		if models.ErrorCode(err) != models.CodeAlreadyExists || !errors.As(err, new(*models.Error)) {
			t.Fatalf("same name twice in a tenant: %v", err)
		}
		var me *models.Error
		if errors.As(err, &me) && me.Field != "name" {
			t.Fatalf("clash reported on %q", me.Field)
		}
		// Renaming a2 to helper clashes with a1. Ids are the tenant's own
		// (issue 23, item 8), so an update names the tenant: with none it
		// looks in the default tenant, which has no a2.
		err = st.UpdateSubAgent(ctx, testSubAgent("a2", "a", "helper"))
		if models.ErrorCode(err) != models.CodeAlreadyExists {
			t.Fatalf("rename onto a taken name: %v", err)
		}
		if err := st.UpdateSubAgent(ctx, testSubAgent("a2", "", "renamed")); models.ErrorCode(err) != models.CodeSubAgentNotFound {
			t.Fatalf("update in the wrong tenant: %v", err)
		}
		upd := testSubAgent("a2", "a", "renamed")
		if err := st.UpdateSubAgent(ctx, upd); err != nil || upd.TenantID != "a" {
			t.Fatalf("update: %v, tenant %q", err, upd.TenantID)
		}

		for tenant, id := range map[string]string{"a": "a1", "b": "b1"} {
			sa, err := st.GetSubAgentByName(ctx, tenant, "helper")
			if err != nil || sa.ID != id {
				t.Fatalf("%s's helper: %v %+v", tenant, err, sa)
			}
		}
		if _, err := st.GetSubAgentByName(ctx, "c", "helper"); models.ErrorCode(err) != models.CodeSubAgentNotFound {
			t.Fatalf("tenant c's helper: %v", err)
		}
		got, err := st.ExistingSubAgentNames(ctx, "b", []string{"helper", "renamed"}, "")
		if err != nil || !got["helper"] || got["renamed"] {
			t.Fatalf("b's names: %v %v", got, err)
		}
		got, err = st.ExistingSubAgentNames(ctx, "a", []string{"helper", "renamed"}, "a1")
		if err != nil || got["helper"] || !got["renamed"] {
			t.Fatalf("a's names without a1: %v %v", got, err)
		}
	})
}

func newKey(t *testing.T, st *store.Store, tenant string, scopes ...string) (string, *store.APIKey) {
	t.Helper()
	key, hash, err := auth.NewAPIKey()
	if err != nil {
		t.Fatal(err)
	}
	k := &store.APIKey{Hash: hash, Prefix: key[:store.APIKeyPrefixLen], Tenant: tenant, Scopes: scopes, Description: "test key"}
	if err := st.CreateAPIKey(context.Background(), k); err != nil {
		t.Fatal(err)
	}
	return key, k
}

func TestAPIKeys(t *testing.T) {
	storetest.ForEachDialect(t, func(t *testing.T, st *store.Store) {
		ctx := context.Background()
		key, k := newKey(t, st, "acme", "runs:read", "runs:write")
		if k.ID == "" || k.CreatedAt.IsZero() {
			t.Fatalf("created %+v", k)
		}
		got, err := st.APIKeyByHash(ctx, auth.HashSecret(key))
		if err != nil {
			t.Fatal(err)
		}
		if got.ID != k.ID || got.Tenant != "acme" || !slices.Equal(got.Scopes, []string{"runs:read", "runs:write"}) ||
			got.Prefix != key[:12] || got.Description != "test key" || !got.CreatedAt.Equal(k.CreatedAt) || got.ExpiresAt != nil || got.RevokedAt != nil {
			t.Fatalf("lookup = %+v, created %+v", got, k)
		}
		if _, err := st.APIKeyByHash(ctx, auth.HashSecret("osk_unknown")); !errors.Is(err, store.ErrAPIKeyNotFound) {
			t.Fatalf("unknown hash: %v", err)
		}
		dup := &store.APIKey{Hash: k.Hash, Prefix: "osk_x", Tenant: "other", Scopes: []string{"admin"}}
		if err := st.CreateAPIKey(ctx, dup); err == nil {
			t.Fatal("a second key with the same hash was stored")
		}

		time.Sleep(2 * time.Millisecond)
		exp := time.Now().Add(time.Hour)
		_, hash, _ := auth.NewAPIKey()
		k2 := &store.APIKey{Hash: hash, Prefix: "osk_12345678", Tenant: "other", Scopes: []string{"admin"}, ExpiresAt: &exp}
		if err := st.CreateAPIKey(ctx, k2); err != nil {
			t.Fatal(err)
		}
		all, err := st.ListAPIKeys(ctx, "")
		if err != nil || len(all) != 2 || all[0].ID != k2.ID || all[1].ID != k.ID || all[0].ExpiresAt == nil || !all[0].ExpiresAt.Equal(*k2.ExpiresAt) {
			t.Fatalf("all keys (newest first): %v %+v", err, all)
		}
		if acme, err := st.ListAPIKeys(ctx, "acme"); err != nil || len(acme) != 1 || acme[0].ID != k.ID {
			t.Fatalf("acme keys: %v %+v", err, acme)
		}

		if err := st.RevokeAPIKey(ctx, k.ID); err != nil {
			t.Fatal(err)
		}
		first, _ := st.APIKeyByHash(ctx, k.Hash)
		if first.RevokedAt == nil {
			t.Fatal("not revoked")
		}
		time.Sleep(2 * time.Millisecond)
		if err := st.RevokeAPIKey(ctx, k.ID); err != nil {
			t.Fatal(err)
		}
		second, _ := st.APIKeyByHash(ctx, k.Hash)
		if !second.RevokedAt.Equal(*first.RevokedAt) {
			t.Fatalf("revoking again moved revoked_at: %v -> %v", first.RevokedAt, second.RevokedAt)
		}
		if err := st.RevokeAPIKey(ctx, "key_nope"); !errors.Is(err, store.ErrAPIKeyNotFound) {
			t.Fatalf("revoke unknown: %v", err)
		}

		// Through auth.Keys: the revoked key is refused, the other one
		// authenticates with its scopes, an unknown one is refused.
		keys := auth.Keys{Lookup: st.KeyLookup()}
		if _, err := keys.Authenticate(ctx, key); !errors.Is(err, auth.ErrInvalidCredentials) {
			t.Fatalf("revoked key: %v", err)
		}
		if _, err := st.KeyLookup()(ctx, auth.HashSecret("nope")); !errors.Is(err, auth.ErrKeyNotFound) {
			t.Fatalf("lookup of an unknown hash: %v", err)
		}
		key3, k3 := newKey(t, st, "acme", "hierarchies:read")
		p, err := keys.Authenticate(ctx, key3)
		if err != nil || p.Tenant != "acme" || p.KeyID != k3.ID || !slices.Equal(p.Scopes, []auth.Scope{auth.ScopeHierarchiesRead}) {
			t.Fatalf("authenticate: %v %+v", err, p)
		}
	})
}

// TestStreamTokens: StreamToken answers ErrStreamTokenNotFound for an
// expired token as for an unknown one; creating a token sweeps tokens
// expired over an hour ago.
func TestStreamTokens(t *testing.T) {
	storetest.ForEachDialect(t, func(t *testing.T, st *store.Store) {
		ctx := context.Background()
		exp := time.Now().Add(time.Minute)
		if err := st.CreateStreamToken(ctx, auth.HashSecret("live"), "run-1", "acme", exp); err != nil {
			t.Fatal(err)
		}
		run, tenant, gotExp, err := st.StreamToken(ctx, auth.HashSecret("live"))
		if err != nil || run != "run-1" || tenant != "acme" || !gotExp.Equal(exp.UTC().Truncate(time.Microsecond)) {
			t.Fatalf("live token: %q %q %v %v", run, tenant, gotExp, err)
		}
		if _, _, _, err := st.StreamToken(ctx, auth.HashSecret("unknown")); !errors.Is(err, store.ErrStreamTokenNotFound) {
			t.Fatalf("unknown token: %v", err)
		}
		if err := st.CreateStreamToken(ctx, auth.HashSecret("expired"), "run-1", "acme", time.Now().Add(-time.Second)); err != nil {
			t.Fatal(err)
		}
		if _, _, _, err := st.StreamToken(ctx, auth.HashSecret("expired")); !errors.Is(err, store.ErrStreamTokenNotFound) {
			t.Fatalf("expired token: %v", err)
		}
		if err := st.CreateStreamToken(ctx, auth.HashSecret("old"), "run-1", "acme", time.Now().Add(-2*time.Hour)); err != nil {
			t.Fatal(err)
		}
		if err := st.CreateStreamToken(ctx, auth.HashSecret("another"), "run-2", "", exp); err != nil {
			t.Fatal(err)
		}
		var n int64
		// live, expired (a second ago) and another; old was swept.
		if err := st.DB().Raw("SELECT COUNT(*) FROM stream_token").Scan(&n).Error; err != nil || n != 3 {
			t.Fatalf("tokens left: %d %v", n, err)
		}
	})
}

func TestIdempotency(t *testing.T) {
	storetest.ForEachDialect(t, func(t *testing.T, st *store.Store) {
		ctx := context.Background()
		rec := store.IdempotencyRecord{Tenant: "acme", Scope: "runs/start", Key: "k1", RequestHash: auth.HashSecret("body"), ExpiresAt: time.Now().Add(time.Hour)}

		// Concurrent claims of one key: exactly one wins.
		const n = 8
		var wg sync.WaitGroup
		results := make([]*store.IdempotencyRecord, n)
		errs := make([]error, n)
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				results[i], errs[i] = st.BeginIdempotent(ctx, rec)
			}()
		}
		wg.Wait()
		winners := 0
		for i := range n {
			if errs[i] != nil {
				t.Fatalf("claim %d: %v", i, errs[i])
			}
			if results[i] == nil {
				winners++
			} else if results[i].Done || results[i].RequestHash != rec.RequestHash {
				t.Fatalf("loser %d saw %+v", i, results[i])
			}
		}
		if winners != 1 {
			t.Fatalf("%d claims won", winners)
		}

		// The same key in another scope or tenant is another claim.
		for _, other := range []store.IdempotencyRecord{{Tenant: "other", Scope: rec.Scope, Key: rec.Key}, {Tenant: rec.Tenant, Scope: "hierarchies/create", Key: rec.Key}} {
			other.RequestHash, other.ExpiresAt = rec.RequestHash, rec.ExpiresAt
			if got, err := st.BeginIdempotent(ctx, other); err != nil || got != nil {
				t.Fatalf("claim %+v: %v %+v", other, err, got)
			}
		}

		// Finish, then a retry finds the response.
		body := []byte(`{"run_id":"r1"}` + "\x00\xff")
		if err := st.FinishIdempotent(ctx, "acme", "runs/start", "k1", 201, body); err != nil {
			t.Fatal(err)
		}
		got, err := st.BeginIdempotent(ctx, rec)
		if err != nil || got == nil || !got.Done || got.StatusCode != 201 || !bytes.Equal(got.Body, body) || got.Tenant != "acme" || got.Key != "k1" {
			t.Fatalf("replay: %v %+v", err, got)
		}
		if err := st.FinishIdempotent(ctx, "acme", "runs/start", "k1", 500, nil); !errors.Is(err, store.ErrIdempotencyClaimNotFound) {
			t.Fatalf("finishing twice: %v", err)
		}
		// Abandon keeps a finished record.
		if err := st.AbandonIdempotent(ctx, "acme", "runs/start", "k1"); err != nil {
			t.Fatal(err)
		}
		if got, _ := st.BeginIdempotent(ctx, rec); got == nil || !got.Done {
			t.Fatalf("abandon removed a finished record: %+v", got)
		}

		// Abandon frees a pending claim.
		rec2 := rec
		rec2.Key = "k2"
		if got, err := st.BeginIdempotent(ctx, rec2); err != nil || got != nil {
			t.Fatalf("claim k2: %v %+v", err, got)
		}
		if got, _ := st.BeginIdempotent(ctx, rec2); got == nil || got.Done {
			t.Fatalf("pending k2: %+v", got)
		}
		if err := st.AbandonIdempotent(ctx, "acme", "runs/start", "k2"); err != nil {
			t.Fatal(err)
		}
		if got, err := st.BeginIdempotent(ctx, rec2); err != nil || got != nil {
			t.Fatalf("claim k2 after abandon: %v %+v", err, got)
		}

		// An expired record is replaced by a new claim.
		old := rec
		old.Key, old.RequestHash, old.ExpiresAt = "k3", auth.HashSecret("old body"), time.Now().Add(-time.Minute)
		if got, err := st.BeginIdempotent(ctx, old); err != nil || got != nil {
			t.Fatalf("claim k3: %v %+v", err, got)
		}
		if err := st.FinishIdempotent(ctx, "acme", "runs/start", "k3", 200, []byte("old")); err != nil {
			t.Fatal(err)
		}
		fresh := rec
		fresh.Key = "k3"
		if got, err := st.BeginIdempotent(ctx, fresh); err != nil || got != nil {
			t.Fatalf("claim over an expired record: %v %+v", err, got)
		}
		if got, _ := st.BeginIdempotent(ctx, fresh); got == nil || got.Done || got.RequestHash != fresh.RequestHash || got.Body != nil {
			t.Fatalf("after replacing: %+v", got)
		}

		// The sweeper deletes what has expired by then.
		deleted, err := st.DeleteExpiredIdempotencyKeys(ctx, time.Now())
		if err != nil || deleted != 0 {
			t.Fatalf("sweep now: %d %v", deleted, err)
		}
		deleted, err = st.DeleteExpiredIdempotencyKeys(ctx, time.Now().Add(2*time.Hour))
		if err != nil || deleted != 5 {
			t.Fatalf("sweep later: %d %v", deleted, err)
		}
	})
}

// TestMigrateAccessKeepsData: rows stored before 00007 belong to the
// default tenant afterwards, and sub-agents survive the table's rebuild.
func TestMigrateAccessKeepsData(t *testing.T) {
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
			if err := st.MigrateTo(ctx, 6); err != nil {
				t.Fatal(err)
			}
			now := time.Now().UTC().Truncate(time.Microsecond)
			for _, q := range []struct {
				sql  string
				args []any
			}{
				{`INSERT INTO hierarchy_team (id, name, global_supervisor_agent_id, global_prompt, created_at, updated_at) VALUES ('h1', 'old', 'gs', 'p', ?, ?)`, []any{now, now}},
				{`INSERT INTO execution (id, hierarchy_id, workflow_id, task, status, created_at, updated_at) VALUES ('r1', 'h1', 'wf', 't', 'running', ?, ?)`, []any{now, now}},
				{`INSERT INTO sub_agent (id, name, description, system_prompt, model, temperature, max_tokens, tools, sub_agents, max_depth, max_iterations, enabled, created_at, updated_at)
				  VALUES ('sa1', 'helper', 'd', 'sp', 'm', 0.5, 100, '["web_search"]', '["other"]', 2, 7, FALSE, ?, ?)`, []any{now, now}},
			} {
				if err := st.Exec(ctx, q.sql, q.args...); err != nil {
					t.Fatal(err)
				}
			}
			if _, err := st.Migrate(ctx, nil); err != nil {
				t.Fatal(err)
			}
			var tenants []string
			if err := st.DB().Raw("SELECT tenant_id FROM hierarchy_team UNION ALL SELECT tenant_id FROM execution").Scan(&tenants).Error; err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(tenants, []string{"default", "default"}) {
				t.Fatalf("tenants = %v", tenants)
			}
			if r, err := st.GetRun(ctx, "r1"); err != nil || r.TenantID != "default" {
				t.Fatalf("run: %v %+v", err, r)
			}
			if n, _ := st.CountActiveRuns(ctx, "default"); n != 1 {
				t.Fatalf("active runs: %d", n)
			}
			sa, err := st.GetSubAgentByName(ctx, "default", "helper")
			if err != nil {
				t.Fatal(err)
			}
			if sa.ID != "sa1" || sa.TenantID != "default" || sa.Description != "d" || sa.SystemPrompt != "sp" || sa.Model != "m" ||
				sa.Temperature == nil || *sa.Temperature != 0.5 || sa.MaxTokens == nil || *sa.MaxTokens != 100 ||
				!slices.Equal(sa.Tools, []string{"web_search"}) || !slices.Equal(sa.SubAgents, []string{"other"}) ||
				sa.MaxDepth != 2 || sa.MaxIterations != 7 || sa.Enabled || !sa.CreatedAt.Equal(now) || !sa.UpdatedAt.Equal(now) {
				t.Fatalf("sub-agent after the rebuild: %+v", sa)
			}
			// The rebuilt table enforces names per tenant.
			if err := st.CreateSubAgent(ctx, testSubAgent("sa2", "default", "helper")); models.ErrorCode(err) != models.CodeAlreadyExists {
				t.Fatalf("duplicate name after the rebuild: %v", err)
			}
			if err := st.CreateSubAgent(ctx, testSubAgent("sa3", "acme", "helper")); err != nil {
				t.Fatal(err)
			}

			// Down: back to 00006 once names are unique again, then up.
			if err := st.Exec(ctx, "DELETE FROM sub_agent WHERE id = 'sa3'"); err != nil {
				t.Fatal(err)
			}
			if err := st.MigrateDownTo(ctx, 6); err != nil {
				t.Fatalf("down: %v", err)
			}
			if err := st.Exec(ctx, "SELECT id, name FROM sub_agent WHERE id = 'sa1'"); err != nil {
				t.Fatal(err)
			}
			if err := st.Exec(ctx, "SELECT tenant_id FROM execution"); err == nil {
				t.Fatal("execution.tenant_id survived the down migration")
			}
			if _, err := st.Migrate(ctx, nil); err != nil {
				t.Fatalf("up again: %v", err)
			}
			if sa, err := st.GetSubAgent(ctx, "", "", "sa1"); err != nil || sa.TenantID != "default" {
				t.Fatalf("after down and up: %v %+v", err, sa)
			}
		})
	}
}

// A claim whose request never finished (its process died) is taken over
// once it is older than the lease; a fresh one is not.
func TestIdempotencyStaleClaimIsTakenOver(t *testing.T) {
	storetest.ForEachDialect(t, func(t *testing.T, st *store.Store) {
		ctx := context.Background()
		now := time.Now()
		fresh := store.IdempotencyRecord{Tenant: "a", Scope: "runs/start", Key: "fresh", RequestHash: "h1", CreatedAt: now, ExpiresAt: now.Add(time.Hour)}
		stale := fresh
		stale.Key, stale.CreatedAt = "stale", now.Add(-store.IdempotencyClaimLease-time.Minute)
		for _, rec := range []store.IdempotencyRecord{fresh, stale} {
			if existing, err := st.BeginIdempotent(ctx, rec); err != nil || existing != nil {
				t.Fatalf("first claim of %s: %+v, %v", rec.Key, existing, err)
			}
		}
		retry := func(key string) *store.IdempotencyRecord {
			existing, err := st.BeginIdempotent(ctx, store.IdempotencyRecord{Tenant: "a", Scope: "runs/start", Key: key, RequestHash: "h1", ExpiresAt: time.Now().Add(time.Hour)})
			if err != nil {
				t.Fatal(err)
			}
			return existing
		}
		if existing := retry("fresh"); existing == nil || existing.Done {
			t.Errorf("retry of a fresh claim: %+v, want the pending record (in progress)", existing)
		}
		if existing := retry("stale"); existing != nil {
			t.Errorf("retry of a claim older than the lease: %+v, want it taken over", existing)
		}
		// Once finished, a record is replayed however old it is.
		if err := st.FinishIdempotent(ctx, "a", "runs/start", "stale", 200, []byte(`{}`)); err != nil {
			t.Fatal(err)
		}
		if existing := retry("stale"); existing == nil || !existing.Done {
			t.Errorf("retry of a finished record: %+v", existing)
		}
	})
}
