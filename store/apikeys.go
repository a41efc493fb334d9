package store

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"gorm.io/gorm"

	"github.com/op-stack/executor/auth"
	"github.com/op-stack/executor/models"
)

// ErrAPIKeyNotFound is returned for an API key hash or id the store does
// not hold.
var ErrAPIKeyNotFound = errors.New("api key not found")

// APIKey is what the store keeps of an API key: its SHA-256 hash
// (auth.HashSecret), never the key itself.
type APIKey struct {
	ID     string
	Hash   string // hex SHA-256 of the key; unique
	Prefix string // the key's first 12 characters, e.g. "osk_AbCdEfGh"
	Tenant string
	Scopes []string
	// Description says what the key is for (free text).
	Description string
	CreatedAt   time.Time
	ExpiresAt   *time.Time // nil: never
	RevokedAt   *time.Time // nil: active
}

type apiKeyRow struct {
	ID          string `gorm:"primaryKey"`
	Hash        string
	Prefix      string
	TenantID    string
	Scopes      string // comma-separated
	Description string
	CreatedAt   time.Time
	ExpiresAt   *time.Time
	RevokedAt   *time.Time
}

func (apiKeyRow) TableName() string { return "api_key" }

// APIKeyPrefixLen is how many leading characters of a key are kept in
// APIKey.Prefix.
const APIKeyPrefixLen = 12

// NewAPIKeyID returns a new API key id ("key_" and 16 hex digits).
func NewAPIKeyID() string {
	b := make([]byte, 8)
	if _, err := rand.Read(b); err != nil {
		panic(err)
	}
	return "key_" + hex.EncodeToString(b)
}

// CreateAPIKey stores k. An empty ID gets NewAPIKeyID and a zero CreatedAt
// the current time (both set into k). Hash, Prefix and Tenant are required;
// a hash already stored is an error wrapping gorm.ErrDuplicatedKey.
func (s *Store) CreateAPIKey(ctx context.Context, k *APIKey) error {
	switch {
	case len(k.Hash) != 64:
		return errors.New("api key: hash must be 64 hex digits (auth.HashSecret)")
	case k.Prefix == "" || len(k.Prefix) > 16:
		return errors.New("api key: prefix must be 1 to 16 characters")
	case strings.TrimSpace(k.Tenant) == "":
		return errors.New("api key: tenant is required")
	}
	if k.ID == "" {
		k.ID = NewAPIKeyID()
	}
	if k.CreatedAt.IsZero() {
		k.CreatedAt = time.Now()
	}
	k.CreatedAt = dbTime(k.CreatedAt)
	k.ExpiresAt = dbTimePtr(k.ExpiresAt)
	k.RevokedAt = dbTimePtr(k.RevokedAt)
	row := apiKeyRow{
		ID: k.ID, Hash: k.Hash, Prefix: k.Prefix, TenantID: k.Tenant, Scopes: strings.Join(k.Scopes, ","),
		Description: k.Description, CreatedAt: k.CreatedAt, ExpiresAt: k.ExpiresAt, RevokedAt: k.RevokedAt,
	}
	if err := s.db.WithContext(ctx).Create(&row).Error; err != nil {
		return fmt.Errorf("insert api key: %w", err)
	}
	return nil
}

// APIKeyByHash returns the key stored under hash, revoked and expired keys
// included (the caller decides); ErrAPIKeyNotFound if there is none.
func (s *Store) APIKeyByHash(ctx context.Context, hash string) (*APIKey, error) {
	var row apiKeyRow
	if err := s.db.WithContext(ctx).Take(&row, "hash = ?", hash).Error; err != nil {
		if notFound(err) {
			return nil, ErrAPIKeyNotFound
		}
		return nil, err
	}
	k := row.toAPIKey()
	return &k, nil
}

// ListAPIKeys returns tenant's keys ("" : every tenant's), newest first,
// revoked and expired ones included.
func (s *Store) ListAPIKeys(ctx context.Context, tenant string) ([]APIKey, error) {
	q := s.db.WithContext(ctx).Model(&apiKeyRow{})
	if tenant != "" {
		q = q.Where("tenant_id = ?", tenant)
	}
	var rows []apiKeyRow
	if err := q.Order("created_at DESC, id").Find(&rows).Error; err != nil {
		return nil, err
	}
	out := make([]APIKey, 0, len(rows))
	for _, r := range rows {
		out = append(out, r.toAPIKey())
	}
	return out, nil
}

// RevokeAPIKey marks the key with id revoked now. Revoking a revoked key
// keeps its first revocation time. An unknown id is ErrAPIKeyNotFound.
func (s *Store) RevokeAPIKey(ctx context.Context, id string) error {
	res := s.db.WithContext(ctx).Model(&apiKeyRow{}).Where("id = ?", id).
		Update("revoked_at", gorm.Expr("COALESCE(revoked_at, ?)", dbTime(time.Now())))
	if res.Error != nil {
		return res.Error
	}
	if res.RowsAffected == 0 {
		return ErrAPIKeyNotFound
	}
	return nil
}

