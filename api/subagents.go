package api

import (
	"context"
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/gin-gonic/gin"

	"github.com/op-stack/executor/models"
	"github.com/op-stack/executor/store"
)

// ToolCatalog knows which tool keys exist. The API asks it about every
// `tools` list it stores (sub-agents' and workers'), so a typo is a 400 at
// create time rather than a failed run later. The tools package's *Registry
// satisfies it.
type ToolCatalog interface {
	// Validate returns nil when every key is known, and otherwise a
	// *models.Error (400) whose Field is field and whose message names the
	// first unknown key.
	Validate(field string, keys []string) error
}

// noToolCatalog is the catalog of a server built without one: it knows no
// tool, so any key is refused with the same error a real catalog gives, and
// lists without tools still pass.
type noToolCatalog struct{}

func (noToolCatalog) Validate(field string, keys []string) error {
	for _, k := range keys {
		return models.FieldError(field, "unknown tool %q; available: (none)", k)
	}
	return nil
}

// subAgentInput is the body of subagents/create and subagents/update. The
// optional settings are pointers so that an absent value takes its default
// while an explicit one (even 0 or false) is kept and validated.
type subAgentInput struct {
	ID            *string  `json:"id"`
	Name          string   `json:"name"`
	Description   string   `json:"description"`
	SystemPrompt  string   `json:"system_prompt"`
	Model         string   `json:"model"`
	Temperature   *float64 `json:"temperature"`
	MaxTokens     *int     `json:"max_tokens"`
	Tools         []string `json:"tools"`
	SubAgents     []string `json:"sub_agents"`
	MaxDepth      *int     `json:"max_depth"`
	MaxIterations *int     `json:"max_iterations"`
	Enabled       *bool    `json:"enabled"`
	// LLM settings like an agent's: flat, or as spec 001's llm_config
	// (which wins).
	Provider  string          `json:"provider"`
	BaseURL   string          `json:"base_url"`
	Region    string          `json:"region"`
	Timeout   int             `json:"timeout"`
	LLMConfig *llmConfigInput `json:"llm_config"`
	// FallbackModels (issue 15), also accepted in llm_config.
	FallbackModels []string `json:"fallback_models"`
}

// subAgentView is a sub-agent as the API answers it: its fields, and its
// LLM settings again as spec 001's llm_config.
type subAgentView struct {
	*models.SubAgent
	LLMConfig subAgentLLMConfig `json:"llm_config"`
}

type subAgentLLMConfig struct {
	Provider       string   `json:"provider,omitempty"`
	Model          string   `json:"model,omitempty"`
	BaseURL        string   `json:"base_url,omitempty"`
	Region         string   `json:"region,omitempty"`
	Temperature    *float64 `json:"temperature,omitempty"`
	MaxTokens      *int     `json:"max_tokens,omitempty"`
	Timeout        int      `json:"timeout,omitempty"`
	FallbackModels []string `json:"fallback_models,omitempty"`
}

func viewSubAgent(sa *models.SubAgent) subAgentView {
	return subAgentView{SubAgent: sa, LLMConfig: subAgentLLMConfig{
		Provider: sa.Provider, Model: sa.Model, BaseURL: sa.BaseURL, Region: sa.Region,
		Temperature: sa.Temperature, MaxTokens: sa.MaxTokens, Timeout: sa.Timeout,
		FallbackModels: sa.FallbackModels,
	}}
}

// Bounds of a sub-agent's max_depth: the runtime stops delegating below it,
// and ten levels of agents calling agents is already far beyond useful.
const (
	minSubAgentMaxDepth = 1
	maxSubAgentMaxDepth = 10
	maxBaseURLLength    = 2000
)

