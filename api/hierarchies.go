package api

import (
	"strconv"
	"strings"

	"github.com/gin-gonic/gin"

	"github.com/op-stack/executor/models"
	"github.com/op-stack/executor/store"
)

// agentInput is an agent as clients send it. It accepts both spellings in
// use: spec 000's (`prompt`, `model_id`) and contract 002's
// (`system_prompt`, `model`); the contract's wins when both are given.
type agentInput struct {
	AgentID      *string  `json:"agent_id"`
	Name         string   `json:"name"`
	Role         string   `json:"role"`
	SystemPrompt string   `json:"system_prompt"`
	Prompt       string   `json:"prompt"`
	Model        string   `json:"model"`
	ModelID      string   `json:"model_id"`
	Temperature  *float64 `json:"temperature"`
	MaxTokens    *int     `json:"max_tokens"`
	Tools        []string `json:"tools"`
	// SubAgents and MaxIterations are used by workers only; supervisors
	// accept them (one body shape for every agent) and drop them.
	SubAgents     []string `json:"sub_agents"`
	MaxIterations *int     `json:"max_iterations"` // a pointer: an explicit 0 is refused, absent means the default
	// LLM settings, flat or as spec 001's llm_config (which wins).
	Provider   string          `json:"provider"`
	BaseURL    string          `json:"base_url"`
	Region     string          `json:"region"`
	Timeout    int             `json:"timeout"`
	UserPrompt string          `json:"user_prompt"`
	LLMConfig  *llmConfigInput `json:"llm_config"`
	// FallbackModels (issue 15) may also be given in llm_config.
	FallbackModels []string `json:"fallback_models"`
	// A2A makes a worker a remote A2A agent (issue 25); on a supervisor it
	// is refused by validation, naming the field.
	A2A *models.A2AAgent `json:"a2a"`
	approvalConfig
}

// llmConfigInput is spec 001's per-agent llm_config.
type llmConfigInput struct {
	Provider    string   `json:"provider"`
	Model       string   `json:"model"`
	BaseURL     string   `json:"base_url"`
	Region      string   `json:"region"`
	Temperature *float64 `json:"temperature"`
	MaxTokens   *int     `json:"max_tokens"`
	Timeout     int      `json:"timeout"`
	// FallbackModels, when given, replaces the agent's fallback_models.
	FallbackModels []string `json:"fallback_models"`
}

// globalConfigInput is spec 001's global_config, on both APIs.
// enable_streaming and output_format are stored and echoed as sent
// (models.GlobalConfig), not acted on: every run streams, and the output
// format is chosen per results request.
type globalConfigInput struct {
	MaxExecutionTime *int   `json:"max_execution_time,omitempty"`
	EnableStreaming  *bool  `json:"enable_streaming,omitempty"`
	OutputFormat     string `json:"output_format,omitempty"`
}

// valueOrZero is *p, or 0 (the default) when p is nil.
func valueOrZero(p *int) int {
	if p == nil {
		return 0
	}
	return *p
}

// apply stores enable_streaming and output_format in h when sent.
// output_format is spec 001's detailed|summary|minimal (it decides the
// default shape of the executions' results); anything else is refused.
func (g *globalConfigInput) apply(h *models.Hierarchy) error {
	if g == nil || (g.EnableStreaming == nil && g.OutputFormat == "") {
		return nil
	}
	format, err := outputFormat("global_config.output_format", g.OutputFormat)
	if err != nil {
		return err
	}
	h.GlobalConfig = &models.GlobalConfig{EnableStreaming: g.EnableStreaming, OutputFormat: format}
	return nil
}

type teamInput struct {
	ID                  string       `json:"id"`
	Name                string       `json:"name"`
	Description         string       `json:"description"`
	TeamSupervisorAgent *agentInput  `json:"team_supervisor_agent"`
	SupervisorPrompt    string       `json:"supervisor_prompt"` // legacy flat form
	PreventDuplicate    bool         `json:"prevent_duplicate"`
	ShareContext        bool         `json:"share_context"`
	Workers             []agentInput `json:"workers"`
}

