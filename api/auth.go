package api

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/op-stack/executor/auth"
	"github.com/op-stack/executor/console"
	"github.com/op-stack/executor/models"
)

// Access modes (AUTH_MODE).
const (
	// AuthOff serves every request as auth.Anonymous: the default tenant,
	// with every scope. For a developer's machine only.
	AuthOff = "off"
	// AuthRequired needs an API key or identity-provider token on every
	// route but the probes and metrics.
	AuthRequired = "required"
)

// Access configures access control.
type Access struct {
	// Mode is AuthOff or AuthRequired; empty is AuthOff.
	Mode string
	// Authenticator checks bearer credentials; nil refuses them all
	// (AuthRequired with no way in).
	Authenticator auth.Authenticator
	// StreamTokenTTL is how long a run's stream token may be used to
	// connect (and reconnect); zero: DefaultStreamTokenTTL.
	StreamTokenTTL time.Duration
	// RateLimit is each caller's request rate; zero RPS: unlimited.
	RateLimit RateLimit
	// MaxConcurrentRuns is how many runs a tenant may have pending or
	// running at once; zero: unlimited.
	MaxConcurrentRuns int
	// CORSOrigins are the browser origins allowed to call the API; none:
	// cross-origin browser requests are refused.
	CORSOrigins []string
	// IdempotencyTTL is how long an Idempotency-Key is remembered; zero:
	// DefaultIdempotencyTTL.
	IdempotencyTTL time.Duration
}

// DefaultStreamTokenTTL is how long a stream token may be used when
// Access.StreamTokenTTL is zero.
const DefaultStreamTokenTTL = 10 * time.Minute

// DefaultIdempotencyTTL is how long Idempotency-Keys are kept when
// Access.IdempotencyTTL is zero.
const DefaultIdempotencyTTL = 24 * time.Hour

// StreamTokenPrefix starts every stream token.
const StreamTokenPrefix = "ost_"

// rule is what a route needs from its caller.
type rule struct {
	// public routes need no credentials (probes, metrics).
	public bool
	scope  auth.Scope
	// streamToken routes also accept a run's stream token in ?token=, for
	// browsers' EventSource, which cannot send an Authorization header.
	streamToken bool
}

