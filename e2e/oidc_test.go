package e2e

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"

	"github.com/op-stack/executor/config"
	"github.com/op-stack/executor/models"
)

// identityProvider is a test OpenID provider: an RSA key whose public half
// a JWKS server the test starts serves, and which signs tokens.
type identityProvider struct {
	key     *rsa.PrivateKey
	jwksURL string
}

func newIdentityProvider(t *testing.T) *identityProvider {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	set, _ := json.Marshal(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: &key.PublicKey, KeyID: "k1", Algorithm: string(jose.RS256), Use: "sig"}}})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Write(set)
	}))
	t.Cleanup(srv.Close)
	return &identityProvider{key: key, jwksURL: srv.URL + "/jwks"}
}

func (p *identityProvider) token(t *testing.T, claims map[string]any) string {
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.RS256, Key: p.key}, (&jose.SignerOptions{}).WithHeader("kid", "k1").WithType("JWT"))
	if err != nil {
		t.Fatal(err)
	}
	payload, _ := json.Marshal(claims)
	obj, err := signer.Sign(payload)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := obj.CompactSerialize()
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

// TestOIDCTokensOnTheAPI configures the service with an identity provider
// and checks that its tokens open the API in the token's tenant with its
// scopes, that runs carry the TenantId search attribute, and that an API
// key of the same tenant sees what the token created while another tenant
// does not.
func TestOIDCTokensOnTheAPI(t *testing.T) {
	idp := newIdentityProvider(t)
	e := newEnv(t, accessRules(), withAuth, withConfig(func(c *config.Config) {
		c.OIDCIssuer, c.OIDCAudience, c.OIDCJWKSURL = "https://idp.example", "op-stack-executor", idp.jwksURL
		c.OIDCTenantClaim, c.OIDCScopesClaim = "org", "scp"
	}))
	claims := func(scopes any) map[string]any {
		return map[string]any{"iss": "https://idp.example", "aud": "op-stack-executor", "sub": "alice", "org": "globex",
			"scp": scopes, "exp": time.Now().Add(time.Hour).Unix(), "iat": time.Now().Unix()}
	}
	writer := idp.token(t, claims([]string{"openid", "hierarchies:write", "runs:write", "runs:read", "admin"}))
	var h struct {
		ID string `json:"hierarchy_id"`
	}
	e.mustCall("POST", "/api/executor/v1/hierarchies/create", writer, accessHierarchy("oidc"), &h)
	var run struct {
		ID string `json:"id"`
	}
	e.mustCall("POST", "/api/executor/v1/runs/start", writer, map[string]any{"hierarchy_id": h.ID, "task": "token"}, &run)

	// admin was in the token and is ignored: no key management.
	if s, raw := e.call("POST", "/api/executor/v1/apikeys/list", writer, map[string]any{}); s != http.StatusForbidden {
		t.Errorf("apikeys/list with a token claiming admin: %d %s, want 403", s, raw)
	}
	// A token without runs:read may not read the run.
	if s, raw := e.call("POST", "/api/executor/v1/runs/get", idp.token(t, claims("hierarchies:read")), map[string]any{"id": run.ID}); s != http.StatusForbidden {
		t.Errorf("runs/get without runs:read: %d %s, want 403", s, raw)
	}
	// Expired, or for another audience: 401.
	expired := claims("runs:read")
	expired["exp"] = time.Now().Add(-time.Minute).Unix()
	other := claims("runs:read")
	other["aud"] = "someone-else"
	for name, c := range map[string]map[string]any{"expired": expired, "other audience": other} {
		if s, raw := e.call("POST", "/api/executor/v1/runs/get", idp.token(t, c), map[string]any{"id": run.ID}); s != http.StatusUnauthorized {
			t.Errorf("%s token: %d %s, want 401", name, s, raw)
		}
	}
	// The tenant is the token's: a key of globex sees the run, one of
	// another tenant does not.
	var v runView
	e.mustCall("POST", "/api/executor/v1/runs/get", e.issueKey("globex", "runs:read"), map[string]any{"id": run.ID}, &v)
	if s, _ := e.call("POST", "/api/executor/v1/runs/get", e.issueKey("initech", "runs:read"), map[string]any{"id": run.ID}); s != http.StatusNotFound {
		t.Errorf("another tenant's key: %d, want 404", s)
	}

	// Operators find the tenant's runs by search attribute.
	desc, err := e.temporal.DescribeWorkflowExecution(context.Background(), models.RunWorkflowID(run.ID), "")
	if err != nil {
		t.Fatal(err)
	}
	sa := desc.GetWorkflowExecutionInfo().GetSearchAttributes().GetIndexedFields()["TenantId"]
	var tenant string
	if sa == nil || json.Unmarshal(sa.GetData(), &tenant) != nil || tenant != "globex" {
		t.Errorf("run's TenantId search attribute = %v, want globex", sa)
	}
}
