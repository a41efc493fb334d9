package api

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"net/http"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/op-stack/executor/auth"
	"github.com/op-stack/executor/models"
	"github.com/op-stack/executor/store"
)

// Idempotency-Key headers.
const (
	// IdempotencyKeyHeader names a creation request so that sending it
	// again (after a timeout, say) does not create twice.
	IdempotencyKeyHeader = "Idempotency-Key"
	// idempotentReplayedHeader marks a response replayed from an earlier
	// request with the same key.
	idempotentReplayedHeader = "Idempotent-Replayed"
	maxIdempotencyKeyLen     = 255
)

// IdempotencyStore keeps the requests made with an Idempotency-Key.
type IdempotencyStore interface {
	// BeginIdempotent claims (rec.Tenant, rec.Scope, rec.Key) for rec if
	// no live record holds it (none, or an expired one) and returns nil;
	// otherwise it returns the live record and claims nothing. Two
	// simultaneous calls for one key never both claim it.
	BeginIdempotent(ctx context.Context, rec store.IdempotencyRecord) (existing *store.IdempotencyRecord, err error)
	// FinishIdempotent stores the response of a claimed request, which a
	// retry then gets again.
	FinishIdempotent(ctx context.Context, tenant, scope, key string, status int, body []byte) error
	// AbandonIdempotent drops a claim whose request did not get an answer
	// worth keeping, so that a retry runs again.
	AbandonIdempotent(ctx context.Context, tenant, scope, key string) error
}

// idempotent returns the middleware of a creation endpoint that honours
// the Idempotency-Key header; scope names the endpoint (e.g.
// "runs/start"), so that one key sent to two endpoints does not collide,
// and ttl is how long a key is remembered.
//
// Without the header the request passes untouched. With it, the first
// request with a key (per tenant and scope) runs and its response is kept;
// a later one with the same key and the same request gets that response
// again, with Idempotent-Replayed: true, without running. "The same
// request" is the same path, query and body bytes (a SHA-256 of them):
// exact bytes, not a canonical form of the JSON, so a client retrying must
// send the body it sent, byte for byte. The path is in it because the
// scope is per route while spec 001's routes carry ids (POST
// /hierarchical-teams/{id}/execute).
//
// The same key with a different request is 409 IDEMPOTENCY_KEY_REUSED, as
// is a retry while the first request is still being served (with
// Retry-After: 1). Responses with status 2xx and 4xx are kept; 5xx, 429
// (which says to retry) and a panic drop the claim, so that a retry runs
// again.
//
// It reads the whole body, which limitBody has bounded, so it goes after
// limitBody, and after authentication for the tenant. It is meant for
// endpoints with short JSON responses, not for streams: it holds the
// response in memory.
func (s *Server) idempotent(scope string, st IdempotencyStore, ttl time.Duration) gin.HandlerFunc {
	return func(c *gin.Context) {
		values := c.Request.Header.Values(IdempotencyKeyHeader)
		if len(values) == 0 {
			c.Next()
			return
		}
		key := values[0]
		if err := checkIdempotencyKey(values); err != nil {
			s.writeError(c, err)
			return
		}
		body, err := io.ReadAll(c.Request.Body)
		if err != nil {
			s.writeError(c, bodyError(err))
			return
		}
		c.Request.Body = io.NopCloser(bytes.NewReader(body))

		p, found := auth.PrincipalFrom(c.Request.Context())
		if !found {
			p = auth.Anonymous()
		}
		now := time.Now()
		rec := store.IdempotencyRecord{
			Tenant: p.Tenant, Scope: scope, Key: key,
			RequestHash: requestHash(c.Request, body),
			CreatedAt:   now, ExpiresAt: now.Add(ttl),
		}
		existing, err := st.BeginIdempotent(c.Request.Context(), rec)
		if err != nil {
			s.writeError(c, err)
			return
		}
		if existing != nil {
			s.answerExisting(c, existing, rec.RequestHash)
			return
		}
		s.serveClaimed(c, st, rec)
	}
}

