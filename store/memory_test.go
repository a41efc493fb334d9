package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/op-stack/executor/models"
	"github.com/op-stack/executor/store"
	"github.com/op-stack/executor/store/storetest"
)

func putMemory(t *testing.T, st *store.Store, it store.MemoryItem) *store.MemoryItem {
	t.Helper()
	if err := st.PutMemory(context.Background(), &it); err != nil {
		t.Fatalf("put %v/%s: %v", it.Namespace, it.Key, err)
	}
	return &it
}

// TestMemoryPutGetSearchDelete: an item is written, replaced (keeping its
// creation time), read back, found by full-text search (stemmed: "coffees"
// finds "coffee"), listed under its namespace's prefix, and deleted; a
// second delete and a get after it are MEMORY_NOT_FOUND.
func TestMemoryPutGetSearchDelete(t *testing.T) {
	storetest.ForEachDialect(t, func(t *testing.T, st *store.Store) {
		ctx := context.Background()
		ns := []string{"users", "u-42"}
		first := putMemory(t, st, store.MemoryItem{TenantID: "acme", Namespace: ns, Key: "drink", Value: []byte(`{"likes":"tea"}`), SearchText: "likes tea"})
		time.Sleep(5 * time.Millisecond)
		second := putMemory(t, st, store.MemoryItem{TenantID: "acme", Namespace: ns, Key: "drink", Value: []byte(`{"likes":"coffee"}`), SearchText: "the user drinks dark roast coffee every morning",
			Embedding: []float32{0.5, -1, 2}, EmbeddingModel: "m"})
		putMemory(t, st, store.MemoryItem{TenantID: "acme", Namespace: ns, Key: "city", Value: []byte(`{"city":"Lyon"}`), SearchText: "the user lives in Lyon"})
		putMemory(t, st, store.MemoryItem{TenantID: "acme", Namespace: []string{"users", "u-7"}, Key: "drink", Value: []byte(`{"likes":"coffee"}`), SearchText: "coffee with milk"})
		putMemory(t, st, store.MemoryItem{TenantID: "acme", Namespace: []string{"usersx"}, Key: "drink", Value: []byte(`{}`), SearchText: "coffee"})
		if second.ID != first.ID || !second.CreatedAt.Equal(first.CreatedAt) || !second.UpdatedAt.After(first.UpdatedAt) {
			t.Errorf("replace: first %+v, second %+v: want the same id and created_at, a later updated_at", first, second)
		}
		got, err := st.GetMemory(ctx, "acme", ns, "drink")
		if err != nil || string(got.Value) != `{"likes":"coffee"}` || len(got.Embedding) != 3 || got.Embedding[2] != 2 || got.EmbeddingModel != "m" {
			t.Fatalf("get = %+v, %v", got, err)
		}

		hits, err := st.SearchMemoryText(ctx, "acme", ns, "Which COFFEES?", 10, 0)
		if err != nil {
			t.Fatal(err)
		}
		if len(hits) != 1 || hits[0].Item.Key != "drink" || hits[0].Rank <= 0 {
			t.Fatalf("search coffees under users/u-42 = %+v", hits)
		}
		hits, _ = st.SearchMemoryText(ctx, "acme", []string{"users"}, "coffee", 10, 0)
		if len(hits) != 2 {
			t.Errorf("search under users = %d hits, want 2 (users/u-42 and users/u-7, not usersx)", len(hits))
		}
		hits, _ = st.SearchMemoryText(ctx, "acme", ns, "", 10, 0)
		if len(hits) != 2 || hits[0].Item.Key != "city" {
			t.Errorf("no query: %+v, want both items, newest first", hits)
		}
		if hits, _ := st.SearchMemoryText(ctx, "acme", ns, "Lyon coffee", 10, 0); len(hits) != 2 {
			t.Errorf("any word matches: %d hits, want 2", len(hits))
		}

		spaces, err := st.ListMemoryNamespaces(ctx, "acme", nil, 0, 100, 0)
		if err != nil || len(spaces) != 3 {
			t.Errorf("namespaces = %v, %v", spaces, err)
		}
		if spaces, _ := st.ListMemoryNamespaces(ctx, "acme", []string{"users"}, 1, 100, 0); len(spaces) != 1 || len(spaces[0]) != 1 || spaces[0][0] != "users" {
			t.Errorf("namespaces under users cut to depth 1 = %v", spaces)
		}

		if err := st.DeleteMemory(ctx, "acme", ns, "drink"); err != nil {
			t.Fatal(err)
		}
		if _, err := st.GetMemory(ctx, "acme", ns, "drink"); models.ErrorCode(err) != models.CodeMemoryNotFound {
			t.Errorf("get after delete = %v", err)
		}
		if err := st.DeleteMemory(ctx, "acme", ns, "drink"); models.ErrorCode(err) != models.CodeMemoryNotFound {
			t.Errorf("second delete = %v", err)
		}
		if hits, _ := st.SearchMemoryText(ctx, "acme", ns, "coffee", 10, 0); len(hits) != 0 {
			t.Errorf("search after delete = %+v", hits)
		}
	})
}

