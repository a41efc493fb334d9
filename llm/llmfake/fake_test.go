package llmfake

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	openai "github.com/sashabaranov/go-openai"
)

func client(s *Server) *openai.Client {
	cfg := openai.DefaultConfig("test-key")
	cfg.BaseURL = s.URL()
	return openai.NewClientWithConfig(cfg)
}

func userReq(model, text string) openai.ChatCompletionRequest {
	return openai.ChatCompletionRequest{
		Model:    model,
		Messages: []openai.ChatCompletionMessage{{Role: "system", Content: "You are a tester. Be brief."}, {Role: "user", Content: text}},
	}
}

// post sends a raw JSON body and returns the response, to check the wire
// format without a client library's interpretation.
func post(t *testing.T, url, body string) *http.Response {
	t.Helper()
	resp, err := http.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

func TestStreamWireFormat(t *testing.T) {
	s := New(t, Rule{Responses: []Response{{Content: "Hello world", Reasoning: "hm", ChunkSize: 5}}})
	resp := post(t, s.URL()+"/chat/completions",
		`{"model":"m1","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"hi there"}]}`)
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("content type %q", ct)
	}
	var payloads []string
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		if line == "" {
			continue
		}
		if !strings.HasPrefix(line, "data: ") {
			t.Fatalf("line without data prefix: %q", line)
		}
		payloads = append(payloads, strings.TrimPrefix(line, "data: "))
	}
	if len(payloads) < 3 || payloads[len(payloads)-1] != "[DONE]" {
		t.Fatalf("stream must end with [DONE]: %q", payloads)
	}
	// role, reasoning "hm", content "Hello", " worl", "d", finish, usage
	if got := len(payloads) - 1; got != 7 {
		t.Fatalf("got %d chunks, want 7: %q", got, payloads)
	}
	var first, usage map[string]any
	_ = json.Unmarshal([]byte(payloads[0]), &first)
	if first["object"] != "chat.completion.chunk" || first["model"] != "m1" {
		t.Fatalf("first chunk %v", first)
	}
	if u, ok := first["usage"]; !ok || u != nil {
		t.Fatalf("with include_usage every chunk carries usage:null, got %v", first)
	}
	_ = json.Unmarshal([]byte(payloads[len(payloads)-2]), &usage)
	if ch := usage["choices"].([]any); len(ch) != 0 {
		t.Fatalf("usage chunk has choices: %v", usage)
	}
	if usage["usage"].(map[string]any)["completion_tokens"].(float64) == 0 {
		t.Fatalf("usage not estimated: %v", usage)
	}
	if !strings.Contains(payloads[1], `"reasoning_content":"hm"`) {
		t.Fatalf("reasoning chunk %s", payloads[1])
	}
	if !strings.Contains(payloads[5], `"finish_reason":"stop"`) {
		t.Fatalf("finish chunk %s", payloads[5])
	}
}

func TestStreamWithoutUsageOmitsIt(t *testing.T) {
	s := New(t)
	resp := post(t, s.RootURL()+"/chat/completions", `{"model":"m","stream":true,"messages":[{"role":"user","content":"x"}]}`)
	b, _ := io.ReadAll(resp.Body)
	if strings.Contains(string(b), `"usage"`) {
		t.Fatalf("usage sent without include_usage: %s", b)
	}
	if !strings.Contains(string(b), DefaultContent[:4]) {
		t.Fatalf("default answer missing: %s", b)
	}
}

