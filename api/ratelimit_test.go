package api

import (
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/op-stack/executor/auth"
)

// newBareServer is the least Server that writeError works with.
func newBareServer() *Server {
	gin.SetMode(gin.ReleaseMode)
	return &Server{log: slog.New(slog.NewTextHandler(io.Discard, nil))}
}

// withPrincipal stands in for the authentication middleware.
func withPrincipal(p auth.Principal) gin.HandlerFunc {
	return func(c *gin.Context) {
		c.Request = c.Request.WithContext(auth.WithPrincipal(c.Request.Context(), p))
		c.Next()
	}
}

func apiKeyPrincipal(tenant, keyID string) auth.Principal {
	return auth.Principal{Tenant: tenant, Scopes: []auth.Scope{auth.ScopeRunsWrite}, Method: auth.MethodAPIKey, KeyID: keyID}
}

// errorEnvelope decodes either dialect's error body far enough to check it.
type errorEnvelope struct {
	Code      any    `json:"code"`
	Message   string `json:"message"`
	ErrorCode string `json:"error_code"`
	Field     string `json:"field"`
	Error     struct {
		Message string         `json:"message"`
		Details map[string]any `json:"details"`
	} `json:"error"`
}

func decodeError(t *testing.T, w *httptest.ResponseRecorder) errorEnvelope {
	t.Helper()
	var e errorEnvelope
	if err := json.Unmarshal(w.Body.Bytes(), &e); err != nil {
		t.Fatalf("status %d, body is not JSON: %q", w.Code, w.Body.String())
	}
	return e
}

// serve sends one request through h.
func serve(h http.Handler, method, path, body string, header http.Header) *httptest.ResponseRecorder {
	var r io.Reader
	if body != "" {
		r = strings.NewReader(body)
	}
	req := httptest.NewRequest(method, path, r)
	for k, vs := range header {
		for _, v := range vs {
			req.Header.Add(k, v)
		}
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, req)
	return w
}

func rateLimitedEngine(s *Server, l RateLimit, keyID string) *gin.Engine {
	r := gin.New()
	r.Use(markDialect, withPrincipal(apiKeyPrincipal("t1", keyID)), s.rateLimit(l))
	r.GET("/healthz", func(c *gin.Context) { c.String(http.StatusOK, "ok") })
	r.POST(ExecutorPrefix+"/runs/get", func(c *gin.Context) { ok(c, nil) })
	r.GET(V1Prefix+"/executions/:id", func(c *gin.Context) { c.JSON(http.StatusOK, gin.H{"success": true}) })
	return r
}

func TestRateLimitRefusesOverTheBurstWithRetryAfter(t *testing.T) {
	s := newBareServer()
	r := rateLimitedEngine(s, RateLimit{RPS: 0.5, Burst: 3}, "k1")
	for i := range 3 {
		if w := serve(r, http.MethodPost, ExecutorPrefix+"/runs/get", "", nil); w.Code != http.StatusOK {
			t.Fatalf("request %d within the burst: status %d", i+1, w.Code)
		}
	}
	w := serve(r, http.MethodPost, ExecutorPrefix+"/runs/get", "", nil)
	if w.Code != http.StatusTooManyRequests {
		t.Fatalf("request over the burst: status %d, want 429", w.Code)
	}
	// One token every 2 s.
	if got := w.Header().Get("Retry-After"); got != "2" {
		t.Errorf("Retry-After = %q, want 2", got)
	}
	if e := decodeError(t, w); e.ErrorCode != "RATE_LIMIT_EXCEEDED" || e.Code != float64(42901) {
		t.Errorf("error = %+v", e)
	}
	// Spec 001's dialect.
	w = serve(r, http.MethodGet, V1Prefix+"/executions/x", "", nil)
	if e := decodeError(t, w); w.Code != http.StatusTooManyRequests || e.Code != "RATE_LIMIT_EXCEEDED" || w.Header().Get("Retry-After") == "" {
		t.Errorf("v1: status %d, error %+v, Retry-After %q", w.Code, e, w.Header().Get("Retry-After"))
	}
	// Probes are never limited.
	for range 5 {
		if w := serve(r, http.MethodGet, "/healthz", "", nil); w.Code != http.StatusOK {
			t.Fatalf("/healthz: status %d", w.Code)
		}
	}
}

func TestRateLimitIsPerKey(t *testing.T) {
	s := newBareServer()
	l := RateLimit{RPS: 0.001, Burst: 1}
	lim := s.rateLimit(l)
	r := gin.New()
	r.Use(func(c *gin.Context) {
		p := apiKeyPrincipal("t1", c.GetHeader("X-Key"))
		c.Request = c.Request.WithContext(auth.WithPrincipal(c.Request.Context(), p))
		c.Next()
	}, lim)
	r.GET("/x", func(c *gin.Context) { c.Status(http.StatusOK) })
	for _, key := range []string{"a", "b", "c"} {
		if w := serve(r, http.MethodGet, "/x", "", http.Header{"X-Key": {key}}); w.Code != http.StatusOK {
			t.Fatalf("first request of key %s: status %d", key, w.Code)
		}
	}
	if w := serve(r, http.MethodGet, "/x", "", http.Header{"X-Key": {"a"}}); w.Code != http.StatusTooManyRequests {
		t.Fatalf("second request of key a: status %d, want 429", w.Code)
	}
}

