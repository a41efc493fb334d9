package llmfake

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/op-stack/executor/llm/internal/fakeserver"
)

// fake is the HTTP handler behind Server and ListenAndServe: the shared
// script (rules, default answer, recorded calls) and the chunk hook.
type fake struct {
	*fakeserver.Script[Rule, Response, Call]

	hookMu  sync.Mutex
	onChunk func(callIndex, chunkIndex int, at time.Time)
}

// hooks tell the shared script about this fake's rules and calls.
var hooks = fakeserver.Hooks[Rule, Response, Call]{
	Match:     func(rule *Rule, c *Call) bool { return rule.matches(c) },
	Responses: func(rule *Rule) (string, []Response) { return rule.Name, rule.Responses },
	Number: func(c *Call, index, rule int, name string) {
		c.Index, c.Rule, c.RuleName = index, rule, name
	},
	Copy: func(c Call) Call {
		c.Messages = append([]Message(nil), c.Messages...)
		c.Tools = append([]Tool(nil), c.Tools...)
		c.ChunkTimes = append([]time.Time(nil), c.ChunkTimes...)
		return c
	},
}

func newFake(opts Options) *fake {
	def := Response{Content: DefaultContent}
	if opts.Default != nil {
		def = *opts.Default
	}
	return &fake{Script: fakeserver.NewScript(hooks, opts.Rules, def), onChunk: opts.OnChunkWritten}
}

func (f *fake) setOnChunk(fn func(callIndex, chunkIndex int, at time.Time)) {
	f.hookMu.Lock()
	defer f.hookMu.Unlock()
	f.onChunk = fn
}

func (f *fake) chunkHook() func(callIndex, chunkIndex int, at time.Time) {
	f.hookMu.Lock()
	defer f.hookMu.Unlock()
	return f.onChunk
}

func (f *fake) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	path := strings.TrimSuffix(r.URL.Path, "/")
	if path == "/v1/chat/completions" || path == "/chat/completions" {
		if r.Method != http.MethodPost {
			writeError(w, http.StatusMethodNotAllowed, "use POST", "invalid_request_error", "")
			return
		}
		f.chat(w, r)
		return
	}
	if path == "/v1/embeddings" || path == "/embeddings" {
		if r.Method != http.MethodPost {
			writeError(w, http.StatusMethodNotAllowed, "use POST", "invalid_request_error", "")
			return
		}
		f.embeddings(w, r)
		return
	}
	if !f.ServeControl(w, r, path, func(w http.ResponseWriter, err error) {
		writeError(w, http.StatusBadRequest, "rules: "+err.Error(), "invalid_request_error", "")
	}) {
		writeError(w, http.StatusNotFound, "the fake serves POST /v1/chat/completions only", "invalid_request_error", "unknown_url")
	}
}

// wireRequest is the part of a chat completion request the fake reads.
type wireRequest struct {
	Model    string `json:"model"`
	Messages []struct {
		Role       string          `json:"role"`
		Content    json.RawMessage `json:"content"`
		ToolCallID string          `json:"tool_call_id"`
		ToolCalls  []struct {
			ID       string `json:"id"`
			Function struct {
				Name      string `json:"name"`
				Arguments string `json:"arguments"`
			} `json:"function"`
		} `json:"tool_calls"`
	} `json:"messages"`
	Temperature         *float64 `json:"temperature"`
	MaxTokens           *int     `json:"max_tokens"`
	MaxCompletionTokens *int     `json:"max_completion_tokens"`
	Stream              bool     `json:"stream"`
	StreamOptions       *struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options"`
	Tools []struct {
		Type     string `json:"type"`
		Function struct {
			Name        string          `json:"name"`
			Description string          `json:"description"`
			Parameters  json.RawMessage `json:"parameters"`
		} `json:"function"`
	} `json:"tools"`
	ResponseFormat *struct {
		Type       string `json:"type"`
		JSONSchema *struct {
			Name   string          `json:"name"`
			Schema json.RawMessage `json:"schema"`
			Strict bool            `json:"strict"`
		} `json:"json_schema"`
	} `json:"response_format"`
}

