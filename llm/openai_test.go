package llm

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/op-stack/executor/llm/llmfake"
)

const testKey = "sk-fake-DO-NOT-LEAK-7f3a9c2e51"

func newTestClient(s *llmfake.Server) *OpenAICompatible {
	return NewOpenAICompatible(ProviderConfig{Name: "testprov", BaseURL: s.URL(), APIKey: testKey})
}

func simpleRequest(model, text string) Request {
	return Request{Model: model, Messages: []Message{
		{Role: RoleSystem, Content: "You are a careful tester. Answer briefly."},
		{Role: RoleUser, Content: text},
	}}
}

func ptr[T any](v T) *T { return &v }

// collect records deltas in arrival order.
type collect struct{ deltas []Delta }

func (c *collect) on(d Delta) { c.deltas = append(c.deltas, d) }

func (c *collect) joined() (content, reasoning string) {
	var cb, rb strings.Builder
	for _, d := range c.deltas {
		cb.WriteString(d.Content)
		rb.WriteString(d.Reasoning)
	}
	return cb.String(), rb.String()
}

func asError(t *testing.T, err error) *Error {
	t.Helper()
	var le *Error
	if !errors.As(err, &le) {
		t.Fatalf("want *llm.Error, got %T: %v", err, err)
	}
	return le
}

func TestStreamContentAndReasoning(t *testing.T) {
	const content = "The answer is forty-two, as computed step by step."
	const reasoning = "Let me think about what the question asks first."
	s := llmfake.New(t, llmfake.Rule{Responses: []llmfake.Response{{
		Content: content, Reasoning: reasoning, ChunkSize: 3,
		Usage: llmfake.Usage{PromptTokens: 11, CompletionTokens: 22, TotalTokens: 33},
	}}})
	var c collect
	resp, err := newTestClient(s).Stream(context.Background(), simpleRequest("my-model", "what?"), c.on)
	if err != nil {
		t.Fatal(err)
	}
	gotC, gotR := c.joined()
	if gotC != content || gotR != reasoning || resp.Content != content || resp.Reasoning != reasoning {
		t.Fatalf("content %q / %q, reasoning %q / %q", gotC, resp.Content, gotR, resp.Reasoning)
	}
	if len(c.deltas) < 20 {
		t.Fatalf("only %d deltas: not streamed", len(c.deltas))
	}
	// Reasoning is streamed before content, and each delta carries one kind.
	seenContent := false
	for _, d := range c.deltas {
		if (d.Content == "") == (d.Reasoning == "") {
			t.Fatalf("delta with both or neither: %+v", d)
		}
		if d.Content != "" {
			seenContent = true
		} else if seenContent {
			t.Fatal("reasoning after content")
		}
	}
	if resp.Usage != (Usage{PromptTokens: 11, CompletionTokens: 22, TotalTokens: 33}) {
		t.Fatalf("usage %+v", resp.Usage)
	}
	if resp.Model != "my-model" || resp.Provider != "testprov" || resp.FinishReason != "stop" || resp.Offline {
		t.Fatalf("%+v", resp)
	}
	if call := s.Calls()[0]; !call.Stream || !call.IncludeUsage || call.APIKey != testKey {
		t.Fatalf("call %+v", call)
	}
}

func TestStreamOpenRouterReasoningField(t *testing.T) {
	s := llmfake.New(t, llmfake.Rule{Responses: []llmfake.Response{{Content: "ok", Reasoning: "thinking aloud", ReasoningField: "reasoning"}}})
	var c collect
	resp, err := newTestClient(s).Stream(context.Background(), simpleRequest("m", "x"), c.on)
	if err != nil {
		t.Fatal(err)
	}
	if _, r := c.joined(); r != "thinking aloud" || resp.Reasoning != "thinking aloud" {
		t.Fatalf("reasoning %q / %q", r, resp.Reasoning)
	}
}