// TestMemoryTTL: an expired item is neither read, searched, listed nor
// exported, and the sweep deletes it; a live one stays.
func TestMemoryTTL(t *testing.T) {
	storetest.ForEachDialect(t, func(t *testing.T, st *store.Store) {
		ctx := context.Background()
		ns := []string{"facts"}
		past, future := time.Now().Add(-time.Second), time.Now().Add(time.Hour)
		putMemory(t, st, store.MemoryItem{TenantID: "acme", Namespace: ns, Key: "old", Value: []byte(`1`), SearchText: "expired fact", ExpiresAt: &past,
			Embedding: []float32{1}, EmbeddingModel: "m"})
		putMemory(t, st, store.MemoryItem{TenantID: "acme", Namespace: ns, Key: "new", Value: []byte(`2`), SearchText: "fresh fact", ExpiresAt: &future})
		if _, err := st.GetMemory(ctx, "acme", ns, "old"); models.ErrorCode(err) != models.CodeMemoryNotFound {
			t.Errorf("get expired = %v", err)
		}
		if _, err := st.GetMemory(ctx, "acme", ns, "new"); err != nil {
			t.Errorf("get live = %v", err)
		}
		if hits, _ := st.SearchMemoryText(ctx, "acme", ns, "fact", 10, 0); len(hits) != 1 || hits[0].Item.Key != "new" {
			t.Errorf("search = %+v, want the live item only", hits)
		}
		if items, _ := st.ListMemory(ctx, "acme", nil, 0, 10); len(items) != 1 {
			t.Errorf("export = %d items, want 1", len(items))
		}
		vecs, err := st.MemoryVectors(ctx, "acme", "facts/", "m")
		if err != nil || len(vecs) != 1 || vecs[0].ExpiresAt == nil {
			t.Errorf("vectors = %+v, %v: want the expired item's, with its expiry (the caller skips it)", vecs, err)
		}
		n, err := st.DeleteExpiredMemory(ctx, time.Now(), 100)
		if err != nil || n != 1 {
			t.Errorf("sweep deleted %d, %v; want 1", n, err)
		}
		if vecs, _ := st.MemoryVectors(ctx, "acme", "facts/", "m"); len(vecs) != 0 {
			t.Errorf("vectors after sweep = %+v", vecs)
		}
	})
}

