// Package auth decides who a request comes from: API keys the service
// issues (stored hashed), and optionally JSON Web Tokens of an OpenID
// Connect provider. It knows nothing of HTTP routes; the api package maps
// routes to the scopes they need and answers in each surface's format.
package auth

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Scope is one permission a key or token carries.
type Scope string

// The scopes. Admin implies every other scope, in every tenant, and is the
// only one that manages keys over the API.
const (
	ScopeHierarchiesRead  Scope = "hierarchies:read"
	ScopeHierarchiesWrite Scope = "hierarchies:write"
	ScopeRunsRead         Scope = "runs:read"
	ScopeRunsWrite        Scope = "runs:write"
	// ScopeMemoryRead and ScopeMemoryWrite reach the tenant's long-term
	// memory (memory/ routes).
	ScopeMemoryRead  Scope = "memory:read"
	ScopeMemoryWrite Scope = "memory:write"
	ScopeAdmin       Scope = "admin"
)

// AllScopes lists the scopes in the order the README documents them.
func AllScopes() []Scope {
	return []Scope{ScopeHierarchiesRead, ScopeHierarchiesWrite, ScopeRunsRead, ScopeRunsWrite, ScopeMemoryRead, ScopeMemoryWrite, ScopeAdmin}
}

// ParseScopes reads a comma- or space-separated scope list, refusing
// unknown scopes so that a typo does not silently grant less (or more)
// than meant.
func ParseScopes(list string) ([]Scope, error) {
	var out []Scope
	for _, f := range strings.FieldsFunc(list, func(r rune) bool { return r == ',' || r == ' ' }) {
		s := Scope(strings.TrimSpace(f))
		if !slices.Contains(AllScopes(), s) {
			return nil, fmt.Errorf("unknown scope %q (known: %s)", s, JoinScopes(AllScopes()))
		}
		if !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	if len(out) == 0 {
		return nil, errors.New("no scope given")
	}
	return out, nil
}

// JoinScopes is the comma-separated form ParseScopes reads.
func JoinScopes(scopes []Scope) string {
	parts := make([]string, len(scopes))
	for i, s := range scopes {
		parts[i] = string(s)
	}
	return strings.Join(parts, ",")
}

// DefaultTenant owns everything created without credentials (AUTH_MODE=off)
// and everything stored before tenants existed.
const DefaultTenant = "default"

// Method says how a principal authenticated.
type Method string

// The methods.
const (
	MethodNone   Method = "none"    // AUTH_MODE=off
	MethodAPIKey Method = "api_key" // a key issued by `executor apikeys create`
	MethodOIDC   Method = "oidc"    // a JWT of the configured identity provider
	// MethodStreamToken is a run's short-lived stream token, for browsers'
	// EventSource, which cannot send an Authorization header.
	MethodStreamToken Method = "stream_token"
)

// Principal is who a request acts as.
type Principal struct {
	Tenant string
	Scopes []Scope
	Method Method
	// KeyID is the id of the API key (never the key), or the token's
	// subject for OIDC; it names the caller in logs and rate limits.
	KeyID string
	// RunID, when set, restricts the principal to that one run: a stream
	// token's principal.
	RunID string
}

// Anonymous is the principal of every request when access control is off:
// the default tenant with every scope, able to see all tenants as before
// tenants existed.
func Anonymous() Principal {
	return Principal{Tenant: DefaultTenant, Scopes: []Scope{ScopeAdmin}, Method: MethodNone, KeyID: "anonymous"}
}

// Has reports whether p carries scope s (admin carries all).
func (p Principal) Has(s Scope) bool {
	return slices.Contains(p.Scopes, s) || slices.Contains(p.Scopes, ScopeAdmin)
}

// AllTenants reports whether p sees every tenant's objects.
func (p Principal) AllTenants() bool { return slices.Contains(p.Scopes, ScopeAdmin) }

// CanSee reports whether p may see an object of tenant.
func (p Principal) CanSee(tenant string) bool {
	return p.AllTenants() || p.Tenant == tenant
}

type principalKey struct{}

// WithPrincipal returns ctx carrying p.
func WithPrincipal(ctx context.Context, p Principal) context.Context {
	return context.WithValue(ctx, principalKey{}, p)
}

// PrincipalFrom returns the principal ctx carries.
func PrincipalFrom(ctx context.Context) (Principal, bool) {
	p, ok := ctx.Value(principalKey{}).(Principal)
	return p, ok
}

// ErrInvalidCredentials is every authentication failure: missing, unknown,
// malformed, expired or revoked credentials. Callers are not told which, so
// that a guess learns nothing.
var ErrInvalidCredentials = errors.New("invalid credentials")

// Authenticator turns a bearer credential into a principal.
type Authenticator interface {
	Authenticate(ctx context.Context, credential string) (Principal, error)
}

// APIKeyPrefix starts every API key, so that keys are recognisable in
// secret scanners and told apart from JWTs.
const APIKeyPrefix = "osk_"

// NewAPIKey returns a fresh API key (shown once) and the hash stored in its
// place. 32 random bytes make a brute-force search hopeless, so a fast
// hash (SHA-256) is safe here, unlike for passwords.
func NewAPIKey() (key, hash string, err error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", "", err
	}
	key = APIKeyPrefix + base64.RawURLEncoding.EncodeToString(b)
	return key, HashSecret(key), nil
}

// HashSecret is the stored form of an API key or stream token.
func HashSecret(secret string) string {
	sum := sha256.Sum256([]byte(secret))
	return hex.EncodeToString(sum[:])
}

// LooksLikeAPIKey reports whether credential has an API key's shape.
func LooksLikeAPIKey(credential string) bool {
	return strings.HasPrefix(credential, APIKeyPrefix) && len(credential) == len(APIKeyPrefix)+43
}

// ParseTTL reads a key lifetime: a Go duration (720h) or whole days (90d).
func ParseTTL(v string) (time.Duration, error) {
	v = strings.TrimSpace(v)
	if days, ok := strings.CutSuffix(v, "d"); ok {
		n, err := strconv.Atoi(days)
		if err != nil || n <= 0 {
			return 0, fmt.Errorf("want a positive number of days such as 90d, got %q", v)
		}
		return time.Duration(n) * 24 * time.Hour, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		return 0, fmt.Errorf("want a positive duration such as 720h or 90d, got %q", v)
	}
	return d, nil
}
