package auth

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	"golang.org/x/oauth2"
)

// OIDCConfig configures authentication with JSON Web Tokens of an
// organisation's OpenID Connect identity provider.
type OIDCConfig struct {
	// Issuer is the provider's issuer URL; a token's "iss" claim must equal
	// it exactly. Required.
	Issuer string
	// Audience is the value a token's "aud" claim must contain (the client
	// id or API identifier the provider issues tokens for). Required.
	Audience string
	// JWKSURL is where the provider publishes its public signing keys (the
	// jwks_uri of its discovery document). Required: the service does no
	// discovery, so that it starts even while the provider is unreachable.
	JWKSURL string
	// TenantClaim names the claim holding the caller's tenant, a non-empty
	// string. Default "tenant".
	TenantClaim string
	// ScopesClaim names the claim holding the caller's scopes, either a
	// space- or comma-separated string (OAuth's "runs:read runs:write") or a
	// JSON array of strings. Scopes this service does not know, such as
	// "openid", are ignored. Default "scope".
	ScopesClaim string
}

// The claim names used when OIDCConfig leaves them empty.
const (
	DefaultTenantClaim = "tenant"
	DefaultScopesClaim = "scope"
)

// jwksTimeout bounds one fetch of the key set when the caller's context
// brings no HTTP client of its own.
const jwksTimeout = 10 * time.Second

// signingAlgs are the algorithms a token may be signed with: every
// asymmetric one go-oidc supports. Symmetric ones (HS256…) and "none" are
// never accepted: the keys come from a public key set.
var signingAlgs = []string{
	oidc.RS256, oidc.RS384, oidc.RS512,
	oidc.ES256, oidc.ES384, oidc.ES512,
	oidc.PS256, oidc.PS384, oidc.PS512,
	oidc.EdDSA,
}

// OIDC authenticates JSON Web Tokens of an OpenID Connect provider. It is
// safe for concurrent use.
type OIDC struct {
	verifier    *oidc.IDTokenVerifier
	tenantClaim string
	scopesClaim string
}

// NewOIDC returns an authenticator for the tokens of the provider cfg
// names. It checks cfg but makes no network request: the signing keys are
// fetched on the first token, and again whenever a token names a key not
// yet seen (the provider rotated its keys).
//
// ctx is kept for those fetches for as long as the authenticator lives, so
// pass a long-lived context (the server's), not a request's. Its values
// count: an HTTP client set with oidc.ClientContext is used for the
// fetches; without one, a client with a 10 s timeout is, so that a hung
// provider cannot stall key refreshes for good.
func NewOIDC(ctx context.Context, cfg OIDCConfig) (*OIDC, error) {
	if strings.TrimSpace(cfg.Issuer) == "" {
		return nil, errors.New("oidc: issuer is required")
	}
	if strings.TrimSpace(cfg.Audience) == "" {
		return nil, errors.New("oidc: audience is required")
	}
	if cfg.JWKSURL == "" {
		return nil, errors.New("oidc: JWKS URL is required")
	}
	u, err := url.Parse(cfg.JWKSURL)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		return nil, fmt.Errorf("oidc: JWKS URL %q is not an http(s) URL", cfg.JWKSURL)
	}
	if cfg.TenantClaim == "" {
		cfg.TenantClaim = DefaultTenantClaim
	}
	if cfg.ScopesClaim == "" {
		cfg.ScopesClaim = DefaultScopesClaim
	}
	if _, ok := ctx.Value(oauth2.HTTPClient).(*http.Client); !ok {
		ctx = oidc.ClientContext(ctx, &http.Client{Timeout: jwksTimeout})
	}
	keySet := oidc.NewRemoteKeySet(ctx, cfg.JWKSURL)
	verifier := oidc.NewVerifier(cfg.Issuer, keySet, &oidc.Config{
		ClientID:             cfg.Audience,
		SupportedSigningAlgs: signingAlgs,
	})
	return &OIDC{verifier: verifier, tenantClaim: cfg.TenantClaim, scopesClaim: cfg.ScopesClaim}, nil
}

// Authenticate implements Authenticator. go-oidc checks the signature
// against the provider's keys, the issuer, the audience and the expiry;
// then the tenant claim must be a non-empty string and the scopes claim,
// when present, a string or an array of strings. The principal's KeyID is
// the token's subject.
//
// Every failure is ErrInvalidCredentials (errors.Is holds), wrapped with
// the reason for the server's log; neither ever holds the token. That
// includes failing to fetch the provider's keys when a token names a key
// not yet cached (the provider is down): the caller answers 401, not 503.
// Telling the two apart would mean matching go-oidc's error text; keep it
// simple until that matters.
func (o *OIDC) Authenticate(ctx context.Context, rawToken string) (Principal, error) {
	tok, err := o.verifier.Verify(ctx, rawToken)
	if err != nil {
		return Principal{}, fmt.Errorf("%w: %v", ErrInvalidCredentials, err)
	}
	var claims map[string]json.RawMessage
	if err := tok.Claims(&claims); err != nil {
		return Principal{}, fmt.Errorf("%w: oidc: reading claims: %v", ErrInvalidCredentials, err)
	}
	var tenant string
	if raw, ok := claims[o.tenantClaim]; !ok || json.Unmarshal(raw, &tenant) != nil || strings.TrimSpace(tenant) == "" {
		return Principal{}, fmt.Errorf("%w: oidc: claim %q is not a non-empty string", ErrInvalidCredentials, o.tenantClaim)
	}
	var scopes []Scope
	if raw, ok := claims[o.scopesClaim]; ok {
		if scopes, err = tokenScopes(raw); err != nil {
			return Principal{}, fmt.Errorf("%w: oidc: claim %q: %v", ErrInvalidCredentials, o.scopesClaim, err)
		}
	}
	return Principal{Tenant: tenant, Scopes: scopes, Method: MethodOIDC, KeyID: tok.Subject}, nil
}

// tokenScopes reads a scopes claim, a space- or comma-separated string or
// an array of strings, keeping the known scopes once each. A token without
// any known scope still authenticates; every route then refuses it.
func tokenScopes(raw json.RawMessage) ([]Scope, error) {
	var names []string
	var list string
	if err := json.Unmarshal(raw, &list); err == nil {
		names = strings.FieldsFunc(list, func(r rune) bool { return r == ',' || r == ' ' })
	} else if err := json.Unmarshal(raw, &names); err != nil {
		return nil, errors.New("neither a string nor an array of strings")
	}
	var out []Scope
	for _, n := range names {
		s := Scope(strings.TrimSpace(n))
		// admin is never taken from a token: an identity provider may put a
		// generic "admin" scope in tokens for other applications, and here
		// it would open every tenant. Cross-tenant access needs an API key.
		if s != ScopeAdmin && slices.Contains(AllScopes(), s) && !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	return out, nil
}
