package models

import (
	"fmt"
	"net/url"
	"regexp"
	"strings"
)

// A2AAgent makes a worker a remote A2A agent (issue 25): its turn is one
// call of the agent its card describes (spec v1.0, SendStreamingMessage
// when the card says it streams, SendMessage otherwise), not a model's
// tool loop. The worker's model, prompts and tools are not used.
type A2AAgent struct {
	// CardURL is the agent card's absolute http(s) URL, usually
	// https://host/.well-known/agent-card.json. The card and the agent's
	// endpoints are reached under the network guard of http_get
	// (A2A_ALLOW_PRIVATE opens private addresses).
	CardURL string `json:"card_url"`
	// HeadersEnv maps a header sent with every request to the agent (its
	// card included) to the environment variable of the worker process
	// holding its value (named A2A_HEADER_…, see A2AHeaderEnvPrefix): the
	// secret never enters the hierarchy, a run's input or its history.
	HeadersEnv map[string]string `json:"headers_env,omitempty"`
}

var (
	a2aEnvNameRE    = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,127}$`)
	a2aHeaderNameRE = regexp.MustCompile("^[!#$%&'*+.^_`|~0-9A-Za-z-]{1,128}$")
)

// A2AHeaderEnvPrefix starts the name of every environment variable a
// worker's headers_env may read. The tenant who writes a hierarchy chooses
// the agent's URL: without the prefix it could have any variable of the
// worker process (a provider's key, the database's password) sent to a
// host of its own. The operator puts the values meant for remote agents,
// and only those, in variables with this prefix.
const A2AHeaderEnvPrefix = "A2A_HEADER_"

// A2AHeaderEnvAllowed reports whether headers_env may name variable env.
func A2AHeaderEnvAllowed(env string) bool {
	return a2aEnvNameRE.MatchString(env) && strings.HasPrefix(env, A2AHeaderEnvPrefix) && len(env) > len(A2AHeaderEnvPrefix)
}

// MaxA2ACardURLLength bounds an a2a.card_url.
const MaxA2ACardURLLength = 2048

// validateA2A checks a worker's a2a settings, naming field (the worker's
// "….a2a") in the error.
func validateA2A(field string, a *A2AAgent) error {
	raw := strings.TrimSpace(a.CardURL)
	if raw == "" {
		return FieldError(field+".card_url", "is required: the URL of the remote agent's card (https://host/.well-known/agent-card.json)")
	}
	if len(raw) > MaxA2ACardURLLength {
		return FieldError(field+".card_url", "must be at most %d characters", MaxA2ACardURLLength)
	}
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
		return FieldError(field+".card_url", "must be an absolute http or https URL, got %q", raw)
	}
	if u.User != nil {
		return FieldError(field+".card_url", "must not carry credentials; send them in a header with headers_env")
	}
	a.CardURL = raw
	for h, env := range a.HeadersEnv {
		if !a2aHeaderNameRE.MatchString(h) {
			return FieldError(field+".headers_env", "%q is not a header name", h)
		}
		if !a2aEnvNameRE.MatchString(env) {
			return FieldError(field+".headers_env", "%q (header %s) is not an environment variable name", env, h)
		}
		if !A2AHeaderEnvAllowed(env) {
			return FieldError(field+".headers_env", "%q (header %s): only variables named %s<NAME> may be sent to a remote agent", env, h, A2AHeaderEnvPrefix)
		}
	}
	return nil
}

// A2AContextID is the A2A contextId a run's remote worker works in: the
// same for every call of that worker in the run, so a later team turn
// continues the remote conversation, and different for every run and
// worker. It is derived, not stored, so it survives continue-as-new and
// replays the same.
func A2AContextID(runID, agentID string) string {
	return fmt.Sprintf("%s.%s", runID, agentID)
}

// A2ACallInput is the input of the CallA2A activity: one turn of a remote
// A2A worker.
type A2ACallInput struct {
	RunID       string        `json:"run_id"`
	Agent       Agent         `json:"agent"`
	Source      Source        `json:"source"`
	Task        string        `json:"task"`
	Instruction string        `json:"instruction"`
	Context     []ContextItem `json:"context,omitempty"`
	// ContextID is the remote contextId (A2AContextID).
	ContextID  string     `json:"context_id"`
	RunOptions RunOptions `json:"run_options"`
	// MessageID is the id of the message that stores the turn's answer,
	// on its llm.stream events, as for a model's answer.
	MessageID       string `json:"message_id,omitempty"`
	ParentMessageID string `json:"parent_message_id,omitempty"`
	DeferWrites     bool   `json:"defer_writes,omitempty"`
	ReturnEvents    bool   `json:"return_events,omitempty"`
	// Guidance is the operator's guidance waiting for the worker
	// (runs/redirect), sent with the instruction.
	Guidance []string `json:"guidance,omitempty"`
}

// Error types of a remote A2A worker's failures (temporal application
// error types). ErrA2ATaskFailed (the remote task failed, was rejected or
// asked for input) and ErrA2ARefused (the card or the network guard
// refused the call) are not retried; ErrA2AUnavailable (a transport
// failure) is.
const (
	ErrA2ATaskFailed  = "A2ATaskFailed"
	ErrA2ARefused     = "A2ARefused"
	ErrA2AUnavailable = "A2AUnavailable"
)

// A2AModelPrefix starts the model a remote A2A worker's output names:
// "a2a:" and the agent card's name.
const A2AModelPrefix = "a2a:"
