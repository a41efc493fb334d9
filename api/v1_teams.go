package api

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/op-stack/executor/models"
)

// v1LLMConfig is spec 001's llm_config. Pointers tell an absent setting
// (the engine's default) from an explicit one.
type v1LLMConfig struct {
	Provider    string   `json:"provider,omitempty"`
	Model       string   `json:"model,omitempty"`
	BaseURL     string   `json:"base_url,omitempty"`
	Region      string   `json:"region,omitempty"`
	Temperature *float64 `json:"temperature,omitempty"`
	MaxTokens   *int     `json:"max_tokens,omitempty"`
	Timeout     *int     `json:"timeout,omitempty"`
	// FallbackModels are tried in order when the model's provider keeps
	// failing (issue 15).
	FallbackModels []string `json:"fallback_models,omitempty"`
}

// v1SupervisorConfig is spec 001's SupervisorConfig. agent_id and
// agent_name are this service's additions (spec 001 gives supervisors
// neither); an absent agent_id is generated.
type v1SupervisorConfig struct {
	AgentID       *string      `json:"agent_id,omitempty"`
	AgentName     string       `json:"agent_name,omitempty"`
	LLMConfig     *v1LLMConfig `json:"llm_config,omitempty"`
	SystemPrompt  string       `json:"system_prompt"`
	UserPrompt    string       `json:"user_prompt,omitempty"`
	MaxIterations *int         `json:"max_iterations,omitempty"`
	approvalConfig
}

// v1AgentConfig is spec 001's AgentConfig: a worker.
type v1AgentConfig struct {
	AgentID       *string      `json:"agent_id,omitempty"`
	AgentName     string       `json:"agent_name"`
	LLMConfig     *v1LLMConfig `json:"llm_config,omitempty"`
	SystemPrompt  string       `json:"system_prompt"`
	UserPrompt    string       `json:"user_prompt,omitempty"`
	Tools         []string     `json:"tools"`
	MaxIterations *int         `json:"max_iterations,omitempty"`
	approvalConfig
}

// v1SubTeam is spec 001's SubTeam. prevent_duplicate and share_context are
// this service's additions (see docs/api-v1.md for their defaults).
type v1SubTeam struct {
	ID               string              `json:"id"`
	Name             string              `json:"name"`
	Description      string              `json:"description,omitempty"`
	SupervisorConfig *v1SupervisorConfig `json:"supervisor_config,omitempty"`
	AgentConfigs     []v1AgentConfig     `json:"agent_configs"`
	PreventDuplicate *bool               `json:"prevent_duplicate,omitempty"`
	ShareContext     *bool               `json:"share_context,omitempty"`
}

// v1TeamRequest is the body of POST and PUT /api/v1/hierarchical-teams:
// spec 001's HierarchicalTeam. execution_mode, enable_context_sharing and
// max_parallel_teams are this service's additions.
type v1TeamRequest struct {
	TeamName             string              `json:"team_name"`
	Description          string              `json:"description"`
	TopSupervisorConfig  *v1SupervisorConfig `json:"top_supervisor_config"`
	SubTeams             []v1SubTeam         `json:"sub_teams"`
	Dependencies         map[string][]string `json:"dependencies"`
	GlobalConfig         *globalConfigInput  `json:"global_config"`
	ExecutionMode        string              `json:"execution_mode"`
	EnableContextSharing *bool               `json:"enable_context_sharing"`
	MaxParallelTeams     int                 `json:"max_parallel_teams"`
}

// droppedTool is a tool the registry does not have, left out of an agent.
type droppedTool struct {
	team, worker int
	tool         string
}

