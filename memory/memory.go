// Package memory is a tenant's long-term memory (issue 29,
// docs/memory.md): items under namespace paths, searched by full text
// always and by meaning when an embedding model is configured, ranked by
// relevance and recency; the tools agents use it through; export and
// import as JSON lines. The rows live in store/ (memory_item).
package memory

import (
	"container/heap"
	"context"
	"encoding/json"
	"math"
	"reflect"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/op-stack/executor/models"
	"github.com/op-stack/executor/store"
)

// Ranking weights (docs/memory.md#ranking). A result's score is
// RelevanceWeight × relevance + RecencyWeight × recency, each in [0, 1].
// Relevance is, with an embedding model, SemanticWeight × the cosine
// similarity (below 0 counts as 0) + (1 − SemanticWeight) × the text rank;
// without one, the text rank alone. The text rank is the database's rank
// (ts_rank_cd, or −bm25 on SQLite) divided by the best among the
// candidates. Recency halves every RecencyHalfLife since the item was last
// written. A search without query text ranks by recency alone.
var (
	RelevanceWeight = 0.8
	RecencyWeight   = 0.2
	SemanticWeight  = 0.7
	RecencyHalfLife = 30 * 24 * time.Hour
)

// Limits of a search.
const (
	DefaultSearchLimit = 10
	MaxSearchLimit     = 100
	// candidatesPerResult is how many candidates of each kind (semantic,
	// text) a search ranks per result asked for: filters on the value
	// drop some.
	candidatesPerResult = 10
	minCandidates       = 100
)

// Service is the memory of every tenant, over the store.
type Service struct {
	Store *store.Store
	// Embedder turns texts into vectors; nil: full-text search only.
	Embedder Embedder
	// Scrubber redacts secrets from what is written.
	Scrubber Scrubber
	// Now is the clock (nil: time.Now).
	Now   func() time.Time
	cache vectorCache
}

// New returns a service over st; embedder may be nil. maxCachedVectors
// bounds the vectors held in memory (0: DefaultMaxCachedVectors).
func New(st *store.Store, embedder Embedder, maxCachedVectors int) *Service {
	if maxCachedVectors <= 0 {
		maxCachedVectors = DefaultMaxCachedVectors
	}
	return &Service{Store: st, Embedder: embedder, cache: vectorCache{max: maxCachedVectors, entries: map[string]*cachedNamespace{}}}
}

func (s *Service) now() time.Time {
	if s.Now != nil {
		return s.Now()
	}
	return time.Now()
}

// Item is an item as the API and the tools show it.
type Item struct {
	Namespace []string        `json:"namespace"`
	Key       string          `json:"key"`
	Value     json.RawMessage `json:"value"`
	// Text is what search reads; "" when it is the value's own text.
	Text      string     `json:"text,omitempty"`
	CreatedAt time.Time  `json:"created_at"`
	UpdatedAt time.Time  `json:"updated_at"`
	ExpiresAt *time.Time `json:"expires_at,omitempty"`
}

// Result is a search's item with its score and the parts of it.
type Result struct {
	Item
	Score     float64 `json:"score"`
	Relevance float64 `json:"relevance"`
	Recency   float64 `json:"recency"`
}

// PutRequest writes one item.
type PutRequest struct {
	Namespace []string        `json:"namespace"`
	Key       string          `json:"key"`
	Value     json.RawMessage `json:"value"`
	// Text is what to search by; "" derives it from the value (its
	// strings, or the JSON).
	Text string `json:"text,omitempty"`
	// TTLSeconds > 0 makes the item expire that long after this write.
	TTLSeconds int `json:"ttl_seconds,omitempty"`
	// Index false stores no embedding (full-text search still finds it).
	Index *bool `json:"index,omitempty"`
	// runKey is the writing run's key (store.Run.ID), set by the tools.
	runKey string
}

