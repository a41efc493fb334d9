package api

import (
	"container/list"
	"context"
	"fmt"
	"math"
	"strconv"
	"sync"
	"time"

	"github.com/gin-gonic/gin"
	"golang.org/x/time/rate"

	"github.com/op-stack/executor/auth"
	"github.com/op-stack/executor/models"
)

// RateLimit is the request rate each caller may sustain (RPS, requests per
// second, refilled continuously) and the burst it may send at once: a
// token bucket per caller. Zero RPS turns the limit off.
type RateLimit struct {
	RPS   float64
	Burst int
}

// Bounds of the per-caller limiters: a limiter unused for limiterIdle is
// dropped (its bucket would have refilled by then at any sensible rate), and
// at most maxLimiters are kept, dropping the least recently used.
const (
	limiterIdle = 10 * time.Minute
	maxLimiters = 10000
)

// rateLimit returns the middleware that limits each caller's request rate
// to l: over it, a request gets 429 RATE_LIMIT_EXCEEDED with Retry-After
// (whole seconds until a token is there) and is not counted. The probe and
// scrape routes are exempt. It reads the principal, so it goes after
// authentication; with l.RPS zero it only passes requests on.
//
// A caller is its principal's Method:KeyID. Anonymous requests (access
// control off) carry no key, so they are told apart by client address
// (gin's ClientIP, which follows the engine's trusted proxies) rather than
// all sharing one bucket.
func (s *Server) rateLimit(l RateLimit) gin.HandlerFunc {
	if l.RPS <= 0 {
		return func(c *gin.Context) { c.Next() }
	}
	lim := newRateLimiter(l, limiterIdle, maxLimiters, time.Now)
	return func(c *gin.Context) {
		if isOpsRoute(c) {
			c.Next()
			return
		}
		if wait, allowed := lim.allow(rateKey(c)); !allowed {
			after := retryAfterSeconds(wait)
			c.Header("Retry-After", strconv.Itoa(after))
			s.writeError(c, models.Errorf(models.CodeRateLimited,
				"too many requests: at most %s per second (burst %d) per API key; retry after %d s",
				strconv.FormatFloat(l.RPS, 'f', -1, 64), lim.burst, after))
			return
		}
		c.Next()
	}
}

// rateKey names the caller a request is counted against.
func rateKey(c *gin.Context) string {
	p, found := auth.PrincipalFrom(c.Request.Context())
	if !found {
		p = auth.Anonymous()
	}
	if p.Method == auth.MethodNone {
		return string(p.Method) + ":" + p.KeyID + "@" + c.ClientIP()
	}
	return string(p.Method) + ":" + p.KeyID
}

// retryAfterSeconds is a Retry-After value for a wait: whole seconds,
// rounded up, at least 1.
func retryAfterSeconds(wait time.Duration) int {
	n := int(math.Ceil(wait.Seconds()))
	if n < 1 {
		n = 1
	}
	return n
}

// rateLimiter holds one token bucket per caller in an LRU list, so that
// memory stays bounded however many callers come and go.
type rateLimiter struct {
	limit rate.Limit
	burst int
	idle  time.Duration
	max   int
	now   func() time.Time

	mu      sync.Mutex
	entries map[string]*list.Element // of *limiterEntry
	lru     list.List                // front: most recently used
}

type limiterEntry struct {
	key      string
	limiter  *rate.Limiter
	lastUsed time.Time
}

func newRateLimiter(l RateLimit, idle time.Duration, capacity int, now func() time.Time) *rateLimiter {
	burst := l.Burst
	if burst < 1 {
		// A bucket of zero tokens refuses everything; one second's worth
		// is the least that lets the rate through.
		burst = max(1, int(math.Ceil(l.RPS)))
	}
	// A limiter is only dropped once its bucket has had time to fill up
	// again, so that dropping it gives nobody tokens early.
	if refill := float64(burst) / l.RPS; refill > idle.Seconds() {
		idle = time.Duration(min(refill, (24*time.Hour).Seconds()) * float64(time.Second))
	}
	return &rateLimiter{
		limit:   rate.Limit(l.RPS),
		burst:   burst,
		idle:    idle,
		max:     capacity,
		now:     now,
		entries: make(map[string]*list.Element),
	}
}

// allow takes a token from key's bucket, or reports how long until one is
// there without taking any.
func (r *rateLimiter) allow(key string) (time.Duration, bool) {
	now := r.now()
	lim := r.limiterFor(key, now)
	res := lim.ReserveN(now, 1)
	if !res.OK() {
		return time.Second, false
	}
	if wait := res.DelayFrom(now); wait > 0 {
		// Give the token back: a refused request does not count.
		res.CancelAt(now)
		return wait, false
	}
	return 0, true
}

// limiterFor returns key's limiter, making it if needed, after dropping
// limiters idle for too long and, over the cap, the least recently used.
func (r *rateLimiter) limiterFor(key string, now time.Time) *rate.Limiter {
	r.mu.Lock()
	defer r.mu.Unlock()
	// The list is in order of last use, so the idle ones are at the back.
	for e := r.lru.Back(); e != nil; e = r.lru.Back() {
		if now.Sub(e.Value.(*limiterEntry).lastUsed) < r.idle {
			break
		}
		r.remove(e)
	}
	if e, found := r.entries[key]; found {
		ent := e.Value.(*limiterEntry)
		ent.lastUsed = now
		r.lru.MoveToFront(e)
		return ent.limiter
	}
	for r.lru.Len() >= r.max {
		r.remove(r.lru.Back())
	}
	ent := &limiterEntry{key: key, limiter: rate.NewLimiter(r.limit, r.burst), lastUsed: now}
	r.entries[key] = r.lru.PushFront(ent)
	return ent.limiter
}

func (r *rateLimiter) remove(e *list.Element) {
	r.lru.Remove(e)
	delete(r.entries, e.Value.(*limiterEntry).key)
}

// size is the number of limiters held.
func (r *rateLimiter) size() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.entries)
}

// concurrentRunsRetryAfter is the Retry-After of a run refused for the
// tenant's concurrent-run limit: runs take seconds to minutes, so sooner
// would mostly be refused again.
const concurrentRunsRetryAfter = "5"

// checkConcurrentRuns refuses a new run of tenant when it already has limit
// runs in progress (count says how many): 429 RATE_LIMIT_EXCEEDED with
// Retry-After. A limit of 0 or less is no limit. The check is not atomic
// with the start that follows, so simultaneous starts can pass it together
// and go over the limit by their number: a soft limit, which is enough to keep one
// tenant from filling the workers. A count that fails is returned as is.
func (s *Server) checkConcurrentRuns(c *gin.Context, tenant string, limit int, count func(ctx context.Context, tenant string) (int64, error)) error {
	if limit <= 0 {
		return nil
	}
	n, err := count(c.Request.Context(), tenant)
	if err != nil {
		return fmt.Errorf("count the runs in progress of tenant %q: %w", tenant, err)
	}
	if n >= int64(limit) {
		c.Header("Retry-After", concurrentRunsRetryAfter)
		return models.Errorf(models.CodeRateLimited,
			"too many runs in progress: tenant %q has %d, the most allowed is %d; retry when one has ended", tenant, n, limit)
	}
	return nil
}
