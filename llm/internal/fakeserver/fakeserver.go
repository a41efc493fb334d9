// Package fakeserver is the plumbing the fake model servers (llm/llmfake,
// llm/bedrockfake) share: a script of rules answering recorded calls, the
// /fake/calls, /fake/rules and /fake/reset control routes, waiting that a
// closing server cuts short, dropped connections, and the httptest server's
// lifecycle. Each fake keeps its own wire format and its own types; they
// plug in through Hooks.
//
// For tests only. Nothing here talks to a real model.
package fakeserver

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync"
	"time"
)

// Hooks are what a fake tells the script about its types: R a rule, P a
// response, C a recorded call.
type Hooks[R, P, C any] struct {
	// Match reports whether rule answers c.
	Match func(rule *R, c *C) bool
	// Responses are a rule's name (for Calls) and its scripted responses.
	Responses func(rule *R) (name string, responses []P)
	// Number sets a call's index, the index of the rule that answered it
	// (-1 for the default) and that rule's name.
	Number func(c *C, index, rule int, ruleName string)
	// Copy returns c with its slices copied, so Calls can hand it out.
	Copy func(c C) C
}

// Script holds a fake's rules, default answer and recorded calls. It is
// safe for concurrent use.
type Script[R, P, C any] struct {
	// Closing is closed when the fake closes, to release waiting handlers.
	Closing chan struct{}
	hooks   Hooks[R, P, C]

	mu       sync.Mutex
	rules    []R
	next     []int // per rule: index of the next response to use
	def      P
	recorded []C
}

// NewScript starts a script answering by rules, and def when none matches.
func NewScript[R, P, C any](hooks Hooks[R, P, C], rules []R, def P) *Script[R, P, C] {
	s := &Script[R, P, C]{Closing: make(chan struct{}), hooks: hooks, def: def}
	s.SetRules(rules)
	return s
}

// SetRules replaces the rules and restarts every rule's response sequence.
func (s *Script[R, P, C]) SetRules(rules []R) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.rules = append([]R(nil), rules...)
	s.next = make([]int, len(rules))
}

// SetDefault replaces the answer to calls no rule matches.
func (s *Script[R, P, C]) SetDefault(def P) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.def = def
}

// Reset forgets the recorded calls and restarts every rule's response
// sequence.
func (s *Script[R, P, C]) Reset() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.recorded = nil
	s.next = make([]int, len(s.rules))
}

// Calls returns a copy of every call recorded so far, in arrival order.
func (s *Script[R, P, C]) Calls() []C {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]C, len(s.recorded))
	for i, c := range s.recorded {
		out[i] = s.hooks.Copy(c)
	}
	return out
}

// Update changes recorded call i under the lock.
func (s *Script[R, P, C]) Update(i int, fn func(c *C)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if i < len(s.recorded) { // Reset may have dropped it
		fn(&s.recorded[i])
	}
}

// Record picks the answer for a call and stores the call, under one lock
// so that concurrent requests consume a rule's responses in arrival order.
// It returns the call's index and its response.
func (s *Script[R, P, C]) Record(c C) (int, P) {
	s.mu.Lock()
	defer s.mu.Unlock()
	index, ruleIndex, ruleName := len(s.recorded), -1, ""
	resp := s.def
	for i := range s.rules {
		rule := &s.rules[i]
		if !s.hooks.Match(rule, &c) {
			continue
		}
		name, responses := s.hooks.Responses(rule)
		ruleIndex, ruleName = i, name
		if n := len(responses); n > 0 {
			resp = responses[min(s.next[i], n-1)]
			s.next[i]++
		}
		break
	}
	s.hooks.Number(&c, index, ruleIndex, ruleName)
	s.recorded = append(s.recorded, c)
	return index, resp
}

// ServeControl serves the control routes on path: GET /fake/calls, PUT (or
// POST) /fake/rules with a JSON []R, POST /fake/reset. It reports whether
// path was one of them; a rules body that does not decode is answered by
// badRules.
func (s *Script[R, P, C]) ServeControl(w http.ResponseWriter, r *http.Request, path string, badRules func(http.ResponseWriter, error)) bool {
	switch {
	case path == "/fake/calls" && r.Method == http.MethodGet:
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(s.Calls())
	case path == "/fake/rules" && (r.Method == http.MethodPut || r.Method == http.MethodPost):
		var rules []R
		if err := json.NewDecoder(r.Body).Decode(&rules); err != nil {
			badRules(w, err)
			return true
		}
		s.SetRules(rules)
		w.WriteHeader(http.StatusNoContent)
	case path == "/fake/reset" && r.Method == http.MethodPost:
		s.Reset()
		w.WriteHeader(http.StatusNoContent)
	default:
		return false
	}
	return true
}

// Wait sleeps for d (forever when d < 0) unless the request or the fake
// ends first; it reports whether the whole time passed.
func (s *Script[R, P, C]) Wait(ctx context.Context, d time.Duration) bool {
	var timeout <-chan time.Time
	if d >= 0 {
		t := time.NewTimer(d)
		defer t.Stop()
		timeout = t.C
	}
	select {
	case <-timeout:
		return true
	case <-ctx.Done():
	case <-s.Closing:
	}
	return false
}

// Abort closes the connection under w without finishing the response.
// Whatever was flushed stays sent; a chunked body is never terminated, so
// the client's read fails with an unexpected EOF rather than a clean end.
func Abort(w http.ResponseWriter) {
	conn, _, err := http.NewResponseController(w).Hijack()
	if err != nil {
		panic(http.ErrAbortHandler) // HTTP/2: aborting resets the stream
	}
	_ = conn.Close()
}

// Server is a fake listening on a loopback port (httptest never listens
// beyond the machine).
type Server struct {
	HTTP    *httptest.Server
	closing chan struct{}
	once    sync.Once
}

// Start serves h on 127.0.0.1, over HTTPS with a self-signed certificate
// when tls is set. closing is the script's Closing, closed by Close.
func Start(h http.Handler, closing chan struct{}, tls bool) *Server {
	if tls {
		return &Server{HTTP: httptest.NewTLSServer(h), closing: closing}
	}
	return &Server{HTTP: httptest.NewServer(h), closing: closing}
}

// Close stops the server, first releasing handlers that hang or sleep so
// that it does not wait for them.
func (s *Server) Close() {
	s.once.Do(func() {
		close(s.closing)
		s.HTTP.CloseClientConnections()
		s.HTTP.Close()
	})
}

// ListenAndServe serves h on addr until it fails, for tests that drive a
// separate process; a closed server is not a failure.
func ListenAndServe(addr string, h http.Handler) error {
	srv := &http.Server{Addr: addr, Handler: h, ReadHeaderTimeout: 10 * time.Second}
	err := srv.ListenAndServe()
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}
