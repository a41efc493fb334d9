package store

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"time"

	"gorm.io/gorm/clause"
)

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

// ErrIdempotencyClaimNotFound is FinishIdempotent's answer when there is no
// pending claim to finish (never claimed, abandoned, expired and swept, or
// already finished).
var ErrIdempotencyClaimNotFound = errors.New("idempotency claim not found")

type idempotencyRow struct {
	TenantID     string `gorm:"primaryKey"`
	Scope        string `gorm:"primaryKey"`
	Key          string `gorm:"primaryKey;column:key"`
	RequestHash  string
	Done         bool
	StatusCode   int
	ResponseBody string // base64 of the response body
	CreatedAt    time.Time
	ExpiresAt    time.Time
}

func (idempotencyRow) TableName() string { return "idempotency_key" }

// IdempotencyClaimLease is how long a claim may stay unfinished before it
// is taken to be abandoned (its process died mid-request) and a retry may
// claim the key again. Creation requests answer in seconds.
const IdempotencyClaimLease = 2 * time.Minute

// idempotencyPK selects the row of (tenant, scope, key).
const idempotencyPK = `tenant_id = ? AND scope = ? AND "key" = ?`

// BeginIdempotent claims (rec.Tenant, rec.Scope, rec.Key) for a request
// about to be served, storing rec as not done (Done, StatusCode and Body
// are ignored; a zero CreatedAt is now; ExpiresAt is required; an empty
// Tenant is the default tenant).
//
// If the key is already held by an unexpired record, nothing is written and
// that record is returned: the caller compares its RequestHash and replays
// its response, or answers that the first request is still in progress. An
// expired record is replaced by the new claim. The claim is atomic: of
// concurrent calls with one key, exactly one returns (nil, nil).
func (s *Store) BeginIdempotent(ctx context.Context, rec IdempotencyRecord) (*IdempotencyRecord, error) {
	if rec.ExpiresAt.IsZero() {
		return nil, errors.New("idempotency: ExpiresAt is required")
	}
	if rec.CreatedAt.IsZero() {
		rec.CreatedAt = time.Now()
	}
	row := idempotencyRow{
		TenantID: tenantOr(rec.Tenant), Scope: rec.Scope, Key: rec.Key, RequestHash: rec.RequestHash,
		CreatedAt: dbTime(rec.CreatedAt), ExpiresAt: dbTime(rec.ExpiresAt),
	}
	db := s.db.WithContext(ctx)
	// A claim races other claims, the deletion of the row it conflicts
	// with (Abandon, the sweeper) and the replacement of an expired row;
	// each round settles one of those, so a few rounds are plenty.
	for range 5 {
		res := db.Clauses(clause.OnConflict{DoNothing: true}).Create(&row)
		if res.Error != nil {
			return nil, fmt.Errorf("claim idempotency key: %w", res.Error)
		}
		if res.RowsAffected == 1 {
			return nil, nil
		}
		var existing idempotencyRow
		err := db.Take(&existing, idempotencyPK, row.TenantID, row.Scope, row.Key).Error
		if notFound(err) {
			continue // deleted since the insert: try again
		}
		if err != nil {
			return nil, err
		}
		now := dbTime(time.Now())
		staleBefore := now.Add(-IdempotencyClaimLease)
		if existing.ExpiresAt.After(now) && (existing.Done || existing.CreatedAt.After(staleBefore)) {
			return existing.toRecord()
		}
		// Expired, or a claim whose request never finished: take it over,
		// unless another claim did first (then its row has a future expiry
		// and a fresh created_at, and this updates nothing).
		res = db.Model(&idempotencyRow{}).Where(idempotencyPK+" AND (expires_at <= ? OR (done = ? AND created_at <= ?))",
			row.TenantID, row.Scope, row.Key, now, false, staleBefore).
			Updates(map[string]any{
				"request_hash": row.RequestHash, "done": false, "status_code": 0, "response_body": "",
				"created_at": row.CreatedAt, "expires_at": row.ExpiresAt,
			})
		if res.Error != nil {
			return nil, fmt.Errorf("replace expired idempotency key: %w", res.Error)
		}
		if res.RowsAffected == 1 {
			return nil, nil
		}
	}
	return nil, errors.New("idempotency: could not claim the key (heavy contention)")
}

// FinishIdempotent stores the response of the request that claimed
// (tenant, scope, key) and marks it done. ErrIdempotencyClaimNotFound if
// there is no pending claim.
func (s *Store) FinishIdempotent(ctx context.Context, tenant, scope, key string, status int, body []byte) error {
	res := s.db.WithContext(ctx).Model(&idempotencyRow{}).Where(idempotencyPK+" AND done = ?", tenantOr(tenant), scope, key, false).
		Updates(map[string]any{"done": true, "status_code": status, "response_body": base64.StdEncoding.EncodeToString(body)})
	if res.Error != nil {
		return res.Error
	}
	if res.RowsAffected == 0 {
		return ErrIdempotencyClaimNotFound
	}
	return nil
}

// AbandonIdempotent deletes the pending claim of (tenant, scope, key), so
// that a retry is served afresh (the request failed in a way worth
// retrying). A finished record is kept; no claim is not an error.
func (s *Store) AbandonIdempotent(ctx context.Context, tenant, scope, key string) error {
	return s.db.WithContext(ctx).Where(idempotencyPK+" AND done = ?", tenantOr(tenant), scope, key, false).
		Delete(&idempotencyRow{}).Error
}

// DeleteExpiredIdempotencyKeys deletes every record expired at now and
// returns how many it deleted.
func (s *Store) DeleteExpiredIdempotencyKeys(ctx context.Context, now time.Time) (int64, error) {
	res := s.db.WithContext(ctx).Where("expires_at <= ?", dbTime(now)).Delete(&idempotencyRow{})
	return res.RowsAffected, res.Error
}

func (r idempotencyRow) toRecord() (*IdempotencyRecord, error) {
	body, err := base64.StdEncoding.DecodeString(r.ResponseBody)
	if err != nil {
		return nil, fmt.Errorf("idempotency key %q response body: %w", r.Key, err)
	}
	if len(body) == 0 {
		body = nil
	}
	return &IdempotencyRecord{
		Tenant: r.TenantID, Scope: r.Scope, Key: r.Key, RequestHash: r.RequestHash, Done: r.Done,
		StatusCode: r.StatusCode, Body: body, CreatedAt: r.CreatedAt.UTC(), ExpiresAt: r.ExpiresAt.UTC(),
	}, nil
}
