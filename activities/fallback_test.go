package activities

import (
	"context"
	"sync"
	"testing"

	"github.com/op-stack/executor/llm"
	"github.com/op-stack/executor/models"
)

// routedLLM fails the models listed in errs and answers the others,
// recording the models asked for in order.
type routedLLM struct {
	mu      sync.Mutex
	errs    map[string]*llm.Error
	breaker *llm.Breaker
	asked   []string
}

func (f *routedLLM) Breaker() *llm.Breaker { return f.breaker }

func (f *routedLLM) Stream(_ context.Context, req llm.Request, onDelta func(llm.Delta)) (*llm.Response, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.asked = append(f.asked, req.Model)
	if e := f.errs[req.Model]; e != nil {
		return nil, e
	}
	onDelta(llm.Delta{Content: "answer of " + req.Model})
	return &llm.Response{Content: "answer of " + req.Model, Model: req.Model, Provider: "p-" + req.Model}, nil
}

func fallbackInput(fallbacks ...string) models.RespondInput {
	return models.RespondInput{
		RunID: "r1", Purpose: models.PurposeWorker, Task: "t", DeferWrites: true,
		Agent:  models.Agent{AgentID: "w-1", Name: "writer", Model: "a", FallbackModels: fallbacks},
		Source: models.Source{AgentID: "w-1", AgentType: models.AgentTypeWorker, AgentName: "writer"},
	}
}

func TestFallbackFollowsTheListWhileCircuitsAreOpen(t *testing.T) {
	open := func(p, m string) *llm.Error {
		return &llm.Error{Provider: p, Model: m, Retryable: true, Message: "circuit open", Cause: llm.ErrCircuitOpen}
	}
	fake := &routedLLM{errs: map[string]*llm.Error{"a": open("pa", "a"), "b": open("pb", "b")}}
	sink := &fakeSink{}
	env := newActivityEnv(&Activities{LLM: fake, Events: sink})
	val, err := env.ExecuteActivity((&Activities{}).Respond, fallbackInput("b", "c", "d"))
	if err != nil {
		t.Fatal(err)
	}
	var res models.RespondResult
	if err := val.Get(&res); err != nil {
		t.Fatal(err)
	}
	if res.Model != "c" || res.Output != "answer of c" {
		t.Fatalf("answered by %q: %q, want c", res.Model, res.Output)
	}
	if want := []string{"a", "b", "c"}; !equalStrings(fake.asked, want) {
		t.Fatalf("asked %v, want %v", fake.asked, want)
	}
	var moves [][2]string
	for _, e := range sink.events(models.CategoryLLM) {
		if e.Event.Action == models.ActionFallback {
			if e.Data["why"] != FallbackCircuitOpen {
				t.Errorf("why = %v", e.Data["why"])
			}
			moves = append(moves, [2]string{e.Data["from"].(string), e.Data["to"].(string)})
		}
	}
	if len(moves) != 2 || moves[0] != [2]string{"a", "b"} || moves[1] != [2]string{"b", "c"} {
		t.Fatalf("llm.fallback events %v, want a→b, b→c", moves)
	}
	if len(res.Calls) != 1 || res.Calls[0].Model != "c" {
		t.Fatalf("usage records %+v, want one of model c", res.Calls)
	}
}

func TestFallbackWhenTheFailureOpensTheCircuit(t *testing.T) {
	br := llm.NewBreaker(1, 0, nil)
	br.Failure("pa") // the provider's circuit is open now
	fake := &routedLLM{breaker: br, errs: map[string]*llm.Error{"a": {Provider: "pa", Model: "a", StatusCode: 500, Retryable: true, Message: "boom"}}}
	env := newActivityEnv(&Activities{LLM: fake, Events: &fakeSink{}})
	val, err := env.ExecuteActivity((&Activities{}).Respond, fallbackInput("b"))
	if err != nil {
		t.Fatal(err)
	}
	var res models.RespondResult
	if err := val.Get(&res); err != nil || res.Model != "b" {
		t.Fatalf("model %q, err %v; want b", res.Model, err)
	}
}

func TestNoFallbackForRejectedOrStillRetriableCalls(t *testing.T) {
	for _, e := range []*llm.Error{
		{Provider: "pa", Model: "a", StatusCode: 400, Message: "bad request"},                // rejected: another model would not help
		{Provider: "pa", Model: "a", StatusCode: 500, Retryable: true, Message: "try again"}, // closed circuit, attempts left: Temporal retries
	} {
		fake := &routedLLM{breaker: llm.NewBreaker(5, 0, nil), errs: map[string]*llm.Error{"a": e}}
		env := newActivityEnv(&Activities{LLM: fake, Events: &fakeSink{}})
		if _, err := env.ExecuteActivity((&Activities{}).Respond, fallbackInput("b")); err == nil {
			t.Fatalf("%v: the call fell back", e)
		}
		if !equalStrings(fake.asked, []string{"a"}) {
			t.Fatalf("%v: asked %v", e, fake.asked)
		}
	}
}

func equalStrings(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestFallbackWhy(t *testing.T) {
	closed := func(string) bool { return false }
	openPA := func(p string) bool { return p == "pa" }
	boom := &llm.Error{Provider: "pa", StatusCode: 500, Retryable: true, Message: "boom"}
	fast := &llm.Error{Provider: "pa", Retryable: true, Message: "circuit open", Cause: llm.ErrCircuitOpen}
	rejected := &llm.Error{Provider: "pa", StatusCode: 400, Message: "bad"}
	for _, tc := range []struct {
		err         error
		circuitOpen func(string) bool
		last        bool
		want        string
	}{
		{fast, closed, false, FallbackCircuitOpen},
		{boom, openPA, false, FallbackCircuitOpen},
		{boom, closed, true, FallbackRetriesExhausted},
		{boom, closed, false, ""},
		{rejected, openPA, true, ""},
		{context.Canceled, openPA, true, ""},
	} {
		if got := fallbackWhy(tc.err, tc.circuitOpen, tc.last); got != tc.want {
			t.Errorf("fallbackWhy(%v, last %v) = %q, want %q", tc.err, tc.last, got, tc.want)
		}
	}
}