func TestStreamToolCalls(t *testing.T) {
	s := llmfake.New(t, llmfake.Rule{HasTools: true, Responses: []llmfake.Response{{
		ToolCalls: []llmfake.ToolCall{
			{ID: "call_a", Name: "search", Arguments: `{"query":"temporal workflows","limit":5}`},
			{ID: "call_b", Name: "fetch", Arguments: `{"url":"https://example.com/x"}`},
		},
		ChunkSize: 5,
	}}})
	req := simpleRequest("m", "look it up")
	req.Tools = []ToolDef{
		{Name: "search", Description: "web search", Parameters: json.RawMessage(`{"type":"object","properties":{"query":{"type":"string"}}}`)},
		{Name: "fetch", Description: "fetch a URL"}, // no parameters: sent as an empty object schema
	}
	resp, err := newTestClient(s).Stream(context.Background(), req, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := []ToolCall{
		{ID: "call_a", Name: "search", Arguments: `{"query":"temporal workflows","limit":5}`},
		{ID: "call_b", Name: "fetch", Arguments: `{"url":"https://example.com/x"}`},
	}
	if fmt.Sprint(resp.ToolCalls) != fmt.Sprint(want) || resp.FinishReason != "tool_calls" {
		t.Fatalf("tool calls %+v finish %q", resp.ToolCalls, resp.FinishReason)
	}
	call := s.Calls()[0]
	if len(call.Tools) != 2 || call.Tools[0].Name != "search" || string(call.Tools[1].Parameters) != `{"type":"object","properties":{}}` {
		t.Fatalf("tools sent %+v", call.Tools)
	}
}

func TestMessagesMapping(t *testing.T) {
	s := llmfake.New(t, llmfake.Rule{HasToolResult: true, Responses: []llmfake.Response{{Content: "done"}}})
	req := simpleRequest("m", "add 1 and 2")
	req.Messages = append(req.Messages,
		Message{Role: RoleAssistant, ToolCalls: []ToolCall{{ID: "c1", Name: "add", Arguments: `{"a":1,"b":2}`}}},
		Message{Role: RoleTool, ToolCallID: "c1", Content: "3"},
	)
	resp, err := newTestClient(s).Stream(context.Background(), req, nil)
	if err != nil || resp.Content != "done" {
		t.Fatalf("%v %+v", err, resp)
	}
	msgs := s.Calls()[0].Messages
	if len(msgs) != 4 || msgs[0].Role != "system" || msgs[2].ToolCalls[0] != (llmfake.ToolCall{ID: "c1", Name: "add", Arguments: `{"a":1,"b":2}`}) ||
		msgs[3].Role != "tool" || msgs[3].ToolCallID != "c1" || msgs[3].Content != "3" {
		t.Fatalf("messages sent %+v", msgs)
	}
}

func TestParametersReachServer(t *testing.T) {
	s := llmfake.New(t)
	req := simpleRequest("m", "x")
	req.Temperature = ptr(0.3)
	req.MaxTokens = ptr(256)
	req.JSONSchema = &JSONSchema{Name: "routing_decision", Schema: json.RawMessage(`{"type":"object","properties":{"action":{"type":"string"}}}`), Strict: true}
	if _, err := newTestClient(s).Stream(context.Background(), req, nil); err != nil {
		t.Fatal(err)
	}
	call := s.Calls()[0]
	if call.Temperature == nil || *call.Temperature < 0.2999 || *call.Temperature > 0.3001 {
		t.Fatalf("temperature %v", call.Temperature)
	}
	if call.MaxTokens == nil || *call.MaxTokens != 256 || call.MaxCompletionTokens != nil {
		t.Fatalf("max tokens %v / %v", call.MaxTokens, call.MaxCompletionTokens)
	}
	if !call.HasJSONSchema() || call.JSONSchemaName != "routing_decision" || !call.JSONSchemaStrict ||
		!strings.Contains(string(call.JSONSchema), `"action"`) {
		t.Fatalf("response format %q %q %s", call.ResponseFormat, call.JSONSchemaName, call.JSONSchema)
	}

	// Nothing set, nothing sent: the provider's defaults apply.
	if _, err := newTestClient(s).Stream(context.Background(), simpleRequest("m", "x"), nil); err != nil {
		t.Fatal(err)
	}
	if call := s.Calls()[1]; call.Temperature != nil || call.MaxTokens != nil || call.ResponseFormat != "" {
		t.Fatalf("unset parameters were sent: %s", call.Body)
	}
}

func TestZeroTemperatureIsSent(t *testing.T) {
	s := llmfake.New(t)
	req := simpleRequest("m", "x")
	req.Temperature = ptr(0.0)
	if _, err := newTestClient(s).Stream(context.Background(), req, nil); err != nil {
		t.Fatal(err)
	}
	if tmp := s.Calls()[0].Temperature; tmp == nil || *tmp > 1e-5 {
		t.Fatalf("temperature 0 must reach the provider as (nearly) 0, got %v", tmp)
	}
}

func TestReasoningModelGetsMaxCompletionTokens(t *testing.T) {
	s := llmfake.New(t)
	req := simpleRequest("o3-mini", "x")
	req.MaxTokens = ptr(100)
	if _, err := newTestClient(s).Stream(context.Background(), req, nil); err != nil {
		t.Fatal(err)
	}
	if call := s.Calls()[0]; call.MaxTokens != nil || call.MaxCompletionTokens == nil || *call.MaxCompletionTokens != 100 {
		t.Fatalf("max_tokens %v max_completion_tokens %v", call.MaxTokens, call.MaxCompletionTokens)
	}
}

// The usage chunk's details: cached prompt tokens and reasoning tokens.
func TestStreamUsageDetails(t *testing.T) {
	s := llmfake.New(t, llmfake.Rule{Responses: []llmfake.Response{{
		Content: "ok",
		Usage: llmfake.Usage{PromptTokens: 1000, CompletionTokens: 300, TotalTokens: 1300,
			PromptTokensDetails:     &llmfake.PromptTokensDetails{CachedTokens: 768},
			CompletionTokensDetails: &llmfake.CompletionTokensDetails{ReasoningTokens: 200}},
	}}})
	resp, err := newTestClient(s).Stream(context.Background(), simpleRequest("my-model", "what?"), func(Delta) {})
	if err != nil {
		t.Fatal(err)
	}
	want := Usage{PromptTokens: 1000, CompletionTokens: 300, TotalTokens: 1300, CachedTokens: 768, ReasoningTokens: 200}
	if resp.Usage != want {
		t.Fatalf("usage %+v, want %+v", resp.Usage, want)
	}
}

func TestUsageEstimatedWhenProviderSendsNone(t *testing.T) {
	s := llmfake.New(t, llmfake.Rule{Responses: []llmfake.Response{{Content: strings.Repeat("word ", 20), OmitUsage: true}}})
	resp, err := newTestClient(s).Stream(context.Background(), simpleRequest("m", "count these characters please"), nil)
	if err != nil {
		t.Fatal(err)
	}
	u := resp.Usage
	if !u.Estimated || u.CompletionTokens != 25 || u.PromptTokens == 0 || u.TotalTokens != u.PromptTokens+u.CompletionTokens {
		t.Fatalf("usage %+v", u)
	}
}

func TestRateLimitIsRetryableWithRetryAfter(t *testing.T) {
	s := llmfake.New(t, llmfake.Rule{Responses: []llmfake.Response{{Status: 429, RetryAfter: "2"}}})
	_, err := newTestClient(s).Stream(context.Background(), simpleRequest("gpt-x", "x"), nil)
	le := asError(t, err)
	if le.StatusCode != 429 || !le.Retryable || le.RetryAfter != 2*time.Second || le.Provider != "testprov" || le.Model != "gpt-x" {
		t.Fatalf("%+v", le)
	}
	if !strings.Contains(le.Error(), "Rate limit") {
		t.Fatalf("provider message lost: %v", le)
	}
}

func TestStatusClassification(t *testing.T) {
	cases := []struct {
		status    int
		retryable bool
	}{
		{400, false}, {401, false}, {403, false}, {404, false}, {422, false}, {402, false},
		{408, true}, {409, true}, {425, true}, {429, true}, {500, true}, {502, true}, {503, true},
	}
	s := llmfake.New(t)
	c := newTestClient(s)
	for _, tc := range cases {
		s.SetRules(llmfake.Rule{Responses: []llmfake.Response{{Status: tc.status}}})
		_, err := c.Stream(context.Background(), simpleRequest("model-under-test", "x"), nil)
		le := asError(t, err)
		if le.StatusCode != tc.status || le.Retryable != tc.retryable || le.RetryAfter != 0 {
			t.Errorf("status %d: %+v", tc.status, le)
		}
		if msg := le.Error(); !strings.Contains(msg, "testprov") || !strings.Contains(msg, "model-under-test") {
			t.Errorf("status %d: message lacks provider or model: %s", tc.status, msg)
		}
	}
}

func TestNonJSONErrorBody(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Retry-After", time.Now().Add(time.Hour).UTC().Format(http.TimeFormat))
		w.WriteHeader(http.StatusBadGateway)
		_, _ = io.WriteString(w, "<html><body>502 Bad Gateway</body></html>")
	}))
	defer srv.Close()
	c := NewOpenAICompatible(ProviderConfig{Name: "p", BaseURL: srv.URL, APIKey: testKey})
	_, err := c.Stream(context.Background(), simpleRequest("m", "x"), nil)
	le := asError(t, err)
	if le.StatusCode != 502 || !le.Retryable || !strings.Contains(le.Message, "502 Bad Gateway") {
		t.Fatalf("%+v", le)
	}
	if le.RetryAfter < 59*time.Minute || le.RetryAfter > time.Hour {
		t.Fatalf("Retry-After as HTTP date: %v", le.RetryAfter)
	}
}