// toModel fills defaults and checks every field that needs no lookup. The
// id is left empty when absent; create generates it.
func (in *subAgentInput) toModel() (*models.SubAgent, error) {
	sa := &models.SubAgent{
		Name:           strings.TrimSpace(in.Name),
		Description:    in.Description,
		SystemPrompt:   in.SystemPrompt,
		Model:          strings.TrimSpace(in.Model),
		Temperature:    in.Temperature,
		MaxTokens:      in.MaxTokens,
		Provider:       strings.TrimSpace(in.Provider),
		BaseURL:        strings.TrimSpace(in.BaseURL),
		Region:         strings.TrimSpace(in.Region),
		Timeout:        in.Timeout,
		FallbackModels: models.CleanModels(in.FallbackModels),
		MaxDepth:       models.DefaultSubAgentMaxDepth,
		MaxIterations:  models.DefaultAgentIterations,
		Enabled:        true,
	}
	if c := in.LLMConfig; c != nil {
		sa.Provider = firstNonEmpty(strings.TrimSpace(c.Provider), sa.Provider)
		sa.Model = firstNonEmpty(strings.TrimSpace(c.Model), sa.Model)
		sa.BaseURL = firstNonEmpty(strings.TrimSpace(c.BaseURL), sa.BaseURL)
		sa.Region = firstNonEmpty(strings.TrimSpace(c.Region), sa.Region)
		if c.Temperature != nil {
			sa.Temperature = c.Temperature
		}
		if c.MaxTokens != nil {
			sa.MaxTokens = c.MaxTokens
		}
		if c.Timeout != 0 {
			sa.Timeout = c.Timeout
		}
		if c.FallbackModels != nil {
			sa.FallbackModels = models.CleanModels(c.FallbackModels)
		}
	}
	if err := models.ValidateFallbackModels("llm_config.fallback_models", sa.FallbackModels); err != nil {
		return nil, err
	}
	if sa.Provider != "" && !slices.Contains(models.KnownProviders, sa.Provider) {
		return nil, &models.Error{Code: models.CodeProviderNotSupported, Field: "llm_config.provider",
			Message: fmt.Sprintf("llm_config.provider: %q is not supported; use one of %s", sa.Provider, strings.Join(models.KnownProviders, ", "))}
	}
	if sa.Timeout < 0 {
		return nil, models.FieldError("llm_config.timeout", "must be 0 (the default) or a number of seconds, got %d", sa.Timeout)
	}
	if n := utf8.RuneCountInString(sa.BaseURL); n > maxBaseURLLength {
		return nil, models.FieldError("llm_config.base_url", "must be at most %d characters, got %d", maxBaseURLLength, n)
	}
	if u, err := url.Parse(sa.BaseURL); sa.BaseURL != "" && (err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "") {
		return nil, models.FieldError("llm_config.base_url", "must be an http(s) URL, got %q", sa.BaseURL)
	}
	if n := utf8.RuneCountInString(sa.Region); n > models.MaxModelLength {
		return nil, models.FieldError("llm_config.region", "must be at most %d characters, got %d", models.MaxModelLength, n)
	}
	if in.ID != nil {
		// An explicit id must be usable; only an absent one is generated.
		sa.ID = strings.TrimSpace(*in.ID)
		if sa.ID == "" {
			return nil, models.FieldError("id", "must be a non-empty string when given (omit it to have one generated)")
		}
		if n := utf8.RuneCountInString(sa.ID); n > models.MaxAgentIDLength {
			return nil, models.FieldError("id", "must be at most %d characters, got %d", models.MaxAgentIDLength, n)
		}
	}
	if sa.Name == "" {
		return nil, models.FieldError("name", "must not be empty")
	}
	if n := utf8.RuneCountInString(sa.Name); n > models.MaxNameLength {
		return nil, models.FieldError("name", "must be at most %d characters, got %d", models.MaxNameLength, n)
	}
	if strings.TrimSpace(sa.SystemPrompt) == "" {
		return nil, models.FieldError("system_prompt", "must not be empty")
	}
	if n := utf8.RuneCountInString(sa.Model); n > models.MaxModelLength {
		return nil, models.FieldError("model", "must be at most %d characters, got %d", models.MaxModelLength, n)
	}
	if t := sa.Temperature; t != nil && (*t < 0 || *t > models.MaxTemperature) {
		return nil, models.FieldError("temperature", "must be between 0 and 2, got %g", *t)
	}
	if m := sa.MaxTokens; m != nil && *m <= 0 {
		return nil, models.FieldError("max_tokens", "must be greater than 0, got %d", *m)
	}
	if in.MaxDepth != nil {
		sa.MaxDepth = *in.MaxDepth
		if sa.MaxDepth < minSubAgentMaxDepth || sa.MaxDepth > maxSubAgentMaxDepth {
			return nil, models.FieldError("max_depth", "must be between %d and %d, got %d", minSubAgentMaxDepth, maxSubAgentMaxDepth, sa.MaxDepth)
		}
	}
	if in.MaxIterations != nil {
		sa.MaxIterations = *in.MaxIterations
		if sa.MaxIterations < 1 || sa.MaxIterations > models.MaxAgentIterations {
			return nil, models.FieldError("max_iterations", "must be between 1 and %d, got %d", models.MaxAgentIterations, sa.MaxIterations)
		}
	}
	if in.Enabled != nil {
		sa.Enabled = *in.Enabled
	}
	var err error
	if sa.Tools, err = cleanKeys("tools", "tool key", in.Tools); err != nil {
		return nil, err
	}
	if sa.SubAgents, err = cleanKeys("sub_agents", "sub-agent name", in.SubAgents); err != nil {
		return nil, err
	}
	return sa, nil
}

