package activities

import (
	"context"
	"errors"
	"iter"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2asrv"
	"go.temporal.io/sdk/temporal"

	"github.com/op-stack/executor/a2aremote"
	"github.com/op-stack/executor/models"
)

// fakeA2AAgent is a named fake: an in-process a2a-go agent (JSON-RPC,
// streaming) that ends every task in state with text; a completed task
// streams "hello world" as an artifact in two chunks after a working
// status "looking".
type fakeA2AAgent struct{ state a2a.TaskState }

func (f fakeA2AAgent) Execute(_ context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {
		if !yield(a2a.NewSubmittedTask(ec, ec.Message), nil) ||
			!yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateWorking, a2a.NewMessage(a2a.MessageRoleAgent, a2a.NewTextPart("looking"))), nil) {
			return
		}
		if f.state != a2a.TaskStateCompleted {
			yield(a2a.NewStatusUpdateEvent(ec, f.state, a2a.NewMessage(a2a.MessageRoleAgent, a2a.NewTextPart("no luck"))), nil)
			return
		}
		first := a2a.NewArtifactEvent(ec, a2a.NewTextPart("hello "))
		more := a2a.NewArtifactUpdateEvent(ec, first.Artifact.ID, a2a.NewTextPart("world"))
		more.Append = true
		if yield(first, nil) && yield(more, nil) {
			yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateCompleted, nil), nil)
		}
	}
}

func (fakeA2AAgent) Cancel(_ context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {
		yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateCanceled, nil), nil)
	}
}

func startFakeA2AAgent(t *testing.T, state a2a.TaskState) string {
	t.Helper()
	mux := http.NewServeMux()
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	mux.Handle("/.well-known/agent-card.json", a2asrv.NewStaticAgentCardHandler(&a2a.AgentCard{
		Name: "fake", Version: "1", Capabilities: a2a.AgentCapabilities{Streaming: true},
		SupportedInterfaces: []*a2a.AgentInterface{a2a.NewAgentInterface(srv.URL+"/rpc", a2a.TransportProtocolJSONRPC)},
		DefaultInputModes:   []string{"text/plain"}, DefaultOutputModes: []string{"text/plain"},
	}))
	mux.Handle("/rpc", a2asrv.NewJSONRPCHandler(a2asrv.NewHandler(fakeA2AAgent{state: state})))
	mux.HandleFunc("/down/.well-known/agent-card.json", func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "down", http.StatusServiceUnavailable)
	})
	return srv.URL
}

func a2aInput(cardURL string) models.A2ACallInput {
	team := &models.Team{Name: "research", Supervisor: models.Agent{AgentID: "ts"}}
	w := models.Agent{AgentID: "w-remote", Name: "remote", A2A: &models.A2AAgent{CardURL: cardURL}}
	return models.A2ACallInput{
		RunID: "r1", Agent: w, Source: models.WorkerSource(&models.Hierarchy{GlobalSupervisor: models.Agent{AgentID: "gs"}}, team, &w),
		Task: "the task", Instruction: "find papers", ContextID: models.A2AContextID("r1", "w-remote"), MessageID: "msg_1",
	}
}

// TestCallA2AStreamsTheAnswer: the remote agent's chunks are the worker's
// llm.stream events under its answer's message_id, its working status is
// llm.reasoning, and the answer is the worker's output.
func TestCallA2AStreamsTheAnswer(t *testing.T) {
	sink := &fakeSink{}
	acts := &Activities{Events: sink, A2A: a2aremote.New(a2aremote.Config{AllowPrivate: true})}
	val, err := newActivityEnv(acts).ExecuteActivity((&Activities{}).CallA2A, a2aInput(startFakeA2AAgent(t, a2a.TaskStateCompleted)+"/.well-known/agent-card.json"))
	if err != nil {
		t.Fatal(err)
	}
	var res models.RespondResult
	if err := val.Get(&res); err != nil {
		t.Fatal(err)
	}
	if res.Output != "hello world" || res.Model != "a2a:fake" {
		t.Fatalf("result %+v", res)
	}
	var text, reasoning string
	for _, e := range sink.events(models.CategoryLLM) {
		if e.Source.AgentID != "w-remote" || e.Data["message_id"] != "msg_1" {
			t.Fatalf("event %+v is not the worker's answer's", e)
		}
		switch e.Event.Action {
		case models.ActionStream:
			text += e.Data["content"].(string)
		case models.ActionReasoning:
			reasoning += e.Data["content"].(string)
		}
	}
	if text != "hello world" || reasoning != "looking\n" {
		t.Fatalf("streamed %q, reasoning %q", text, reasoning)
	}
}

// TestCallA2AFailures: the failure types and whether Temporal retries them.
func TestCallA2AFailures(t *testing.T) {
	base := startFakeA2AAgent(t, a2a.TaskStateFailed)
	card := base + "/.well-known/agent-card.json"
	private := a2aremote.New(a2aremote.Config{AllowPrivate: true})
	for _, tc := range []struct {
		name      string
		client    *a2aremote.Client
		cardURL   string
		errType   string
		retryable bool
		says      string
	}{
		{"task failed", private, card, models.ErrA2ATaskFailed, false, "failed: no luck"},
		{"guarded", a2aremote.New(a2aremote.Config{}), card, models.ErrA2ARefused, false, "loopback"},
		{"card 503", private, base + "/down/.well-known/agent-card.json", models.ErrA2AUnavailable, true, "503"},
		{"not enabled", nil, card, models.ErrA2ARefused, false, "not enabled"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			acts := &Activities{Events: &fakeSink{}, A2A: tc.client}
			_, err := newActivityEnv(acts).ExecuteActivity((&Activities{}).CallA2A, a2aInput(tc.cardURL))
			var appErr *temporal.ApplicationError
			if !errors.As(err, &appErr) || appErr.Type() != tc.errType || appErr.NonRetryable() == tc.retryable || !strings.Contains(err.Error(), tc.says) {
				t.Fatalf("error %v, want %s (retryable %v) saying %q", err, tc.errType, tc.retryable, tc.says)
			}
			if !strings.Contains(err.Error(), `worker "remote" (agent_id w-remote)`) {
				t.Fatalf("error %v does not name the worker", err)
			}
		})
	}
}
