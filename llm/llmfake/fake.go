// Package llmfake is a fake OpenAI-compatible chat completions server for
// tests and benchmarks only. It speaks real HTTP, so the code under test
// runs its real client (go-openai) end to end, and it can be scripted to
// answer, stream slowly, or fail the ways real providers fail: error
// statuses with Retry-After, connections dropped mid-stream, requests that
// never get an answer.
//
// Nothing here talks to a real model. Never point production traffic at it.
package llmfake

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/op-stack/executor/llm/internal/fakeserver"
)

// DefaultContent is the fake's answer when no rule matches and no default
// response was configured.
const DefaultContent = "This is the fake model's default answer."

// Rule scripts the fake's answers to the requests it matches. Every set
// field must match; unset fields match anything. Rules are tried in order
// and the first match wins, so put specific rules before general ones.
type Rule struct {
	// Name only labels the rule in Calls, for readable test failures.
	Name string `json:"name,omitempty"`

	Model          string `json:"model,omitempty"`           // request model equals
	SystemContains string `json:"system_contains,omitempty"` // some system message contains
	UserContains   string `json:"user_contains,omitempty"`   // the last user message contains
	HasJSONSchema  bool   `json:"has_json_schema,omitempty"` // response_format is json_schema
	HasTools       bool   `json:"has_tools,omitempty"`       // the request offers tools
	HasToolResult  bool   `json:"has_tool_result,omitempty"` // some message has role "tool"

	// Responses are used one per matching request, in order; the last one
	// repeats, so a single response answers every time. Empty means the
	// fake's default response.
	Responses []Response `json:"responses,omitempty"`
}

// Response is one scripted answer, or one scripted fault.
type Response struct {
	Content string `json:"content,omitempty"`
	// EchoToolResult appends the content of the request's last tool
	// message to Content: an agent that "uses" what a tool answered (the
	// fact memory_search found) without a real model.
	EchoToolResult bool `json:"echo_tool_result,omitempty"`
	// Reasoning is streamed before the content, in the delta field named by
	// ReasoningField.
	Reasoning string `json:"reasoning,omitempty"`
	// ReasoningField is the JSON name of the reasoning delta field:
	// "reasoning_content" (DeepSeek, vLLM; what go-openai decodes) by
	// default, "reasoning" to imitate OpenRouter.
	ReasoningField string     `json:"reasoning_field,omitempty"`
	ToolCalls      []ToolCall `json:"tool_calls,omitempty"`
	// FinishReason defaults to "tool_calls" when there are tool calls and
	// "stop" otherwise.
	FinishReason string `json:"finish_reason,omitempty"`

	// ChunkSize is how many characters of content, reasoning or tool
	// arguments go in one chunk; 0 means 4, close to a token.
	ChunkSize int `json:"chunk_size,omitempty"`
	// TokenDelay is slept between two chunks (once, before answering, for
	// non-streaming requests); 0 streams as fast as the socket allows.
	TokenDelay time.Duration `json:"token_delay,omitempty"`
	// FirstTokenDelay is the time to first token: a streaming answer sends
	// its headers at once and its first chunk after this delay (TokenDelay
	// then separates the chunks that follow); a non-streaming answer waits
	// it before TokenDelay. 0 means no extra delay.
	FirstTokenDelay time.Duration `json:"first_token_delay,omitempty"`
	// Usage is reported as is; the zero value means "estimate it" at about
	// four characters a token.
	Usage Usage `json:"usage"`
	// OmitUsage leaves usage out even when the client asked for it, as some
	// compatible servers do.
	OmitUsage bool `json:"omit_usage,omitempty"`

	// Status, when not 0 or 200, answers with that HTTP status and an
	// OpenAI-style error body instead of a completion.
	Status       int    `json:"status,omitempty"`
	ErrorMessage string `json:"error_message,omitempty"` // default per status
	ErrorType    string `json:"error_type,omitempty"`    // default per status
	ErrorCode    string `json:"error_code,omitempty"`    // default per status
	// RetryAfter is sent verbatim as the Retry-After header, with any
	// status: "2" or an HTTP date.
	RetryAfter string `json:"retry_after,omitempty"`

	// DropAfterChunks > 0 writes that many stream chunks and then closes
	// the TCP connection without ending the chunked body, which a client
	// sees as an unexpected EOF. For a non-streaming request any value > 0
	// closes the connection without answering.
	DropAfterChunks int `json:"drop_after_chunks,omitempty"`
	// CloseWithoutAnswer closes the connection before writing anything, as
	// a crashed proxy would.
	CloseWithoutAnswer bool `json:"close_without_answer,omitempty"`
	// Hang never answers: the handler waits until the client gives up or
	// the fake is closed.
	Hang bool `json:"hang,omitempty"`
	// HangAfterChunks > 0 writes that many chunks and then stalls the same
	// way, as a provider whose stream freezes.
	HangAfterChunks int `json:"hang_after_chunks,omitempty"`
}

