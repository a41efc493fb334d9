package models

import (
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"
)

// Execution modes of a hierarchy.
const (
	ExecutionModeSequential = "sequential"
	ExecutionModeParallel   = "parallel"
)

// Limits and defaults that validation and the engine share.
const (
	MaxAgentIDLength = 100
	MaxNameLength    = 255
	// MaxRoleLength and MaxModelLength are the widths of the columns that
	// store a worker's role and an agent's model (store/migrations): the
	// same limit on every database, where PostgreSQL would otherwise
	// refuse a longer value and SQLite keep it.
	MaxRoleLength        = 255
	MaxModelLength       = 200
	DefaultMaxIterations = 10
	MaxMaxIterations     = 100
	MaxTemperature       = 2.0

	DefaultGlobalSupervisorName   = "Global Supervisor"
	DefaultGlobalSupervisorPrompt = "You are Global Supervisor. Coordinate and oversee the work of all team supervisors."
)

// Agent is one LLM agent of a hierarchy: the global supervisor, a team
// supervisor or a worker. AgentID is the caller's id for it (contract 002:
// the upstream agent_bound.id) and is what every event it causes carries.
type Agent struct {
	AgentID      string   `json:"agent_id"`
	Name         string   `json:"name"`
	Role         string   `json:"role,omitempty"`
	SystemPrompt string   `json:"system_prompt"`
	Model        string   `json:"model,omitempty"`
	Temperature  *float64 `json:"temperature,omitempty"`
	MaxTokens    *int     `json:"max_tokens,omitempty"`
	Tools        []string `json:"tools,omitempty"`
	// SubAgents names the sub-agents this agent may delegate to.
	SubAgents []string `json:"sub_agents,omitempty"`
	// MaxIterations bounds the agent's model turns in one task (tool
	// rounds); 0 means DefaultAgentIterations. For supervisors it bounds
	// their routing loop; 0 means the hierarchy's max_iterations.
	MaxIterations int `json:"max_iterations,omitempty"`
	// LLM settings of spec 001's llm_config. Provider empty: routed by the
	// model table. BaseURL must be a provider's configured endpoint or in
	// LLM_ALLOWED_BASE_URLS (a caller-chosen URL would receive the key).
	Provider string `json:"provider,omitempty"`
	BaseURL  string `json:"base_url,omitempty"`
	Region   string `json:"region,omitempty"`
	Timeout  int    `json:"timeout,omitempty"` // seconds per LLM call; 0: LLM_CALL_TIMEOUT
	// FallbackModels are tried in order when the model's provider keeps
	// failing: its circuit is open, or the call's last attempt failed
	// with a retryable error (see activities' complete).
	FallbackModels []string `json:"fallback_models,omitempty"`
	// UserPrompt is spec 001's per-agent task instruction, added to the
	// agent's prompt.
	UserPrompt string `json:"user_prompt,omitempty"`
	// RequiresApproval holds the agent's turn (a worker's or a team
	// supervisor's) until a person approves it (see Approval).
	RequiresApproval bool `json:"requires_approval,omitempty"`
	// ApprovalTools names the worker's tools whose every call waits for
	// approval, arguments shown.
	ApprovalTools []string `json:"approval_tools,omitempty"`
	// ApprovalTimeout (seconds; 0: the run's APPROVAL_TIMEOUT, which 0
	// makes unbounded) resolves the agent's open gates as ApprovalDefault
	// ("approve" or "reject", the default) when it runs out.
	ApprovalTimeout int    `json:"approval_timeout,omitempty"`
	ApprovalDefault string `json:"approval_default,omitempty"`
	// A2A makes a worker a remote A2A agent: its turn calls that agent
	// instead of a model (see A2AAgent). Only workers may have it.
	A2A *A2AAgent `json:"a2a,omitempty"`
}

// Team is a team supervisor with its workers.
type Team struct {
	ID               string  `json:"id"`
	Name             string  `json:"name"`
	Description      string  `json:"description,omitempty"`
	Supervisor       Agent   `json:"team_supervisor_agent"`
	PreventDuplicate bool    `json:"prevent_duplicate"`
	ShareContext     bool    `json:"share_context"`
	Workers          []Agent `json:"workers"`
}