// contentText reads a message content that is a string, null, or an array
// of parts.
func contentText(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if json.Unmarshal(raw, &parts) == nil {
		var b strings.Builder
		for _, p := range parts {
			b.WriteString(p.Text)
		}
		return b.String()
	}
	return ""
}

func callFromRequest(path string, body []byte, wr *wireRequest, r *http.Request) Call {
	c := Call{
		Path:                path,
		APIKey:              strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer "),
		Model:               wr.Model,
		Temperature:         wr.Temperature,
		MaxTokens:           wr.MaxTokens,
		MaxCompletionTokens: wr.MaxCompletionTokens,
		Stream:              wr.Stream,
		IncludeUsage:        wr.StreamOptions != nil && wr.StreamOptions.IncludeUsage,
		Body:                json.RawMessage(body),
		ReceivedAt:          time.Now(),
	}
	for _, m := range wr.Messages {
		msg := Message{Role: m.Role, Content: contentText(m.Content), ToolCallID: m.ToolCallID}
		for _, tc := range m.ToolCalls {
			msg.ToolCalls = append(msg.ToolCalls, ToolCall{ID: tc.ID, Name: tc.Function.Name, Arguments: tc.Function.Arguments})
		}
		c.Messages = append(c.Messages, msg)
	}
	for _, t := range wr.Tools {
		c.Tools = append(c.Tools, Tool{Name: t.Function.Name, Description: t.Function.Description, Parameters: t.Function.Parameters})
	}
	if rf := wr.ResponseFormat; rf != nil {
		c.ResponseFormat = rf.Type
		if rf.JSONSchema != nil {
			c.JSONSchemaName = rf.JSONSchema.Name
			c.JSONSchema = rf.JSONSchema.Schema
			c.JSONSchemaStrict = rf.JSONSchema.Strict
		}
	}
	return c
}

func (rule *Rule) matches(c *Call) bool {
	if rule.Model != "" && rule.Model != c.Model {
		return false
	}
	if rule.SystemContains != "" {
		found := false
		for _, m := range c.Messages {
			if m.Role == "system" && strings.Contains(m.Content, rule.SystemContains) {
				found = true
				break
			}
		}
		if !found {
			return false
		}
	}
	if rule.UserContains != "" {
		last := ""
		for _, m := range c.Messages {
			if m.Role == "user" {
				last = m.Content
			}
		}
		if !strings.Contains(last, rule.UserContains) {
			return false
		}
	}
	if rule.HasJSONSchema && !c.HasJSONSchema() {
		return false
	}
	if rule.HasTools && len(c.Tools) == 0 {
		return false
	}
	if rule.HasToolResult {
		found := false
		for _, m := range c.Messages {
			if m.Role == "tool" {
				found = true
				break
			}
		}
		if !found {
			return false
		}
	}
	return true
}

