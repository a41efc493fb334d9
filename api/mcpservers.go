package api

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/op-stack/executor/models"
	"github.com/op-stack/executor/store"
)

// MCP servers (issue 24, docs/mcp.md): a tenant's Model Context Protocol
// servers, managed with the hierarchies' scopes since they configure what
// agents can do. A server's secrets go in and never come out: answers list
// the names of those that are set (secrets_set), never a value.

// The routes' wire types (models.MCPServerInput, models.MCPServer and
// the rest) live in package models, shared with the Go client.

// MCPProbe tries to reach an MCP server when it is created or updated, so
// that a typo in a URL shows at once rather than at a run's first call.
// Package app wires one on the mcp client (the api package does not import
// mcp), through the same network guard as the workers' calls.
type MCPProbe interface {
	// ProbeMCPServer connects to target and lists its tools within ctx's
	// deadline; an error says why it could not.
	ProbeMCPServer(ctx context.Context, target MCPProbeTarget) error
}

// MCPProbeTarget is what a probe connects to: a Streamable HTTP server
// with the inline credentials the API knows (a worker's environment
// variables are the workers' own, so they are not sent).
type MCPProbeTarget struct {
	Name    string
	URL     string
	Headers map[string]string
}

// DefaultMCPProbeTimeout bounds a create's or update's probe: the answer
// waits for it, and a server that does not answer in this time is saved
// with a warning all the same.
const DefaultMCPProbeTimeout = 3 * time.Second

func viewMCPServer(m *store.MCPServer) models.MCPServer {
	approval := m.Approval
	if approval == "" {
		approval = mcpApprovalNone
	}
	return models.MCPServer{ID: m.ID, Name: m.Name, Tenant: m.TenantID, URL: m.URL, Command: m.Command,
		HeaderEnv: m.HeaderEnv, BearerTokenEnv: m.BearerTokenEnv, SecretsSet: nonNilStrings(m.SecretNames),
		AllowedTools: nonNilStrings(m.AllowedTools), TimeoutSeconds: m.Timeout.Seconds(), Approval: approval,
		CreatedAt: m.CreatedAt, UpdatedAt: m.UpdatedAt}
}

func nonNilStrings(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// The approval policies of a server: none, every tool that may be
// destructive (destructiveHint, true when absent), or every tool it does
// not mark readOnlyHint (see models.MCPPolicyGate).
const (
	mcpApprovalNone        = models.MCPApprovalNone
	mcpApprovalDestructive = models.MCPApprovalDestructive
	mcpApprovalNotReadOnly = models.MCPApprovalNotReadOnly
)

// MaxMCPTimeout bounds a server's per-call timeout.
const MaxMCPTimeout = time.Hour

var (
	mcpNameRE    = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,63}$`)
	headerNameRE = regexp.MustCompile("^[!#$%&'*+.^_`|~0-9A-Za-z-]{1,128}$")
	mcpToolRE    = regexp.MustCompile(`^[A-Za-z0-9_./-]{1,128}$`)
)