// routeRules maps every route ("METHOD /full/path") to its rule. A route
// registered without a rule makes NewServer panic, and the route-table test
// checks each rule's effect, so no route is ever served unguarded.
func routeRules() map[string]rule {
	hr, hw := rule{scope: auth.ScopeHierarchiesRead}, rule{scope: auth.ScopeHierarchiesWrite}
	rr, rw := rule{scope: auth.ScopeRunsRead}, rule{scope: auth.ScopeRunsWrite}
	stream := rule{scope: auth.ScopeRunsRead, streamToken: true}
	admin := rule{scope: auth.ScopeAdmin}
	mr, mw := rule{scope: auth.ScopeMemoryRead}, rule{scope: auth.ScopeMemoryWrite}
	public := rule{public: true}
	e := ExecutorPrefix
	return map[string]rule{
		"GET /healthz": public,
		"GET /readyz":  public,
		"GET /metrics": public,
		// The API's description: nothing in it is a tenant's.
		"GET /openapi.json": public,

		// The web console's pages and assets hold no data: their scripts
		// call the routes below with the person's key.
		"GET /":                                  public,
		"GET /runs":                              public,
		"GET /runs/:id":                          public,
		"GET /mcp-servers":                       public,
		"GET /schedules":                         public,
		"GET /webhooks":                          public,
		"GET /compare":                           public,
		"GET /memory":                            public,
		"GET " + console.AssetPrefix + "/*asset": public,

		"POST " + e + "/hierarchies/create": hw,
		"POST " + e + "/hierarchies/get":    hr,
		"POST " + e + "/hierarchies/update": hw,
		"POST " + e + "/hierarchies/delete": hw,
		"POST " + e + "/hierarchies/list":   hr,

		"POST " + e + "/subagents/create": hw,
		"POST " + e + "/subagents/get":    hr,
		"POST " + e + "/subagents/update": hw,
		"POST " + e + "/subagents/delete": hw,
		"POST " + e + "/subagents/list":   hr,

		// The built-in tools: what a hierarchy may name, read with it.
		"POST " + e + "/tools/list": hr,

		"POST " + e + "/runs/start":        rw,
		"POST " + e + "/runs/fork":         rw,
		"POST " + e + "/runs/fork-points":  rr,
		"POST " + e + "/runs/get":          rr,
		"POST " + e + "/runs/list":         rr,
		"POST " + e + "/runs/cancel":       rw,
		"POST " + e + "/runs/delete":       rw,
		"POST " + e + "/runs/pause":        rw,
		"POST " + e + "/runs/resume":       rw,
		"POST " + e + "/runs/teams/cancel": rw,
		"POST " + e + "/runs/redirect":     rw,
		"POST " + e + "/runs/approvals":    rr,
		"POST " + e + "/runs/approve":      rw,
		"POST " + e + "/runs/reject":       rw,
		"POST " + e + "/runs/events":       rr,
		"POST " + e + "/runs/messages":     rr,
		"POST " + e + "/runs/stream":       rr,
		"POST " + e + "/runs/stream-token": rr,
		"GET " + e + "/runs/:id/stream":    stream,
		"POST " + e + "/runs/:id/stream":   stream, // AG-UI (?format=ag-ui)
		"GET " + e + "/runs/:id/ws":        stream,
		"POST " + e + "/runs/results":      rr,
		// Formatting calls a model, which costs money: it is a write.
		"POST " + e + "/runs/results/format": rw,

		"POST " + e + "/artifacts/list": rr,

		// A schedule starts runs: it is run access, as runs/start is.
		"POST " + e + "/schedules/create":  rw,
		"POST " + e + "/schedules/list":    rr,
		"POST " + e + "/schedules/get":     rr,
		"POST " + e + "/schedules/pause":   rw,
		"POST " + e + "/schedules/unpause": rw,
		"POST " + e + "/schedules/trigger": rw,
		"POST " + e + "/schedules/update":  rw,
		"POST " + e + "/schedules/delete":  rw,

		// MCP servers configure what agents can do, as hierarchies do.
		"POST " + e + "/mcp-servers/create": hw,
		"POST " + e + "/mcp-servers/get":    hr,
		"POST " + e + "/mcp-servers/list":   hr,
		"POST " + e + "/mcp-servers/update": hw,
		"POST " + e + "/mcp-servers/delete": hw,

		// Webhooks report on runs: reading them is reading runs, and
		// managing them (or sending a delivery again) a write.
		"POST " + e + "/webhooks/create":     rw,
		"POST " + e + "/webhooks/get":        rr,
		"POST " + e + "/webhooks/list":       rr,
		"POST " + e + "/webhooks/update":     rw,
		"POST " + e + "/webhooks/delete":     rw,
		"POST " + e + "/webhooks/deliveries": rr,
		"POST " + e + "/webhooks/redeliver":  rw,

		// Long-term memory (docs/memory.md): its own scopes, since what
		// agents remember of a tenant's users is neither runs nor
		// hierarchies. An export reads everything; an import writes.
		"POST " + e + "/memory/put":             mw,
		"POST " + e + "/memory/get":             mr,
		"POST " + e + "/memory/search":          mr,
		"POST " + e + "/memory/list-namespaces": mr,
		"POST " + e + "/memory/delete":          mw,
		"POST " + e + "/memory/export":          mr,
		"POST " + e + "/memory/import":          mw,

		// The MCP server: listing its tools (the hierarchies) needs
		// hierarchies:read; a tool call, which starts a run, also needs
		// runs:write (checked by mcpserve, which answers a tool error).
		"POST " + e + "/mcp":   hr,
		"GET " + e + "/mcp":    hr,
		"DELETE " + e + "/mcp": hr,

		"POST " + e + "/apikeys/create": admin,
		"POST " + e + "/apikeys/list":   admin,
		"POST " + e + "/apikeys/revoke": admin,

		"POST " + V1Prefix + "/hierarchical-teams":             hw,
		"GET " + V1Prefix + "/hierarchical-teams/:id":          hr,
		"PUT " + V1Prefix + "/hierarchical-teams/:id":          hw,
		"DELETE " + V1Prefix + "/hierarchical-teams/:id":       hw,
		"POST " + V1Prefix + "/hierarchical-teams/:id/execute": rw,

		"GET " + V1Prefix + "/executions/:id":                 rr,
		"GET " + V1Prefix + "/executions/:id/stream":          stream,
		"GET " + V1Prefix + "/executions/:id/ws":              stream,
		"POST " + V1Prefix + "/executions/:id/stream-token":   rr,
		"GET " + V1Prefix + "/executions/:id/results":         rr,
		"POST " + V1Prefix + "/executions/:id/results/format": rw,
		"POST " + V1Prefix + "/executions/:id/cancel":         rw,
		"POST " + V1Prefix + "/executions/:id/pause":          rw,
		"POST " + V1Prefix + "/executions/:id/resume":         rw,

		"GET " + V1Prefix + "/artifacts/:id": rr,

		// A2A agents: the card describes a hierarchy; the JSON-RPC
		// endpoint reads runs, and its methods that start, answer or
		// cancel one need runs:write (checked by the routes it calls).
		"POST " + A2APrefix + "/:hierarchy_id":                            rr,
		"GET " + A2APrefix + "/:hierarchy_id/.well-known/agent-card.json": hr,
	}
}

