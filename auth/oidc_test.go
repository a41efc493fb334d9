package auth

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
)

const (
	testIssuer   = "https://idp.example.test"
	testAudience = "executor-api"
	testKeyID    = "test-key-1"
)

// testIdP is an identity provider's key set, served by an httptest server
// the test starts, and the private key that signs its tokens.
type testIdP struct {
	key     *rsa.PrivateKey
	jwksURL string
	fetches atomic.Int32
}

func newTestIdP(t *testing.T, public ...jose.JSONWebKey) *testIdP {
	t.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	idp := &testIdP{key: key}
	set := jose.JSONWebKeySet{Keys: append([]jose.JSONWebKey{
		{Key: &key.PublicKey, KeyID: testKeyID, Algorithm: string(jose.RS256), Use: "sig"},
	}, public...)}
	body, err := json.Marshal(set)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		idp.fetches.Add(1)
		w.Header().Set("Content-Type", "application/json")
		w.Write(body)
	}))
	t.Cleanup(srv.Close)
	idp.jwksURL = srv.URL + "/jwks"
	return idp
}

func (idp *testIdP) authenticator(t *testing.T) *OIDC {
	t.Helper()
	o, err := NewOIDC(t.Context(), OIDCConfig{Issuer: testIssuer, Audience: testAudience, JWKSURL: idp.jwksURL})
	if err != nil {
		t.Fatal(err)
	}
	return o
}

// validClaims are the claims of a token the test IdP accepts; tests change
// one thing.
func validClaims() map[string]any {
	now := time.Now()
	return map[string]any{
		"iss":    testIssuer,
		"aud":    testAudience,
		"sub":    "user-42",
		"iat":    now.Unix(),
		"exp":    now.Add(time.Hour).Unix(),
		"tenant": "acme",
		"scope":  "openid runs:read runs:write",
	}
}

// sign returns claims as a compact JWS signed by key with alg under kid.
func sign(t *testing.T, alg jose.SignatureAlgorithm, key crypto.Signer, kid string, claims map[string]any) string {
	t.Helper()
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: alg, Key: jose.JSONWebKey{Key: key, KeyID: kid}},
		(&jose.SignerOptions{}).WithType("JWT"))
	if err != nil {
		t.Fatal(err)
	}
	return signPayload(t, signer, claims)
}

func signPayload(t *testing.T, signer jose.Signer, claims map[string]any) string {
	t.Helper()
	payload, err := json.Marshal(claims)
	if err != nil {
		t.Fatal(err)
	}
	jws, err := signer.Sign(payload)
	if err != nil {
		t.Fatal(err)
	}
	tok, err := jws.CompactSerialize()
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

func (idp *testIdP) token(t *testing.T, claims map[string]any) string {
	return sign(t, jose.RS256, idp.key, testKeyID, claims)
}

func TestOIDCValidToken(t *testing.T) {
	idp := newTestIdP(t)
	o := idp.authenticator(t)
	cases := []struct {
		name  string
		scope any
		want  []Scope
	}{
		{"space-separated string", "openid runs:read runs:write", []Scope{ScopeRunsRead, ScopeRunsWrite}},
		{"comma-separated string", "runs:read,hierarchies:read, profile", []Scope{ScopeRunsRead, ScopeHierarchiesRead}},
		{"array", []string{"openid", "hierarchies:write", "runs:read", "runs:read", "email"}, []Scope{ScopeHierarchiesWrite, ScopeRunsRead}},
		{"only unknown scopes", "openid profile", nil},
		{"no scope claim", nil, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			claims := validClaims()
			if c.scope == nil {
				delete(claims, "scope")
			} else {
				claims["scope"] = c.scope
			}
			p, err := o.Authenticate(t.Context(), idp.token(t, claims))
			if err != nil {
				t.Fatal(err)
			}
			want := Principal{Tenant: "acme", Scopes: c.want, Method: MethodOIDC, KeyID: "user-42"}
			if p.Tenant != want.Tenant || p.Method != want.Method || p.KeyID != want.KeyID || !slices.Equal(p.Scopes, want.Scopes) {
				t.Fatalf("principal %+v, want %+v", p, want)
			}
		})
	}
	if n := idp.fetches.Load(); n != 1 {
		t.Errorf("key set fetched %d times, want once (then cached)", n)
	}
}