// checkMCPServer validates in into a server, naming the field of the
// first problem.
func (s *Server) checkMCPServer(in models.MCPServerInput) (*store.MCPServer, error) {
	name := strings.TrimSpace(in.Name)
	if !mcpNameRE.MatchString(name) {
		return nil, models.FieldError("name", "must be 1 to 64 characters of a-z, 0-9, _ and -, starting with a letter or digit (it is how agents name the server: \"mcp:%s/<tool>\")", name)
	}
	m := &store.MCPServer{Name: name, URL: strings.TrimSpace(in.URL), Command: in.Command,
		Headers: in.Headers, BearerToken: in.BearerToken, HeaderEnv: in.HeaderEnv,
		BearerTokenEnv: strings.TrimSpace(in.BearerTokenEnv), AllowedTools: in.AllowedTools, Approval: in.Approval}
	switch {
	case m.URL != "" && len(m.Command) > 0:
		return nil, models.FieldError("command", "give either url (Streamable HTTP) or command (stdio), not both")
	case m.URL != "":
		u, err := url.Parse(m.URL)
		if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
			return nil, models.FieldError("url", "must be an absolute http or https URL")
		}
		if u.User != nil {
			return nil, models.FieldError("url", "must not carry credentials; use headers or bearer_token")
		}
	case len(m.Command) > 0:
		if !slices.Contains(s.mcpStdioCommands, m.Command[0]) {
			return nil, models.FieldError("command", "stdio command %q is not allowed on this deployment (the operator lists them in MCP_STDIO_COMMANDS)", m.Command[0])
		}
	default:
		return nil, models.FieldError("url", "is required")
	}
	for k := range m.Headers {
		if !headerNameRE.MatchString(k) {
			return nil, models.FieldError("headers", "%q is not a header name", k)
		}
	}
	for k, v := range m.HeaderEnv {
		if !headerNameRE.MatchString(k) {
			return nil, models.FieldError("header_env", "%q is not a header name", k)
		}
		if !models.MCPSecretEnvAllowed(v, models.MCPHeaderEnvPrefix) {
			return nil, models.FieldError("header_env", "%q may not be read for an MCP server: name a workers' environment variable %s<NAME> (upper case)", v, models.MCPHeaderEnvPrefix)
		}
		if _, both := m.Headers[k]; both {
			return nil, models.FieldError("header_env", "header %q is given both inline and as an environment variable", k)
		}
	}
	if m.BearerTokenEnv != "" && !models.MCPSecretEnvAllowed(m.BearerTokenEnv, models.MCPTokenEnvPrefix) {
		return nil, models.FieldError("bearer_token_env", "%q may not be read for an MCP server: name a workers' environment variable %s<NAME> (upper case)", m.BearerTokenEnv, models.MCPTokenEnvPrefix)
	}
	if m.BearerTokenEnv != "" && m.BearerToken != nil && *m.BearerToken != "" {
		return nil, models.FieldError("bearer_token_env", "give bearer_token or bearer_token_env, not both")
	}
	for _, h := range []string{"Authorization"} {
		_, inline := m.Headers[h]
		_, env := m.HeaderEnv[h]
		if (inline || env) && ((m.BearerToken != nil && *m.BearerToken != "") || m.BearerTokenEnv != "") {
			return nil, models.FieldError("bearer_token", "the Authorization header is already given in headers or header_env")
		}
	}
	for i, t := range m.AllowedTools {
		if !mcpToolRE.MatchString(t) {
			return nil, models.FieldError(fmt.Sprintf("allowed_tools[%d]", i), "%q is not a tool name", t)
		}
	}
	if in.TimeoutSeconds < 0 || time.Duration(in.TimeoutSeconds*float64(time.Second)) > MaxMCPTimeout {
		return nil, models.FieldError("timeout_seconds", "must be between 0 (the default, 60) and %d", int(MaxMCPTimeout.Seconds()))
	}
	m.Timeout = time.Duration(in.TimeoutSeconds * float64(time.Second))
	switch m.Approval {
	case "", mcpApprovalNone:
		m.Approval = ""
	case mcpApprovalDestructive, mcpApprovalNotReadOnly:
	default:
		return nil, models.FieldError("approval", "must be %q, %q or %q", mcpApprovalNone, mcpApprovalDestructive, mcpApprovalNotReadOnly)
	}
	return m, nil
}

// mcpTenant is the tenant whose servers a request manages: the caller's
// own (a principal that sees every tenant manages its own tenant's).
func mcpTenant(c *gin.Context) string {
	if t := tenantFilter(c.Request.Context()); t != "" {
		return t
	}
	return ownTenant(c.Request.Context())
}

// mcpSecretError turns the store's refusal of inline secrets into a 400
// naming the field.
func mcpSecretError(err error) error {
	if errors.Is(err, store.ErrNoMCPSecretKey) {
		e := models.FieldError("bearer_token", "%v", err)
		e.Code = models.CodeInvalidConfig
		return e
	}
	return err
}

func (s *Server) createMCPServer(c *gin.Context) {
	var in models.MCPServerInput
	if err := decodeJSON(c, &in); err != nil {
		s.writeError(c, err)
		return
	}
	m, err := s.checkMCPServer(in)
	if err != nil {
		s.writeError(c, err)
		return
	}
	m.TenantID = mcpTenant(c)
	if m.TenantID == noTenant {
		s.writeError(c, models.Errorf(models.CodePermissionDenied, "no tenant"))
		return
	}
	if err := s.store.CreateMCPServer(c.Request.Context(), m); err != nil {
		s.writeError(c, mcpSecretError(err))
		return
	}
	view := viewMCPServer(m)
	view.Warnings = s.probeMCPServer(c.Request.Context(), m)
	ok(c, view)
}

// probeMCPServer tries to reach a server just saved, for at most the
// probe timeout, and returns a warning when it does not answer: the server
// stays saved, since it may come up later (issue 24). A stdio server is
// not probed: it runs on the workers, whose programs the API's host may
// not have.
func (s *Server) probeMCPServer(ctx context.Context, m *store.MCPServer) []models.MCPServerWarning {
	if s.mcpProbe == nil || m.URL == "" {
		return nil
	}
	target := MCPProbeTarget{Name: m.Name, URL: m.URL, Headers: map[string]string{}}
	if len(m.SecretNames) > 0 {
		// The secrets as stored (an update may have kept the old ones).
		if sec, err := s.store.MCPServerSecrets(ctx, m.TenantID, m.ID); err == nil {
			for k, v := range sec.Headers {
				target.Headers[k] = v
			}
			if sec.BearerToken != "" {
				target.Headers["Authorization"] = "Bearer " + sec.BearerToken
			}
		}
	}
	timeout := s.mcpProbeTimeout
	if timeout <= 0 {
		timeout = DefaultMCPProbeTimeout
	}
	if m.Timeout > 0 && m.Timeout < timeout {
		timeout = m.Timeout
	}
	pctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	err := s.mcpProbe.ProbeMCPServer(pctx, target)
	if err == nil {
		return nil
	}
	msg := err.Error()
	if pctx.Err() != nil && ctx.Err() == nil {
		msg = fmt.Sprintf("no answer within %s", timeout)
	}
	note := ""
	if len(m.HeaderEnv) > 0 || m.BearerTokenEnv != "" {
		note = " (credentials from the workers' environment are not sent from here)"
	}
	s.log.InfoContext(ctx, "MCP server saved but not reachable", "tenant", m.TenantID, "mcp_server", m.Name, "error", msg)
	return []models.MCPServerWarning{{
		Code:    models.WarningMCPServerUnreachable,
		Message: fmt.Sprintf("saved, but MCP server %q did not answer%s: %s; runs will list its tools when they need them", m.Name, note, msg),
	}}
}