func TestErrorEventInStream(t *testing.T) {
	for _, tc := range []struct {
		name, event string
		retryable   bool
	}{
		{"bare error", `{"error":{"message":"upstream overloaded","code":502}}`, true},
		{"error in chunk", `{"id":"x","choices":[{"index":0,"delta":{},"finish_reason":"error"}],"error":{"message":"context too long","code":400}}`, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "text/event-stream")
				_, _ = io.WriteString(w, `data: {"id":"x","choices":[{"index":0,"delta":{"role":"assistant","content":"Hel"}}]}`+"\n\n")
				_, _ = io.WriteString(w, "data: "+tc.event+"\n\n")
			}))
			defer srv.Close()
			c := NewOpenAICompatible(ProviderConfig{Name: "p", BaseURL: srv.URL})
			_, err := c.Stream(context.Background(), simpleRequest("m", "x"), nil)
			le := asError(t, err)
			if le.Retryable != tc.retryable || le.StatusCode != 0 {
				t.Fatalf("%+v", le)
			}
		})
	}
}

func TestEmptyStreamIsRetryable(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, "data: [DONE]\n\n")
	}))
	defer srv.Close()
	_, err := NewOpenAICompatible(ProviderConfig{Name: "p", BaseURL: srv.URL}).Stream(context.Background(), simpleRequest("m", "x"), nil)
	if le := asError(t, err); !le.Retryable {
		t.Fatalf("%+v", le)
	}
}

