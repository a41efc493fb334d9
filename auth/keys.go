package auth

import (
	"context"
	"errors"
	"time"
)

// KeyRecord is what the service keeps of an API key: never the key itself.
type KeyRecord struct {
	ID        string
	Tenant    string
	Scopes    []Scope
	ExpiresAt *time.Time
	RevokedAt *time.Time
}

// ErrKeyNotFound is what a KeyLookup returns for a hash it does not know.
var ErrKeyNotFound = errors.New("api key not found")

// KeyLookup finds the key stored under a hash (HashSecret of the key).
type KeyLookup func(ctx context.Context, hash string) (KeyRecord, error)

// Keys authenticates API keys issued by `executor apikeys create`.
type Keys struct {
	Lookup KeyLookup
	// Now is the clock expiry is checked against; nil: time.Now.
	Now func() time.Time
}

// Authenticate implements Authenticator. A lookup failure other than
// ErrKeyNotFound (the database is down) is returned as it is, so that the
// caller answers 503 rather than 401.
func (k Keys) Authenticate(ctx context.Context, credential string) (Principal, error) {
	if !LooksLikeAPIKey(credential) {
		return Principal{}, ErrInvalidCredentials
	}
	rec, err := k.Lookup(ctx, HashSecret(credential))
	if errors.Is(err, ErrKeyNotFound) {
		return Principal{}, ErrInvalidCredentials
	}
	if err != nil {
		return Principal{}, err
	}
	now := time.Now()
	if k.Now != nil {
		now = k.Now()
	}
	if rec.RevokedAt != nil || (rec.ExpiresAt != nil && !now.Before(*rec.ExpiresAt)) {
		return Principal{}, ErrInvalidCredentials
	}
	return Principal{Tenant: rec.Tenant, Scopes: rec.Scopes, Method: MethodAPIKey, KeyID: rec.ID}, nil
}

// Chain authenticates API keys with Keys and anything else with Tokens
// (nil: no identity provider, so anything else is refused).
type Chain struct {
	Keys   Authenticator
	Tokens Authenticator
}

// Authenticate implements Authenticator.
func (c Chain) Authenticate(ctx context.Context, credential string) (Principal, error) {
	if credential == "" {
		return Principal{}, ErrInvalidCredentials
	}
	if LooksLikeAPIKey(credential) || c.Tokens == nil {
		if c.Keys == nil {
			return Principal{}, ErrInvalidCredentials
		}
		return c.Keys.Authenticate(ctx, credential)
	}
	return c.Tokens.Authenticate(ctx, credential)
}