// findMCPServer loads the server a get/delete body names by id or name.
func (s *Server) findMCPServer(c *gin.Context) (*store.MCPServer, error) {
	var in struct {
		ID   string `json:"id"`
		Name string `json:"name"`
	}
	if err := decodeJSON(c, &in); err != nil {
		return nil, err
	}
	id, name := strings.TrimSpace(in.ID), strings.TrimSpace(in.Name)
	if id == "" && name == "" {
		return nil, models.FieldError("id", "id or name is required")
	}
	tenant := mcpTenant(c)
	if tenant == noTenant {
		return nil, models.Errorf(models.CodeMCPServerNotFound, "MCP server not found")
	}
	return s.store.GetMCPServer(c.Request.Context(), tenant, id, name)
}

func (s *Server) getMCPServer(c *gin.Context) {
	m, err := s.findMCPServer(c)
	if err != nil {
		s.writeError(c, err)
		return
	}
	ok(c, viewMCPServer(m))
}

func (s *Server) listMCPServers(c *gin.Context) {
	tenant := mcpTenant(c)
	items := []models.MCPServer{}
	if tenant != noTenant {
		list, err := s.store.ListMCPServers(c.Request.Context(), tenant)
		if err != nil {
			s.writeError(c, err)
			return
		}
		for i := range list {
			items = append(items, viewMCPServer(&list[i]))
		}
	}
	ok(c, models.MCPServerList{Items: items, Total: len(items)})
}

func (s *Server) updateMCPServer(c *gin.Context) {
	var in models.MCPServerInput
	if err := decodeJSON(c, &in); err != nil {
		s.writeError(c, err)
		return
	}
	if strings.TrimSpace(in.ID) == "" {
		s.writeError(c, models.FieldError("id", "is required"))
		return
	}
	m, err := s.checkMCPServer(in)
	if err != nil {
		s.writeError(c, err)
		return
	}
	m.ID, m.TenantID = strings.TrimSpace(in.ID), mcpTenant(c)
	if m.TenantID == noTenant {
		s.writeError(c, models.Errorf(models.CodeMCPServerNotFound, "MCP server with id %q not found", m.ID))
		return
	}
	if err := s.store.UpdateMCPServer(c.Request.Context(), m); err != nil {
		s.writeError(c, mcpSecretError(err))
		return
	}
	view := viewMCPServer(m)
	view.Warnings = s.probeMCPServer(c.Request.Context(), m)
	ok(c, view)
}

func (s *Server) deleteMCPServer(c *gin.Context) {
	m, err := s.findMCPServer(c)
	if err != nil {
		s.writeError(c, err)
		return
	}
	if err := s.store.DeleteMCPServer(c.Request.Context(), m.TenantID, m.ID); err != nil {
		s.writeError(c, err)
		return
	}
	ok(c, models.MCPServerDeleted{ID: m.ID, Name: m.Name, Deleted: true})
}

// checkMCPToolKey checks an agent's "mcp:<server>/<tool>" key: well
// formed, naming a server of the request's tenant (another tenant's is
// unknown), and a tool the server's allowed_tools lets through. Whether
// the server really offers the tool is learnt when a run lists its tools:
// a server may be down, or not deployed yet, when a hierarchy is saved.
func (s *Server) checkMCPToolKey(ctx context.Context, field, key string, cache map[string]*store.MCPServer) error {
	name, tool, ok := models.ParseMCPToolKey(key)
	if !ok {
		return models.FieldError(field, "%q is not an MCP tool key; write mcp:<server>/<tool> or mcp:<server>/*", key)
	}
	srv, seen := cache[name]
	if !seen {
		tenant := tenantFilter(ctx)
		if tenant == "" {
			tenant = ownTenant(ctx)
		}
		if tenant != noTenant {
			found, err := s.store.GetMCPServer(ctx, tenant, "", name)
			switch {
			case err == nil:
				srv = found
			case models.ErrorCode(err) != models.CodeMCPServerNotFound:
				return err
			}
		}
		cache[name] = srv
	}
	if srv == nil {
		return models.FieldError(field, "unknown MCP server %q in %q; add it with mcp-servers/create", name, key)
	}
	if tool != models.MCPAllTools && len(srv.AllowedTools) > 0 && !slices.Contains(srv.AllowedTools, tool) {
		return models.FieldError(field, "tool %q of MCP server %q is not in its allowed_tools (%s)", tool, name, strings.Join(srv.AllowedTools, ", "))
	}
	return nil
}