// Hierarchy is a global supervisor over teams. The same struct is stored,
// returned by hierarchies/get and passed (as a snapshot) into a run's
// workflow input, so a run never sees later edits.
type Hierarchy struct {
	ID string `json:"hierarchy_id"`
	// TenantID owns the hierarchy; the store sets "default" when empty.
	TenantID             string `json:"tenant_id,omitempty"`
	Name                 string `json:"name"`
	Description          string `json:"description,omitempty"`
	GlobalSupervisor     Agent  `json:"global_supervisor_agent"`
	ExecutionMode        string `json:"execution_mode"`
	EnableContextSharing bool   `json:"enable_context_sharing"`
	MaxIterations        int    `json:"max_iterations"`
	// Dependencies maps a team's name to the names of the teams that must
	// complete before it (spec 001). ExecutionOrder is computed from them.
	Dependencies   map[string][]string `json:"dependencies,omitempty"`
	ExecutionOrder []string            `json:"execution_order,omitempty"`
	// MaxParallelTeams bounds the teams running at once in parallel mode
	// (0: all ready teams); a run's execution_config may override it.
	MaxParallelTeams int `json:"max_parallel_teams,omitempty"`
	// MaxExecutionTime ends a run that overruns it (seconds; 0: no limit).
	MaxExecutionTime int       `json:"max_execution_time,omitempty"`
	Teams            []Team    `json:"teams"`
	CreatedAt        time.Time `json:"created_at"`
	UpdatedAt        time.Time `json:"updated_at"`

	// GlobalConfig is what spec 001's global_config said besides
	// max_execution_time; nil when it said nothing.
	GlobalConfig *GlobalConfig `json:"global_config,omitempty"`
	// Budget is the default budget of the hierarchy's runs: a run's
	// execution_config.budget replaces it whole. Stored with the global
	// supervisor's settings.
	Budget *Budget `json:"budget,omitempty"`
	// Memory declares the long-term memory its agents' memory tools reach
	// (docs/memory.md); nil: none. Stored with the global supervisor's
	// settings.
	Memory *MemoryConfig `json:"memory,omitempty"`
}

// GlobalConfig holds spec 001's global_config settings that the engine
// does not act on: every run streams its events, and the results' format
// is chosen per results request. They are stored and echoed as sent, so a
// client reads back what it wrote.
type GlobalConfig struct {
	EnableStreaming *bool  `json:"enable_streaming,omitempty"`
	OutputFormat    string `json:"output_format,omitempty"`
}

// NewID returns a new random identifier (a UUID string) for hierarchies,
// teams, workers, runs and generated agent_ids.
func NewID() string { return uuid.NewString() }

// Normalize fills every default a stored hierarchy must have: generated
// agent_ids and team ids where the caller gave none, default names and
// prompts, the default execution mode and iteration limit. It never
// overwrites a value the caller set.
func (h *Hierarchy) Normalize() {
	if h.ExecutionMode == "" {
		h.ExecutionMode = ExecutionModeSequential
	}
	if h.MaxIterations == 0 {
		h.MaxIterations = DefaultMaxIterations
	}
	gs := &h.GlobalSupervisor
	if gs.Name == "" {
		gs.Name = DefaultGlobalSupervisorName
	}
	if strings.TrimSpace(gs.SystemPrompt) == "" {
		gs.SystemPrompt = DefaultGlobalSupervisorPrompt
	}
	normalizeAgentID(gs)
	for i := range h.Teams {
		t := &h.Teams[i]
		if t.ID == "" {
			t.ID = NewID()
		}
		if t.Supervisor.Name == "" {
			t.Supervisor.Name = t.Name + " Supervisor"
		}
		if strings.TrimSpace(t.Supervisor.SystemPrompt) == "" {
			t.Supervisor.SystemPrompt = fmt.Sprintf("You are %s. Coordinate the workers of team %s.", t.Supervisor.Name, t.Name)
		}
		normalizeAgentID(&t.Supervisor)
		for j := range t.Workers {
			w := &t.Workers[j]
			if w.Role == "" {
				w.Role = w.Name
			}
			if strings.TrimSpace(w.SystemPrompt) == "" {
				// Contract 002's default prompt for an agent without a template.
				w.SystemPrompt = fmt.Sprintf("You are %s. %s", w.Name, w.Role)
			}
			normalizeAgentID(w)
		}
	}
}

func normalizeAgentID(a *Agent) {
	if a.AgentID == "" {
		a.AgentID = NewID()
	}
}