// toModel converts a spec 001 request to a hierarchy. Tools the registry
// does not know (but for MCP tool keys, "mcp:<server>/<tool>", which are
// kept and checked) are dropped rather than refused (spec 001's own example
// names tools this service does not have, and must work unchanged); the
// caller turns them into warnings once agent_ids are known.
func (in *v1TeamRequest) toModel(tools ToolCatalog) (*models.Hierarchy, []droppedTool, error) {
	h := &models.Hierarchy{
		Name:                 strings.TrimSpace(in.TeamName),
		Description:          in.Description,
		ExecutionMode:        strings.TrimSpace(in.ExecutionMode),
		EnableContextSharing: true,
		Dependencies:         in.Dependencies,
		MaxParallelTeams:     in.MaxParallelTeams,
		MaxExecutionTime:     defaultV1MaxExecutionTime,
	}
	// Spec 001 passes upstream results to downstream teams.
	if in.EnableContextSharing != nil {
		h.EnableContextSharing = *in.EnableContextSharing
	}
	if g := in.GlobalConfig; g != nil && g.MaxExecutionTime != nil {
		h.MaxExecutionTime = *g.MaxExecutionTime
	}
	if err := in.GlobalConfig.apply(h); err != nil {
		return nil, nil, err
	}
	if sc := in.TopSupervisorConfig; sc != nil {
		gs, err := sc.toAgent("top_supervisor_config")
		if err != nil {
			return nil, nil, err
		}
		if err := noGate("top_supervisor_config", gs); err != nil {
			return nil, nil, err
		}
		h.GlobalSupervisor = gs
	}
	var dropped []droppedTool
	for i, st := range in.SubTeams {
		field := fmt.Sprintf("sub_teams[%d]", i)
		team := models.Team{
			ID:          strings.TrimSpace(st.ID),
			Name:        strings.TrimSpace(st.Name),
			Description: st.Description,
			// Spec 001's workers build on each other's results (the
			// analyst analyses what the searcher found).
			ShareContext: true,
		}
		if st.PreventDuplicate != nil {
			team.PreventDuplicate = *st.PreventDuplicate
		}
		if st.ShareContext != nil {
			team.ShareContext = *st.ShareContext
		}
		if st.SupervisorConfig != nil {
			sup, err := st.SupervisorConfig.toAgent(field + ".supervisor_config")
			if err != nil {
				return nil, nil, err
			}
			team.Supervisor = sup
		}
		for j, ac := range st.AgentConfigs {
			w, unknown, err := ac.toAgent(fmt.Sprintf("%s.agent_configs[%d]", field, j), tools)
			if err != nil {
				return nil, nil, err
			}
			for _, tool := range unknown {
				dropped = append(dropped, droppedTool{team: i, worker: j, tool: tool})
			}
			team.Workers = append(team.Workers, w)
		}
		h.Teams = append(h.Teams, team)
	}
	return h, dropped, nil
}

func (c *v1LLMConfig) apply(a *models.Agent) {
	if c == nil {
		return
	}
	a.Provider = strings.TrimSpace(c.Provider)
	a.Model = strings.TrimSpace(c.Model)
	a.BaseURL = strings.TrimSpace(c.BaseURL)
	a.Region = strings.TrimSpace(c.Region)
	a.Temperature = c.Temperature
	a.MaxTokens = c.MaxTokens
	if c.Timeout != nil {
		a.Timeout = *c.Timeout
	}
	a.FallbackModels = models.CleanModels(c.FallbackModels)
}

func agentID(field string, id *string) (string, error) {
	if id == nil {
		return "", nil // generated by Normalize
	}
	if strings.TrimSpace(*id) == "" {
		return "", models.FieldError(field+".agent_id", "must be a non-empty string when given (omit it to have one generated)")
	}
	return *id, nil
}

func (sc *v1SupervisorConfig) toAgent(field string) (models.Agent, error) {
	id, err := agentID(field, sc.AgentID)
	if err != nil {
		return models.Agent{}, err
	}
	a := models.Agent{AgentID: id, Name: strings.TrimSpace(sc.AgentName), SystemPrompt: sc.SystemPrompt, UserPrompt: sc.UserPrompt}
	sc.LLMConfig.apply(&a)
	if sc.MaxIterations != nil {
		if *sc.MaxIterations < 1 {
			return a, models.FieldError(field+".max_iterations", "must be at least 1, got %d", *sc.MaxIterations)
		}
		a.MaxIterations = *sc.MaxIterations
	}
	return a, sc.approvalConfig.apply(field, &a, false)
}

