package api

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/op-stack/executor/auth"
	"github.com/op-stack/executor/models"
	"github.com/op-stack/executor/store"
)

// fakeIdempotencyStore is an in-memory IdempotencyStore with the store's
// semantics: one claim per (tenant, scope, key) at a time, expired records
// claimable again.
type fakeIdempotencyStore struct {
	mu      sync.Mutex
	now     func() time.Time
	records map[[3]string]store.IdempotencyRecord
	// failBegin makes BeginIdempotent fail.
	failBegin error
	abandons  int
}

func newFakeIdempotencyStore() *fakeIdempotencyStore {
	return &fakeIdempotencyStore{now: time.Now, records: map[[3]string]store.IdempotencyRecord{}}
}

func (f *fakeIdempotencyStore) BeginIdempotent(_ context.Context, rec store.IdempotencyRecord) (*store.IdempotencyRecord, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.failBegin != nil {
		return nil, f.failBegin
	}
	id := [3]string{rec.Tenant, rec.Scope, rec.Key}
	if old, found := f.records[id]; found && f.now().Before(old.ExpiresAt) {
		return &old, nil
	}
	rec.Done = false
	f.records[id] = rec
	return nil, nil
}

func (f *fakeIdempotencyStore) FinishIdempotent(_ context.Context, tenant, scope, key string, status int, body []byte) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	id := [3]string{tenant, scope, key}
	rec, found := f.records[id]
	if !found || rec.Done {
		return errors.New("no claim to finish")
	}
	rec.Done, rec.StatusCode, rec.Body = true, status, append([]byte(nil), body...)
	f.records[id] = rec
	return nil
}

func (f *fakeIdempotencyStore) AbandonIdempotent(_ context.Context, tenant, scope, key string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	id := [3]string{tenant, scope, key}
	if rec, found := f.records[id]; found && !rec.Done {
		delete(f.records, id)
		f.abandons++
	}
	return nil
}

func (f *fakeIdempotencyStore) record(tenant, scope, key string) (store.IdempotencyRecord, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	rec, found := f.records[[3]string{tenant, scope, key}]
	return rec, found
}

// idempotencyRig is an engine with one idempotent creation endpoint in
// each dialect, whose handler counts its calls and answers what next says.
type idempotencyRig struct {
	engine *gin.Engine
	store  *fakeIdempotencyStore
	calls  atomic.Int64
	// next decides the handler's response; nil answers 200 with the call
	// number.
	next func(c *gin.Context, call int64)
}

func newIdempotencyRig(t *testing.T) *idempotencyRig {
	t.Helper()
	s := newBareServer()
	rig := &idempotencyRig{store: newFakeIdempotencyStore()}
	r := gin.New()
	r.Use(markDialect, s.recoverPanics, s.limitBodyTo(1<<10), func(c *gin.Context) {
		p := apiKeyPrincipal(c.GetHeader("X-Tenant"), "k")
		if p.Tenant == "" {
			p.Tenant = "t1"
		}
		c.Request = c.Request.WithContext(auth.WithPrincipal(c.Request.Context(), p))
		c.Next()
	})
	handler := func(c *gin.Context) {
		n := rig.calls.Add(1)
		if rig.next != nil {
			rig.next(c, n)
			return
		}
		var in map[string]any
		if err := decodeJSON(c, &in); err != nil {
			s.writeError(c, err)
			return
		}
		ok(c, gin.H{"call": n, "in": in})
	}
	r.POST(ExecutorPrefix+"/runs/start", s.idempotent("runs/start", rig.store, time.Hour), handler)
	r.POST(V1Prefix+"/hierarchical-teams/:id/execute", v1Resource("team_id"), s.idempotent("teams/execute", rig.store, time.Hour), handler)
	rig.engine = r
	return rig
}

// limitBodyTo is limitBody with its own limit, for the rig.
func (s *Server) limitBodyTo(n int64) gin.HandlerFunc {
	return func(c *gin.Context) {
		c.Request.Body = http.MaxBytesReader(c.Writer, c.Request.Body, n)
		c.Next()
	}
}