func TestMissingToolCallIDsAreFilled(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		for _, chunk := range []string{
			`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"type":"function","function":{"name":"f","arguments":"{\"a\""}}]}}]}`,
			`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":":1}"}}]}}]}`,
			`{"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}`,
		} {
			_, _ = io.WriteString(w, "data: "+chunk+"\n\n")
		}
		_, _ = io.WriteString(w, "data: [DONE]\n\n")
	}))
	defer srv.Close()
	resp, err := NewOpenAICompatible(ProviderConfig{Name: "p", BaseURL: srv.URL}).Stream(context.Background(), simpleRequest("m", "x"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.ToolCalls) != 1 || resp.ToolCalls[0] != (ToolCall{ID: "call_0", Name: "f", Arguments: `{"a":1}`}) {
		t.Fatalf("%+v", resp.ToolCalls)
	}
}

func TestDroppedConnectionIsRetryable(t *testing.T) {
	s := llmfake.New(t, llmfake.Rule{Responses: []llmfake.Response{{Content: "this answer is cut short by the fault", DropAfterChunks: 3}}})
	var c collect
	_, err := newTestClient(s).Stream(context.Background(), simpleRequest("m", "x"), c.on)
	le := asError(t, err)
	if !le.Retryable || le.StatusCode != 0 || !strings.Contains(le.Message, "dropped mid-stream") {
		t.Fatalf("%+v", le)
	}
	if len(c.deltas) != 2 { // role chunk + two content chunks were written
		t.Fatalf("%d deltas before the drop", len(c.deltas))
	}

	s.SetRules(llmfake.Rule{Responses: []llmfake.Response{{CloseWithoutAnswer: true}}})
	_, err = newTestClient(s).Stream(context.Background(), simpleRequest("m", "x"), nil)
	if le := asError(t, err); !le.Retryable || le.StatusCode != 0 {
		t.Fatalf("%+v", le)
	}
}