// cleanKeys trims a list of tool keys or sub-agent names and refuses empty
// entries and repeats: a repeat would offer the model the same function
// twice, which providers reject. The result is never nil so the API
// answers [] rather than null.
func cleanKeys(field, what string, keys []string) ([]string, error) {
	out := make([]string, 0, len(keys))
	seen := make(map[string]bool, len(keys))
	for i, k := range keys {
		k = strings.TrimSpace(k)
		if k == "" {
			return nil, models.FieldError(field, "entry %d is empty: a %s is required", i, what)
		}
		if seen[k] {
			return nil, models.FieldError(field, "duplicate %s %q", what, k)
		}
		seen[k] = true
		out = append(out, k)
	}
	return out, nil
}

// agentRefs is one agent's references to check against the tool catalog
// and the stored sub-agents; field prefixes the reported field names.
type agentRefs struct {
	field     string
	tools     []string
	subAgents []string
}

// checkRefs checks every agent's tool keys against the catalog and its
// sub-agent names against the store, in order, and returns the first
// problem. selfName is the name of the sub-agent being saved: it may list
// itself (recursion is allowed; the engine bounds it with max_depth) even
// before it exists. excludeID ignores that sub-agent's stored row, whose
// old name an update is about to replace.
func (s *Server) checkRefs(ctx context.Context, refs []agentRefs, selfName, excludeID string) error {
	var lookup []string
	for _, r := range refs {
		for _, n := range r.subAgents {
			if n != selfName {
				lookup = append(lookup, n)
			}
		}
	}
	existing, err := s.store.ExistingSubAgentNames(ctx, ownTenant(ctx), lookup, excludeID)
	if err != nil {
		return err
	}
	mcpServers := map[string]*store.MCPServer{} // by name, loaded once per request
	for _, r := range refs {
		var builtin []string
		for _, k := range r.tools {
			if !models.IsMCPToolKey(k) {
				builtin = append(builtin, k)
				continue
			}
			if err := s.checkMCPToolKey(ctx, r.field+"tools", k, mcpServers); err != nil {
				return err
			}
		}
		if len(builtin) > 0 {
			if err := s.tools.Validate(r.field+"tools", builtin); err != nil {
				return err
			}
		}
		for _, n := range r.subAgents {
			if n != selfName && !existing[n] {
				return models.FieldError(r.field+"sub_agents", "unknown sub-agent %q", n)
			}
		}
	}
	return nil
}

// readSubAgent decodes and validates a create or update body, including
// its tool keys and sub-agent names. An update must name its id.
func (s *Server) readSubAgent(c *gin.Context, update bool) (*models.SubAgent, error) {
	var in subAgentInput
	if err := decodeJSON(c, &in); err != nil {
		return nil, err
	}
	sa, err := in.toModel()
	if err != nil {
		return nil, err
	}
	excludeID := "" // a new sub-agent has no stored row to ignore
	if update {
		if sa.ID == "" {
			return nil, models.FieldError("id", "is required")
		}
		excludeID = sa.ID
	}
	refs := []agentRefs{{tools: sa.Tools, subAgents: sa.SubAgents}}
	if err := s.checkRefs(c.Request.Context(), refs, sa.Name, excludeID); err != nil {
		return nil, err
	}
	return sa, nil
}

func (s *Server) createSubAgent(c *gin.Context) {
	sa, err := s.readSubAgent(c, false)
	if err != nil {
		s.writeError(c, err)
		return
	}
	if sa.ID == "" {
		sa.ID = models.NewID()
	} else if err := s.checkSubAgentIDFree(c.Request.Context(), sa.ID); err != nil {
		s.writeError(c, err)
		return
	}
	sa.TenantID = ownTenant(c.Request.Context())
	if err := s.store.CreateSubAgent(c.Request.Context(), sa); err != nil {
		s.writeError(c, err)
		return
	}
	ok(c, viewSubAgent(sa))
}

func (s *Server) updateSubAgent(c *gin.Context) {
	sa, err := s.readSubAgent(c, true)
	if err != nil {
		s.writeError(c, err)
		return
	}
	old, err := s.visibleSubAgent(c.Request.Context(), sa.ID)
	if err != nil {
		s.writeError(c, err)
		return
	}
	sa.TenantID = old.TenantID
	if err := s.store.UpdateSubAgent(c.Request.Context(), sa); err != nil {
		s.writeError(c, err)
		return
	}
	ok(c, viewSubAgent(sa))
}

// subAgentKey is the body of subagents/get and subagents/delete: one of id
// and name.
type subAgentKey struct {
	ID   string `json:"id"`
	Name string `json:"name"`
}

