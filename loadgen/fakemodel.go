package loadgen

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/op-stack/executor/llm"
)

// ModelOptions shape the fake model's answers.
type ModelOptions struct {
	// FirstTokenDelay is waited before the first token (a streaming
	// answer sends its headers at once).
	FirstTokenDelay time.Duration
	// Tokens is the number of stamped tokens in every answer (at least 1).
	Tokens int
	// TokenInterval separates two tokens; 0 sends them as fast as the
	// socket allows (with FirstTokenDelay 0: the zero-delay model).
	TokenInterval time.Duration
}

// ModelCall is what the fake model recorded of one call.
type ModelCall struct {
	ID       int64
	Received time.Time // the request was read
	Finished time.Time // the answer's last byte was written
	Stream   bool
	Tokens   int
	Failed   bool // the client went away before the answer ended
}

// FakeModel is an OpenAI-compatible chat completions server
// (POST /v1/chat/completions, streaming and not) whose answers are made of
// stamped tokens: each token is "@<call>.<index>.<unix µs> ", the call's
// number, the token's index in the answer and the time the model sent it,
// so a client reading the run's stream can tell which call a token came
// from and how long it took to arrive. Routing decisions (a prompt with the
// routing block of llm.FormatRoutingInput) answer JSON that dispatches the
// first option not yet done, else finishes, with the tokens in its
// "reason"; every other prompt gets the tokens as text.
type FakeModel struct {
	opts  ModelOptions
	srv   *http.Server
	ln    net.Listener
	next  atomic.Int64
	mu    sync.Mutex
	calls map[int64]*ModelCall
}