// checkRouteRules panics naming every registered route without a rule and
// every rule without a route: both are programming errors that must not
// reach a running service.
func checkRouteRules(routes gin.RoutesInfo, rules map[string]rule) {
	seen := map[string]bool{}
	var missing, stale []string
	for _, r := range routes {
		k := r.Method + " " + r.Path
		seen[k] = true
		if _, ok := rules[k]; !ok {
			missing = append(missing, k)
		}
	}
	for k := range rules {
		if !seen[k] && k != "GET /metrics" {
			stale = append(stale, k)
		}
	}
	if len(missing)+len(stale) > 0 {
		sort.Strings(missing)
		sort.Strings(stale)
		panic(fmt.Sprintf("api: routes without an access rule: %v; rules without a route: %v", missing, stale))
	}
}

// authenticate decides who the request comes from and whether the route
// lets them in: public routes pass; with AUTH_MODE=off everyone is
// auth.Anonymous; otherwise a bearer API key or token (or, on a stream
// route, a stream token for that run) is required, and the route's scope.
// Failures are answered 401 INVALID_API_KEY or 403 PERMISSION_DENIED in the
// route's dialect. Tenancy (another tenant's object is not found) is
// checked by the handlers, which know the object.
func (s *Server) authenticate(c *gin.Context) {
	r, known := s.rules[c.Request.Method+" "+c.FullPath()]
	if known && r.public {
		c.Next()
		return
	}
	var p auth.Principal
	switch {
	case s.access.Mode != AuthRequired:
		p = auth.Anonymous()
	case known && r.streamToken && c.Query("token") != "":
		token, runID := c.Query("token"), c.Param("id")
		var (
			err  error
			info streamTokenInfo
		)
		if p, info, err = s.streamTokenPrincipal(c.Request.Context(), token, runID); err != nil {
			s.refuse(c, err)
			return
		}
		c.Set(credentialCheckKey, streamCredential{keyID: info.KeyID, expires: info.ExpiresAt, check: func(ctx context.Context) error {
			_, _, err := s.streamTokenPrincipal(ctx, token, runID)
			return err
		}})
	default:
		cred, err := bearer(c.Request)
		if err == nil {
			if s.access.Authenticator == nil {
				err = auth.ErrInvalidCredentials
			} else {
				p, err = s.access.Authenticator.Authenticate(c.Request.Context(), cred)
			}
		}
		if err != nil {
			s.refuse(c, err)
			return
		}
		if p.Method == auth.MethodAPIKey {
			// Only API keys are checked again: they can be revoked here. An
			// identity provider's token is not rechecked mid-stream (it
			// cannot be revoked here, and its expiry must not cut a stream
			// that its client will reopen with a fresh token anyway).
			authn := s.access.Authenticator
			c.Set(credentialCheckKey, streamCredential{keyID: p.KeyID, check: func(ctx context.Context) error {
				_, err := authn.Authenticate(ctx, cred)
				return err
			}})
		}
	}
	c.Request = c.Request.WithContext(auth.WithPrincipal(c.Request.Context(), p))
	if known && !p.Has(r.scope) {
		s.writeError(c, models.Errorf(models.CodePermissionDenied, "this route needs the %s scope", r.scope))
		return
	}
	c.Next()
}