// TestMemoryTenantIsolation: another tenant reads, searches, lists,
// exports and deletes nothing of a tenant's memory, even at the same path.
func TestMemoryTenantIsolation(t *testing.T) {
	storetest.ForEachDialect(t, func(t *testing.T, st *store.Store) {
		ctx := context.Background()
		ns := []string{"users", "u-1"}
		putMemory(t, st, store.MemoryItem{TenantID: "acme", Namespace: ns, Key: "secret-plan", Value: []byte(`{"plan":"merge"}`), SearchText: "plan to merge",
			Embedding: []float32{1, 0}, EmbeddingModel: "m"})
		if _, err := st.GetMemory(ctx, "globex", ns, "secret-plan"); models.ErrorCode(err) != models.CodeMemoryNotFound {
			t.Errorf("other tenant's get = %v", err)
		}
		if hits, _ := st.SearchMemoryText(ctx, "globex", nil, "plan merge", 10, 0); len(hits) != 0 {
			t.Errorf("other tenant's search = %+v", hits)
		}
		if hits, _ := st.SearchMemoryText(ctx, "globex", nil, "", 10, 0); len(hits) != 0 {
			t.Errorf("other tenant's listing = %+v", hits)
		}
		if spaces, _ := st.ListMemoryNamespaces(ctx, "globex", nil, 0, 10, 0); len(spaces) != 0 {
			t.Errorf("other tenant's namespaces = %v", spaces)
		}
		if items, _ := st.ListMemory(ctx, "globex", nil, 0, 10); len(items) != 0 {
			t.Errorf("other tenant's export = %v", items)
		}
		if v, _ := st.MemoryNamespaceVersions(ctx, "globex", nil); len(v) != 0 {
			t.Errorf("other tenant's versions = %v", v)
		}
		if vecs, _ := st.MemoryVectors(ctx, "globex", "users/u-1/", "m"); len(vecs) != 0 {
			t.Errorf("other tenant's vectors = %v", vecs)
		}
		got, _ := st.SearchMemoryText(ctx, "acme", nil, "plan", 10, 0)
		if len(got) != 1 {
			t.Fatalf("owner's search = %+v", got)
		}
		if items, _ := st.MemoryItemsByID(ctx, "globex", []int64{got[0].Item.ID}); len(items) != 0 {
			t.Errorf("other tenant's read by id = %v", items)
		}
		if err := st.DeleteMemory(ctx, "globex", ns, "secret-plan"); models.ErrorCode(err) != models.CodeMemoryNotFound {
			t.Errorf("other tenant's delete = %v", err)
		}
		if _, err := st.GetMemory(ctx, "acme", ns, "secret-plan"); err != nil {
			t.Errorf("owner's item after the other's delete: %v", err)
		}
	})
}

// TestMemoryNamespaceVersions: every write and delete moves its
// namespace's version and no other's.
func TestMemoryNamespaceVersions(t *testing.T) {
	storetest.ForEachDialect(t, func(t *testing.T, st *store.Store) {
		ctx := context.Background()
		putMemory(t, st, store.MemoryItem{TenantID: "acme", Namespace: []string{"a"}, Key: "k", Value: []byte(`1`)})
		putMemory(t, st, store.MemoryItem{TenantID: "acme", Namespace: []string{"b"}, Key: "k", Value: []byte(`1`)})
		v1, _ := st.MemoryNamespaceVersions(ctx, "acme", nil)
		putMemory(t, st, store.MemoryItem{TenantID: "acme", Namespace: []string{"a"}, Key: "k", Value: []byte(`2`)})
		if err := st.DeleteMemory(ctx, "acme", []string{"a"}, "k"); err != nil {
			t.Fatal(err)
		}
		v2, _ := st.MemoryNamespaceVersions(ctx, "acme", nil)
		if v2["a/"] != v1["a/"]+2 || v2["b/"] != v1["b/"] || v1["b/"] == 0 {
			t.Errorf("versions before %v, after %v", v1, v2)
		}
		if v, _ := st.MemoryNamespaceVersions(ctx, "acme", []string{"b"}); len(v) != 1 {
			t.Errorf("versions under b = %v", v)
		}
	})
}

// TestCheckMemoryPath: namespaces and keys refuse '/', control characters,
// empty and overlong segments.
func TestCheckMemoryPath(t *testing.T) {
	for _, ns := range [][]string{{}, {""}, {"a/b"}, {"a\n"}, make([]string, 11)} {
		if err := store.CheckMemoryPath("namespace", ns, false); models.ErrorCode(err) != models.CodeInvalidParameters {
			t.Errorf("%q: %v, want INVALID_PARAMETERS", ns, err)
		}
	}
	if err := store.CheckMemoryPath("namespace", []string{"users", "u-42", "é"}, false); err != nil {
		t.Error(err)
	}
	if err := store.CheckMemoryKey("key", "a/b"); err == nil {
		t.Error("key with '/' accepted")
	}
}