// toAgent converts a worker and returns the tools it had to drop.
func (ac *v1AgentConfig) toAgent(field string, tools ToolCatalog) (models.Agent, []string, error) {
	id, err := agentID(field, ac.AgentID)
	if err != nil {
		return models.Agent{}, nil, err
	}
	a := models.Agent{AgentID: id, Name: strings.TrimSpace(ac.AgentName), SystemPrompt: ac.SystemPrompt, UserPrompt: ac.UserPrompt}
	ac.LLMConfig.apply(&a)
	if ac.MaxIterations != nil {
		if *ac.MaxIterations < 1 {
			return a, nil, models.FieldError(field+".max_iterations", "must be at least 1, got %d", *ac.MaxIterations)
		}
		a.MaxIterations = *ac.MaxIterations
	}
	var dropped []string
	for _, t := range ac.Tools {
		t = strings.TrimSpace(t)
		switch {
		case t == "" || contains(a.Tools, t) || contains(dropped, t):
		case models.IsMCPToolKey(t):
			// An MCP tool is the tenant's own, not spec 001's example: it
			// is kept, and checked (well formed, a server of the tenant,
			// an allowed tool) with the hierarchy's references, a 400
			// naming the field as hierarchies/create answers.
			a.Tools = append(a.Tools, t)
		case tools.Validate(field+".tools", []string{t}) == nil:
			a.Tools = append(a.Tools, t)
		default:
			dropped = append(dropped, t)
		}
	}
	return a, dropped, ac.approvalConfig.apply(field, &a, true)
}

// readV1Team decodes, converts, normalizes and validates a spec 001 create
// or update body with the same rules as hierarchies/create, and returns
// the warnings about dropped tools.
func (s *Server) readV1Team(c *gin.Context) (*models.Hierarchy, []string, error) {
	var in v1TeamRequest
	if err := decodeJSON(c, &in); err != nil {
		return nil, nil, err
	}
	h, dropped, err := in.toModel(s.tools)
	if err != nil {
		return nil, nil, err
	}
	h.Normalize()
	if err := h.Validate(); err != nil {
		return nil, nil, v1FieldError(err)
	}
	if err := s.checkHierarchyRefs(c.Request.Context(), h); err != nil {
		return nil, nil, v1FieldError(err)
	}
	warnings := []string{}
	for _, d := range dropped {
		warnings = append(warnings, fmt.Sprintf("tool %q of agent %s is not available; the agent runs without it", d.tool, h.Teams[d.team].Workers[d.worker].AgentID))
	}
	return h, warnings, nil
}

// v1FieldRenames turn the engine's field paths into spec 001's, in order.
var v1FieldRenames = []struct{ from, to string }{
	{"global_supervisor_agent.", "top_supervisor_config."},
	{"teams[", "sub_teams["},
	{".team_supervisor_agent", ".supervisor_config"},
	{".workers[", ".agent_configs["},
}

// v1Field renames an engine field path ("teams[0].workers[1].name") to
// spec 001's ("sub_teams[0].agent_configs[1].agent_name").
func v1Field(f string) string {
	switch f {
	case "name":
		return "team_name"
	case "teams":
		return "sub_teams"
	case "global_supervisor_agent":
		return "top_supervisor_config"
	case "max_execution_time":
		return "global_config.max_execution_time"
	}
	for _, r := range v1FieldRenames {
		f = strings.Replace(f, r.from, r.to, 1)
	}
	inAgent := strings.Contains(f, "agent_configs[") || strings.HasPrefix(f, "top_supervisor_config") || strings.Contains(f, ".supervisor_config")
	if inAgent {
		for _, k := range []string{"temperature", "max_tokens", "provider", "model", "base_url", "region", "timeout"} {
			if strings.HasSuffix(f, "."+k) {
				return strings.TrimSuffix(f, k) + "llm_config." + k
			}
		}
		if strings.HasSuffix(f, ".name") {
			return strings.TrimSuffix(f, "name") + "agent_name"
		}
	}
	return f
}

// v1FieldError rewrites a validation error's field (and the message's
// leading field) in spec 001's terms, keeping its code.
func v1FieldError(err error) error {
	var e *models.Error
	if !errors.As(err, &e) || e.Field == "" {
		return err
	}
	out := *e
	out.Field = v1Field(e.Field)
	if strings.HasPrefix(e.Message, e.Field) {
		out.Message = out.Field + strings.TrimPrefix(e.Message, e.Field)
	}
	return &out
}

