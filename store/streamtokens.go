package store

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// ErrStreamTokenNotFound is returned for a stream token that is unknown or
// has expired.
var ErrStreamTokenNotFound = errors.New("stream token not found")

type streamTokenRow struct {
	Hash     string `gorm:"primaryKey"`
	RunID    string
	TenantID string
	// KeyID is the API key that issued the token ("" for none): the token
	// is valid only while that key is.
	KeyID     string
	ExpiresAt time.Time
	CreatedAt time.Time
}

func (streamTokenRow) TableName() string { return "stream_token" }

// streamTokenGrace is how long expired stream tokens are kept before
// CreateStreamToken deletes them.
const streamTokenGrace = time.Hour

// CreateStreamToken stores a token (by its hash, auth.HashSecret) that lets
// its bearer stream run runID of tenant until expiresAt. It also deletes
// tokens that expired over an hour ago: one indexed delete, so that the
// table stays small without a separate sweeper.
func (s *Store) CreateStreamToken(ctx context.Context, hash, runID, tenant string, expiresAt time.Time) error {
	return s.CreateKeyStreamToken(ctx, hash, runID, tenant, "", expiresAt)
}

// CreateKeyStreamToken is CreateStreamToken for a token issued by the API
// key keyID ("" for none): StreamToken refuses the token once that key is
// revoked, expired or deleted.
func (s *Store) CreateKeyStreamToken(ctx context.Context, hash, runID, tenant, keyID string, expiresAt time.Time) error {
	now := dbTime(time.Now())
	db := s.db.WithContext(ctx)
	row := streamTokenRow{Hash: hash, RunID: runID, TenantID: tenantOr(tenant), KeyID: keyID, ExpiresAt: dbTime(expiresAt), CreatedAt: now}
	if err := db.Create(&row).Error; err != nil {
		return fmt.Errorf("insert stream token: %w", err)
	}
	if err := db.Where("expires_at < ?", now.Add(-streamTokenGrace)).Delete(&streamTokenRow{}).Error; err != nil {
		return fmt.Errorf("delete expired stream tokens: %w", err)
	}
	return nil
}

// StreamToken returns the run, tenant and expiry of the token stored under
// hash. A token past its expiry, or issued by an API key that has since
// been revoked, expired or deleted, is reported as ErrStreamTokenNotFound
// just like an unknown one, so callers need not check either themselves;
// expiresAt lets a stream end when its token does.
func (s *Store) StreamToken(ctx context.Context, hash string) (runID, tenant string, expiresAt time.Time, err error) {
	t, err := s.StreamTokenInfo(ctx, hash)
	return t.RunID, t.Tenant, t.ExpiresAt, err
}

// StreamTokenInfo is what a valid stream token grants.
type StreamTokenInfo struct {
	RunID, Tenant string
	// KeyID is the API key that issued the token ("" for none): a stream
	// opened with the token ends when that key is revoked or expires.
	KeyID     string
	ExpiresAt time.Time
}

// StreamTokenInfo is StreamToken with the issuing key's id as well.
func (s *Store) StreamTokenInfo(ctx context.Context, hash string) (StreamTokenInfo, error) {
	var row streamTokenRow
	if err := s.db.WithContext(ctx).Take(&row, "hash = ?", hash).Error; err != nil {
		if notFound(err) {
			return StreamTokenInfo{}, ErrStreamTokenNotFound
		}
		return StreamTokenInfo{}, err
	}
	now := time.Now()
	if !now.Before(row.ExpiresAt) {
		return StreamTokenInfo{}, ErrStreamTokenNotFound
	}
	if row.KeyID != "" {
		var key apiKeyRow
		if err := s.db.WithContext(ctx).Take(&key, "id = ?", row.KeyID).Error; err != nil {
			if notFound(err) {
				return StreamTokenInfo{}, ErrStreamTokenNotFound
			}
			return StreamTokenInfo{}, err
		}
		if key.RevokedAt != nil || (key.ExpiresAt != nil && !now.Before(*key.ExpiresAt)) {
			return StreamTokenInfo{}, ErrStreamTokenNotFound
		}
	}
	return StreamTokenInfo{RunID: row.RunID, Tenant: row.TenantID, KeyID: row.KeyID, ExpiresAt: row.ExpiresAt.UTC()}, nil
}
