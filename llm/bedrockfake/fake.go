// Package bedrockfake is a fake of AWS Bedrock's ConverseStream HTTP API
// for tests only. It listens on 127.0.0.1 and answers
// POST /model/{modelId}/converse-stream with the AWS event-stream binary
// encoding (application/vnd.amazon.eventstream), so the code under test
// runs the real AWS SDK client end to end: request serialisation, SigV4
// signing, event-stream decoding and error deserialisation.
//
// It can be scripted to answer with text, reasoning and tool use, to report
// usage, or to fail the ways Bedrock fails: an error status with an AWS JSON
// error body and x-amzn-errortype header, an exception event in the middle
// of a stream, a dropped connection, a request that never gets an answer.
//
// The fake ignores request signatures (it only records which access key and
// region signed), but the SDK refuses to send a request without
// credentials: tests must configure fake static credentials, e.g.
// AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY set to test values.
//
// Nothing here talks to AWS. Never point production traffic at it.
package bedrockfake

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/op-stack/executor/llm/internal/fakeserver"
)

// DefaultContent is the fake's answer when no rule matches and no default
// response was configured.
const DefaultContent = "This is the fake Bedrock model's default answer."

// Rule scripts the fake's answers to the requests it matches. Every set
// field must match; unset fields match anything. Rules are tried in order
// and the first match wins.
type Rule struct {
	// Name only labels the rule in Calls, for readable test failures.
	Name string `json:"name,omitempty"`

	ModelID        string `json:"model_id,omitempty"`        // model id from the path equals
	Region         string `json:"region,omitempty"`          // the SigV4 signing region equals
	SystemContains string `json:"system_contains,omitempty"` // some system block contains
	UserContains   string `json:"user_contains,omitempty"`   // the text of the last user message contains
	HasTools       bool   `json:"has_tools,omitempty"`       // toolConfig offers tools
	HasToolResult  bool   `json:"has_tool_result,omitempty"` // some message has a toolResult block

	// Responses are used one per matching request, in order; the last one
	// repeats. Empty means the fake's default response.
	Responses []Response `json:"responses,omitempty"`
}

// Response is one scripted answer, or one scripted fault.
type Response struct {
	Content string `json:"content,omitempty"`
	// Reasoning is streamed before the content as reasoningContent text
	// deltas, followed by a signature delta as Claude models send.
	Reasoning string    `json:"reasoning,omitempty"`
	ToolUses  []ToolUse `json:"tool_uses,omitempty"`
	// StopReason defaults to "tool_use" when there are tool uses and
	// "end_turn" otherwise.
	StopReason string `json:"stop_reason,omitempty"`

	// ChunkSize is how many characters of text, reasoning or tool input go
	// in one delta event; 0 means 4.
	ChunkSize int `json:"chunk_size,omitempty"`
	// TokenDelay is slept between two events.
	TokenDelay time.Duration `json:"token_delay,omitempty"`
	// Usage is reported in the metadata event as is; the zero value means
	// "estimate it" at about four characters a token.
	Usage Usage `json:"usage"`
	// OmitMetadata leaves the metadata event (usage) out.
	OmitMetadata bool `json:"omit_metadata,omitempty"`
	// OmitMessageStop leaves the messageStop event out, as a stream cut
	// short by a proxy would.
	OmitMessageStop bool `json:"omit_message_stop,omitempty"`

	// Status, when not 0 or 200, answers with that HTTP status and an AWS
	// JSON error body ({"message": …}) instead of a stream.
	Status int `json:"status,omitempty"`
	// ErrorType goes in the x-amzn-errortype header; the default depends
	// on Status (429 ThrottlingException, 400 ValidationException, 403
	// AccessDeniedException, 404 ResourceNotFoundException, 5xx
	// InternalServerException or ServiceUnavailableException…).
	ErrorType    string `json:"error_type,omitempty"`
	ErrorMessage string `json:"error_message,omitempty"`

	// StreamException, when set, sends an exception event (message type
	// "exception") after ExceptionAfterEvents events and ends the stream.
	// It is the union member name, e.g. "throttlingException",
	// "modelStreamErrorException", "validationException",
	// "internalServerException", "serviceUnavailableException".
	StreamException        string `json:"stream_exception,omitempty"`
	StreamExceptionMessage string `json:"stream_exception_message,omitempty"`
	ExceptionAfterEvents   int    `json:"exception_after_events,omitempty"`

	// DropAfterEvents > 0 writes that many events and then closes the TCP
	// connection without ending the body.
	DropAfterEvents int `json:"drop_after_events,omitempty"`
	// Hang never answers: the handler waits until the client gives up or
	// the fake is closed.
	Hang bool `json:"hang,omitempty"`
	// HangAfterEvents > 0 writes that many events and then stalls.
	HangAfterEvents int `json:"hang_after_events,omitempty"`
}