// v1TeamSummary is the data of a create or update.
func v1TeamSummary(h *models.Hierarchy, status string, warnings []string) gin.H {
	agents := 0
	for _, t := range h.Teams {
		agents += len(t.Workers)
	}
	data := gin.H{
		"team_id":         h.ID,
		"team_name":       h.Name,
		"status":          status,
		"created_at":      h.CreatedAt,
		"updated_at":      h.UpdatedAt,
		"sub_teams_count": len(h.Teams),
		"total_agents":    agents,
		"execution_order": v1ExecutionOrder(h),
	}
	if len(warnings) > 0 {
		data["warnings"] = warnings
	}
	return data
}

// v1ExecutionOrder is the hierarchy's execution order by team id (the
// engine orders by name).
func v1ExecutionOrder(h *models.Hierarchy) []string {
	ids := teamIDs(h)
	order := make([]string, 0, len(h.ExecutionOrder))
	for _, name := range h.ExecutionOrder {
		order = append(order, lookupID(ids, name))
	}
	return order
}

func teamIDs(h *models.Hierarchy) map[string]string {
	ids := make(map[string]string, len(h.Teams))
	for _, t := range h.Teams {
		ids[t.Name] = t.ID
	}
	return ids
}

func (s *Server) v1CreateTeam(c *gin.Context) {
	h, warnings, err := s.readV1Team(c)
	if err != nil {
		s.writeError(c, err)
		return
	}
	h.ID = models.NewID()
	h.TenantID = ownTenant(c.Request.Context())
	// Spec 001: a team_name is unique within the tenant (TEAM_ALREADY_EXISTS).
	if err := s.store.CreateNamedHierarchy(c.Request.Context(), h); err != nil {
		s.writeError(c, v1FieldError(err))
		return
	}
	okV1(c, CodeTeamCreated, "hierarchical team created", v1TeamSummary(h, "created", warnings))
}

func (s *Server) v1UpdateTeam(c *gin.Context) {
	id, err := pathID(c, "team_id")
	if err != nil {
		s.writeError(c, err)
		return
	}
	h, warnings, err := s.readV1Team(c)
	if err != nil {
		s.writeError(c, err)
		return
	}
	h.ID = id
	if err := s.keepTenant(c.Request.Context(), h); err != nil {
		s.writeError(c, err)
		return
	}
	if err := s.store.UpdateNamedHierarchy(c.Request.Context(), h); err != nil {
		s.writeError(c, v1FieldError(err))
		return
	}
	okV1(c, CodeTeamUpdated, "hierarchical team updated", v1TeamSummary(h, "updated", warnings))
}