func TestGoOpenAIReadsStream(t *testing.T) {
	s := New(t, Rule{HasTools: true, Responses: []Response{{
		Reasoning: "think first",
		Content:   "calling",
		ToolCalls: []ToolCall{{Name: "search", Arguments: `{"q":"go streaming"}`}, {ID: "c2", Name: "add", Arguments: `{"a":1}`}},
	}}})
	req := userReq("m", "find")
	req.Tools = []openai.Tool{{Type: openai.ToolTypeFunction, Function: &openai.FunctionDefinition{Name: "search", Parameters: json.RawMessage(`{"type":"object"}`)}}}
	req.StreamOptions = &openai.StreamOptions{IncludeUsage: true}
	stream, err := client(s).CreateChatCompletionStream(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	defer stream.Close()
	var content, reasoning strings.Builder
	args := map[int]string{}
	ids := map[int]string{}
	var finish openai.FinishReason
	var usage *openai.Usage
	for {
		chunk, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if chunk.Usage != nil {
			usage = chunk.Usage
		}
		for _, ch := range chunk.Choices {
			content.WriteString(ch.Delta.Content)
			reasoning.WriteString(ch.Delta.ReasoningContent)
			for _, tc := range ch.Delta.ToolCalls {
				args[*tc.Index] += tc.Function.Arguments
				if tc.ID != "" {
					ids[*tc.Index] = tc.ID
				}
			}
			if ch.FinishReason != "" {
				finish = ch.FinishReason
			}
		}
	}
	if content.String() != "calling" || reasoning.String() != "think first" {
		t.Fatalf("content %q reasoning %q", content.String(), reasoning.String())
	}
	if args[0] != `{"q":"go streaming"}` || args[1] != `{"a":1}` || ids[0] != "call_fake_0" || ids[1] != "c2" {
		t.Fatalf("tool calls %v %v", args, ids)
	}
	if finish != openai.FinishReasonToolCalls || usage == nil || usage.TotalTokens == 0 {
		t.Fatalf("finish %q usage %v", finish, usage)
	}
}

func TestNonStreaming(t *testing.T) {
	s := New(t, Rule{Responses: []Response{{Content: "plain", Usage: Usage{PromptTokens: 7, CompletionTokens: 3, TotalTokens: 10}}}})
	resp, err := client(s).CreateChatCompletion(context.Background(), userReq("m", "hello"))
	if err != nil {
		t.Fatal(err)
	}
	if resp.Choices[0].Message.Content != "plain" || resp.Usage.TotalTokens != 10 || resp.Choices[0].FinishReason != "stop" {
		t.Fatalf("%+v", resp)
	}
}

func TestRulesMatchInOrderAndLastResponseRepeats(t *testing.T) {
	s := New(t,
		Rule{Name: "json", HasJSONSchema: true, Responses: []Response{{Content: `{"a":1}`}}},
		Rule{Name: "seq", Model: "m", SystemContains: "tester", UserContains: "count", Responses: []Response{{Content: "one"}, {Content: "two"}}},
		Rule{Name: "toolres", HasToolResult: true, Responses: []Response{{Content: "got result"}}},
	)
	c := client(s)
	ask := func(req openai.ChatCompletionRequest) string {
		t.Helper()
		resp, err := c.CreateChatCompletion(context.Background(), req)
		if err != nil {
			t.Fatal(err)
		}
		return resp.Choices[0].Message.Content
	}
	for i, want := range []string{"one", "two", "two"} {
		if got := ask(userReq("m", "please count")); got != want {
			t.Fatalf("answer %d = %q, want %q", i, got, want)
		}
	}
	if got := ask(userReq("other", "please count")); got != DefaultContent {
		t.Fatalf("model mismatch should fall to default, got %q", got)
	}
	jreq := userReq("m", "please count")
	jreq.ResponseFormat = &openai.ChatCompletionResponseFormat{Type: "json_schema", JSONSchema: &openai.ChatCompletionResponseFormatJSONSchema{Name: "d", Schema: json.RawMessage(`{"type":"object"}`), Strict: true}}
	if got := ask(jreq); got != `{"a":1}` {
		t.Fatalf("json rule: %q", got)
	}
	treq := userReq("x", "here")
	treq.Messages = append(treq.Messages,
		openai.ChatCompletionMessage{Role: "assistant", ToolCalls: []openai.ToolCall{{ID: "c1", Type: "function", Function: openai.FunctionCall{Name: "f", Arguments: "{}"}}}},
		openai.ChatCompletionMessage{Role: "tool", ToolCallID: "c1", Content: "42"})
	if got := ask(treq); got != "got result" {
		t.Fatalf("tool result rule: %q", got)
	}

	calls := s.Calls()
	if len(calls) != 6 {
		t.Fatalf("%d calls", len(calls))
	}
	if calls[0].RuleName != "seq" || calls[3].Rule != -1 || !calls[4].HasJSONSchema() || calls[4].JSONSchemaName != "d" || !calls[4].JSONSchemaStrict {
		t.Fatalf("recorded rules: %+v", calls)
	}
	if m := calls[5].Messages; len(m) != 4 || m[2].ToolCalls[0].ID != "c1" || m[3].ToolCallID != "c1" {
		t.Fatalf("recorded messages: %+v", m)
	}

	s.SetRules(Rule{Responses: []Response{{Content: "new script"}}})
	if got := ask(userReq("m", "please count")); got != "new script" {
		t.Fatalf("after SetRules: %q", got)
	}
	s.Reset()
	if len(s.Calls()) != 0 {
		t.Fatal("Reset kept calls")
	}
	s.SetDefault(Response{Content: "changed default"})
	s.SetRules()
	if got := ask(userReq("m", "x")); got != "changed default" {
		t.Fatalf("after SetDefault: %q", got)
	}
}

func TestRecordsParameters(t *testing.T) {
	s := New(t)
	req := userReq("m", "x")
	req.Temperature = 0.5
	req.MaxTokens = 99
	req.Tools = []openai.Tool{{Type: "function", Function: &openai.FunctionDefinition{Name: "f", Description: "d", Parameters: json.RawMessage(`{"type":"object"}`)}}}
	stream, err := client(s).CreateChatCompletionStream(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := stream.Recv(); err != nil {
			break
		}
	}
	stream.Close()
	// The handler records FinishedAt after its last write, which the
	// client may have read already.
	c := s.Calls()[0]
	for deadline := time.Now().Add(5 * time.Second); c.FinishedAt.IsZero() && time.Now().Before(deadline); c = s.Calls()[0] {
		time.Sleep(time.Millisecond)
	}
	if c.Temperature == nil || *c.Temperature != 0.5 || c.MaxTokens == nil || *c.MaxTokens != 99 || !c.Stream || c.APIKey != "test-key" {
		t.Fatalf("%+v", c)
	}
	if len(c.Tools) != 1 || c.Tools[0].Name != "f" || string(c.Tools[0].Parameters) != `{"type":"object"}` {
		t.Fatalf("tools %+v", c.Tools)
	}
	if c.FirstChunkAt.IsZero() || c.FinishedAt.Before(c.FirstChunkAt) || len(c.ChunkTimes) == 0 || c.Status != 200 {
		t.Fatalf("timestamps %+v", c)
	}
}

func TestErrorStatusAndRetryAfter(t *testing.T) {
	s := New(t, Rule{Responses: []Response{{Status: 429, RetryAfter: "2"}}})
	resp := post(t, s.URL()+"/chat/completions", `{"model":"m","stream":true,"messages":[]}`)
	if resp.StatusCode != 429 || resp.Header.Get("Retry-After") != "2" {
		t.Fatalf("status %d retry-after %q", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
	_, err := client(s).CreateChatCompletionStream(context.Background(), userReq("m", "x"))
	var apiErr *openai.APIError
	if !errors.As(err, &apiErr) || apiErr.HTTPStatusCode != 429 || apiErr.Code != "rate_limit_exceeded" {
		t.Fatalf("err %#v", err)
	}
	if c := s.Calls()[1]; c.Status != 429 {
		t.Fatalf("recorded status %d", c.Status)
	}
}

func TestDropAfterChunks(t *testing.T) {
	s := New(t, Rule{Responses: []Response{{Content: "a long answer that never ends", DropAfterChunks: 3}}})
	stream, err := client(s).CreateChatCompletionStream(context.Background(), userReq("m", "x"))
	if err != nil {
		t.Fatal(err)
	}
	defer stream.Close()
	n := 0
	for {
		_, err = stream.Recv()
		if err != nil {
			break
		}
		n++
	}
	if !errors.Is(err, io.ErrUnexpectedEOF) || n != 3 {
		t.Fatalf("after %d chunks: %v", n, err)
	}
	if !s.Calls()[0].Dropped {
		t.Fatal("drop not recorded")
	}
}

func TestCloseWithoutAnswer(t *testing.T) {
	s := New(t, Rule{Responses: []Response{{CloseWithoutAnswer: true}}})
	_, err := client(s).CreateChatCompletionStream(context.Background(), userReq("m", "x"))
	if err == nil {
		t.Fatal("want an error")
	}
}

func TestHangReleasedByClientAndByClose(t *testing.T) {
	s := NewServer(Options{Rules: []Rule{{Responses: []Response{{Hang: true}}}}})
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := client(s).CreateChatCompletionStream(ctx, userReq("m", "x"))
	if !errors.Is(err, context.DeadlineExceeded) || time.Since(start) > 5*time.Second {
		t.Fatalf("err %v after %v", err, time.Since(start))
	}

	// A request still hanging must not keep Close waiting.
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, _ = client(s).CreateChatCompletionStream(context.Background(), userReq("m", "x"))
	}()
	for len(s.Calls()) < 2 {
		time.Sleep(time.Millisecond)
	}
	closed := make(chan struct{})
	go func() { s.Close(); close(closed) }()
	select {
	case <-closed:
	case <-time.After(5 * time.Second):
		t.Fatal("Close blocked on a hanging request")
	}
	<-done
}

func TestOnChunkWrittenAndConcurrency(t *testing.T) {
	var mu sync.Mutex
	seen := map[int]int{}
	s := NewServer(Options{
		Default: &Response{Content: "0123456789", ChunkSize: 2},
		OnChunkWritten: func(call, chunk int, at time.Time) {
			mu.Lock()
			defer mu.Unlock()
			seen[call]++
		},
	})
	defer s.Close()
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			stream, err := client(s).CreateChatCompletionStream(context.Background(), userReq("m", "x"))
			if err != nil {
				t.Error(err)
				return
			}
			defer stream.Close()
			for {
				if _, err := stream.Recv(); err != nil {
					return
				}
			}
		})
	}
	wg.Wait()
	calls := s.Calls()
	if len(calls) != 8 {
		t.Fatalf("%d calls", len(calls))
	}
	mu.Lock()
	defer mu.Unlock()
	for _, c := range calls {
		// role + 5 content + finish
		if len(c.ChunkTimes) != 7 || seen[c.Index] != 7 {
			t.Fatalf("call %d: %d chunk times, %d hook calls", c.Index, len(c.ChunkTimes), seen[c.Index])
		}
	}
}