func (f *fake) chat(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return // the client went away while sending
	}
	var wr wireRequest
	if err := json.Unmarshal(body, &wr); err != nil {
		writeError(w, http.StatusBadRequest, "the fake could not parse the request body: "+err.Error(), "invalid_request_error", "")
		return
	}
	idx, resp := f.Record(callFromRequest(r.URL.Path, body, &wr, r))
	onChunk := f.chunkHook()
	status := 0
	defer func() {
		f.Update(idx, func(c *Call) {
			c.FinishedAt = time.Now()
			c.Status = status
			if r.Context().Err() != nil && !c.Dropped {
				c.Aborted = true
			}
		})
	}()

	ctx := r.Context()
	if resp.Hang {
		f.Wait(ctx, -1)
		fakeserver.Abort(w) // never an answer, not even an empty one
		return
	}
	if resp.CloseWithoutAnswer {
		f.drop(w, idx)
		return
	}
	if resp.RetryAfter != "" {
		w.Header().Set("Retry-After", resp.RetryAfter)
	}
	if resp.Status != 0 && resp.Status != http.StatusOK {
		status = resp.Status
		msg, typ, code := errorDefaults(resp)
		writeError(w, resp.Status, msg, typ, code)
		return
	}

	if resp.EchoToolResult {
		last := ""
		for _, m := range wr.Messages {
			if m.Role == "tool" {
				last = contentText(m.Content)
			}
		}
		resp.Content = strings.TrimSpace(resp.Content + " " + last)
	}
	chunks := buildChunks(idx, &wr, &resp)
	if !wr.Stream {
		if resp.FirstTokenDelay > 0 && !f.Wait(ctx, resp.FirstTokenDelay) {
			return
		}
		if resp.TokenDelay > 0 && !f.Wait(ctx, resp.TokenDelay) {
			return
		}
		if resp.DropAfterChunks > 0 {
			f.drop(w, idx)
			return
		}
		status = http.StatusOK
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(buildCompletion(idx, &wr, &resp))
		return
	}

	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	status = http.StatusOK
	rc := http.NewResponseController(w)
	if resp.FirstTokenDelay > 0 {
		// Headers now, the first chunk later, as a provider that accepted
		// the request and is still computing its first token.
		if err := rc.Flush(); err != nil || !f.Wait(ctx, resp.FirstTokenDelay) {
			return
		}
	}
	for i, chunk := range chunks {
		if i > 0 && resp.TokenDelay > 0 && !f.Wait(ctx, resp.TokenDelay) {
			return
		}
		if _, err := fmt.Fprintf(w, "data: %s\n\n", chunk); err != nil {
			return
		}
		if err := rc.Flush(); err != nil {
			return
		}
		at := time.Now()
		f.Update(idx, func(c *Call) {
			if c.FirstChunkAt.IsZero() {
				c.FirstChunkAt = at
			}
			c.ChunkTimes = append(c.ChunkTimes, at)
		})
		if onChunk != nil {
			onChunk(idx, i, at)
		}
		if resp.DropAfterChunks > 0 && i+1 >= resp.DropAfterChunks {
			f.drop(w, idx)
			return
		}
		if resp.HangAfterChunks > 0 && i+1 >= resp.HangAfterChunks {
			f.Wait(ctx, -1)
			fakeserver.Abort(w)
			return
		}
	}
	_, _ = io.WriteString(w, "data: [DONE]\n\n")
	_ = rc.Flush()
}

// drop closes the connection under the response. Whatever was flushed
// stays sent; the chunked body is never terminated, so the client's read
// fails with io.ErrUnexpectedEOF rather than a clean end.
func (f *fake) drop(w http.ResponseWriter, idx int) {
	f.Update(idx, func(c *Call) { c.Dropped = true })
	fakeserver.Abort(w)
}

func errorDefaults(resp Response) (msg, typ, code string) {
	msg, typ, code = resp.ErrorMessage, resp.ErrorType, resp.ErrorCode
	var dMsg, dType, dCode string
	switch s := resp.Status; {
	case s == http.StatusUnauthorized:
		dMsg, dType, dCode = "Incorrect API key provided (fake).", "invalid_request_error", "invalid_api_key"
	case s == http.StatusTooManyRequests:
		dMsg, dType, dCode = "Rate limit reached (fake).", "requests", "rate_limit_exceeded"
	case s >= 500:
		dMsg, dType, dCode = "The fake server had an error while processing your request.", "server_error", ""
	default:
		dMsg, dType, dCode = fmt.Sprintf("The fake answered %d %s.", s, http.StatusText(s)), "invalid_request_error", ""
	}
	if msg == "" {
		msg = dMsg
	}
	if typ == "" {
		typ = dType
	}
	if code == "" {
		code = dCode
	}
	return msg, typ, code
}

// writeError answers in OpenAI's error shape, which go-openai decodes into
// an *openai.APIError.
func writeError(w http.ResponseWriter, status int, msg, typ, code string) {
	var c any
	if code != "" {
		c = code
	}
	body, _ := json.Marshal(map[string]any{"error": map[string]any{
		"message": msg, "type": typ, "param": nil, "code": c,
	}})
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(body)
}