// checkIdempotencyKey accepts one key of 1 to 255 printable ASCII
// characters.
func checkIdempotencyKey(values []string) error {
	if len(values) > 1 {
		return models.FieldError(IdempotencyKeyHeader, "must be sent once, got %d values", len(values))
	}
	key := values[0]
	if key == "" || len(key) > maxIdempotencyKeyLen {
		return models.FieldError(IdempotencyKeyHeader, "must be 1 to %d characters long, got %d", maxIdempotencyKeyLen, len(key))
	}
	for i := 0; i < len(key); i++ {
		if key[i] < 0x20 || key[i] > 0x7e {
			return models.FieldError(IdempotencyKeyHeader, "must be printable ASCII characters")
		}
	}
	return nil
}

// requestHash is the hex SHA-256 of the request's path, query and body.
func requestHash(r *http.Request, body []byte) string {
	h := sha256.New()
	h.Write([]byte(r.URL.EscapedPath()))
	h.Write([]byte{'?'})
	h.Write([]byte(r.URL.RawQuery))
	h.Write([]byte{0})
	h.Write(body)
	return hex.EncodeToString(h.Sum(nil))
}

// answerExisting answers a request whose key a live record holds.
func (s *Server) answerExisting(c *gin.Context, rec *store.IdempotencyRecord, hash string) {
	switch {
	case rec.RequestHash != hash:
		s.writeError(c, models.Errorf(models.CodeIdempotencyKeyReused,
			"the Idempotency-Key was used with a different request (path or body); use a new key for a new request"))
	case !rec.Done:
		c.Header("Retry-After", "1")
		s.writeError(c, models.Errorf(models.CodeIdempotencyKeyReused,
			"the first request with this Idempotency-Key is still in progress; retry shortly for its response"))
	default:
		c.Header(idempotentReplayedHeader, "true")
		c.Data(rec.StatusCode, "application/json; charset=utf-8", rec.Body)
		c.Abort()
	}
}

// serveClaimed runs the handler of a request whose key it claimed and
// keeps the response, or drops the claim.
func (s *Server) serveClaimed(c *gin.Context, st IdempotencyStore, rec store.IdempotencyRecord) {
	w := &capturingWriter{ResponseWriter: c.Writer}
	c.Writer = w
	// The outcome is recorded even when the client has gone away.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(c.Request.Context()), 10*time.Second)
	defer cancel()
	finished := false
	defer func() {
		c.Writer = w.ResponseWriter
		if finished {
			return
		}
		// A panic (re-raised for recoverPanics) or a response not worth
		// keeping: a retry runs again.
		if err := st.AbandonIdempotent(ctx, rec.Tenant, rec.Scope, rec.Key); err != nil {
			s.log.WarnContext(ctx, "dropping an idempotency claim failed; its key answers 409 until it expires",
				"scope", rec.Scope, "error", err)
		}
	}()
	c.Next()
	status := w.Status()
	if !keepIdempotentResponse(status) {
		return
	}
	finished = true
	if err := st.FinishIdempotent(ctx, rec.Tenant, rec.Scope, rec.Key, status, w.body.Bytes()); err != nil {
		// The response has gone out; a retry gets 409 "in progress" until
		// the record expires rather than running twice.
		s.log.ErrorContext(ctx, "storing an idempotent response failed", "scope", rec.Scope, "error", err)
	}
}

// keepIdempotentResponse says which responses a retry gets again: success
// and the client's own errors, but not 429, which asks for a retry.
func keepIdempotentResponse(status int) bool {
	switch {
	case status == http.StatusTooManyRequests:
		return false
	case status >= 200 && status < 300, status >= 400 && status < 500:
		return true
	}
	return false
}

// capturingWriter copies the response body as it is written.
type capturingWriter struct {
	gin.ResponseWriter
	body bytes.Buffer
}

func (w *capturingWriter) Write(b []byte) (int, error) {
	w.body.Write(b)
	return w.ResponseWriter.Write(b)
}

func (w *capturingWriter) WriteString(s string) (int, error) {
	w.body.WriteString(s)
	return w.ResponseWriter.WriteString(s)
}