func TestTokenDelay(t *testing.T) {
	s := New(t, Rule{Responses: []Response{{Content: "abcdefgh", ChunkSize: 4, TokenDelay: 20 * time.Millisecond}}})
	stream, err := client(s).CreateChatCompletionStream(context.Background(), userReq("m", "x"))
	if err != nil {
		t.Fatal(err)
	}
	defer stream.Close()
	for {
		if _, err := stream.Recv(); err != nil {
			break
		}
	}
	c := s.Calls()[0]
	// Four chunks after the first, each after a delay: a lower bound only.
	if got := c.ChunkTimes[len(c.ChunkTimes)-1].Sub(c.ChunkTimes[0]); got < 60*time.Millisecond {
		t.Fatalf("stream took %v", got)
	}
}

func TestFirstTokenDelay(t *testing.T) {
	const ttft = 150 * time.Millisecond
	s := New(t, Rule{Responses: []Response{{Content: "abcdefgh", ChunkSize: 4, FirstTokenDelay: ttft, TokenDelay: 10 * time.Millisecond}}})
	start := time.Now()
	stream, err := client(s).CreateChatCompletionStream(context.Background(), userReq("m", "x"))
	if err != nil {
		t.Fatal(err)
	}
	defer stream.Close()
	// The headers come at once: the client has its stream before the delay.
	if got := time.Since(start); got >= ttft {
		t.Errorf("stream opened after %v, want the headers before the first-token delay", got)
	}
	var content strings.Builder
	for {
		chunk, err := stream.Recv()
		if err != nil {
			break
		}
		if len(chunk.Choices) > 0 {
			content.WriteString(chunk.Choices[0].Delta.Content)
		}
	}
	if content.String() != "abcdefgh" {
		t.Fatalf("content %q", content.String())
	}
	c := s.Calls()[0]
	if got := c.FirstChunkAt.Sub(c.ReceivedAt); got < ttft {
		t.Errorf("first chunk %v after the request, want at least %v", got, ttft)
	}
	// Later chunks are TokenDelay apart, not delayed again.
	if got := c.ChunkTimes[len(c.ChunkTimes)-1].Sub(c.ChunkTimes[0]); got >= ttft {
		t.Errorf("first to last chunk took %v", got)
	}

	// Non-streaming: the answer waits the first-token delay too.
	start = time.Now()
	resp, err := client(s).CreateChatCompletion(context.Background(), userReq("m", "y"))
	if err != nil {
		t.Fatal(err)
	}
	if got := time.Since(start); got < ttft || resp.Choices[0].Message.Content != "abcdefgh" {
		t.Errorf("non-streaming answer %q after %v, want at least %v", resp.Choices[0].Message.Content, got, ttft)
	}
}

