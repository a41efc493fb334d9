package a2aremote

import (
	"context"
	"errors"
	"iter"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2asrv"

	"github.com/op-stack/executor/models"
)

// fakeAgent is a named fake: an in-process A2A agent on the a2a-go server
// (JSON-RPC), whose executor the test chooses. The end-to-end tests use
// the real @a2a-js/sdk server instead (e2e/a2aclient_test.go).
type fakeAgent struct {
	url       string
	mu        sync.Mutex
	contexts  []string
	headers   []string // the X-Agent-Key of every request
	cancelled []a2a.TaskID
	// cardStatus, when set, is the card's answer instead of the card.
	cardStatus int
}

type fakeExecutor struct {
	f   *fakeAgent
	run func(execCtx *a2asrv.ExecutorContext, yield func(a2a.Event, error) bool)
}

func (e *fakeExecutor) Execute(_ context.Context, execCtx *a2asrv.ExecutorContext) iter.Seq2[a2a.Event, error] {
	e.f.mu.Lock()
	e.f.contexts = append(e.f.contexts, execCtx.ContextID)
	e.f.mu.Unlock()
	return func(yield func(a2a.Event, error) bool) { e.run(execCtx, yield) }
}

func (e *fakeExecutor) Cancel(_ context.Context, execCtx *a2asrv.ExecutorContext) iter.Seq2[a2a.Event, error] {
	e.f.mu.Lock()
	e.f.cancelled = append(e.f.cancelled, execCtx.TaskID)
	e.f.mu.Unlock()
	return func(yield func(a2a.Event, error) bool) {
		yield(a2a.NewStatusUpdateEvent(execCtx, a2a.TaskStateCanceled, nil), nil)
	}
}

func startFake(t *testing.T, streaming bool, run func(*a2asrv.ExecutorContext, func(a2a.Event, error) bool)) *fakeAgent {
	t.Helper()
	f := &fakeAgent{}
	mux := http.NewServeMux()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		f.headers = append(f.headers, r.Header.Get("X-Agent-Key"))
		status := f.cardStatus
		f.mu.Unlock()
		if status != 0 && strings.HasSuffix(r.URL.Path, "agent-card.json") {
			http.Error(w, "no card", status)
			return
		}
		mux.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	card := &a2a.AgentCard{
		Name: "fake", Description: "fake", Version: "1",
		SupportedInterfaces: []*a2a.AgentInterface{a2a.NewAgentInterface(srv.URL+"/rpc", a2a.TransportProtocolJSONRPC)},
		Capabilities:        a2a.AgentCapabilities{Streaming: streaming},
		DefaultInputModes:   []string{"text/plain"}, DefaultOutputModes: []string{"text/plain"},
	}
	mux.Handle("/.well-known/agent-card.json", a2asrv.NewStaticAgentCardHandler(card))
	mux.Handle("/rpc", a2asrv.NewJSONRPCHandler(a2asrv.NewHandler(&fakeExecutor{f: f, run: run})))
	f.url = srv.URL + "/.well-known/agent-card.json"
	return f
}

// completes answers with one artifact in two chunks.
func completes(execCtx *a2asrv.ExecutorContext, yield func(a2a.Event, error) bool) {
	if execCtx.StoredTask == nil && !yield(a2a.NewSubmittedTask(execCtx, execCtx.Message), nil) {
		return
	}
	if !yield(a2a.NewStatusUpdateEvent(execCtx, a2a.TaskStateWorking, a2a.NewMessage(a2a.MessageRoleAgent, a2a.NewTextPart("looking"))), nil) {
		return
	}
	first := a2a.NewArtifactEvent(execCtx, a2a.NewTextPart("hello "))
	if !yield(first, nil) {
		return
	}
	more := a2a.NewArtifactUpdateEvent(execCtx, first.Artifact.ID, a2a.NewTextPart("world"))
	more.Append, more.LastChunk = true, true
	if !yield(more, nil) {
		return
	}
	yield(a2a.NewStatusUpdateEvent(execCtx, a2a.TaskStateCompleted, nil), nil)
}

