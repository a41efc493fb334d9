package store

import "time"

// IdempotencyRecord is a request made with an Idempotency-Key: claimed
// while its first request is being served, then holding that request's
// response so that a retry with the same key and body gets it again.
type IdempotencyRecord struct {
	Tenant string
	// Scope is the operation the key was used for (e.g. "runs/start"), so
	// that one key sent to two different endpoints does not collide.
	Scope       string
	Key         string
	RequestHash string // SHA-256 of the request body
	// Done is false while the first request is still being served.
	Done       bool
	StatusCode int
	Body       []byte
	CreatedAt  time.Time
	ExpiresAt  time.Time
}