func (s *Server) v1DeleteTeam(c *gin.Context) {
	id, err := pathID(c, "team_id")
	if err != nil {
		s.writeError(c, err)
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
	okV1(c, CodeTeamDeleted, "hierarchical team deleted", gin.H{"team_id": id, "deleted": true})
}

func (s *Server) v1GetTeam(c *gin.Context) {
	id, err := pathID(c, "team_id")
	if err != nil {
		s.writeError(c, err)
		return
	}
	h, err := s.visibleHierarchy(c.Request.Context(), id)
	if err != nil {
		s.writeError(c, err)
		return
	}
	okV1(c, CodeTeamInfoRetrieved, "hierarchical team retrieved", v1TeamOf(h))
}

// v1TeamView is a stored hierarchy in spec 001's shape. It is also a valid
// PUT body: what GET returns can be edited and sent back.
type v1TeamView struct {
	TeamID               string              `json:"team_id"`
	TeamName             string              `json:"team_name"`
	Description          string              `json:"description"`
	TopSupervisorConfig  v1SupervisorConfig  `json:"top_supervisor_config"`
	SubTeams             []v1SubTeam         `json:"sub_teams"`
	Dependencies         map[string][]string `json:"dependencies"`
	GlobalConfig         globalConfigInput   `json:"global_config"`
	ExecutionOrder       []string            `json:"execution_order"`
	ExecutionMode        string              `json:"execution_mode"`
	EnableContextSharing bool                `json:"enable_context_sharing"`
	MaxParallelTeams     int                 `json:"max_parallel_teams"`
	CreatedAt            time.Time           `json:"created_at"`
	UpdatedAt            time.Time           `json:"updated_at"`
}

// v1TeamOf shows a hierarchy in spec 001's shape. Iteration limits are the
// effective ones (a supervisor without its own uses the hierarchy's).
func v1TeamOf(h *models.Hierarchy) v1TeamView {
	ids := teamIDs(h)
	v := v1TeamView{
		TeamID: h.ID, TeamName: h.Name, Description: h.Description,
		TopSupervisorConfig:  v1SupervisorOf(h.GlobalSupervisor, h.MaxIterations),
		SubTeams:             make([]v1SubTeam, 0, len(h.Teams)),
		Dependencies:         map[string][]string{},
		GlobalConfig:         v1GlobalConfigOf(h),
		ExecutionOrder:       v1ExecutionOrder(h),
		ExecutionMode:        h.ExecutionMode,
		EnableContextSharing: h.EnableContextSharing,
		MaxParallelTeams:     h.MaxParallelTeams,
		CreatedAt:            h.CreatedAt,
		UpdatedAt:            h.UpdatedAt,
	}
	for name, deps := range h.Dependencies {
		list := make([]string, 0, len(deps))
		for _, d := range deps {
			list = append(list, lookupID(ids, d))
		}
		v.Dependencies[lookupID(ids, name)] = list
	}
	for _, t := range h.Teams {
		sup := v1SupervisorOf(t.Supervisor, h.MaxIterations)
		st := v1SubTeam{
			ID: t.ID, Name: t.Name, Description: t.Description, SupervisorConfig: &sup,
			AgentConfigs:     make([]v1AgentConfig, 0, len(t.Workers)),
			PreventDuplicate: refOf(t.PreventDuplicate), ShareContext: refOf(t.ShareContext),
		}
		for _, w := range t.Workers {
			iters := w.MaxIterations
			if iters == 0 {
				iters = models.DefaultAgentIterations
			}
			tools := w.Tools
			if tools == nil {
				tools = []string{}
			}
			st.AgentConfigs = append(st.AgentConfigs, v1AgentConfig{
				AgentID: refOf(w.AgentID), AgentName: w.Name, LLMConfig: v1LLMConfigOf(w),
				SystemPrompt: w.SystemPrompt, UserPrompt: w.UserPrompt, Tools: tools, MaxIterations: &iters,
				approvalConfig: approvalConfigOf(w),
			})
		}
		v.SubTeams = append(v.SubTeams, st)
	}
	return v
}

func v1SupervisorOf(a models.Agent, hierarchyIterations int) v1SupervisorConfig {
	iters := a.MaxIterations
	if iters == 0 {
		iters = hierarchyIterations
	}
	return v1SupervisorConfig{
		AgentID: refOf(a.AgentID), AgentName: a.Name, LLMConfig: v1LLMConfigOf(a),
		SystemPrompt: a.SystemPrompt, UserPrompt: a.UserPrompt, MaxIterations: &iters,
		approvalConfig: approvalConfigOf(a),
	}
}

func v1LLMConfigOf(a models.Agent) *v1LLMConfig {
	c := &v1LLMConfig{Provider: a.Provider, Model: a.Model, BaseURL: a.BaseURL, Region: a.Region, Temperature: a.Temperature, MaxTokens: a.MaxTokens, FallbackModels: a.FallbackModels}
	if a.Timeout > 0 {
		c.Timeout = refOf(a.Timeout)
	}
	return c
}

func refOf[T any](v T) *T { return &v }

// v1GlobalConfigOf is a team's global_config as sent, spec 001's defaults
// (enable_streaming true, output_format "detailed") standing in for what
// was not.
func v1GlobalConfigOf(h *models.Hierarchy) globalConfigInput {
	gc := globalConfigInput{MaxExecutionTime: &h.MaxExecutionTime, EnableStreaming: refOf(true), OutputFormat: "detailed"}
	if h.GlobalConfig != nil {
		if h.GlobalConfig.EnableStreaming != nil {
			gc.EnableStreaming = refOf(*h.GlobalConfig.EnableStreaming)
		}
		if h.GlobalConfig.OutputFormat != "" {
			gc.OutputFormat = h.GlobalConfig.OutputFormat
		}
	}
	return gc
}

// defaultV1MaxExecutionTime is spec 001's GlobalConfig.max_execution_time
// default, in seconds.
const defaultV1MaxExecutionTime = 3600