func TestOIDCCustomClaimNames(t *testing.T) {
	idp := newTestIdP(t)
	o, err := NewOIDC(t.Context(), OIDCConfig{
		Issuer: testIssuer, Audience: testAudience, JWKSURL: idp.jwksURL,
		TenantClaim: "org_id", ScopesClaim: "permissions",
	})
	if err != nil {
		t.Fatal(err)
	}
	claims := validClaims()
	claims["org_id"] = "globex"
	claims["permissions"] = []string{"admin", "runs:read"}
	claims["aud"] = []string{"other-api", testAudience}
	p, err := o.Authenticate(t.Context(), idp.token(t, claims))
	if err != nil {
		t.Fatal(err)
	}
	// admin is never taken from a token.
	if p.Tenant != "globex" || !slices.Equal(p.Scopes, []Scope{ScopeRunsRead}) {
		t.Fatalf("principal %+v, want tenant globex with runs:read only", p)
	}
}

func TestOIDCECDSAKey(t *testing.T) {
	ec, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	idp := newTestIdP(t, jose.JSONWebKey{Key: &ec.PublicKey, KeyID: "ec-1", Algorithm: string(jose.ES256), Use: "sig"})
	p, err := idp.authenticator(t).Authenticate(t.Context(), sign(t, jose.ES256, ec, "ec-1", validClaims()))
	if err != nil {
		t.Fatal(err)
	}
	if p.Tenant != "acme" {
		t.Fatalf("principal %+v", p)
	}
}

func TestOIDCRejects(t *testing.T) {
	idp := newTestIdP(t)
	o := idp.authenticator(t)
	other, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	with := func(k string, v any) string {
		c := validClaims()
		if v == nil {
			delete(c, k)
		} else {
			c[k] = v
		}
		return idp.token(t, c)
	}
	b64 := func(v any) string {
		b, _ := json.Marshal(v)
		return base64.RawURLEncoding.EncodeToString(b)
	}
	hmac, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.HS256, Key: []byte("0123456789abcdef0123456789abcdef")},
		(&jose.SignerOptions{}).WithType("JWT").WithHeader("kid", testKeyID))
	if err != nil {
		t.Fatal(err)
	}
	valid := idp.token(t, validClaims())
	parts := strings.Split(valid, ".")

	cases := map[string]string{
		"wrong audience":           with("aud", "someone-else"),
		"no audience":              with("aud", nil),
		"wrong issuer":             with("iss", "https://evil.example.test"),
		"expired":                  with("exp", time.Now().Add(-time.Minute).Unix()),
		"no expiry":                with("exp", nil),
		"missing tenant":           with("tenant", nil),
		"empty tenant":             with("tenant", ""),
		"tenant not a string":      with("tenant", 7),
		"scopes neither form":      with("scope", map[string]any{"runs:read": true}),
		"signed by another key":    sign(t, jose.RS256, other, testKeyID, validClaims()),
		"another key, unknown kid": sign(t, jose.RS256, other, "rotated", validClaims()),
		"HS256":                    signPayload(t, hmac, validClaims()),
		"alg none":                 b64(map[string]string{"alg": "none", "typ": "JWT", "kid": testKeyID}) + "." + b64(validClaims()) + ".",
		"payload tampered":         parts[0] + "." + b64(map[string]any{"iss": testIssuer, "aud": testAudience, "sub": "x", "exp": time.Now().Add(time.Hour).Unix(), "tenant": "other", "scope": "admin"}) + "." + parts[2],
		"malformed":                "not.a.jwt",
		"garbage":                  "eyJhbGciOi",
		"empty":                    "",
	}
	for name, tok := range cases {
		t.Run(name, func(t *testing.T) {
			p, err := o.Authenticate(t.Context(), tok)
			if !errors.Is(err, ErrInvalidCredentials) {
				t.Fatalf("got %+v, %v; want ErrInvalidCredentials", p, err)
			}
			if tok != "" && strings.Contains(err.Error(), tok) {
				t.Fatalf("error %q contains the token", err)
			}
			t.Log(err)
		})
	}
}