// StartFakeModel serves the fake model on addr ("127.0.0.1:0" picks a
// free port).
func StartFakeModel(addr string, opts ModelOptions) (*FakeModel, error) {
	if opts.Tokens < 1 {
		opts.Tokens = 1
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("fake model: %w", err)
	}
	m := &FakeModel{opts: opts, ln: ln, calls: map[int64]*ModelCall{}}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/chat/completions", m.handle)
	mux.HandleFunc("POST /chat/completions", m.handle)
	mux.HandleFunc("GET /v1/models", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"object":"list","data":[{"id":"bench-fake","object":"model","owned_by":"executor-bench"}]}`))
	})
	mux.HandleFunc("GET /v1/bench/calls", m.serveCalls)
	m.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = m.srv.Serve(ln) }()
	return m, nil
}

// URL is the model's base URL, ending in /v1 (what OPENAI_BASE_URL or
// COMPATIBLE_BASE_URL take).
func (m *FakeModel) URL() string { return "http://" + m.ln.Addr().String() + "/v1" }

// Close stops the server; calls in flight end.
func (m *FakeModel) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	return m.srv.Shutdown(ctx)
}

// Call returns the record of call id.
func (m *FakeModel) Call(id int64) (ModelCall, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	c, ok := m.calls[id]
	if !ok {
		return ModelCall{}, false
	}
	return *c, true
}

// serveCalls answers GET /v1/bench/calls?ids=1,2,…: the records of those
// calls (received and finished in Unix microseconds, 0 while in flight),
// so a client in another process (the peer, bench/peer) can compute its
// runs' model time as this command does.
func (m *FakeModel) serveCalls(w http.ResponseWriter, r *http.Request) {
	type record struct {
		ID         int64 `json:"id"`
		ReceivedUS int64 `json:"received_us"`
		FinishedUS int64 `json:"finished_us"`
		Failed     bool  `json:"failed"`
	}
	out := []record{}
	for _, s := range strings.Split(r.URL.Query().Get("ids"), ",") {
		id, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
		if err != nil {
			continue
		}
		if c, ok := m.Call(id); ok {
			rec := record{ID: id, ReceivedUS: c.Received.UnixMicro(), Failed: c.Failed}
			if !c.Finished.IsZero() {
				rec.FinishedUS = c.Finished.UnixMicro()
			}
			out = append(out, rec)
		}
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(out)
}

// Calls is the number of calls answered or in flight.
func (m *FakeModel) Calls() int64 { return m.next.Load() }

type chatRequest struct {
	Model    string `json:"model"`
	Stream   bool   `json:"stream"`
	Messages []struct {
		Role    string          `json:"role"`
		Content json.RawMessage `json:"content"`
	} `json:"messages"`
}

// text is a message's content, a string or an array of text parts.
func text(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var parts []struct {
		Text string `json:"text"`
	}
	_ = json.Unmarshal(raw, &parts)
	var b strings.Builder
	for _, p := range parts {
		b.WriteString(p.Text)
	}
	return b.String()
}

// Stamp is one token as the fake model wrote it.
type Stamp struct {
	Call  int64
	Index int
	Sent  time.Time
}

// formatStamp is a token: "@call.index.unixµs ".
func formatStamp(call int64, index int, at time.Time) string {
	return "@" + strconv.FormatInt(call, 10) + "." + strconv.Itoa(index) + "." + strconv.FormatInt(at.UnixMicro(), 10) + " "
}

// answerParts are an answer's text around its tokens.
func answerParts(req chatRequest) (prefix, suffix string) {
	var last string
	for _, msg := range req.Messages {
		if msg.Role == "user" {
			last = text(msg.Content)
		}
	}
	in, ok := llm.ParseRoutingInput(last)
	if !ok {
		return "", ""
	}
	action, target := "finish", ""
	done := map[string]bool{}
	for _, c := range in.Completed {
		done[c] = true
	}
	for _, o := range in.Options {
		if !done[o] {
			action, target = "dispatch", o
			break
		}
	}
	if action == "finish" && !in.AllowFinish && len(in.Options) > 0 {
		action, target = "dispatch", in.Options[0]
	}
	instruction := ""
	if target != "" {
		instruction = "do the " + target + " part"
	}
	head, _ := json.Marshal(map[string]string{"action": action, "target": target, "instruction": instruction})
	// {"action":…,"instruction":…,"target":…} → …,"reason":"<tokens>"}
	return string(head[:len(head)-1]) + `,"reason":"`, `"}`
}

func (m *FakeModel) handle(w http.ResponseWriter, r *http.Request) {
	var req chatRequest
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		http.Error(w, `{"error":{"message":"bad request body","type":"invalid_request_error"}}`, http.StatusBadRequest)
		return
	}
	id := m.next.Add(1)
	call := &ModelCall{ID: id, Received: time.Now(), Stream: req.Stream, Tokens: m.opts.Tokens}
	m.mu.Lock()
	m.calls[id] = call
	m.mu.Unlock()
	prefix, suffix := answerParts(req)
	ctx := r.Context()
	wait := func(d time.Duration) bool {
		if d <= 0 {
			return ctx.Err() == nil
		}
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-ctx.Done():
			return false
		case <-t.C:
			return true
		}
	}
	model := req.Model
	if model == "" {
		model = "bench-fake"
	}
	completionID := "chatcmpl-bench-" + strconv.FormatInt(id, 10)
	created := time.Now().Unix()
	usage := map[string]int{"prompt_tokens": 10, "completion_tokens": m.opts.Tokens, "total_tokens": 10 + m.opts.Tokens}
	finish := func(failed bool) {
		m.mu.Lock()
		call.Finished, call.Failed = time.Now(), failed
		m.mu.Unlock()
	}
	if !req.Stream {
		if !wait(m.opts.FirstTokenDelay) {
			finish(true)
			return
		}
		var b strings.Builder
		b.WriteString(prefix)
		for i := 0; i < m.opts.Tokens; i++ {
			if i > 0 && !wait(m.opts.TokenInterval) {
				finish(true)
				return
			}
			b.WriteString(formatStamp(id, i, time.Now()))
		}
		b.WriteString(suffix)
		body, _ := json.Marshal(map[string]any{
			"id": completionID, "object": "chat.completion", "created": created, "model": model,
			"choices": []any{map[string]any{"index": 0, "message": map[string]any{"role": "assistant", "content": b.String()}, "finish_reason": "stop"}},
			"usage":   usage,
		})
		w.Header().Set("Content-Type", "application/json")
		_, err := w.Write(body)
		finish(err != nil)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	chunk := func(delta map[string]any, finishReason any, u any) error {
		c := map[string]any{"id": completionID, "object": "chat.completion.chunk", "created": created, "model": model,
			"choices": []any{}}
		if delta != nil {
			c["choices"] = []any{map[string]any{"index": 0, "delta": delta, "finish_reason": finishReason}}
		}
		if u != nil {
			c["usage"] = u
		}
		raw, _ := json.Marshal(c)
		if _, err := fmt.Fprintf(w, "data: %s\n\n", raw); err != nil {
			return err
		}
		return rc.Flush()
	}
	if err := chunk(map[string]any{"role": "assistant", "content": ""}, nil, nil); err != nil {
		finish(true)
		return
	}
	if !wait(m.opts.FirstTokenDelay) {
		finish(true)
		return
	}
	for i := 0; i < m.opts.Tokens; i++ {
		if i > 0 && !wait(m.opts.TokenInterval) {
			finish(true)
			return
		}
		content := formatStamp(id, i, time.Now())
		if i == 0 {
			content = prefix + content
		}
		if i == m.opts.Tokens-1 {
			content += suffix
		}
		if err := chunk(map[string]any{"content": content}, nil, nil); err != nil {
			finish(true)
			return
		}
	}
	if err := chunk(map[string]any{}, "stop", nil); err != nil {
		finish(true)
		return
	}
	if err := chunk(nil, nil, usage); err != nil {
		finish(true)
		return
	}
	_, err := fmt.Fprint(w, "data: [DONE]\n\n")
	if err == nil {
		err = rc.Flush()
	}
	finish(err != nil)
}

// ParseStamps appends to out the complete stamps in text and returns what
// is left after the last one (a stamp cut between two events continues in
// the next).
func ParseStamps(text string, out []Stamp) ([]Stamp, string) {
	for {
		at := strings.IndexByte(text, '@')
		if at < 0 {
			return out, ""
		}
		end := strings.IndexByte(text[at:], ' ')
		if end < 0 {
			return out, text[at:]
		}
		fields := strings.Split(text[at+1:at+end], ".")
		text = text[at+end+1:]
		if len(fields) != 3 {
			continue
		}
		call, err1 := strconv.ParseInt(fields[0], 10, 64)
		index, err2 := strconv.Atoi(fields[1])
		us, err3 := strconv.ParseInt(fields[2], 10, 64)
		if err1 != nil || err2 != nil || err3 != nil {
			continue
		}
		out = append(out, Stamp{Call: call, Index: index, Sent: time.UnixMicro(us)})
	}
}