func endsIn(state a2a.TaskState, text string) func(*a2asrv.ExecutorContext, func(a2a.Event, error) bool) {
	return func(execCtx *a2asrv.ExecutorContext, yield func(a2a.Event, error) bool) {
		if execCtx.StoredTask == nil && !yield(a2a.NewSubmittedTask(execCtx, execCtx.Message), nil) {
			return
		}
		yield(a2a.NewStatusUpdateEvent(execCtx, state, a2a.NewMessage(a2a.MessageRoleAgent, a2a.NewTextPart(text))), nil)
	}
}

func call(t *testing.T, c *Client, agent models.A2AAgent, text string) (*Result, []Update, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var updates []Update
	res, err := c.Call(ctx, Request{Agent: agent, ContextID: "run-1.w-1", Text: text}, func(u Update) { updates = append(updates, u) })
	return res, updates, err
}

func kindOf(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return e.Kind
	}
	return ""
}

func TestCallStreams(t *testing.T) {
	f := startFake(t, true, completes)
	res, updates, err := call(t, New(Config{AllowPrivate: true}), models.A2AAgent{CardURL: f.url}, "hi")
	if err != nil {
		t.Fatal(err)
	}
	if res.Text != "hello world" || !res.Streamed || res.AgentName != "fake" {
		t.Fatalf("result %+v", res)
	}
	var text, progress string
	for _, u := range updates {
		text, progress = text+u.Text, progress+u.Progress
	}
	if text != "hello world" || progress != "looking" {
		t.Fatalf("updates: text %q, progress %q", text, progress)
	}
	if len(f.contexts) != 1 || f.contexts[0] != "run-1.w-1" {
		t.Fatalf("remote contexts %v, want the caller's contextId", f.contexts)
	}
}

func TestCallWithoutStreaming(t *testing.T) {
	f := startFake(t, false, completes)
	res, updates, err := call(t, New(Config{AllowPrivate: true}), models.A2AAgent{CardURL: f.url}, "hi")
	if err != nil {
		t.Fatal(err)
	}
	if res.Text != "hello world" || res.Streamed {
		t.Fatalf("result %+v", res)
	}
	if len(updates) == 0 || updates[len(updates)-1].Text == "" {
		t.Fatalf("the answer was not given as an update: %+v", updates)
	}
}

func TestCallReplyMessage(t *testing.T) {
	f := startFake(t, true, func(_ *a2asrv.ExecutorContext, yield func(a2a.Event, error) bool) {
		yield(a2a.NewMessage(a2a.MessageRoleAgent, a2a.NewTextPart("just a reply")), nil)
	})
	res, _, err := call(t, New(Config{AllowPrivate: true}), models.A2AAgent{CardURL: f.url}, "hi")
	if err != nil || res.Text != "just a reply" {
		t.Fatalf("result %+v, %v", res, err)
	}
}

func TestCallTaskFailures(t *testing.T) {
	for _, tc := range []struct {
		state a2a.TaskState
		want  string
	}{
		{a2a.TaskStateFailed, "failed: out of paper"},
		{a2a.TaskStateRejected, "was rejected: out of paper"},
		{a2a.TaskStateInputRequired, "asked for input (input-required), which a worker cannot give: out of paper"},
	} {
		t.Run(string(tc.state), func(t *testing.T) {
			f := startFake(t, true, endsIn(tc.state, "out of paper"))
			_, _, err := call(t, New(Config{AllowPrivate: true}), models.A2AAgent{CardURL: f.url}, "hi")
			if kindOf(err) != KindTaskFailed || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v (kind %q), want a task failure saying %q", err, kindOf(err), tc.want)
			}
		})
	}
}

func TestCallRefusedByTheGuard(t *testing.T) {
	f := startFake(t, true, completes)
	_, _, err := call(t, New(Config{}), models.A2AAgent{CardURL: f.url}, "hi")
	if kindOf(err) != KindRefused || !strings.Contains(err.Error(), "loopback") || !strings.Contains(err.Error(), "A2A_ALLOW_PRIVATE") {
		t.Fatalf("error %v (kind %q), want the guard's refusal", err, kindOf(err))
	}
	if len(f.headers) != 0 {
		t.Fatalf("the agent was reached %d times", len(f.headers))
	}
}