// SearchRequest searches the items under a namespace prefix.
type SearchRequest struct {
	// Namespace is the prefix searched ([] : all of the tenant's).
	Namespace []string `json:"namespace"`
	Query     string   `json:"query,omitempty"`
	// Filter keeps items whose value is an object with these top-level
	// fields equal to these JSON values.
	Filter map[string]any `json:"filter,omitempty"`
	Limit  int            `json:"limit,omitempty"`
	Offset int            `json:"offset,omitempty"`
}

// checkValue checks a value is one JSON value of at most the store's size.
func checkValue(field string, v json.RawMessage) (any, error) {
	if len(v) == 0 {
		return nil, models.FieldError(field, "is required (any JSON value)")
	}
	if len(v) > store.MaxMemoryValueBytes {
		return nil, models.FieldError(field, "must be at most %d bytes of JSON, got %d", store.MaxMemoryValueBytes, len(v))
	}
	var parsed any
	if err := json.Unmarshal(v, &parsed); err != nil {
		return nil, models.FieldError(field, "must be JSON: %v", err)
	}
	return parsed, nil
}

// textOf is the searchable text of a value: its strings (keys with them),
// in order, or its JSON when it has none.
func textOf(v any) string {
	var parts []string
	var walk func(any)
	walk = func(x any) {
		switch t := x.(type) {
		case string:
			parts = append(parts, t)
		case []any:
			for _, e := range t {
				walk(e)
			}
		case map[string]any:
			keys := make([]string, 0, len(t))
			for k := range t {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			for _, k := range keys {
				parts = append(parts, k+":")
				walk(t[k])
			}
		case nil:
		default:
			raw, _ := json.Marshal(t)
			parts = append(parts, string(raw))
		}
	}
	walk(v)
	return strings.Join(parts, " ")
}

// Put writes an item of tenant, redacting secrets from its value and text
// first, and embeds its text when an embedding model is configured.
func (s *Service) Put(ctx context.Context, tenant string, req PutRequest) (*Item, error) {
	if err := store.CheckMemoryPath("namespace", req.Namespace, false); err != nil {
		return nil, err
	}
	if err := store.CheckMemoryKey("key", req.Key); err != nil {
		return nil, err
	}
	parsed, err := checkValue("value", req.Value)
	if err != nil {
		return nil, err
	}
	if req.TTLSeconds < 0 {
		return nil, models.FieldError("ttl_seconds", "must be 0 (no expiry) or more, got %d", req.TTLSeconds)
	}
	// Secrets never reach the store: the value's strings and the text are
	// scrubbed before anything else reads them.
	value, _ := json.Marshal(s.Scrubber.scrubJSON(parsed))
	text := req.Text
	if strings.TrimSpace(text) == "" {
		text = textOf(parsed)
	}
	text, _ = s.Scrubber.Scrub(text)
	if len(text) > store.MaxMemorySearchTextLength {
		text = text[:store.MaxMemorySearchTextLength]
	}
	it := &store.MemoryItem{TenantID: tenant, Namespace: req.Namespace, Key: req.Key, Value: value, SearchText: text, RunID: req.runKey}
	if req.TTLSeconds > 0 {
		exp := s.now().Add(time.Duration(req.TTLSeconds) * time.Second)
		it.ExpiresAt = &exp
	}
	if s.Embedder != nil && (req.Index == nil || *req.Index) && strings.TrimSpace(text) != "" {
		vecs, err := s.Embedder.Embed(ctx, []string{text})
		if err != nil {
			return nil, &models.Error{Code: models.CodeUnavailable, Message: "memory: the embedding model is unavailable", Err: err}
		}
		it.Embedding, it.EmbeddingModel = vecs[0], s.Embedder.Model()
	}
	if err := s.Store.PutMemory(ctx, it); err != nil {
		return nil, err
	}
	out := itemOf(*it)
	return &out, nil
}

func itemOf(it store.MemoryItem) Item {
	return Item{Namespace: it.Namespace, Key: it.Key, Value: it.Value, Text: it.SearchText, CreatedAt: it.CreatedAt, UpdatedAt: it.UpdatedAt, ExpiresAt: it.ExpiresAt}
}

// Get reads one item.
func (s *Service) Get(ctx context.Context, tenant string, ns []string, key string) (*Item, error) {
	if err := store.CheckMemoryPath("namespace", ns, false); err != nil {
		return nil, err
	}
	if err := store.CheckMemoryKey("key", key); err != nil {
		return nil, err
	}
	it, err := s.Store.GetMemory(ctx, tenant, ns, key)
	if err != nil {
		return nil, err
	}
	out := itemOf(*it)
	return &out, nil
}

// Delete deletes one item.
func (s *Service) Delete(ctx context.Context, tenant string, ns []string, key string) error {
	if err := store.CheckMemoryPath("namespace", ns, false); err != nil {
		return err
	}
	if err := store.CheckMemoryKey("key", key); err != nil {
		return err
	}
	return s.Store.DeleteMemory(ctx, tenant, ns, key)
}

// ListNamespaces lists the namespaces under prefix.
func (s *Service) ListNamespaces(ctx context.Context, tenant string, prefix []string, maxDepth, limit, offset int) ([][]string, error) {
	if err := store.CheckMemoryPath("prefix", prefix, true); err != nil {
		return nil, err
	}
	return s.Store.ListMemoryNamespaces(ctx, tenant, prefix, maxDepth, limit, offset)
}

// candidate is an item id a search ranks, with what is known of it.
type candidate struct {
	cosine, text float64
	hasCos       bool
}

// Search finds tenant's items under req.Namespace: the best by score
// (see the weights), filtered on their values.
func (s *Service) Search(ctx context.Context, tenant string, req SearchRequest) ([]Result, error) {
	if err := store.CheckMemoryPath("namespace", req.Namespace, true); err != nil {
		return nil, err
	}
	if req.Limit <= 0 {
		req.Limit = DefaultSearchLimit
	}
	if req.Limit > MaxSearchLimit {
		return nil, models.FieldError("limit", "must be at most %d, got %d", MaxSearchLimit, req.Limit)
	}
	if req.Offset < 0 {
		return nil, models.FieldError("offset", "must be 0 or more, got %d", req.Offset)
	}
	want := req.Offset + req.Limit
	pool := max(want*candidatesPerResult, minCandidates)
	query := strings.TrimSpace(req.Query)
	cands := map[int64]*candidate{}
	var items map[int64]store.MemoryItem

	if query == "" {
		// Newest first: recency is the whole score.
		hits, err := s.Store.SearchMemoryText(ctx, tenant, req.Namespace, "", pool, 0)
		if err != nil {
			return nil, err
		}
		items = map[int64]store.MemoryItem{}
		for _, h := range hits {
			items[h.Item.ID] = h.Item
			cands[h.Item.ID] = &candidate{}
		}
	} else {
		hits, err := s.Store.SearchMemoryText(ctx, tenant, req.Namespace, query, pool, 0)
		if err != nil {
			return nil, err
		}
		best := 0.0
		for _, h := range hits {
			best = math.Max(best, h.Rank)
		}
		items = map[int64]store.MemoryItem{}
		for _, h := range hits {
			c := &candidate{}
			if best > 0 {
				c.text = h.Rank / best
			}
			cands[h.Item.ID] = c
			items[h.Item.ID] = h.Item
		}
		if s.Embedder != nil {
			sem, err := s.semantic(ctx, tenant, req.Namespace, query, pool)
			if err != nil {
				return nil, err
			}
			var missing []int64
			for id, cos := range sem {
				c := cands[id]
				if c == nil {
					c = &candidate{}
					cands[id] = c
					missing = append(missing, id)
				}
				c.cosine, c.hasCos = cos, true
			}
			more, err := s.Store.MemoryItemsByID(ctx, tenant, missing)
			if err != nil {
				return nil, err
			}
			for _, it := range more {
				items[it.ID] = it
			}
		}
	}

	now := s.now()
	var out []Result
	for id, c := range cands {
		it, found := items[id]
		if !found || !matches(it.Value, req.Filter) {
			continue
		}
		rec := math.Pow(0.5, now.Sub(it.UpdatedAt).Hours()/RecencyHalfLife.Hours())
		rec = math.Min(1, math.Max(0, rec))
		r := Result{Item: itemOf(it), Recency: rec}
		switch {
		case query == "":
			r.Score = rec
		case s.Embedder != nil:
			cos := 0.0
			if c.hasCos {
				cos = math.Max(0, c.cosine)
			}
			r.Relevance = SemanticWeight*cos + (1-SemanticWeight)*c.text
			r.Score = RelevanceWeight*r.Relevance + RecencyWeight*rec
		default:
			r.Relevance = c.text
			r.Score = RelevanceWeight*r.Relevance + RecencyWeight*rec
		}
		out = append(out, r)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Score != out[j].Score {
			return out[i].Score > out[j].Score
		}
		return out[i].UpdatedAt.After(out[j].UpdatedAt)
	})
	if req.Offset >= len(out) {
		return []Result{}, nil
	}
	out = out[req.Offset:]
	if len(out) > req.Limit {
		out = out[:req.Limit]
	}
	return out, nil
}

