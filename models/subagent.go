package models

import "time"

// Sub-agent defaults (spec 003).
const (
	DefaultSubAgentMaxDepth = 3
	DefaultAgentIterations  = 10
	MaxAgentIterations      = 50
)

// SubAgent is a reusable agent definition stored in the database. A worker
// or a sub-agent that lists it by name in SubAgents can delegate a task to
// it through the `delegate` tool. Its ID is also its agent_id on the event
// stream; the caller may set it at create.
type SubAgent struct {
	ID string `json:"id"`
	// TenantID owns the sub-agent; names are unique per tenant. The store
	// sets "default" when empty.
	TenantID     string   `json:"tenant_id,omitempty"`
	Name         string   `json:"name"`
	Description  string   `json:"description,omitempty"`
	SystemPrompt string   `json:"system_prompt"`
	Model        string   `json:"model,omitempty"`
	Temperature  *float64 `json:"temperature,omitempty"`
	MaxTokens    *int     `json:"max_tokens,omitempty"`
	// Provider, BaseURL, Region and Timeout complete the sub-agent's LLM
	// settings as an agent's (spec 001's llm_config): empty provider is
	// routed by the model table, Timeout 0 is the run's LLM call timeout.
	Provider string `json:"provider,omitempty"`
	BaseURL  string `json:"base_url,omitempty"`
	Region   string `json:"region,omitempty"`
	Timeout  int    `json:"timeout,omitempty"`
	// FallbackModels as an agent's (issue 15).
	FallbackModels []string `json:"fallback_models,omitempty"`
	Tools          []string `json:"tools"`          // tool keys from the registry
	SubAgents      []string `json:"sub_agents"`     // names of sub-agents it may delegate to
	MaxDepth       int      `json:"max_depth"`      // deepest nesting below the run's agents it may be called at
	MaxIterations  int      `json:"max_iterations"` // model turns per task (tool rounds)
	Enabled        bool     `json:"enabled"`
	// Version counts the definition's writes (spec 003 §7.2): 1 when
	// created, one more per update.
	Version   int       `json:"version"`
	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"updated_at"`
}

// Agent returns the definition as an agent the engine can run.
func (s *SubAgent) Agent() Agent {
	return Agent{
		AgentID: s.ID, Name: s.Name, Role: s.Description, SystemPrompt: s.SystemPrompt,
		Model: s.Model, Temperature: s.Temperature, MaxTokens: s.MaxTokens,
		Provider: s.Provider, BaseURL: s.BaseURL, Region: s.Region, Timeout: s.Timeout,
		FallbackModels: s.FallbackModels,
		Tools:          s.Tools, SubAgents: s.SubAgents, MaxIterations: s.MaxIterations,
	}
}

// The delegate tool's options.mode (spec 003's subAgent options.mode): what
// the sub-agent may use for one delegated task, never more than its
// definition allows.
const (
	// DelegateModeDefault (or no mode) runs the sub-agent as defined.
	DelegateModeDefault = "default"
	// DelegateModeNoDelegation keeps its tools but not its sub-agents.
	DelegateModeNoDelegation = "no_delegation"
	// DelegateModeNoTools runs it without tools or sub-agents: it answers
	// from its prompt, the task and the context alone.
	DelegateModeNoTools = "no_tools"
)

// DelegateModes lists the modes the delegate tool accepts.
var DelegateModes = []string{DelegateModeDefault, DelegateModeNoDelegation, DelegateModeNoTools}

// ApplyDelegateMode narrows def for mode ("" is the default) and reports
// whether mode is known; an unknown mode leaves def as it was.
func ApplyDelegateMode(def *SubAgent, mode string) bool {
	switch mode {
	case "", DelegateModeDefault:
	case DelegateModeNoDelegation:
		def.SubAgents = nil
	case DelegateModeNoTools:
		def.Tools, def.SubAgents = nil, nil
	default:
		return false
	}
	return true
}
