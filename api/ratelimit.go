package api

import (
	"container/list"
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
// A caller is its principal's Method:KeyID. Requests without credentials
// (AUTH_MODE=off: one local user, on 127.0.0.1 by default) are not limited:
// there is no caller to tell apart, and one shared bucket would throttle
// the whole service.
func (s *Server) rateLimit(l RateLimit) gin.HandlerFunc {
	if l.RPS <= 0 {
		return func(c *gin.Context) { c.Next() }
	}
	lim := newRateLimiter(l, limiterIdle, maxLimiters, time.Now)
	return func(c *gin.Context) {
		p, found := auth.PrincipalFrom(c.Request.Context())
		if isOpsRoute(c) || !found || p.Method == auth.MethodNone || isInProcess(c.Request.Context()) {
			c.Next()
			return
		}
		if wait, allowed := lim.allow(string(p.Method) + ":" + p.KeyID); !allowed {
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