// Validate checks a normalized hierarchy and returns a FieldError naming the
// first offending field, or nil.
func (h *Hierarchy) Validate() error {
	if err := validateName("name", h.Name); err != nil {
		return err
	}
	if err := CheckBudget(h.Budget, "budget", h); err != nil {
		return err
	}
	switch h.ExecutionMode {
	case ExecutionModeSequential, ExecutionModeParallel:
	default:
		return FieldError("execution_mode", "must be %q or %q, got %q", ExecutionModeSequential, ExecutionModeParallel, h.ExecutionMode)
	}
	if h.MaxParallelTeams < 0 {
		return FieldError("max_parallel_teams", "must be 0 (no limit) or more, got %d", h.MaxParallelTeams)
	}
	if h.MaxExecutionTime < 0 {
		return FieldError("max_execution_time", "must be 0 (no limit) or a number of seconds, got %d", h.MaxExecutionTime)
	}
	if h.MaxIterations < 1 || h.MaxIterations > MaxMaxIterations {
		return FieldError("max_iterations", "must be between 1 and %d, got %d", MaxMaxIterations, h.MaxIterations)
	}
	if len(h.Teams) == 0 {
		return FieldError("teams", "at least one team is required")
	}
	seenIDs := map[string]string{} // agent_id -> field that used it first
	if err := validateAgent("global_supervisor_agent", &h.GlobalSupervisor, seenIDs); err != nil {
		return err
	}
	if h.GlobalSupervisor.A2A != nil {
		return FieldError("global_supervisor_agent.a2a", "only workers can be remote A2A agents")
	}
	teamNames, teamIDs := map[string]bool{}, map[string]bool{}
	for i := range h.Teams {
		t := &h.Teams[i]
		field := fmt.Sprintf("teams[%d]", i)
		if err := validateName(field+".name", t.Name); err != nil {
			return err
		}
		if teamIDs[t.ID] {
			return FieldError(field+".id", "duplicate team id %q in this hierarchy", t.ID)
		}
		if len(t.ID) > 64 {
			return FieldError(field+".id", "must be at most 64 characters")
		}
		teamIDs[t.ID] = true
		if teamNames[t.Name] {
			return FieldError(field+".name", "duplicate team name %q in this hierarchy", t.Name)
		}
		teamNames[t.Name] = true
		if err := validateAgent(field+".team_supervisor_agent", &t.Supervisor, seenIDs); err != nil {
			return err
		}
		if t.Supervisor.A2A != nil {
			return FieldError(field+".team_supervisor_agent.a2a", "only workers can be remote A2A agents")
		}
		if len(t.Workers) == 0 {
			return FieldError(field+".workers", "team %q needs at least one worker", t.Name)
		}
		workerNames := map[string]bool{}
		for j := range t.Workers {
			w := &t.Workers[j]
			wfield := fmt.Sprintf("%s.workers[%d]", field, j)
			if err := validateName(wfield+".name", w.Name); err != nil {
				return err
			}
			if workerNames[w.Name] {
				return FieldError(wfield+".name", "duplicate worker name %q in team %q", w.Name, t.Name)
			}
			workerNames[w.Name] = true
			if err := validateAgent(wfield, w, seenIDs); err != nil {
				return err
			}
			if w.A2A != nil {
				if err := validateA2A(wfield+".a2a", w.A2A); err != nil {
					return err
				}
			}
		}
	}
	if err := h.CheckMemoryConfig("memory"); err != nil {
		return err
	}
	return h.resolveDependencies()
}

// resolveDependencies checks Dependencies (keys and values may name teams
// by name or id), rewrites them to team names, and computes ExecutionOrder:
// the teams in an order where every team follows the teams it needs, ties
// kept in the hierarchy's order. Unknown teams and cycles are
// INVALID_DEPENDENCIES errors naming them.
func (h *Hierarchy) resolveDependencies() error {
	byRef := map[string]string{}
	for _, t := range h.Teams {
		byRef[t.Name] = t.Name
		if t.ID != "" {
			byRef[t.ID] = t.Name
		}
	}
	resolved := map[string][]string{}
	var unknown []string
	for _, key := range sortedKeys(h.Dependencies) {
		team, ok := byRef[key]
		if !ok {
			unknown = append(unknown, key)
			continue
		}
		for _, dep := range h.Dependencies[key] {
			name, ok := byRef[dep]
			if !ok {
				unknown = append(unknown, dep)
				continue
			}
			if name == team {
				return &Error{Code: CodeInvalidDependencies, Field: "dependencies", Message: fmt.Sprintf("dependencies: team %q depends on itself", team)}
			}
			if !slices.Contains(resolved[team], name) {
				resolved[team] = append(resolved[team], name)
			}
		}
	}
	if len(unknown) > 0 {
		return &Error{Code: CodeInvalidDependencies, Field: "dependencies", Message: fmt.Sprintf("dependencies: unknown teams %q", unknown)}
	}
	// Kahn's algorithm, always taking the first ready team in hierarchy order.
	done := map[string]bool{}
	var order []string
	for len(order) < len(h.Teams) {
		progressed := false
		for _, t := range h.Teams {
			if done[t.Name] {
				continue
			}
			ready := true
			for _, dep := range resolved[t.Name] {
				ready = ready && done[dep]
			}
			if ready {
				done[t.Name] = true
				order = append(order, t.Name)
				progressed = true
				break
			}
		}
		if !progressed {
			var cycle []string
			for _, t := range h.Teams {
				if !done[t.Name] {
					cycle = append(cycle, t.Name)
				}
			}
			return &Error{Code: CodeInvalidDependencies, Field: "dependencies", Message: fmt.Sprintf("dependencies: a cycle among teams %q", cycle)}
		}
	}
	if len(resolved) == 0 {
		resolved = nil
	}
	h.Dependencies, h.ExecutionOrder = resolved, order
	return nil
}