// matches reports whether value is an object whose fields equal filter's.
func matches(value json.RawMessage, filter map[string]any) bool {
	if len(filter) == 0 {
		return true
	}
	var obj map[string]any
	if json.Unmarshal(value, &obj) != nil {
		return false
	}
	for k, want := range filter {
		got, ok := obj[k]
		if !ok || !reflect.DeepEqual(normalizeJSON(got), normalizeJSON(want)) {
			return false
		}
	}
	return true
}

// normalizeJSON makes Go values from a request and from a stored value
// comparable (numbers as float64).
func normalizeJSON(v any) any {
	raw, _ := json.Marshal(v)
	var out any
	_ = json.Unmarshal(raw, &out)
	return out
}

// semantic returns the cosine similarity to query of the best n items with
// vectors under prefix, by id.
func (s *Service) semantic(ctx context.Context, tenant string, prefix []string, query string, n int) (map[int64]float64, error) {
	vecs, err := s.Embedder.Embed(ctx, []string{query})
	if err != nil {
		return nil, &models.Error{Code: models.CodeUnavailable, Message: "memory: the embedding model is unavailable", Err: err}
	}
	q := normalized(vecs[0])
	versions, err := s.Store.MemoryNamespaceVersions(ctx, tenant, prefix)
	if err != nil {
		return nil, err
	}
	model := s.Embedder.Model()
	now := s.now()
	top := &topK{}
	for ns, version := range versions {
		c, err := s.cache.get(ctx, s.Store, tenant, ns, model, version)
		if err != nil {
			return nil, err
		}
		c.scan(q, now, n, top)
	}
	out := make(map[int64]float64, top.Len())
	for _, h := range *top {
		out[h.id] = float64(h.score)
	}
	return out, nil
}

