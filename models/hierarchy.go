package models

import (
	"fmt"
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
	MaxAgentIDLength     = 100
	MaxNameLength        = 255
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
	// rounds); 0 means DefaultAgentIterations.
	MaxIterations int `json:"max_iterations,omitempty"`
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
	ID                   string    `json:"hierarchy_id"`
	Name                 string    `json:"name"`
	Description          string    `json:"description,omitempty"`
	GlobalSupervisor     Agent     `json:"global_supervisor_agent"`
	ExecutionMode        string    `json:"execution_mode"`
	EnableContextSharing bool      `json:"enable_context_sharing"`
	MaxIterations        int       `json:"max_iterations"`
	Teams                []Team    `json:"teams"`
	CreatedAt            time.Time `json:"created_at"`
	UpdatedAt            time.Time `json:"updated_at"`
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
	switch h.ExecutionMode {
	case ExecutionModeSequential:
	default:
		return FieldError("execution_mode", "must be %q, got %q", ExecutionModeSequential, h.ExecutionMode)
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
	teamNames := map[string]bool{}
	for i := range h.Teams {
		t := &h.Teams[i]
		field := fmt.Sprintf("teams[%d]", i)
		if err := validateName(field+".name", t.Name); err != nil {
			return err
		}
		if teamNames[t.Name] {
			return FieldError(field+".name", "duplicate team name %q in this hierarchy", t.Name)
		}
		teamNames[t.Name] = true
		if err := validateAgent(field+".team_supervisor_agent", &t.Supervisor, seenIDs); err != nil {
			return err
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
		}
	}
	return nil
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
	if a.Temperature != nil && (*a.Temperature < 0 || *a.Temperature > MaxTemperature) {
		return FieldError(field+".temperature", "must be between 0 and 2, got %g", *a.Temperature)
	}
	if a.MaxTokens != nil && *a.MaxTokens <= 0 {
		return FieldError(field+".max_tokens", "must be greater than 0, got %d", *a.MaxTokens)
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