func TestRateLimitOffPassesEverything(t *testing.T) {
	s := newBareServer()
	r := rateLimitedEngine(s, RateLimit{RPS: 0, Burst: 1}, "k1")
	for i := range 100 {
		if w := serve(r, http.MethodPost, ExecutorPrefix+"/runs/get", "", nil); w.Code != http.StatusOK {
			t.Fatalf("request %d: status %d", i, w.Code)
		}
	}
}

func TestRateLimitDoesNotCountRefusedRequests(t *testing.T) {
	now := time.Unix(1_000_000, 0)
	lim := newRateLimiter(RateLimit{RPS: 1, Burst: 1}, time.Hour, 10, func() time.Time { return now })
	if _, ok := lim.allow("k"); !ok {
		t.Fatal("first request refused")
	}
	// Hammering while refused must not push the next token further away.
	for range 50 {
		wait, ok := lim.allow("k")
		if ok || wait <= 0 || wait > time.Second {
			t.Fatalf("refused request: ok %v, wait %v", ok, wait)
		}
	}
	now = now.Add(time.Second)
	if _, ok := lim.allow("k"); !ok {
		t.Fatal("a second later the bucket holds a token again, yet the request was refused")
	}
}

func TestRateLimiterMemoryIsBounded(t *testing.T) {
	now := time.Unix(1_000_000, 0)
	lim := newRateLimiter(RateLimit{RPS: 10, Burst: 10}, 10*time.Minute, 100, func() time.Time { return now })
	// Many callers at once: the cap holds.
	for i := range 10_000 {
		lim.allow(fmt.Sprintf("api_key:k%d", i))
		if n := lim.size(); n > 100 {
			t.Fatalf("%d limiters after %d callers, cap 100", n, i+1)
		}
	}
	// The most recently used are the ones kept.
	lim.mu.Lock()
	_, newest := lim.entries["api_key:k9999"]
	_, oldest := lim.entries["api_key:k0"]
	lim.mu.Unlock()
	if !newest || oldest {
		t.Errorf("kept newest %v, kept oldest %v; want the least recently used dropped", newest, oldest)
	}
	// Idle callers go away.
	now = now.Add(10 * time.Minute)
	lim.allow("api_key:fresh")
	if n := lim.size(); n != 1 {
		t.Errorf("%d limiters after 10 idle minutes, want only the fresh one", n)
	}
	// A caller in use stays, however many others come and go.
	for i := range 1000 {
		now = now.Add(time.Second)
		lim.allow("api_key:busy")
		lim.allow(fmt.Sprintf("api_key:once%d", i))
	}
	lim.mu.Lock()
	_, busy := lim.entries["api_key:busy"]
	lim.mu.Unlock()
	if !busy || lim.size() > 100 {
		t.Errorf("busy caller kept %v, %d limiters", busy, lim.size())
	}
}

func TestRetryAfterSeconds(t *testing.T) {
	for wait, want := range map[time.Duration]int{0: 1, time.Millisecond: 1, time.Second: 1, 1001 * time.Millisecond: 2, 2500 * time.Millisecond: 3} {
		if got := retryAfterSeconds(wait); got != want {
			t.Errorf("retryAfterSeconds(%v) = %d, want %d", wait, got, want)
		}
	}
}

func TestRateLimitSkipsRequestsWithoutCredentials(t *testing.T) {
	s := newBareServer()
	r := gin.New()
	r.Use(func(c *gin.Context) {
		c.Request = c.Request.WithContext(auth.WithPrincipal(c.Request.Context(), auth.Anonymous()))
	}, s.rateLimit(RateLimit{RPS: 0.001, Burst: 1}))
	r.GET("/x", func(c *gin.Context) { c.Status(http.StatusOK) })
	for i := range 5 {
		w := httptest.NewRecorder()
		r.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/x", nil))
		if w.Code != http.StatusOK {
			t.Fatalf("request %d without credentials (AUTH_MODE=off): status %d, want 200", i, w.Code)
		}
	}
}

func TestRateLimiterKeepsSlowBucketsUntilRefilled(t *testing.T) {
	now := time.Unix(1_000_000, 0)
	// 10 tokens at one per 5 minutes: 50 minutes to refill.
	lim := newRateLimiter(RateLimit{RPS: 1.0 / 300, Burst: 10}, 10*time.Minute, 100, func() time.Time { return now })
	for range 10 {
		if _, ok := lim.allow("k"); !ok {
			t.Fatal("refused within the burst")
		}
	}
	now = now.Add(11 * time.Minute)
	lim.allow("other")
	granted := 0
	for range 10 {
		if _, ok := lim.allow("k"); ok {
			granted++
		}
	}
	if granted != 2 {
		t.Errorf("after 11 idle minutes %d requests passed, want the 2 tokens refilled (not a fresh bucket)", granted)
	}
}