func TestConnectionRefusedIsRetryable(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	url := srv.URL
	srv.Close()
	_, err := NewOpenAICompatible(ProviderConfig{Name: "p", BaseURL: url, APIKey: testKey}).Stream(context.Background(), simpleRequest("m", "x"), nil)
	if le := asError(t, err); !le.Retryable || le.StatusCode != 0 || strings.Contains(le.Error(), testKey) {
		t.Fatalf("%+v", le)
	}
}

func TestCancellationReturnsContextError(t *testing.T) {
	for _, tc := range []struct {
		name string
		resp llmfake.Response
	}{
		{"hang before answering", llmfake.Response{Hang: true}},
		{"stall mid-stream", llmfake.Response{Content: "some text", HangAfterChunks: 2}},
		{"slow tokens", llmfake.Response{Content: strings.Repeat("x", 400), TokenDelay: 50 * time.Millisecond}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := llmfake.New(t, llmfake.Rule{Responses: []llmfake.Response{tc.resp}})
			ctx, cancel := context.WithCancel(context.Background())
			go func() {
				time.Sleep(100 * time.Millisecond)
				cancel()
			}()
			start := time.Now()
			_, err := newTestClient(s).Stream(ctx, simpleRequest("m", "x"), nil)
			if !errors.Is(err, context.Canceled) {
				t.Fatalf("want context.Canceled itself, got %T %v", err, err)
			}
			var le *Error
			if errors.As(err, &le) {
				t.Fatal("cancellation must not look like a provider failure")
			}
			if d := time.Since(start); d > 5*time.Second {
				t.Fatalf("returned %v after start", d)
			}
		})
	}

	s := llmfake.New(t, llmfake.Rule{Responses: []llmfake.Response{{Hang: true}}})
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if _, err := newTestClient(s).Stream(ctx, simpleRequest("m", "x"), nil); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("want context.DeadlineExceeded, got %v", err)
	}
}

func TestTransportTimeoutIsRetryable(t *testing.T) {
	s := llmfake.New(t, llmfake.Rule{Responses: []llmfake.Response{{Hang: true}}})
	c := NewOpenAICompatible(ProviderConfig{Name: "p", BaseURL: s.URL(), HTTPClient: &http.Client{Timeout: 100 * time.Millisecond}})
	_, err := c.Stream(context.Background(), simpleRequest("m", "x"), nil)
	if le := asError(t, err); !le.Retryable || le.StatusCode != 0 || !strings.Contains(le.Message, "timeout") {
		t.Fatalf("%+v", le)
	}
}