// invalidKeysChunk bounds the ids of one InvalidAPIKeys query (SQLite
// takes at most 32,766 parameters; PostgreSQL 65,535).
const invalidKeysChunk = 5000

// InvalidAPIKeys returns those of ids whose key is revoked, or expired at
// now: one indexed query per 5,000 ids, so that a process rechecks the
// keys behind all of its open streams at once (api's credential watch).
// An id the store does not know is not returned: keys are never deleted,
// so such an id is not a stored key's.
func (s *Store) InvalidAPIKeys(ctx context.Context, ids []string, now time.Time) ([]string, error) {
	var out []string
	for len(ids) > 0 {
		chunk := ids[:min(len(ids), invalidKeysChunk)]
		ids = ids[len(chunk):]
		var found []string
		err := s.db.WithContext(ctx).Model(&apiKeyRow{}).
			Where("id IN ? AND (revoked_at IS NOT NULL OR (expires_at IS NOT NULL AND expires_at <= ?))", chunk, dbTime(now)).
			Pluck("id", &found).Error
		if err != nil {
			return nil, err
		}
		out = append(out, found...)
	}
	return out, nil
}

// KeyLookup adapts APIKeyByHash to auth.Keys: an unknown hash is
// auth.ErrKeyNotFound, any other failure is returned as it is.
func (s *Store) KeyLookup() auth.KeyLookup {
	return func(ctx context.Context, hash string) (auth.KeyRecord, error) {
		k, err := s.APIKeyByHash(ctx, hash)
		if errors.Is(err, ErrAPIKeyNotFound) {
			return auth.KeyRecord{}, auth.ErrKeyNotFound
		}
		if err != nil {
			return auth.KeyRecord{}, err
		}
		scopes := make([]auth.Scope, len(k.Scopes))
		for i, sc := range k.Scopes {
			scopes[i] = auth.Scope(sc)
		}
		return auth.KeyRecord{ID: k.ID, Tenant: k.Tenant, Scopes: scopes, ExpiresAt: k.ExpiresAt, RevokedAt: k.RevokedAt}, nil
	}
}

func (r apiKeyRow) toAPIKey() APIKey {
	var scopes []string
	for _, sc := range strings.Split(r.Scopes, ",") {
		if sc = strings.TrimSpace(sc); sc != "" {
			scopes = append(scopes, sc)
		}
	}
	return APIKey{
		ID: r.ID, Hash: r.Hash, Prefix: r.Prefix, Tenant: r.TenantID, Scopes: scopes, Description: r.Description,
		CreatedAt: r.CreatedAt.UTC(), ExpiresAt: utcPtr(r.ExpiresAt), RevokedAt: utcPtr(r.RevokedAt),
	}
}

// dbTime is t as the store writes it: UTC, truncated to what PostgreSQL
// keeps (microseconds), so that what a caller holds equals a later read and
// SQLite's textual times compare in time order.
func dbTime(t time.Time) time.Time { return t.UTC().Truncate(time.Microsecond) }

func dbTimePtr(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	u := dbTime(*t)
	return &u
}

// CheckTenant checks a tenant name given for a new key: 1 to 100
// characters, no white space.
func CheckTenant(tenant string) error {
	t := strings.TrimSpace(tenant)
	switch {
	case t == "":
		return models.FieldError("tenant", "is required")
	case utf8.RuneCountInString(t) > 100:
		return models.FieldError("tenant", "must be at most 100 characters")
	case strings.ContainsAny(t, " \t\r\n"):
		return models.FieldError("tenant", "%q contains white space", t)
	}
	return nil
}

// IssueAPIKey makes a new API key for tenant with scopes, expiring after
// ttl (0: never), and stores its hash. It returns the key, which exists
// nowhere else: the caller shows it once.
func (s *Store) IssueAPIKey(ctx context.Context, tenant string, scopes []auth.Scope, ttl time.Duration, description string) (string, *APIKey, error) {
	if err := CheckTenant(tenant); err != nil {
		return "", nil, err
	}
	if len(scopes) == 0 {
		return "", nil, models.FieldError("scopes", "at least one scope is required")
	}
	key, hash, err := auth.NewAPIKey()
	if err != nil {
		return "", nil, err
	}
	names := make([]string, len(scopes))
	for i, sc := range scopes {
		names[i] = string(sc)
	}
	rec := &APIKey{Hash: hash, Prefix: key[:APIKeyPrefixLen], Tenant: strings.TrimSpace(tenant), Scopes: names, Description: description}
	if ttl > 0 {
		at := time.Now().Add(ttl).UTC()
		rec.ExpiresAt = &at
	}
	if err := s.CreateAPIKey(ctx, rec); err != nil {
		return "", nil, err
	}
	return key, rec, nil
}
