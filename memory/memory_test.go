package memory_test

import (
	"bytes"
	"context"
	"encoding/json"
	"hash/fnv"
	"math"
	"strings"
	"testing"
	"unicode"

	"github.com/op-stack/executor/memory"
	"github.com/op-stack/executor/models"
	"github.com/op-stack/executor/store"
	"github.com/op-stack/executor/store/storetest"
)

// wordsEmbedder is a deterministic embedder: each word (lower-cased,
// without a trailing "s") adds 1 to a hashed dimension, so texts sharing
// words point the same way.
type wordsEmbedder struct{ dim int }

func (e wordsEmbedder) Model() string { return "words" }
func (e wordsEmbedder) Embed(_ context.Context, texts []string) ([][]float32, error) {
	out := make([][]float32, len(texts))
	for i, t := range texts {
		v := make([]float32, e.dim)
		for _, w := range strings.FieldsFunc(strings.ToLower(t), func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) }) {
			h := fnv.New32a()
			h.Write([]byte(strings.TrimSuffix(w, "s")))
			v[h.Sum32()%uint32(e.dim)]++
		}
		out[i] = v
	}
	return out, nil
}

// TestToolNamespaceScoping: memory_save and memory_search reach only the
// run's declared namespaces (or namespaces under them): a call naming
// another is an error result and writes or reads nothing; without a
// namespace, save uses the first declared one and search all of them.
func TestToolNamespaceScoping(t *testing.T) {
	storetest.ForEachDialect(t, func(t *testing.T, st *store.Store) {
		ctx := context.Background()
		svc := memory.New(st, wordsEmbedder{dim: 64}, 0)
		if _, err := svc.Put(ctx, "acme", memory.PutRequest{Namespace: []string{"users", "u-2"}, Key: "pet", Value: json.RawMessage(`{"fact":"u-2 has a cat named Tom"}`)}); err != nil {
			t.Fatal(err)
		}
		scope := &models.RunMemory{Namespaces: [][]string{{"users", "u-1"}, {"teams", "research"}}}
		call := func(name, args string) (string, error) {
			return svc.RunTool(ctx, memory.ToolCall{Tenant: "acme", RunKey: "run-1", Scope: scope, Name: name, Arguments: args})
		}
		for _, args := range []string{
			`{"namespace":["users","u-2"],"key":"k","value":"x"}`,
			`{"namespace":["users"],"key":"k","value":"x"}`,
			`{"namespace":["teams","research2"],"key":"k","value":"x"}`,
		} {
			if _, err := call(models.MemorySaveToolName, args); err == nil || !strings.Contains(err.Error(), "outside this agent's memory") {
				t.Errorf("save %s: err = %v, want outside", args, err)
			}
		}
		for _, args := range []string{`{"namespace":["users","u-2"],"query":"cat"}`, `{"namespace":["users"],"query":"cat"}`, `{"namespace":[""],"query":"cat"}`} {
			if _, err := call(models.MemorySearchToolName, args); err == nil {
				t.Errorf("search %s: no error", args)
			}
		}
		if items, _ := st.ListMemory(ctx, "acme", []string{"users", "u-2"}, 0, 10); len(items) != 1 {
			t.Errorf("u-2's items = %d, want the one put (nothing written by refused calls)", len(items))
		}
		if _, err := call(models.MemorySaveToolName, `{"key":"drink","value":{"fact":"u-1 drinks green tea"}}`); err != nil {
			t.Fatal(err)
		}
		if _, err := call(models.MemorySaveToolName, `{"namespace":["teams","research","facts"],"key":"sun","value":"the sun is a star"}`); err != nil {
			t.Fatal(err)
		}
		got, err := st.GetMemory(ctx, "acme", []string{"users", "u-1"}, "drink")
		if err != nil || got.RunID != "run-1" {
			t.Fatalf("default namespace: %+v, %v", got, err)
		}
		out, err := call(models.MemorySearchToolName, `{"query":"what does the user drink? also cat star"}`)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(out, "green tea") || !strings.Contains(out, "the sun is a star") || strings.Contains(out, "Tom") {
			t.Errorf("search over the declared namespaces = %s: want u-1's and research's, never u-2's", out)
		}
		if _, err := svc.RunTool(ctx, memory.ToolCall{Tenant: "globex", Scope: scope, Name: models.MemorySearchToolName, Arguments: `{"query":"tea"}`}); err != nil {
			t.Fatal(err)
		} else if out, _ := svc.RunTool(ctx, memory.ToolCall{Tenant: "globex", Scope: scope, Name: models.MemorySearchToolName, Arguments: `{"query":"tea"}`}); strings.Contains(out, "tea") {
			t.Errorf("another tenant's run with the same namespaces found %s", out)
		}
		if _, err := svc.RunTool(ctx, memory.ToolCall{Tenant: "acme", Name: models.MemorySearchToolName, Arguments: `{"query":"tea"}`}); err == nil {
			t.Error("a run without memory searched")
		}
	})
}