func (rig *idempotencyRig) post(path, key, body string) *httptest.ResponseRecorder {
	h := http.Header{"Content-Type": {"application/json"}}
	if key != "\x00none" {
		h.Set(IdempotencyKeyHeader, key)
	}
	return serve(rig.engine, http.MethodPost, path, body, h)
}

const startPath = ExecutorPrefix + "/runs/start"

func TestIdempotencyWithoutKeyPassesThrough(t *testing.T) {
	rig := newIdempotencyRig(t)
	for range 2 {
		if w := rig.post(startPath, "\x00none", `{"a":1}`); w.Code != 200 || w.Header().Get(idempotentReplayedHeader) != "" {
			t.Fatalf("status %d, replayed %q", w.Code, w.Header().Get(idempotentReplayedHeader))
		}
	}
	if rig.calls.Load() != 2 || len(rig.store.records) != 0 {
		t.Errorf("%d calls, %d records; want 2 calls and nothing stored", rig.calls.Load(), len(rig.store.records))
	}
}

func TestIdempotencyKeyMustBeValid(t *testing.T) {
	rig := newIdempotencyRig(t)
	for name, key := range map[string]string{"empty": "", "too long": strings.Repeat("k", 256), "control": "a\tb", "non-ASCII": "clé"} {
		w := rig.post(startPath, key, `{}`)
		e := decodeError(t, w)
		if w.Code != 400 || e.ErrorCode != "INVALID_PARAMETERS" || e.Field != IdempotencyKeyHeader {
			t.Errorf("%s key: status %d, error %+v", name, w.Code, e)
		}
	}
	w := rig.post(V1Prefix+"/hierarchical-teams/t1/execute", "", `{}`)
	if e := decodeError(t, w); w.Code != 400 || e.Error.Details["field"] != IdempotencyKeyHeader {
		t.Errorf("v1 empty key: status %d, error %+v", w.Code, e)
	}
	if w := rig.post(startPath, strings.Repeat("k", 255), `{}`); w.Code != 200 {
		t.Errorf("255-character key: status %d", w.Code)
	}
	if rig.calls.Load() != 1 {
		t.Errorf("handler called %d times, want once (for the valid key)", rig.calls.Load())
	}
}

func TestIdempotencyReplaysTheFirstResponse(t *testing.T) {
	rig := newIdempotencyRig(t)
	first := rig.post(startPath, "key-1", `{"task":"x"}`)
	if first.Code != 200 || first.Header().Get(idempotentReplayedHeader) != "" {
		t.Fatalf("first: status %d, replayed %q", first.Code, first.Header().Get(idempotentReplayedHeader))
	}
	again := rig.post(startPath, "key-1", `{"task":"x"}`)
	if again.Code != 200 || again.Body.String() != first.Body.String() {
		t.Fatalf("replay: status %d body %s; want 200 %s", again.Code, again.Body.String(), first.Body.String())
	}
	if again.Header().Get(idempotentReplayedHeader) != "true" || !strings.HasPrefix(again.Header().Get("Content-Type"), "application/json") {
		t.Errorf("replay headers = %v", again.Header())
	}
	if rig.calls.Load() != 1 {
		t.Errorf("handler called %d times, want once", rig.calls.Load())
	}
	// Another tenant's, or another scope's, key of the same name is its own.
	other := serve(rig.engine, http.MethodPost, startPath, `{"task":"x"}`,
		http.Header{"Content-Type": {"application/json"}, IdempotencyKeyHeader: {"key-1"}, "X-Tenant": {"t2"}})
	if other.Code != 200 || other.Header().Get(idempotentReplayedHeader) != "" {
		t.Errorf("other tenant: status %d, replayed %q", other.Code, other.Header().Get(idempotentReplayedHeader))
	}
	if w := rig.post(V1Prefix+"/hierarchical-teams/t1/execute", "key-1", `{"task":"x"}`); w.Header().Get(idempotentReplayedHeader) != "" {
		t.Error("a key of one scope replayed on another")
	}
	if rig.calls.Load() != 3 {
		t.Errorf("handler called %d times, want 3", rig.calls.Load())
	}
}