// ToolUse is a tool call the fake model makes.
type ToolUse struct {
	ID    string `json:"id,omitempty"` // default "tooluse_fake_<n>"
	Name  string `json:"name"`
	Input string `json:"input"` // JSON text, streamed in pieces; empty means {}
}

// Usage is token usage in Bedrock's wire form. As Bedrock counts them,
// InputTokens leaves out the prompt tokens read from the cache
// (CacheReadInputTokens) and written to it (CacheWriteInputTokens), and
// TotalTokens counts them all.
type Usage struct {
	InputTokens           int `json:"inputTokens"`
	OutputTokens          int `json:"outputTokens"`
	TotalTokens           int `json:"totalTokens"`
	CacheReadInputTokens  int `json:"cacheReadInputTokens,omitempty"`
	CacheWriteInputTokens int `json:"cacheWriteInputTokens,omitempty"`
}

// Message is a Converse message as the fake received it.
type Message struct {
	Role    string         `json:"role"`
	Content []ContentBlock `json:"content"`
}

// Text joins the message's text blocks.
func (m Message) Text() string {
	var b strings.Builder
	for _, c := range m.Content {
		b.WriteString(c.Text)
	}
	return b.String()
}

// ContentBlock is one block of a Converse message; exactly one field is set.
type ContentBlock struct {
	Text             string          `json:"text,omitempty"`
	ToolUse          *ToolUseBlock   `json:"toolUse,omitempty"`
	ToolResult       *ToolResult     `json:"toolResult,omitempty"`
	ReasoningContent json.RawMessage `json:"reasoningContent,omitempty"`
}

// ToolUseBlock is an assistant's tool call in the request history.
type ToolUseBlock struct {
	ToolUseID string          `json:"toolUseId"`
	Name      string          `json:"name"`
	Input     json.RawMessage `json:"input"`
}

// ToolResult answers a tool call in the request history.
type ToolResult struct {
	ToolUseID string `json:"toolUseId"`
	Content   []struct {
		Text string          `json:"text,omitempty"`
		JSON json.RawMessage `json:"json,omitempty"`
	} `json:"content"`
	Status string `json:"status,omitempty"`
}

// Text joins the result's text blocks.
func (r ToolResult) Text() string {
	var b strings.Builder
	for _, c := range r.Content {
		b.WriteString(c.Text)
	}
	return b.String()
}

// SystemBlock is one block of the system prompt.
type SystemBlock struct {
	Text string `json:"text,omitempty"`
}

// InferenceConfig is the request's inferenceConfig.
type InferenceConfig struct {
	MaxTokens     *int     `json:"maxTokens,omitempty"`
	Temperature   *float64 `json:"temperature,omitempty"`
	TopP          *float64 `json:"topP,omitempty"`
	StopSequences []string `json:"stopSequences,omitempty"`
}

// ToolConfig is the request's toolConfig.
type ToolConfig struct {
	Tools []struct {
		ToolSpec *ToolSpec `json:"toolSpec,omitempty"`
	} `json:"tools"`
	ToolChoice json.RawMessage `json:"toolChoice,omitempty"`
}

// ToolSpec is a tool definition as the fake received it.
type ToolSpec struct {
	Name        string `json:"name"`
	Description string `json:"description,omitempty"`
	InputSchema struct {
		JSON json.RawMessage `json:"json"`
	} `json:"inputSchema"`
}