// hierarchyInput is the body of hierarchies/create and hierarchies/update.
// The legacy flat form (before spec 000) gives the supervisors' prompts as
// `global_prompt` and `teams[].supervisor_prompt` and no agent_ids; it is
// still accepted (FR-016).
type hierarchyInput struct {
	HierarchyID           string      `json:"hierarchy_id"`
	Name                  string      `json:"name"`
	Description           string      `json:"description"`
	GlobalSupervisorAgent *agentInput `json:"global_supervisor_agent"`
	GlobalPrompt          string      `json:"global_prompt"` // legacy flat form
	ExecutionMode         string      `json:"execution_mode"`
	EnableContextSharing  bool        `json:"enable_context_sharing"`
	MaxIterations         *int        `json:"max_iterations"` // absent: the default; given: 1–100
	Teams                 []teamInput `json:"teams"`
	// Spec 001's team dependencies (team name or id → the teams it needs
	// first), parallel limit and time limit.
	Dependencies     map[string][]string `json:"dependencies"`
	MaxParallelTeams int                 `json:"max_parallel_teams"`
	MaxExecutionTime int                 `json:"max_execution_time"`
	GlobalConfig     *globalConfigInput  `json:"global_config"`
	// Budget is the default execution_config.budget of the hierarchy's runs.
	Budget *models.Budget `json:"budget"`
	// Memory declares the namespaces of its agents' memory tools
	// (docs/memory.md).
	Memory *models.MemoryConfig `json:"memory"`
}

type idInput struct {
	HierarchyID string `json:"hierarchy_id"`
	ID          string `json:"id"`
}

func (in idInput) id() (string, error) {
	id := strings.TrimSpace(in.HierarchyID)
	if id == "" {
		id = strings.TrimSpace(in.ID)
	}
	if id == "" {
		return "", models.FieldError("hierarchy_id", "is required")
	}
	return id, nil
}

// toModel converts one agent. worker says whether it is a worker: only
// workers' tools, sub_agents and max_iterations are checked and stored.
func (in *agentInput) toModel(field string, worker bool) (models.Agent, error) {
	if in == nil {
		return models.Agent{}, nil
	}
	a := models.Agent{
		Name:           strings.TrimSpace(in.Name),
		Role:           strings.TrimSpace(in.Role),
		SystemPrompt:   firstNonEmpty(in.SystemPrompt, in.Prompt),
		Model:          strings.TrimSpace(firstNonEmpty(in.Model, in.ModelID)),
		Temperature:    in.Temperature,
		MaxTokens:      in.MaxTokens,
		Tools:          in.Tools,
		MaxIterations:  valueOrZero(in.MaxIterations),
		Provider:       strings.TrimSpace(in.Provider),
		BaseURL:        strings.TrimSpace(in.BaseURL),
		Region:         strings.TrimSpace(in.Region),
		Timeout:        in.Timeout,
		UserPrompt:     in.UserPrompt,
		FallbackModels: models.CleanModels(in.FallbackModels),
		A2A:            in.A2A,
	}
	if n := in.MaxIterations; n != nil && (*n < 1 || *n > models.MaxAgentIterations) {
		return a, models.FieldError(field+".max_iterations", "must be between 1 and %d (omit it for the default), got %d", models.MaxAgentIterations, *n)
	}
	if c := in.LLMConfig; c != nil {
		a.Provider = firstNonEmpty(strings.TrimSpace(c.Provider), a.Provider)
		a.Model = firstNonEmpty(strings.TrimSpace(c.Model), a.Model)
		a.BaseURL = firstNonEmpty(strings.TrimSpace(c.BaseURL), a.BaseURL)
		a.Region = firstNonEmpty(strings.TrimSpace(c.Region), a.Region)
		if c.Temperature != nil {
			a.Temperature = c.Temperature
		}
		if c.MaxTokens != nil {
			a.MaxTokens = c.MaxTokens
		}
		if c.Timeout != 0 {
			a.Timeout = c.Timeout
		}
		if c.FallbackModels != nil {
			a.FallbackModels = models.CleanModels(c.FallbackModels)
		}
	}
	// Supervisors have no tools or sub-agents (they route); their
	// max_iterations bounds their routing loop.
	if worker {
		var err error
		if a.Tools, err = cleanKeys(field+".tools", "tool key", in.Tools); err != nil {
			return a, err
		}
		if a.SubAgents, err = cleanKeys(field+".sub_agents", "sub-agent name", in.SubAgents); err != nil {
			return a, err
		}
	} else {
		a.Tools = nil
	}
	if err := in.approvalConfig.apply(field, &a, worker); err != nil {
		return a, err
	}
	if in.AgentID != nil {
		// An explicit agent_id must be usable; only an absent one is generated.
		if strings.TrimSpace(*in.AgentID) == "" {
			return a, models.FieldError(field+".agent_id", "must be a non-empty string when given (omit it to have one generated)")
		}
		a.AgentID = *in.AgentID
	}
	return a, nil
}