// KnownProviders are the LLM providers an agent may name.
var KnownProviders = []string{"openai", "openrouter", "compatible", "aws_bedrock", "offline"}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

func validateName(field, name string) error {
	if strings.TrimSpace(name) == "" {
		return FieldError(field, "must not be empty")
	}
	if utf8.RuneCountInString(name) > MaxNameLength {
		return FieldError(field, "must be at most %d characters", MaxNameLength)
	}
	return nil
}

func validateAgent(field string, a *Agent, seenIDs map[string]string) error {
	if strings.TrimSpace(a.AgentID) == "" {
		return FieldError(field+".agent_id", "must be a non-empty string")
	}
	if utf8.RuneCountInString(a.AgentID) > MaxAgentIDLength {
		return FieldError(field+".agent_id", "must be at most %d characters, got %d", MaxAgentIDLength, utf8.RuneCountInString(a.AgentID))
	}
	if first, dup := seenIDs[a.AgentID]; dup {
		return FieldError(field+".agent_id", "duplicate agent_id %q: already used by %s; agent_ids must be unique within a hierarchy", a.AgentID, first)
	}
	seenIDs[a.AgentID] = field
	if n := utf8.RuneCountInString(a.Name); n > MaxNameLength {
		return FieldError(field+".name", "must be at most %d characters, got %d", MaxNameLength, n)
	}
	if n := utf8.RuneCountInString(a.Role); n > MaxRoleLength {
		return FieldError(field+".role", "must be at most %d characters, got %d", MaxRoleLength, n)
	}
	if n := utf8.RuneCountInString(a.Model); n > MaxModelLength {
		return FieldError(field+".model", "must be at most %d characters, got %d", MaxModelLength, n)
	}
	if err := ValidateFallbackModels(field+".fallback_models", a.FallbackModels); err != nil {
		return err
	}
	if a.Temperature != nil && (*a.Temperature < 0 || *a.Temperature > MaxTemperature) {
		return FieldError(field+".temperature", "must be between 0 and 2, got %g", *a.Temperature)
	}
	if a.MaxTokens != nil && *a.MaxTokens <= 0 {
		return FieldError(field+".max_tokens", "must be greater than 0, got %d", *a.MaxTokens)
	}
	if a.Provider != "" && !slices.Contains(KnownProviders, a.Provider) {
		return &Error{Code: CodeProviderNotSupported, Field: field + ".provider",
			Message: fmt.Sprintf("%s.provider: %q is not supported; use one of %s", field, a.Provider, strings.Join(KnownProviders, ", "))}
	}
	if a.Timeout < 0 {
		return FieldError(field+".timeout", "must be 0 (the default) or a number of seconds, got %d", a.Timeout)
	}
	if a.MaxIterations < 0 || a.MaxIterations > MaxAgentIterations {
		return FieldError(field+".max_iterations", "must be between 0 (the default) and %d, got %d", MaxAgentIterations, a.MaxIterations)
	}
	return nil
}

// AgentIDs lists every agent_id of the hierarchy: global supervisor first,
// then each team's supervisor followed by its workers.
func (h *Hierarchy) AgentIDs() []string {
	ids := []string{h.GlobalSupervisor.AgentID}
	for _, t := range h.Teams {
		ids = append(ids, t.Supervisor.AgentID)
		for _, w := range t.Workers {
			ids = append(ids, w.AgentID)
		}
	}
	return ids
}

// MaxFallbackModels bounds an agent's fallback_models.
const MaxFallbackModels = 5

// ValidateFallbackModels checks an agent's fallback_models: at most
// MaxFallbackModels non-empty model ids, none twice.
func ValidateFallbackModels(field string, ids []string) error {
	if len(ids) > MaxFallbackModels {
		return FieldError(field, "may list at most %d models, got %d", MaxFallbackModels, len(ids))
	}
	for i, m := range ids {
		switch {
		case m == "" || strings.ContainsAny(m, " \t\n"):
			return FieldError(fmt.Sprintf("%s[%d]", field, i), "must be a model id without spaces, got %q", m)
		case utf8.RuneCountInString(m) > MaxModelLength:
			return FieldError(fmt.Sprintf("%s[%d]", field, i), "must be at most %d characters", MaxModelLength)
		case slices.Contains(ids[:i], m):
			return FieldError(fmt.Sprintf("%s[%d]", field, i), "lists %q twice", m)
		}
	}
	return nil
}

// CleanModels trims each model id; nil stays nil.
func CleanModels(ids []string) []string {
	if ids == nil {
		return nil
	}
	out := make([]string, len(ids))
	for i, m := range ids {
		out[i] = strings.TrimSpace(m)
	}
	return out
}
