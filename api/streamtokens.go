package api

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/op-stack/executor/auth"
	"github.com/op-stack/executor/models"
	"github.com/op-stack/executor/store"
)

// A stream token lets a browser's EventSource, which cannot send an
// Authorization header, open one run's stream: GET …/stream?token=ost_….
// An authenticated call with runs:read on the run issues it; it is stored
// hashed, names its run, its tenant and the API key that issued it, and may
// be used to connect (and reconnect) until it expires or that key is
// revoked; a stream opened with it ends within
// StreamOptions.CredentialCheckInterval of the revocation. The API key itself never goes in a URL,
// where proxies and browser history would keep it.

// streamTokenResponse is the answer of runs/stream-token and of spec 001's
// POST /executions/{id}/stream-token.
type streamTokenResponse struct {
	Token     string `json:"token"`
	ExpiresAt string `json:"expires_at"`
	// StreamURL is the run's GET stream path with the token, ready for
	// new EventSource(url).
	StreamURL string `json:"stream_url"`
}

func (s *Server) issueStreamToken(ctx context.Context, runID string, v1 bool) (streamTokenResponse, error) {
	run, err := s.visibleRun(ctx, runID)
	if err != nil {
		return streamTokenResponse{}, err
	}
	b := make([]byte, 24)
	if _, err := rand.Read(b); err != nil {
		return streamTokenResponse{}, err
	}
	token := StreamTokenPrefix + base64.RawURLEncoding.EncodeToString(b)
	ttl := s.access.StreamTokenTTL
	if ttl <= 0 {
		ttl = DefaultStreamTokenTTL
	}
	expires := time.Now().UTC().Add(ttl)
	// A token issued with an API key lives no longer than the key: it is
	// refused (and its open streams end) once the key is revoked.
	var keyID string
	if p, ok := auth.PrincipalFrom(ctx); ok && p.Method == auth.MethodAPIKey {
		keyID = p.KeyID
	}
	// The token names the run as its tenant does (public id and tenant),
	// as the stream's path does.
	if err := s.store.CreateKeyStreamToken(ctx, auth.HashSecret(token), run.PublicID, tenantOrDefault(run.TenantID), keyID, expires); err != nil {
		return streamTokenResponse{}, err
	}
	path := ExecutorPrefix + "/runs/" + run.PublicID + "/stream"
	if v1 {
		path = V1Prefix + "/executions/" + run.PublicID + "/stream"
	}
	return streamTokenResponse{Token: token, ExpiresAt: models.FormatTimestamp(expires), StreamURL: path + "?token=" + token}, nil
}

// createStreamToken is POST runs/stream-token {"id": …}.
func (s *Server) createStreamToken(c *gin.Context) {
	id, valid := readID[runIDInput](s, c)
	if !valid {
		return
	}
	resp, err := s.issueStreamToken(c.Request.Context(), id, false)
	if err != nil {
		s.writeError(c, err)
		return
	}
	ok(c, resp)
}

// v1CreateStreamToken is spec 001's POST /executions/{id}/stream-token.
func (s *Server) v1CreateStreamToken(c *gin.Context) {
	id, err := pathID(c, "execution_id")
	if err == nil {
		var resp streamTokenResponse
		if resp, err = s.issueStreamToken(c.Request.Context(), id, true); err == nil {
			okV1(c, "STREAM_TOKEN_ISSUED", "stream token issued", resp)
			return
		}
	}
	s.writeError(c, err)
}

// streamTokenInfo is what a valid stream token grants.
type streamTokenInfo = store.StreamTokenInfo

// streamTokenPrincipal checks a stream token for the run in the path: an
// unknown or expired token, or one of another run, is invalid credentials.
// It returns the token's record too, for the credential watch.
func (s *Server) streamTokenPrincipal(ctx context.Context, token, pathRunID string) (auth.Principal, streamTokenInfo, error) {
	if !strings.HasPrefix(token, StreamTokenPrefix) || s.store == nil {
		return auth.Principal{}, streamTokenInfo{}, auth.ErrInvalidCredentials
	}
	info, err := s.store.StreamTokenInfo(ctx, auth.HashSecret(token))
	if errors.Is(err, store.ErrStreamTokenNotFound) {
		return auth.Principal{}, info, auth.ErrInvalidCredentials
	}
	if err != nil {
		return auth.Principal{}, info, err
	}
	if !time.Now().Before(info.ExpiresAt) || info.RunID != strings.TrimSpace(pathRunID) {
		return auth.Principal{}, info, auth.ErrInvalidCredentials
	}
	runID := info.RunID
	return auth.Principal{Tenant: info.Tenant, Scopes: []auth.Scope{auth.ScopeRunsRead}, Method: auth.MethodStreamToken, KeyID: "stream:" + runID, RunID: runID}, info, nil
}
