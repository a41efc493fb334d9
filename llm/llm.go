// Package llm reaches language models: OpenAI, OpenRouter and any
// OpenAI-compatible endpoint through go-openai's streaming chat completions,
// AWS Bedrock through the AWS SDK's ConverseStream, plus a built-in offline
// model for machines without a provider. A Router picks the provider of
// each request, by model table or by the request's own llm_config.
//
// Retries are not done here: a failed call returns an *Error that says
// whether it is worth retrying, and the caller (a Temporal activity) owns the
// retry policy.
package llm

import (
	"context"
	"encoding/json"
	"fmt"
	"time"
)

// Message roles.
const (
	RoleSystem    = "system"
	RoleUser      = "user"
	RoleAssistant = "assistant"
	RoleTool      = "tool"
)

// Message is one chat message.
type Message struct {
	Role       string     `json:"role"`
	Content    string     `json:"content"`
	ToolCalls  []ToolCall `json:"tool_calls,omitempty"`   // assistant messages that call tools
	ToolCallID string     `json:"tool_call_id,omitempty"` // tool messages: the call they answer
}

// ToolDef offers the model a function to call.
type ToolDef struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	Parameters  json.RawMessage `json:"parameters"` // a JSON schema object
}

// ToolCall is the model asking for one function call.
type ToolCall struct {
	ID        string `json:"id"`
	Name      string `json:"name"`
	Arguments string `json:"arguments"` // JSON text as the model wrote it
}

// JSONSchema asks for structured output (response_format json_schema).
type JSONSchema struct {
	Name   string          `json:"name"`
	Schema json.RawMessage `json:"schema"`
	Strict bool            `json:"strict"`
}

// Request is one chat completion.
type Request struct {
	Model       string      `json:"model"`
	Messages    []Message   `json:"messages"`
	Temperature *float64    `json:"temperature,omitempty"`
	MaxTokens   *int        `json:"max_tokens,omitempty"`
	Tools       []ToolDef   `json:"tools,omitempty"`
	JSONSchema  *JSONSchema `json:"json_schema,omitempty"`
	// Provider, BaseURL and Region override the model table for one agent
	// (spec 001's llm_config); empty means route by model.
	Provider string `json:"provider,omitempty"`
	BaseURL  string `json:"base_url,omitempty"`
	Region   string `json:"region,omitempty"`
}

// Delta is a piece of a streamed answer: content or reasoning text.
type Delta struct {
	Content   string
	Reasoning string
}

// Usage counts the tokens of one call.
type Usage struct {
	PromptTokens     int `json:"prompt_tokens"`
	CompletionTokens int `json:"completion_tokens"`
	TotalTokens      int `json:"total_tokens"`
	// CachedTokens is the part of PromptTokens read from the provider's
	// prompt cache, CacheWriteTokens the part written to it (Bedrock's
	// cache writes), ReasoningTokens the part of CompletionTokens spent
	// reasoning; each priced at its own rate (see pricing.Price.Cost).
	CachedTokens     int `json:"cached_tokens,omitempty"`
	CacheWriteTokens int `json:"cache_write_tokens,omitempty"`
	ReasoningTokens  int `json:"reasoning_tokens,omitempty"`
	// Estimated is set when the provider reported no usage and the counts
	// were guessed from text length, so cost reports can say so.
	Estimated bool `json:"estimated,omitempty"`
}

// Response is a finished call.
type Response struct {
	Content      string     `json:"content"`
	Reasoning    string     `json:"reasoning,omitempty"`
	ToolCalls    []ToolCall `json:"tool_calls,omitempty"`
	FinishReason string     `json:"finish_reason,omitempty"`
	Usage        Usage      `json:"usage"`
	Model        string     `json:"model"`    // the model id as the caller named it
	Provider     string     `json:"provider"` // which provider served it
	Offline      bool       `json:"offline,omitempty"`
}

// Client runs chat completions.
type Client interface {
	// Stream runs one completion, calling onDelta for every content or
	// reasoning delta as it arrives, and returns the whole answer. Errors
	// are *Error when the provider answered or the connection failed.
	Stream(ctx context.Context, req Request, onDelta func(Delta)) (*Response, error)
}

// Error is a failed call, classified for the retry policy.
type Error struct {
	Provider   string
	Model      string
	StatusCode int           // HTTP status, 0 when no response arrived
	Retryable  bool          // 429, 5xx, timeouts and network errors
	RetryAfter time.Duration // from a Retry-After header, 0 when absent
	Message    string        // the provider's message, never a credential
	// UpstreamModel is the name sent to the provider when a router mapped
	// Model to another name; empty when they are the same.
	UpstreamModel string
	// Cause is the underlying error when there is one worth inspecting
	// with errors.As (a *RouteError, say); its text is already in Message.
	Cause error
}

// KeyRejected tells whether the provider refused the credentials it was
// sent (HTTP 401 or 403), as opposed to the request: the key is wrong,
// revoked or lacks access, and only the operator can fix it.
func (e *Error) KeyRejected() bool {
	return !e.Retryable && (e.StatusCode == 401 || e.StatusCode == 403)
}

// Unwrap exposes Cause to errors.Is and errors.As.
func (e *Error) Unwrap() error { return e.Cause }

func (e *Error) Error() string {
	if e.StatusCode != 0 {
		return fmt.Sprintf("%s model %q: HTTP %d: %s", e.Provider, e.Model, e.StatusCode, e.Message)
	}
	return fmt.Sprintf("%s model %q: %s", e.Provider, e.Model, e.Message)
}