// ToolCall is a function call the fake model makes.
type ToolCall struct {
	ID        string `json:"id,omitempty"` // default "call_fake_<n>"
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

// Usage is token usage in OpenAI's wire form. The details, when set, say
// how many prompt tokens came from the provider's cache and how many
// completion tokens were spent reasoning (both inside the counts).
type Usage struct {
	PromptTokens            int                      `json:"prompt_tokens"`
	CompletionTokens        int                      `json:"completion_tokens"`
	TotalTokens             int                      `json:"total_tokens"`
	PromptTokensDetails     *PromptTokensDetails     `json:"prompt_tokens_details,omitempty"`
	CompletionTokensDetails *CompletionTokensDetails `json:"completion_tokens_details,omitempty"`
}

// PromptTokensDetails is OpenAI's usage.prompt_tokens_details.
type PromptTokensDetails struct {
	CachedTokens int `json:"cached_tokens"`
}

// CompletionTokensDetails is OpenAI's usage.completion_tokens_details.
type CompletionTokensDetails struct {
	ReasoningTokens int `json:"reasoning_tokens"`
}

// Cached is the cached part of the prompt tokens, 0 without details.
func (u Usage) Cached() int {
	if u.PromptTokensDetails == nil {
		return 0
	}
	return u.PromptTokensDetails.CachedTokens
}

// Reasoning is the reasoning part of the completion tokens, 0 without
// details.
func (u Usage) Reasoning() int {
	if u.CompletionTokensDetails == nil {
		return 0
	}
	return u.CompletionTokensDetails.ReasoningTokens
}

// Message is a chat message as the fake received it. Content arrays (text
// parts) are joined into Content.
type Message struct {
	Role       string     `json:"role"`
	Content    string     `json:"content"`
	ToolCalls  []ToolCall `json:"tool_calls,omitempty"`
	ToolCallID string     `json:"tool_call_id,omitempty"`
}

// Tool is a function tool as the fake received it.
type Tool struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	Parameters  json.RawMessage `json:"parameters,omitempty"`
}