func TestAPIKeyNeverInErrors(t *testing.T) {
	echo := "Incorrect API key provided: " + testKey + ". You can find your API key at the dashboard."
	for _, resp := range []llmfake.Response{
		{Status: 401, ErrorMessage: echo},
		{Status: 500, ErrorMessage: "internal error while handling key " + testKey},
		{Status: 401},
		{Status: 500},
	} {
		s := llmfake.New(t, llmfake.Rule{Responses: []llmfake.Response{resp}})
		_, err := newTestClient(s).Stream(context.Background(), simpleRequest("m", "x"), nil)
		le := asError(t, err)
		for _, text := range []string{err.Error(), le.Message, fmt.Sprintf("%+v", err), fmt.Sprintf("%#v", *le)} {
			if strings.Contains(text, testKey) || strings.Contains(text, testKey[8:]) {
				t.Fatalf("status %d: key leaked: %s", resp.Status, text)
			}
		}
		if s.Calls()[0].APIKey != testKey {
			t.Fatal("the key was not sent at all")
		}
	}
}

func TestInvalidSchemaIsNotRetryable(t *testing.T) {
	s := llmfake.New(t)
	req := simpleRequest("m", "x")
	req.Tools = []ToolDef{{Name: "bad", Parameters: json.RawMessage(`{not json`)}}
	_, err := newTestClient(s).Stream(context.Background(), req, nil)
	if le := asError(t, err); le.Retryable {
		t.Fatalf("%+v", le)
	}
	if len(s.Calls()) != 0 {
		t.Fatal("an invalid request was sent")
	}
}

func TestParseRetryAfter(t *testing.T) {
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	h := func(kv ...string) http.Header {
		out := http.Header{}
		for i := 0; i < len(kv); i += 2 {
			out.Set(kv[i], kv[i+1])
		}
		return out
	}
	for _, tc := range []struct {
		h    http.Header
		want time.Duration
	}{
		{h(), 0},
		{h("Retry-After", "2"), 2 * time.Second},
		{h("Retry-After", "0.5"), 500 * time.Millisecond},
		{h("Retry-After", "-1"), 0},
		{h("Retry-After", "soon"), 0},
		{h("Retry-After", now.Add(30*time.Second).Format(http.TimeFormat)), 30 * time.Second},
		{h("Retry-After", now.Add(-30*time.Second).Format(http.TimeFormat)), 0},
		{h("Retry-After", "20", "Retry-After-Ms", "1500"), 1500 * time.Millisecond},
	} {
		if got := parseRetryAfter(tc.h, now); got != tc.want {
			t.Errorf("%v: got %v want %v", tc.h, got, tc.want)
		}
	}
}

func TestConcurrentCallsKeepTheirOwnRetryAfter(t *testing.T) {
	s := llmfake.New(t,
		llmfake.Rule{UserContains: "slow", Responses: []llmfake.Response{{Status: 429, RetryAfter: "7"}}},
		llmfake.Rule{Responses: []llmfake.Response{{Status: 503, RetryAfter: "3"}}},
	)
	c := newTestClient(s)
	errs := make(chan *Error, 20)
	for i := range 20 {
		go func() {
			text := "fast"
			if i%2 == 0 {
				text = "slow"
			}
			_, err := c.Stream(context.Background(), simpleRequest("m", text), nil)
			var le *Error
			errors.As(err, &le)
			errs <- le
		}()
	}
	for range 20 {
		le := <-errs
		if le == nil || (le.StatusCode == 429) != (le.RetryAfter == 7*time.Second) || (le.StatusCode == 503) != (le.RetryAfter == 3*time.Second) {
			t.Fatalf("%+v", le)
		}
	}
}