// credentialCheckKey holds, in a request's gin context, the request's
// streamCredential (none with AUTH_MODE=off).
const credentialCheckKey = "api.credential_check"

// credentialCheck authenticates a request's credential again: nil while it
// is valid, auth.ErrInvalidCredentials once it is revoked or expired (or,
// for a stream token, once the key that issued it is), another error when
// that cannot be told (the database is down). Event streams use it only
// when the server has no store; otherwise the credential watch asks the
// store about all open streams' keys at once (see credentialWatch).
type credentialCheck func(ctx context.Context) error

// refuse answers an authentication failure: 401 for bad credentials, the
// error itself (503 when the key store is down) otherwise.
func (s *Server) refuse(c *gin.Context, err error) {
	if errors.Is(err, auth.ErrInvalidCredentials) {
		c.Header("WWW-Authenticate", `Bearer realm="op-stack-executor"`)
		s.writeError(c, models.Errorf(models.CodeInvalidAPIKey, "a valid API key is required: send Authorization: Bearer <key>"))
		return
	}
	s.writeError(c, err)
}

// bearer is the credential of an Authorization: Bearer header.
func bearer(r *http.Request) (string, error) {
	h := r.Header.Get("Authorization")
	scheme, cred, ok := strings.Cut(h, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") || strings.TrimSpace(cred) == "" {
		return "", auth.ErrInvalidCredentials
	}
	return strings.TrimSpace(cred), nil
}

// principal is the caller of the request, set by authenticate. A request
// that somehow skipped it gets the zero principal: no tenant, no scope, so
// it sees nothing.
func principal(c *gin.Context) auth.Principal {
	p, _ := auth.PrincipalFrom(c.Request.Context())
	return p
}

// Routes lists the routes the server serves.
func (s *Server) Routes() gin.RoutesInfo { return s.router.Routes() }

// RouteScope is the scope a route (method and path as registered, e.g.
// "/api/v1/executions/:id") needs, and whether it is public.
func (s *Server) RouteScope(method, path string) (auth.Scope, bool) {
	r := s.rules[method+" "+path]
	return r.scope, r.public
}

// accessMiddleware is access control's part of every request, in order:
// CORS first (a preflight carries no credentials), then authentication and
// scopes, the caller's request rate, and the body's media type.
func (s *Server) accessMiddleware() []gin.HandlerFunc {
	return []gin.HandlerFunc{corsMiddleware(s.access.CORSOrigins), s.authenticate, s.rateLimit(s.access.RateLimit), s.requireJSON()}
}

// idempotentCreate makes a creation route honour Idempotency-Key (see
// idempotent), with the scope naming the operation.
func (s *Server) idempotentCreate(scope string) gin.HandlerFunc {
	ttl := s.access.IdempotencyTTL
	if ttl <= 0 {
		ttl = DefaultIdempotencyTTL
	}
	return s.idempotent(scope, s.store, ttl)
}