// TestSemanticSearch: with an embedder, an item sharing no stemmed word
// with the query's text form but its meaning (here: its hashed words) is
// found, items are ranked by similarity, a filter on the value's fields
// applies, and a write is seen by the next search (the cached vectors are
// reloaded when the namespace's version moves).
func TestSemanticSearch(t *testing.T) {
	storetest.ForEachDialect(t, func(t *testing.T, st *store.Store) {
		ctx := context.Background()
		svc := memory.New(st, wordsEmbedder{dim: 128}, 0)
		ns := []string{"facts"}
		put := func(key, value string) {
			t.Helper()
			if _, err := svc.Put(ctx, "acme", memory.PutRequest{Namespace: ns, Key: key, Value: json.RawMessage(value)}); err != nil {
				t.Fatal(err)
			}
		}
		put("a", `{"kind":"pref","text":"prefers window seats on flights"}`)
		put("b", `{"kind":"pref","text":"allergic to peanuts"}`)
		put("c", `{"kind":"fact","text":"lives near the airport"}`)
		res, err := svc.Search(ctx, "acme", memory.SearchRequest{Namespace: ns, Query: "window seat flight"})
		if err != nil {
			t.Fatal(err)
		}
		if len(res) == 0 || res[0].Key != "a" || res[0].Relevance <= 0.5 {
			t.Fatalf("results = %+v, want a first", res)
		}
		res, _ = svc.Search(ctx, "acme", memory.SearchRequest{Namespace: ns, Query: "airport peanuts window", Filter: map[string]any{"kind": "pref"}})
		for _, r := range res {
			if r.Key == "c" {
				t.Errorf("filter kind=pref returned %+v", r)
			}
		}
		if len(res) != 2 {
			t.Errorf("filtered results = %d, want 2", len(res))
		}
		put("d", `{"kind":"pref","text":"flights with window seats only"}`)
		res, _ = svc.Search(ctx, "acme", memory.SearchRequest{Namespace: ns, Query: "window seats flights"})
		keys := []string{}
		for _, r := range res {
			keys = append(keys, r.Key)
		}
		if len(res) < 2 || !(res[0].Key == "d" || res[1].Key == "d") {
			t.Errorf("after a write the new item is not among the best: %v", keys)
		}
		for _, r := range res {
			if r.Score < 0 || r.Score > 1 || math.Abs(r.Score-(memory.RelevanceWeight*r.Relevance+memory.RecencyWeight*r.Recency)) > 1e-9 {
				t.Errorf("score %v of relevance %v, recency %v", r.Score, r.Relevance, r.Recency)
			}
		}
	})
}

// TestSecretsNeverStored: keys, tokens and passwords in a value or text are
// redacted before the item is stored (and so before it is embedded).
func TestSecretsNeverStored(t *testing.T) {
	st := storetest.SQLite(t)
	svc := memory.New(st, nil, 0)
	svc.Scrubber.Known = []string{"hunter2-known-value"}
	ctx := context.Background()
	_, err := svc.Put(ctx, "acme", memory.PutRequest{Namespace: []string{"n"}, Key: "k",
		Value: json.RawMessage(`{"note":"use sk-abcdefghijklmnopqrstuvwx and AKIAABCDEFGHIJKLMNOP","auth":"Bearer abcdefghijklmnop1234","x":"password: hunter2-known-value"}`)})
	if err != nil {
		t.Fatal(err)
	}
	got, _ := st.GetMemory(ctx, "acme", []string{"n"}, "k")
	for _, secret := range []string{"sk-abcdef", "AKIAABCD", "abcdefghijklmnop1234", "hunter2"} {
		if bytes.Contains(got.Value, []byte(secret)) || strings.Contains(got.SearchText, secret) {
			t.Errorf("%q stored: value %s, text %q", secret, got.Value, got.SearchText)
		}
	}
	if !json.Valid(got.Value) || !strings.Contains(string(got.Value), memory.Redacted) {
		t.Errorf("value = %s", got.Value)
	}
}

// TestExportImport: an export read back by an import into another tenant
// gives the same items.
func TestExportImport(t *testing.T) {
	st := storetest.SQLite(t)
	svc := memory.New(st, nil, 0)
	ctx := context.Background()
	for _, k := range []string{"a", "b", "c"} {
		if _, err := svc.Put(ctx, "acme", memory.PutRequest{Namespace: []string{"n", k}, Key: k, Value: json.RawMessage(`{"v":"` + k + `"}`), TTLSeconds: 3600}); err != nil {
			t.Fatal(err)
		}
	}
	var buf bytes.Buffer
	n, err := svc.Export(ctx, "acme", nil, &buf)
	if err != nil || n != 3 || strings.Count(buf.String(), "\n") != 3 {
		t.Fatalf("export %d, %v: %s", n, err, buf.String())
	}
	imported, skipped, err := svc.Import(ctx, "globex", strings.NewReader(buf.String()+`{"namespace":["old"],"key":"k","value":1,"expires_at":"2000-01-01T00:00:00Z"}`+"\n"))
	if err != nil || imported != 3 || skipped != 1 {
		t.Fatalf("import = %d, %d, %v", imported, skipped, err)
	}
	got, err := svc.Get(ctx, "globex", []string{"n", "b"}, "b")
	if err != nil || string(got.Value) != `{"v":"b"}` || got.ExpiresAt == nil {
		t.Errorf("imported = %+v, %v", got, err)
	}
	if _, _, err := svc.Import(ctx, "globex", strings.NewReader("{\"namespace\":[\"a/b\"],\"key\":\"k\",\"value\":1}\n")); models.ErrorCode(err) != models.CodeInvalidParameters || !strings.Contains(err.Error(), "line 1") {
		t.Errorf("bad line: %v", err)
	}
}