func TestIdempotencyKeyWithAnotherRequestIsRefused(t *testing.T) {
	rig := newIdempotencyRig(t)
	rig.post(startPath, "key-1", `{"task":"x"}`)
	w := rig.post(startPath, "key-1", `{"task":"y"}`)
	if e := decodeError(t, w); w.Code != 409 || e.ErrorCode != "IDEMPOTENCY_KEY_REUSED" || !strings.Contains(e.Message, "different") {
		t.Errorf("other body: status %d, error %+v", w.Code, e)
	}
	// Whitespace counts: bytes are compared, not JSON values.
	if w := rig.post(startPath, "key-1", `{"task": "x"}`); w.Code != 409 {
		t.Errorf("same JSON, other bytes: status %d, want 409", w.Code)
	}
	// Spec 001: the team id in the path is part of the request.
	rig.post(V1Prefix+"/hierarchical-teams/t1/execute", "key-2", `{}`)
	w = rig.post(V1Prefix+"/hierarchical-teams/t2/execute", "key-2", `{}`)
	if e := decodeError(t, w); w.Code != 409 || e.Code != "IDEMPOTENCY_KEY_REUSED" {
		t.Errorf("other team: status %d, error %+v", w.Code, e)
	}
	if rig.calls.Load() != 2 {
		t.Errorf("handler called %d times, want 2", rig.calls.Load())
	}
}

func TestIdempotencyKeyInProgress(t *testing.T) {
	rig := newIdempotencyRig(t)
	release := make(chan struct{})
	started := make(chan struct{})
	rig.next = func(c *gin.Context, _ int64) {
		close(started)
		<-release
		ok(c, "done")
	}
	done := make(chan *httptest.ResponseRecorder)
	go func() { done <- rig.post(startPath, "key-1", `{}`) }()
	<-started
	w := rig.post(startPath, "key-1", `{}`)
	e := decodeError(t, w)
	if w.Code != 409 || e.ErrorCode != "IDEMPOTENCY_KEY_REUSED" || !strings.Contains(e.Message, "in progress") || w.Header().Get("Retry-After") != "1" {
		t.Errorf("while in progress: status %d, Retry-After %q, error %+v", w.Code, w.Header().Get("Retry-After"), e)
	}
	close(release)
	if first := <-done; first.Code != 200 {
		t.Fatalf("first: status %d", first.Code)
	}
	if w := rig.post(startPath, "key-1", `{}`); w.Code != 200 || w.Header().Get(idempotentReplayedHeader) != "true" {
		t.Errorf("after: status %d, replayed %q", w.Code, w.Header().Get(idempotentReplayedHeader))
	}
}

func TestIdempotencyConcurrentDoubleSubmitRunsOnce(t *testing.T) {
	rig := newIdempotencyRig(t)
	rig.next = func(c *gin.Context, n int64) {
		time.Sleep(5 * time.Millisecond)
		ok(c, n)
	}
	const clients = 20
	var wg sync.WaitGroup
	codes := make([]int, clients)
	start := make(chan struct{})
	for i := range clients {
		wg.Go(func() {
			<-start
			codes[i] = rig.post(startPath, "double", `{"task":"x"}`).Code
		})
	}
	close(start)
	wg.Wait()
	if n := rig.calls.Load(); n != 1 {
		t.Fatalf("handler called %d times for one key, want once", n)
	}
	for i, code := range codes {
		if code != 200 && code != 409 {
			t.Errorf("client %d: status %d, want 200 (run or replayed) or 409 (in progress)", i, code)
		}
	}
}