func TestOIDCJWKSUnreachable(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	url := srv.URL + "/jwks"
	srv.Close()
	// The service starts while the provider is down...
	o, err := NewOIDC(t.Context(), OIDCConfig{Issuer: testIssuer, Audience: testAudience, JWKSURL: url})
	if err != nil {
		t.Fatal(err)
	}
	// ...and refuses tokens until it is back.
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := o.Authenticate(t.Context(), sign(t, jose.RS256, key, testKeyID, validClaims())); !errors.Is(err, ErrInvalidCredentials) {
		t.Fatalf("got %v, want ErrInvalidCredentials", err)
	}
}

func TestNewOIDCConfig(t *testing.T) {
	ok := OIDCConfig{Issuer: testIssuer, Audience: testAudience, JWKSURL: "https://idp.example.test/jwks"}
	if _, err := NewOIDC(t.Context(), ok); err != nil {
		t.Fatalf("valid config refused: %v", err)
	}
	bad := map[string]func(*OIDCConfig){
		"no issuer":       func(c *OIDCConfig) { c.Issuer = "" },
		"no audience":     func(c *OIDCConfig) { c.Audience = " " },
		"no JWKS URL":     func(c *OIDCConfig) { c.JWKSURL = "" },
		"relative JWKS":   func(c *OIDCConfig) { c.JWKSURL = "/jwks" },
		"JWKS not http":   func(c *OIDCConfig) { c.JWKSURL = "file:///etc/jwks.json" },
		"JWKS unparsable": func(c *OIDCConfig) { c.JWKSURL = "https://[::1" },
	}
	for name, change := range bad {
		c := ok
		change(&c)
		if _, err := NewOIDC(t.Context(), c); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

// fakeKeys stands in for Keys: it records what it was asked and answers
// with a fixed API-key principal.
type fakeKeys struct{ got []string }

func (f *fakeKeys) Authenticate(_ context.Context, credential string) (Principal, error) {
	f.got = append(f.got, credential)
	return Principal{Tenant: "keys-tenant", Scopes: []Scope{ScopeRunsRead}, Method: MethodAPIKey, KeyID: "key-1"}, nil
}

func TestChainRoutesKeysAndTokens(t *testing.T) {
	idp := newTestIdP(t)
	keys := &fakeKeys{}
	chain := Chain{Keys: keys, Tokens: idp.authenticator(t)}

	apiKey, _, err := NewAPIKey()
	if err != nil {
		t.Fatal(err)
	}
	p, err := chain.Authenticate(t.Context(), apiKey)
	if err != nil || p.Method != MethodAPIKey || p.Tenant != "keys-tenant" {
		t.Fatalf("API key: got %+v, %v", p, err)
	}
	if !slices.Equal(keys.got, []string{apiKey}) {
		t.Fatalf("fake Keys asked %d times, want once with the key", len(keys.got))
	}
	if n := idp.fetches.Load(); n != 0 {
		t.Fatalf("an API key reached the OIDC verifier (%d key set fetches)", n)
	}

	p, err = chain.Authenticate(t.Context(), idp.token(t, validClaims()))
	if err != nil || p.Method != MethodOIDC || p.Tenant != "acme" || p.KeyID != "user-42" {
		t.Fatalf("JWT: got %+v, %v", p, err)
	}
	if len(keys.got) != 1 {
		t.Fatal("a JWT reached Keys")
	}

	// A JWT the provider refuses is refused, not handed to Keys.
	c := validClaims()
	c["aud"] = "someone-else"
	if _, err := chain.Authenticate(t.Context(), idp.token(t, c)); !errors.Is(err, ErrInvalidCredentials) {
		t.Fatalf("bad JWT: got %v", err)
	}
	if len(keys.got) != 1 {
		t.Fatal("a refused JWT reached Keys")
	}
}