// normalized is v scaled to length 1 (cosine similarity is then a dot
// product).
func normalized(v []float32) []float32 {
	var sum float64
	for _, f := range v {
		sum += float64(f) * float64(f)
	}
	out := make([]float32, len(v))
	if sum == 0 {
		return out
	}
	inv := float32(1 / math.Sqrt(sum))
	for i, f := range v {
		out[i] = f * inv
	}
	return out
}

// DefaultMaxCachedVectors bounds the vectors a process keeps (about 1 GB at
// 256 dimensions); the least recently searched namespaces go first.
const DefaultMaxCachedVectors = 1_000_000

// vectorCache keeps each namespace's vectors, normalised and contiguous,
// until its version moves: a search then reads one row of
// memory_namespace, not every vector.
type vectorCache struct {
	mu      sync.Mutex
	max     int
	total   int
	entries map[string]*cachedNamespace
	load    sync.Map // key → *sync.Mutex: one load per namespace at once
}

type cachedNamespace struct {
	key      string
	version  int64
	dim      int
	ids      []int64
	expires  []int64 // unix nanoseconds; 0: never
	vectors  []float32
	lastUsed time.Time
}

func (c *vectorCache) get(ctx context.Context, st *store.Store, tenant, ns, model string, version int64) (*cachedNamespace, error) {
	key := tenant + "\x00" + ns + "\x00" + model
	c.mu.Lock()
	e := c.entries[key]
	if e != nil && e.version == version {
		e.lastUsed = time.Now()
		c.mu.Unlock()
		return e, nil
	}
	c.mu.Unlock()
	lk, _ := c.load.LoadOrStore(key, &sync.Mutex{})
	lk.(*sync.Mutex).Lock()
	defer lk.(*sync.Mutex).Unlock()
	c.mu.Lock()
	if e := c.entries[key]; e != nil && e.version == version {
		c.mu.Unlock()
		return e, nil
	}
	c.mu.Unlock()
	rows, err := st.MemoryVectors(ctx, tenant, ns, model)
	if err != nil {
		return nil, err
	}
	e = &cachedNamespace{key: key, version: version, lastUsed: time.Now()}
	for _, r := range rows {
		if e.dim == 0 {
			e.dim = len(r.Vector)
		}
		if len(r.Vector) != e.dim {
			continue // a vector of another size cannot be compared
		}
		e.ids = append(e.ids, r.ID)
		var exp int64
		if r.ExpiresAt != nil {
			exp = r.ExpiresAt.UnixNano()
		}
		e.expires = append(e.expires, exp)
		e.vectors = append(e.vectors, normalized(r.Vector)...)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if old := c.entries[key]; old != nil {
		c.total -= len(old.ids)
	}
	c.entries[key] = e
	c.total += len(e.ids)
	for c.total > c.max && len(c.entries) > 1 {
		var oldest *cachedNamespace
		for _, x := range c.entries {
			if x != e && (oldest == nil || x.lastUsed.Before(oldest.lastUsed)) {
				oldest = x
			}
		}
		if oldest == nil {
			break
		}
		delete(c.entries, oldest.key)
		c.total -= len(oldest.ids)
	}
	return e, nil
}

// scan adds the namespace's live vectors most similar to q to top, which
// keeps the best n.
func (e *cachedNamespace) scan(q []float32, now time.Time, n int, top *topK) {
	if e.dim != len(q) || e.dim == 0 {
		return
	}
	nowNano := now.UnixNano()
	q = q[:e.dim]
	for i, id := range e.ids {
		if exp := e.expires[i]; exp != 0 && exp <= nowNano {
			continue
		}
		dot := dot32(e.vectors[i*e.dim:(i+1)*e.dim:(i+1)*e.dim], q)
		if top.Len() < n {
			heap.Push(top, scored{id, dot})
		} else if dot > (*top)[0].score {
			(*top)[0] = scored{id, dot}
			heap.Fix(top, 0)
		}
	}
}

// dot is the dot product of two vectors of one length, four lanes at a
// time (independent sums let the CPU overlap the multiplications).
func dot32(v, q []float32) float32 {
	q = q[:len(v)]
	var s0, s1, s2, s3 float32
	j := 0
	for ; j+4 <= len(v); j += 4 {
		s0 += v[j] * q[j]
		s1 += v[j+1] * q[j+1]
		s2 += v[j+2] * q[j+2]
		s3 += v[j+3] * q[j+3]
	}
	for ; j < len(v); j++ {
		s0 += v[j] * q[j]
	}
	return s0 + s1 + s2 + s3
}

type scored struct {
	id    int64
	score float32
}

// topK is a min-heap of the best scores seen.
type topK []scored

func (h topK) Len() int           { return len(h) }
func (h topK) Less(i, j int) bool { return h[i].score < h[j].score }
func (h topK) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *topK) Push(x any)        { *h = append(*h, x.(scored)) }
func (h *topK) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}