func TestIdempotencyKeepsClientErrorsButNotServerErrors(t *testing.T) {
	s := newBareServer()
	rig := newIdempotencyRig(t)
	rig.next = func(c *gin.Context, n int64) {
		switch {
		case n == 1:
			s.writeError(c, models.Errorf(models.CodeHierarchyNotFound, "no such hierarchy"))
		default:
			ok(c, n)
		}
	}
	for range 2 {
		if w := rig.post(startPath, "four", `{}`); w.Code != 404 {
			t.Fatalf("status %d, want the kept 404", w.Code)
		}
	}
	if rig.calls.Load() != 1 {
		t.Fatalf("a 4xx was not kept: %d calls", rig.calls.Load())
	}

	for name, fail := range map[string]func(c *gin.Context){
		"500":   func(c *gin.Context) { s.writeError(c, errors.New("boom")) },
		"503":   func(c *gin.Context) { s.writeError(c, models.Errorf(models.CodeUnavailable, "later")) },
		"429":   func(c *gin.Context) { s.writeError(c, models.Errorf(models.CodeRateLimited, "later")) },
		"panic": func(c *gin.Context) { panic("handler bug") },
	} {
		t.Run(name, func(t *testing.T) {
			rig.calls.Store(0)
			rig.next = func(c *gin.Context, n int64) {
				if n == 1 {
					fail(c)
					return
				}
				ok(c, n)
			}
			key := "retry-" + name
			if w := rig.post(startPath, key, `{}`); w.Code < 429 {
				t.Fatalf("first: status %d", w.Code)
			}
			if _, found := rig.store.record("t1", "runs/start", key); found {
				t.Fatal("the claim was kept after a failure")
			}
			w := rig.post(startPath, key, `{}`)
			if w.Code != 200 || w.Header().Get(idempotentReplayedHeader) != "" || rig.calls.Load() != 2 {
				t.Errorf("retry: status %d, replayed %q, %d calls; want it run again", w.Code, w.Header().Get(idempotentReplayedHeader), rig.calls.Load())
			}
		})
	}
}

func TestIdempotencyExpiredKeyRunsAgain(t *testing.T) {
	rig := newIdempotencyRig(t)
	now := time.Now()
	rig.store.now = func() time.Time { return now }
	rig.post(startPath, "k", `{}`)
	now = now.Add(2 * time.Hour) // the rig's TTL is an hour
	if w := rig.post(startPath, "k", `{"other":true}`); w.Code != 200 || w.Header().Get(idempotentReplayedHeader) != "" {
		t.Errorf("expired key: status %d, replayed %q", w.Code, w.Header().Get(idempotentReplayedHeader))
	}
	if rig.calls.Load() != 2 {
		t.Errorf("%d calls, want 2", rig.calls.Load())
	}
}

func TestIdempotencyBodyReachesTheHandlerAndIsLimited(t *testing.T) {
	rig := newIdempotencyRig(t)
	w := rig.post(startPath, "k", `{"task":"hello"}`)
	if w.Code != 200 || !strings.Contains(w.Body.String(), `"task":"hello"`) {
		t.Fatalf("status %d body %s: the handler did not get the body", w.Code, w.Body.String())
	}
	w = rig.post(startPath, "big", `{"task":"`+strings.Repeat("x", 2<<10)+`"}`)
	if e := decodeError(t, w); w.Code != 413 || e.ErrorCode != "RESOURCE_LIMIT_EXCEEDED" {
		t.Errorf("oversized body: status %d, error %+v", w.Code, e)
	}
	if _, found := rig.store.record("t1", "runs/start", "big"); found {
		t.Error("an oversized request claimed its key")
	}
}

func TestIdempotencyStoreFailure(t *testing.T) {
	rig := newIdempotencyRig(t)
	rig.store.failBegin = errors.New("database on fire")
	w := rig.post(startPath, "k", `{}`)
	if w.Code != 500 || strings.Contains(w.Body.String(), "fire") || rig.calls.Load() != 0 {
		t.Errorf("status %d body %s, %d calls", w.Code, w.Body.String(), rig.calls.Load())
	}
}
