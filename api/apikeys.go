package api

import (
	"errors"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/op-stack/executor/auth"
	"github.com/op-stack/executor/models"
	"github.com/op-stack/executor/store"
)

// Key management over the API: admin scope only (see routeRules). The CLI
// (`executor apikeys`) does the same against the database directly, which
// is how the first admin key is made.

type createAPIKeyInput struct {
	Tenant      string   `json:"tenant"`
	Scopes      []string `json:"scopes"`
	ExpiresIn   string   `json:"expires_in"` // a Go duration or Nd days; empty: never
	Description string   `json:"description"`
}

// apiKeyView is a stored key as the API shows it: never its hash.
type apiKeyView struct {
	ID          string     `json:"id"`
	Prefix      string     `json:"prefix"`
	Tenant      string     `json:"tenant"`
	Scopes      []string   `json:"scopes"`
	Description string     `json:"description"`
	CreatedAt   time.Time  `json:"created_at"`
	ExpiresAt   *time.Time `json:"expires_at"`
	RevokedAt   *time.Time `json:"revoked_at"`
}

func viewAPIKey(k store.APIKey) apiKeyView {
	return apiKeyView{ID: k.ID, Prefix: k.Prefix, Tenant: k.Tenant, Scopes: k.Scopes, Description: k.Description,
		CreatedAt: k.CreatedAt, ExpiresAt: k.ExpiresAt, RevokedAt: k.RevokedAt}
}

func (s *Server) createAPIKey(c *gin.Context) {
	var in createAPIKeyInput
	if err := decodeJSON(c, &in); err != nil {
		s.writeError(c, err)
		return
	}
	scopes, err := auth.ParseScopes(strings.Join(in.Scopes, ","))
	if err != nil {
		s.writeError(c, models.FieldError("scopes", "%v", err))
		return
	}
	var ttl time.Duration
	if in.ExpiresIn != "" {
		if ttl, err = auth.ParseTTL(in.ExpiresIn); err != nil {
			s.writeError(c, models.FieldError("expires_in", "%v", err))
			return
		}
	}
	key, rec, err := s.store.IssueAPIKey(c.Request.Context(), in.Tenant, scopes, ttl, in.Description)
	if err != nil {
		s.writeError(c, err)
		return
	}
	ok(c, gin.H{"key": key, "api_key": viewAPIKey(*rec)})
}

func (s *Server) listAPIKeys(c *gin.Context) {
	var in struct {
		Tenant string `json:"tenant"`
	}
	if c.Request.ContentLength != 0 {
		if err := decodeJSON(c, &in); err != nil {
			s.writeError(c, err)
			return
		}
	}
	keys, err := s.store.ListAPIKeys(c.Request.Context(), strings.TrimSpace(in.Tenant))
	if err != nil {
		s.writeError(c, err)
		return
	}
	items := make([]apiKeyView, 0, len(keys))
	for _, k := range keys {
		items = append(items, viewAPIKey(k))
	}
	ok(c, gin.H{"items": items})
}

func (s *Server) revokeAPIKey(c *gin.Context) {
	var in struct {
		ID string `json:"id"`
	}
	if err := decodeJSON(c, &in); err != nil {
		s.writeError(c, err)
		return
	}
	id := strings.TrimSpace(in.ID)
	if id == "" {
		s.writeError(c, models.FieldError("id", "is required"))
		return
	}
	if err := s.store.RevokeAPIKey(c.Request.Context(), id); err != nil {
		if errors.Is(err, store.ErrAPIKeyNotFound) {
			err = models.Errorf(models.CodeRouteNotFound, "api key %q not found", id)
		}
		s.writeError(c, err)
		return
	}
	ok(c, gin.H{"id": id, "revoked": true})
}