func (in *hierarchyInput) toModel() (*models.Hierarchy, error) {
	h := &models.Hierarchy{
		Name:                 strings.TrimSpace(in.Name),
		Description:          in.Description,
		ExecutionMode:        strings.TrimSpace(in.ExecutionMode),
		EnableContextSharing: in.EnableContextSharing,
		Dependencies:         in.Dependencies,
		MaxParallelTeams:     in.MaxParallelTeams,
		MaxExecutionTime:     in.MaxExecutionTime,
		Budget:               in.Budget,
		Memory:               in.Memory,
	}
	if g := in.GlobalConfig; g != nil && g.MaxExecutionTime != nil {
		h.MaxExecutionTime = *g.MaxExecutionTime
	}
	if err := in.GlobalConfig.apply(h); err != nil {
		return nil, err
	}
	if in.MaxIterations != nil {
		// Absent means the default (Normalize); a given value must be in
		// the documented range, 0 included, which used to pass as "default".
		if *in.MaxIterations < 1 || *in.MaxIterations > models.MaxMaxIterations {
			return nil, models.FieldError("max_iterations", "must be between 1 and %d (omit it for the default), got %d", models.MaxMaxIterations, *in.MaxIterations)
		}
		h.MaxIterations = *in.MaxIterations
	}
	gs, err := in.GlobalSupervisorAgent.toModel("global_supervisor_agent", false)
	if err != nil {
		return nil, err
	}
	if err := noGate("global_supervisor_agent", gs); err != nil {
		return nil, err
	}
	if gs.SystemPrompt == "" {
		gs.SystemPrompt = in.GlobalPrompt
	}
	h.GlobalSupervisor = gs
	for i, t := range in.Teams {
		field := "teams[" + strconv.Itoa(i) + "]"
		sup, err := t.TeamSupervisorAgent.toModel(field+".team_supervisor_agent", false)
		if err != nil {
			return nil, err
		}
		if sup.SystemPrompt == "" {
			sup.SystemPrompt = t.SupervisorPrompt
		}
		team := models.Team{
			ID:               strings.TrimSpace(t.ID),
			Name:             strings.TrimSpace(t.Name),
			Description:      t.Description,
			Supervisor:       sup,
			PreventDuplicate: t.PreventDuplicate,
			ShareContext:     t.ShareContext,
		}
		for j := range t.Workers {
			w, err := t.Workers[j].toModel(workerField(i, j), true)
			if err != nil {
				return nil, err
			}
			team.Workers = append(team.Workers, w)
		}
		h.Teams = append(h.Teams, team)
	}
	return h, nil
}