// Call records one request the fake received and what it did about it.
type Call struct {
	Index int    `json:"index"`
	Path  string `json:"path"`
	// Rule is the index of the matching rule, -1 for the default answer;
	// RuleName is that rule's Name.
	Rule     int    `json:"rule"`
	RuleName string `json:"rule_name,omitempty"`
	// APIKey is the bearer token sent, so tests can check it was; the fake
	// is for test keys only.
	APIKey string `json:"api_key,omitempty"`

	Model               string    `json:"model"`
	Messages            []Message `json:"messages"`
	Temperature         *float64  `json:"temperature,omitempty"`
	MaxTokens           *int      `json:"max_tokens,omitempty"`
	MaxCompletionTokens *int      `json:"max_completion_tokens,omitempty"`
	Tools               []Tool    `json:"tools,omitempty"`
	Stream              bool      `json:"stream"`
	IncludeUsage        bool      `json:"include_usage"`
	// ResponseFormat is the response_format type ("json_schema",
	// "json_object", "text") or "" when absent.
	ResponseFormat   string          `json:"response_format,omitempty"`
	JSONSchemaName   string          `json:"json_schema_name,omitempty"`
	JSONSchema       json.RawMessage `json:"json_schema,omitempty"`
	JSONSchemaStrict bool            `json:"json_schema_strict,omitempty"`
	Body             json.RawMessage `json:"body"` // the raw request body

	ReceivedAt   time.Time   `json:"received_at"`
	FirstChunkAt time.Time   `json:"first_chunk_at"` // zero when nothing was streamed
	FinishedAt   time.Time   `json:"finished_at"`
	ChunkTimes   []time.Time `json:"chunk_times,omitempty"` // when each chunk was flushed
	Status       int         `json:"status"`                // HTTP status sent, 0 if none
	Dropped      bool        `json:"dropped,omitempty"`     // the fake cut the connection
	Aborted      bool        `json:"aborted,omitempty"`     // the client went away first
}

// HasJSONSchema tells whether the request asked for json_schema output.
func (c Call) HasJSONSchema() bool { return c.ResponseFormat == "json_schema" }

// Options configures a fake server.
type Options struct {
	Rules []Rule
	// Default answers requests no rule matches; nil means DefaultContent.
	Default *Response
	// OnChunkWritten is called after each stream chunk is flushed to the
	// socket, from the handler goroutine; keep it fast.
	OnChunkWritten func(callIndex, chunkIndex int, at time.Time)
}

// Server is a running fake on 127.0.0.1. It is safe for concurrent use.
type Server struct {
	fake *fake
	srv  *fakeserver.Server
}

// New starts a fake answering by rules and, when t is not nil, closes it
// when the test ends.
func New(t testing.TB, rules ...Rule) *Server {
	s := NewServer(Options{Rules: rules})
	if t != nil {
		t.Cleanup(s.Close)
	}
	return s
}

// NewServer starts a fake; the caller must Close it.
func NewServer(opts Options) *Server {
	f := newFake(opts)
	return &Server{fake: f, srv: fakeserver.Start(f, f.Closing, false)}
}

// ListenAndServe runs a fake on addr (use a loopback address such as
// "127.0.0.1:8089") until it fails, for tests that drive a separate
// process. Its base URL is http://ADDR/v1. Besides the chat endpoint it
// serves GET /fake/calls, PUT /fake/rules (a JSON []Rule) and
// POST /fake/reset.
func ListenAndServe(addr string, rules []Rule) error {
	return fakeserver.ListenAndServe(addr, newFake(Options{Rules: rules}))
}

// URL is the base URL for go-openai's ClientConfig.BaseURL; it ends in /v1.
func (s *Server) URL() string { return s.srv.HTTP.URL + "/v1" }

// RootURL is the server's address without the /v1 prefix.
func (s *Server) RootURL() string { return s.srv.HTTP.URL }

// Close stops the fake, first releasing handlers that hang or sleep so
// that it does not wait for them.
func (s *Server) Close() { s.srv.Close() }

// SetRules replaces the script and restarts every rule's response
// sequence. Calls are kept.
func (s *Server) SetRules(rules ...Rule) { s.fake.SetRules(rules) }

// SetDefault replaces the answer to requests that no rule matches.
func (s *Server) SetDefault(r Response) { s.fake.SetDefault(r) }

// SetOnChunkWritten replaces the chunk hook; nil removes it.
func (s *Server) SetOnChunkWritten(fn func(callIndex, chunkIndex int, at time.Time)) {
	s.fake.setOnChunk(fn)
}

// Calls returns a copy of every request received so far, in arrival order.
func (s *Server) Calls() []Call { return s.fake.Calls() }

// Reset forgets the recorded calls and restarts every rule's response
// sequence.
func (s *Server) Reset() { s.fake.Reset() }