// Call records one request the fake received and what it did about it.
type Call struct {
	Index int    `json:"index"`
	Path  string `json:"path"`
	// Rule is the index of the matching rule, -1 for the default answer.
	Rule     int    `json:"rule"`
	RuleName string `json:"rule_name,omitempty"`
	// ModelID is the model id from the path, unescaped.
	ModelID string `json:"model_id"`
	// AccessKeyID and Region come from the SigV4 Authorization header's
	// credential scope (the secret never travels); BearerAuth is set when
	// a Bedrock API key was sent instead.
	AccessKeyID string `json:"access_key_id,omitempty"`
	Region      string `json:"region,omitempty"`
	Service     string `json:"service,omitempty"`
	BearerAuth  bool   `json:"bearer_auth,omitempty"`

	Messages        []Message        `json:"messages"`
	System          []SystemBlock    `json:"system,omitempty"`
	InferenceConfig *InferenceConfig `json:"inferenceConfig,omitempty"`
	ToolConfig      *ToolConfig      `json:"toolConfig,omitempty"`
	Body            json.RawMessage  `json:"body"` // the raw request body

	ReceivedAt time.Time `json:"received_at"`
	FinishedAt time.Time `json:"finished_at"`
	Status     int       `json:"status"`            // HTTP status sent, 0 if none
	Events     int       `json:"events"`            // event-stream messages flushed
	Dropped    bool      `json:"dropped,omitempty"` // the fake cut the connection
	Aborted    bool      `json:"aborted,omitempty"` // the client went away first
}

// SystemText joins the system blocks with newlines.
func (c Call) SystemText() string {
	var parts []string
	for _, s := range c.System {
		parts = append(parts, s.Text)
	}
	return strings.Join(parts, "\n")
}

// ToolNames lists the names of the tools the request offered.
func (c Call) ToolNames() []string {
	if c.ToolConfig == nil {
		return nil
	}
	var out []string
	for _, t := range c.ToolConfig.Tools {
		if t.ToolSpec != nil {
			out = append(out, t.ToolSpec.Name)
		}
	}
	return out
}

// Options configures a fake server.
type Options struct {
	Rules []Rule
	// Default answers requests no rule matches; nil means DefaultContent.
	Default *Response
	// TLS serves HTTPS with a self-signed certificate; use HTTPClient,
	// which trusts it. The SDK sends Bedrock API keys (bearer tokens) over
	// HTTPS only.
	TLS bool
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
	return &Server{fake: f, srv: fakeserver.Start(f, f.Closing, opts.TLS)}
}

// HTTPClient is a client for the fake; with TLS it trusts the fake's
// certificate.
func (s *Server) HTTPClient() *http.Client { return s.srv.HTTP.Client() }

// ListenAndServe runs a fake on addr (use a loopback address such as
// "127.0.0.1:8090") until it fails, for tests that drive a separate
// process: point AWS_BEDROCK_ENDPOINT at http://ADDR. Besides the Bedrock
// endpoint it serves GET /fake/calls, PUT /fake/rules (a JSON []Rule) and
// POST /fake/reset.
func ListenAndServe(addr string, rules []Rule) error {
	return fakeserver.ListenAndServe(addr, newFake(Options{Rules: rules}))
}

// URL is the endpoint to give the SDK as its base endpoint
// (BedrockConfig.Endpoint, AWS_BEDROCK_ENDPOINT): http://127.0.0.1:PORT,
// or https:// with TLS.
func (s *Server) URL() string { return s.srv.HTTP.URL }

// Close stops the fake, first releasing handlers that hang or sleep.
func (s *Server) Close() { s.srv.Close() }

// SetRules replaces the script and restarts every rule's response
// sequence. Calls are kept.
func (s *Server) SetRules(rules ...Rule) { s.fake.SetRules(rules) }

// SetDefault replaces the answer to requests that no rule matches.
func (s *Server) SetDefault(r Response) { s.fake.SetDefault(r) }

// Calls returns a copy of every request received so far, in arrival order.
func (s *Server) Calls() []Call { return s.fake.Calls() }

// Reset forgets the recorded calls and restarts every rule's response
// sequence.
func (s *Server) Reset() { s.fake.Reset() }