func TestCallCardStatus(t *testing.T) {
	for status, kind := range map[int]string{http.StatusServiceUnavailable: KindUnavailable, http.StatusNotFound: KindRefused, http.StatusTooManyRequests: KindUnavailable} {
		f := startFake(t, true, completes)
		f.cardStatus = status
		_, _, err := call(t, New(Config{AllowPrivate: true}), models.A2AAgent{CardURL: f.url}, "hi")
		if kindOf(err) != kind {
			t.Errorf("card answering %d: error %v (kind %q), want %q", status, err, kindOf(err), kind)
		}
	}
}

func TestCallHeadersFromTheEnvironment(t *testing.T) {
	f := startFake(t, true, completes)
	agent := models.A2AAgent{CardURL: f.url, HeadersEnv: map[string]string{"X-Agent-Key": "A2A_HEADER_AGENT_KEY"}}
	env := map[string]string{}
	c := New(Config{AllowPrivate: true, LookupEnv: func(k string) (string, bool) { v, ok := env[k]; return v, ok }})
	_, _, err := call(t, c, agent, "hi")
	if kindOf(err) != KindRefused || !strings.Contains(err.Error(), "A2A_HEADER_AGENT_KEY") {
		t.Fatalf("error %v, want the missing variable named", err)
	}
	env["A2A_HEADER_AGENT_KEY"] = "s3cret"
	if _, _, err := call(t, c, agent, "hi"); err != nil {
		t.Fatal(err)
	}
	// A variable without the prefix is never read, even when set.
	env["DATABASE_URL"] = "postgres://secret"
	if _, _, err := call(t, c, models.A2AAgent{CardURL: f.url, HeadersEnv: map[string]string{"X-Agent-Key": "DATABASE_URL"}}, "hi"); kindOf(err) != KindRefused {
		t.Fatalf("DATABASE_URL as a header: %v", err)
	}
	if len(f.headers) < 2 {
		t.Fatalf("requests %v", f.headers)
	}
	for i, h := range f.headers {
		if h != "s3cret" {
			t.Fatalf("request %d carried X-Agent-Key %q", i, h)
		}
	}
}

func TestCallCancelledCancelsTheRemoteTask(t *testing.T) {
	started := make(chan struct{})
	f := startFake(t, true, func(execCtx *a2asrv.ExecutorContext, yield func(a2a.Event, error) bool) {
		if !yield(a2a.NewSubmittedTask(execCtx, execCtx.Message), nil) {
			return
		}
		yield(a2a.NewStatusUpdateEvent(execCtx, a2a.TaskStateWorking, nil), nil)
		close(started)
		time.Sleep(3 * time.Second)
	})
	ctx, cancel := context.WithCancel(context.Background())
	go func() { <-started; time.Sleep(100 * time.Millisecond); cancel() }()
	_, err := New(Config{AllowPrivate: true}).Call(ctx, Request{Agent: models.A2AAgent{CardURL: f.url}, Text: "hang"}, nil)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("error %v, want context.Canceled", err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.cancelled) != 1 {
		t.Fatalf("remote cancellations %v, want one", f.cancelled)
	}
}

// TestCallHeadersStayWithTheAgent: a card URL that redirects to another
// host is followed (under the guard), but the agent's headers are not
// sent there.
func TestCallHeadersStayWithTheAgent(t *testing.T) {
	f := startFake(t, true, completes)
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		f.headers = append(f.headers, "other:"+r.Header.Get("X-Agent-Key"))
		f.mu.Unlock()
		http.Redirect(w, r, f.url, http.StatusFound)
	}))
	t.Cleanup(other.Close)
	c := New(Config{AllowPrivate: true, LookupEnv: func(string) (string, bool) { return "s3cret", true }})
	// The card is asked of other, which redirects to the agent's host
	// (127.0.0.1 under another port: another host).
	if _, _, err := call(t, c, models.A2AAgent{CardURL: other.URL + "/card", HeadersEnv: map[string]string{"X-Agent-Key": "A2A_HEADER_KEY"}}, "hi"); err != nil {
		t.Fatal(err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.headers) < 3 || f.headers[0] != "other:s3cret" || f.headers[1] != "" {
		t.Fatalf("headers seen %q: want the key at the card's host only, then none at the redirect's host", f.headers)
	}
	for _, h := range f.headers[2:] {
		if h != "s3cret" {
			t.Fatalf("headers seen %q: the card's interface (on the agent's host) gets the key", f.headers)
		}
	}
}