// findSubAgent loads the sub-agent a get or delete body names.
func (s *Server) findSubAgent(c *gin.Context) (*models.SubAgent, error) {
	var in subAgentKey
	if err := decodeJSON(c, &in); err != nil {
		return nil, err
	}
	id, name := strings.TrimSpace(in.ID), strings.TrimSpace(in.Name)
	switch {
	case id != "" && name != "":
		// Two keys could name two different sub-agents; refuse rather than
		// pick one silently.
		return nil, models.FieldError("id", "give either id or name, not both")
	case id != "":
		return s.visibleSubAgent(c.Request.Context(), id)
	case name != "":
		return s.store.GetSubAgentByName(c.Request.Context(), ownTenant(c.Request.Context()), name)
	default:
		return nil, models.FieldError("id", "id or name is required")
	}
}

func (s *Server) getSubAgent(c *gin.Context) {
	sa, err := s.findSubAgent(c)
	if err != nil {
		s.writeError(c, err)
		return
	}
	ok(c, viewSubAgent(sa))
}

func (s *Server) deleteSubAgent(c *gin.Context) {
	sa, err := s.findSubAgent(c)
	if err != nil {
		s.writeError(c, err)
		return
	}
	if err := s.store.DeleteSubAgent(c.Request.Context(), sa.TenantID, sa.ID); err != nil {
		s.writeError(c, err)
		return
	}
	ok(c, gin.H{"id": sa.ID, "name": sa.Name, "deleted": true})
}

func (s *Server) listSubAgents(c *gin.Context) {
	f, valid := s.readPage(c, &pageInput{})
	if !valid {
		return
	}
	f.Tenant = tenantFilter(c.Request.Context())
	items, total, err := s.store.ListSubAgents(c.Request.Context(), f)
	if err != nil {
		s.writeError(c, err)
		return
	}
	views := make([]subAgentView, len(items))
	for i := range items {
		views[i] = viewSubAgent(&items[i])
	}
	ok(c, gin.H{"items": views, "total": total, "page": f.Page, "page_size": f.PageSize})
}

// workerField is the field prefix of worker j of team i, as validation
// reports it.
func workerField(i, j int) string {
	return "teams[" + strconv.Itoa(i) + "].workers[" + strconv.Itoa(j) + "]"
}

// checkHierarchyRefs checks every worker's tool keys and sub-agent names.
// Supervisors' are not checked: they are accepted but not kept.
func (s *Server) checkHierarchyRefs(ctx context.Context, h *models.Hierarchy) error {
	var refs []agentRefs
	for i, t := range h.Teams {
		for j, w := range t.Workers {
			refs = append(refs, agentRefs{field: workerField(i, j) + ".", tools: w.Tools, subAgents: w.SubAgents})
		}
	}
	if err := s.checkRefs(ctx, refs, "", ""); err != nil {
		return err
	}
	return s.checkAgentIDsFree(ctx, h)
}

// checkAgentIDsFree refuses a hierarchy with an agent_id that is the id of
// one of its tenant's sub-agents: a run names agents by id on the stream
// (source.agent_id, path) and in its cycle check, so the two must not
// collide (spec 003).
func (s *Server) checkAgentIDsFree(ctx context.Context, h *models.Hierarchy) error {
	taken, err := s.store.SubAgentIDsIn(ctx, ownTenant(ctx), h.AgentIDs())
	if err != nil || len(taken) == 0 {
		return err
	}
	check := func(field, id string) error {
		if taken[id] {
			return models.FieldError(field+".agent_id", "agent_id %q is the id of a sub-agent; agent_ids and sub-agent ids must differ", id)
		}
		return nil
	}
	if err := check("global_supervisor_agent", h.GlobalSupervisor.AgentID); err != nil {
		return err
	}
	for i, t := range h.Teams {
		if err := check("teams["+strconv.Itoa(i)+"].team_supervisor_agent", t.Supervisor.AgentID); err != nil {
			return err
		}
		for j, w := range t.Workers {
			if err := check(workerField(i, j), w.AgentID); err != nil {
				return err
			}
		}
	}
	return nil
}

// checkSubAgentIDFree refuses a sub-agent id that is an agent_id of one of
// its tenant's hierarchies (see checkAgentIDsFree).
func (s *Server) checkSubAgentIDFree(ctx context.Context, id string) error {
	hid, err := s.store.HierarchyUsingAgentID(ctx, ownTenant(ctx), id)
	if err != nil || hid == "" {
		return err
	}
	return models.FieldError("id", "%q is an agent_id of hierarchy %s; sub-agent ids and agent_ids must differ", id, hid)
}