func TestControlEndpoints(t *testing.T) {
	s := New(t)
	req, _ := http.NewRequest(http.MethodPut, s.RootURL()+"/fake/rules", strings.NewReader(`[{"user_contains":"ping","responses":[{"content":"pong"}]}]`))
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != http.StatusNoContent {
		t.Fatalf("%v %v", resp, err)
	}
	resp.Body.Close()
	got, err := client(s).CreateChatCompletion(context.Background(), userReq("m", "ping"))
	if err != nil || got.Choices[0].Message.Content != "pong" {
		t.Fatalf("%v %v", got, err)
	}
	r := post(t, s.RootURL()+"/fake/calls", "")
	if r.StatusCode != http.StatusNotFound {
		t.Fatalf("POST /fake/calls: %d", r.StatusCode)
	}
	g, err := http.Get(s.RootURL() + "/fake/calls")
	if err != nil {
		t.Fatal(err)
	}
	defer g.Body.Close()
	var calls []Call
	if err := json.NewDecoder(g.Body).Decode(&calls); err != nil || len(calls) != 1 || calls[0].Messages[1].Content != "ping" {
		t.Fatalf("%v %+v", err, calls)
	}
	post(t, s.RootURL()+"/fake/reset", "")
	if len(s.Calls()) != 0 {
		t.Fatal("reset over HTTP kept calls")
	}
}

func TestListenAndServe(t *testing.T) {
	// A port that is taken makes it fail at once.
	s := New(t)
	if err := ListenAndServe(strings.TrimPrefix(s.RootURL(), "http://"), nil); err == nil {
		t.Fatal("no error on a taken address")
	}

	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	go func() { _ = ListenAndServe(addr, []Rule{{Responses: []Response{{Content: "standalone"}}}}) }()
	cfg := openai.DefaultConfig("k")
	cfg.BaseURL = "http://" + addr + "/v1"
	c := openai.NewClientWithConfig(cfg)
	deadline := time.Now().Add(5 * time.Second)
	for {
		resp, err := c.CreateChatCompletion(context.Background(), userReq("m", "x"))
		if err == nil {
			if got := resp.Choices[0].Message.Content; got != "standalone" {
				t.Fatalf("got %q", got)
			}
			return // the server lives until the test binary exits
		}
		if time.Now().After(deadline) {
			t.Fatal(err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