// readHierarchy decodes, converts, normalizes and validates a create or
// update body.
func readHierarchy(c *gin.Context) (*hierarchyInput, *models.Hierarchy, error) {
	var in hierarchyInput
	if err := decodeJSON(c, &in); err != nil {
		return nil, nil, err
	}
	h, err := in.toModel()
	if err != nil {
		return nil, nil, err
	}
	h.Normalize()
	if err := h.Validate(); err != nil {
		return nil, nil, err
	}
	return &in, h, nil
}

func (s *Server) createHierarchy(c *gin.Context) {
	_, h, err := readHierarchy(c)
	if err != nil {
		s.writeError(c, err)
		return
	}
	if err := s.checkHierarchyRefs(c.Request.Context(), h); err != nil {
		s.writeError(c, err)
		return
	}
	h.ID = models.NewID()
	h.TenantID = ownTenant(c.Request.Context())
	if err := s.store.CreateHierarchy(c.Request.Context(), h); err != nil {
		s.writeError(c, err)
		return
	}
	ok(c, gin.H{"hierarchy_id": h.ID, "execution_order": h.ExecutionOrder})
}

func (s *Server) getHierarchy(c *gin.Context) {
	id, valid := readID[idInput](s, c)
	if !valid {
		return
	}
	h, err := s.visibleHierarchy(c.Request.Context(), id)
	if err != nil {
		s.writeError(c, err)
		return
	}
	ok(c, h)
}

func (s *Server) updateHierarchy(c *gin.Context) {
	in, h, err := readHierarchy(c)
	if err != nil {
		s.writeError(c, err)
		return
	}
	h.ID, err = idInput{HierarchyID: in.HierarchyID}.id()
	if err != nil {
		s.writeError(c, err)
		return
	}
	if err := s.keepTenant(c.Request.Context(), h); err != nil {
		s.writeError(c, err)
		return
	}
	if err := s.checkHierarchyRefs(c.Request.Context(), h); err != nil {
		s.writeError(c, err)
		return
	}
	if err := s.store.UpdateHierarchy(c.Request.Context(), h); err != nil {
		s.writeError(c, err)
		return
	}
	ok(c, h)
}

func (s *Server) deleteHierarchy(c *gin.Context) {
	id, valid := readID[idInput](s, c)
	if !valid {
		return
	}
	if _, err := s.visibleHierarchy(c.Request.Context(), id); err != nil {
		s.writeError(c, err)
		return
	}
	if err := s.store.DeleteHierarchy(c.Request.Context(), id); err != nil {
		s.writeError(c, err)
		return
	}
	ok(c, gin.H{"hierarchy_id": id, "deleted": true})
}

// pageInput is the paging part of a list request.
type pageInput struct {
	Page     int `json:"page"`
	PageSize int `json:"page_size"`
}

const (
	defaultPageSize = 20
	maxPageSize     = 100
)

func (p pageInput) filter() (store.ListFilter, error) {
	if p.Page == 0 {
		p.Page = 1
	}
	if p.PageSize == 0 {
		p.PageSize = defaultPageSize
	}
	if p.Page < 1 {
		return store.ListFilter{}, models.FieldError("page", "must be at least 1, got %d", p.Page)
	}
	if p.PageSize < 1 || p.PageSize > maxPageSize {
		return store.ListFilter{}, models.FieldError("page_size", "must be between 1 and %d, got %d", maxPageSize, p.PageSize)
	}
	return store.ListFilter{Page: p.Page, PageSize: p.PageSize}, nil
}

func (s *Server) listHierarchies(c *gin.Context) {
	f, valid := s.readPage(c, &pageInput{})
	if !valid {
		return
	}
	f.Tenant = tenantFilter(c.Request.Context())
	items, total, err := s.store.ListHierarchies(c.Request.Context(), f)
	if err != nil {
		s.writeError(c, err)
		return
	}
	ok(c, gin.H{"items": items, "total": total, "page": f.Page, "page_size": f.PageSize})
}

func firstNonEmpty(values ...string) string {
	for _, v := range values {
		if strings.TrimSpace(v) != "" {
			return v
		}
	}
	return ""
}
