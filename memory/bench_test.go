//go:build unix

package memory_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/op-stack/executor/memory"
	"github.com/op-stack/executor/store"
	"github.com/op-stack/executor/store/storetest"
)

// processCPU is the user and system CPU time this process has used.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// benchVocabulary is the words the benchmark's items are made of.
func benchVocabulary(n int) []string {
	words := make([]string, n)
	for i := range words {
		words[i] = fmt.Sprintf("w%x", i*7919+13)
	}
	return words
}

// BenchmarkSearch measures one search of a namespace of 1,000, 10,000 and
// 100,000 items on PostgreSQL (TEST_DATABASE_URL): full text (tsvector,
// GIN) and semantic (256-dimension vectors, cosine over the namespace's
// cached vectors, plus the full-text candidates it merges). Each item is
// 12 words of a 5,000-word vocabulary; each query 3 words. Semantic's
// vectors are loaded once per namespace version: the "load-ms" metric is
// that first load, the ns/op the searches after it. docs/memory.md
// records the figures:
//
//	TEST_DATABASE_URL=postgres://... go test ./memory -run '^$' -bench BenchmarkSearch -benchtime 50x
func BenchmarkSearch(b *testing.B) {
	st := storetest.Postgres(b)
	ctx := context.Background()
	emb := wordsEmbedder{dim: 256}
	words := benchVocabulary(5000)
	rng := rand.New(rand.NewSource(1))
	sentence := func(n int) string {
		parts := make([]string, n)
		for i := range parts {
			parts[i] = words[rng.Intn(len(words))]
		}
		return strings.Join(parts, " ")
	}
	for _, size := range []int{1_000, 10_000, 100_000} {
		ns := []string{"bench", fmt.Sprint(size)}
		items := make([]store.MemoryItem, size)
		texts := make([]string, size)
		for i := range items {
			texts[i] = sentence(12)
		}
		vecs, _ := emb.Embed(ctx, texts)
		for i := range items {
			value, _ := json.Marshal(map[string]any{"text": texts[i], "n": i % 10})
			items[i] = store.MemoryItem{TenantID: "bench", Namespace: ns, Key: fmt.Sprintf("k%d", i), Value: value, SearchText: texts[i],
				Embedding: vecs[i], EmbeddingModel: emb.Model()}
		}
		seeded := time.Now()
		if err := st.PutMemoryBatch(ctx, items); err != nil {
			b.Fatal(err)
		}
		// The steady state: autovacuum would have merged the GIN index's
		// pending list and analysed the table by the time of real searches.
		if err := st.AnalyzeMemory(ctx); err != nil {
			b.Fatal(err)
		}
		b.Logf("%d items seeded in %v", size, time.Since(seeded).Round(time.Millisecond))
		queries := make([]string, 64)
		for i := range queries {
			queries[i] = sentence(3)
		}
		for _, kind := range []string{"fulltext", "semantic"} {
			svc := memory.New(st, nil, 0)
			if kind == "semantic" {
				svc = memory.New(st, emb, 0)
			}
			b.Run(fmt.Sprintf("%s/items=%d", kind, size), func(b *testing.B) {
				load := time.Now()
				if _, err := svc.Search(ctx, "bench", memory.SearchRequest{Namespace: ns, Query: queries[0]}); err != nil {
					b.Fatal(err)
				}
				loadMs := float64(time.Since(load).Microseconds()) / 1000
				b.ResetTimer()
				cpu0 := processCPU()
				for i := 0; i < b.N; i++ {
					res, err := svc.Search(ctx, "bench", memory.SearchRequest{Namespace: ns, Query: queries[i%len(queries)], Limit: 10})
					if err != nil {
						b.Fatal(err)
					}
					if len(res) == 0 {
						b.Fatalf("no result for %q", queries[i%len(queries)])
					}
				}
				b.ReportMetric(loadMs, "load-ms")
				// This process's CPU time per search (the database's is not
				// in it): on a loaded machine, wall time measures the queue.
				b.ReportMetric(float64((processCPU()-cpu0).Microseconds())/1000/float64(b.N), "client-cpu-ms/op")
			})
		}
	}
}
