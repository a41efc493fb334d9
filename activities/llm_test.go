package activities

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	temporallog "go.temporal.io/sdk/log"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"

	"github.com/op-stack/executor/llm"
	"github.com/op-stack/executor/models"
)

// fakeLLM is an in-process llm.Client for unit tests: it answers from a
// list of contents in order (or returns err) and records the requests.
type fakeLLM struct {
	mu       sync.Mutex
	answers  []string
	err      error
	requests []llm.Request
}

func (f *fakeLLM) Stream(_ context.Context, req llm.Request, onDelta func(llm.Delta)) (*llm.Response, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.requests = append(f.requests, req)
	if f.err != nil {
		return nil, f.err
	}
	answer := f.answers[0]
	if len(f.answers) > 1 {
		f.answers = f.answers[1:]
	}
	onDelta(llm.Delta{Content: answer})
	return &llm.Response{Content: answer, Model: req.Model, Provider: "fake", Usage: llm.Usage{TotalTokens: 5}}, nil
}

// fakeSink records published event batches.
type fakeSink struct {
	mu      sync.Mutex
	batches []models.EventBatch
}

func (s *fakeSink) PublishEvents(_ context.Context, _ string, b models.EventBatch) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.batches = append(s.batches, b)
	return nil
}

// events returns the published events of the given categories.
func (s *fakeSink) events(categories ...string) []models.Event {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []models.Event
	for _, b := range s.batches {
		for _, e := range b.Events {
			for _, c := range categories {
				if e.Event.Category == c {
					out = append(out, e)
				}
			}
		}
	}
	return out
}

func withAction(events []models.Event, action string) []models.Event {
	var out []models.Event
	for _, e := range events {
		if e.Event.Action == action {
			out = append(out, e)
		}
	}
	return out
}

func teamDecideInput() models.DecideInput {
	team := &models.Team{Name: "research", Supervisor: models.Agent{AgentID: "ts", Name: "lead"}}
	return models.DecideInput{
		RunID:      "r1",
		Supervisor: models.Agent{AgentID: "ts", Name: "lead", SystemPrompt: "You lead."},
		Source:     models.TeamSupervisorSource(&models.Hierarchy{GlobalSupervisor: models.Agent{AgentID: "gs"}}, team),
		Task:       "write a report",
		Options:    []models.Option{{Name: "searcher", AgentID: "w-s"}, {Name: "Data Analyst", AgentID: "w-a"}},
		Completed:  []string{"searcher"},
		Iteration:  2,
		Publish:    true,
	}
}

func TestParseDecision(t *testing.T) {
	in := teamDecideInput()
	in.AllowFinish = true
	cases := []struct {
		answer, action, target string
	}{
		{`{"action":"dispatch","target":"searcher","instruction":"look","reason":"r"}`, "dispatch", "searcher"},
		{"```json\n{\"action\": \"dispatch\", \"target\": \"data analyst\", \"instruction\": \"x\"}\n```", "dispatch", "Data Analyst"},
		{`Sure! {"selected_agent": "searcher", "reasoning": "best fit"}`, "dispatch", "searcher"},
		{`{"next": "FINISH"}`, "finish", ""},
		{`{"action":"finish","target":"","instruction":"","reason":"done"}`, "finish", ""},
		{"I would pick the Data Analyst for this.", "dispatch", "Data Analyst"},
		{"done", "finish", ""},
	}
	for _, tc := range cases {
		d, err := parseDecision(tc.answer, in)
		if err != nil || d.Action != tc.action || d.Target != tc.target {
			t.Errorf("%q: got %+v, %v; want %s %q", tc.answer, d, err, tc.action, tc.target)
		}
	}
	for _, bad := range []string{`{"action":"dispatch","target":"nobody"}`, "no idea", `{"action":"dance","target":"searcher"}`} {
		if d, err := parseDecision(bad, in); err == nil {
			t.Errorf("%q was accepted as %+v", bad, d)
		}
	}
	in.AllowFinish = false
	if _, err := parseDecision(`{"action":"finish"}`, in); err == nil || !strings.Contains(err.Error(), "not possible yet") {
		t.Errorf("finishing before any work: %v", err)
	}
}

// TestParseDecisionWithTargets: a decision that may dispatch several
// (MaxTargets) reads the "targets" list, drops repeats and anything past
// the limit, refuses a name not offered, and still takes a single target.
func TestParseDecisionWithTargets(t *testing.T) {
	in := teamDecideInput()
	in.Options = append(in.Options, models.Option{Name: "writer"})
	in.MaxTargets = 2
	d, err := parseDecision(`{"action":"dispatch","targets":[{"target":"searcher","instruction":"look"},{"target":"searcher","instruction":"again"},{"team":"data analyst","instruction":"count"},{"target":"writer","instruction":"w"}],"reason":"r"}`, in)
	if err != nil || d.Target != "searcher" || d.Instruction != "look" || len(d.Also) != 1 || d.Also[0] != (models.DispatchTarget{Target: "Data Analyst", Instruction: "count"}) {
		t.Errorf("targets: %+v, %v", d, err)
	}
	if d, err := parseDecision(`{"action":"dispatch","target":"writer","instruction":"w"}`, in); err != nil || d.Target != "writer" || len(d.Also) != 0 {
		t.Errorf("single target: %+v, %v", d, err)
	}
	if d, err := parseDecision(`{"action":"dispatch","targets":[{"target":"searcher"},{"target":"nobody"}]}`, in); err == nil {
		t.Errorf("a target not offered was accepted: %+v", d)
	}
	var schema struct {
		Required []string `json:"required"`
	}
	if err := json.Unmarshal(decisionSchema(in).Schema, &schema); err != nil || strings.Join(schema.Required, ",") != "action,targets,reason" {
		t.Errorf("schema requires %v (%v)", schema.Required, err)
	}
}

func newActivityEnv(acts *Activities) *testsuite.TestActivityEnvironment {
	var suite testsuite.WorkflowTestSuite
	suite.SetLogger(temporallog.NewStructuredLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
	env := suite.NewTestActivityEnvironment()
	env.RegisterActivity(acts)
	return env
}

func TestDecideCorrectsAnInvalidChoice(t *testing.T) {
	fake := &fakeLLM{answers: []string{`{"action":"dispatch","target":"ghost"}`, `{"action":"dispatch","target":"Data Analyst","instruction":"analyse","reason":"ok"}`}}
	sink := &fakeSink{}
	env := newActivityEnv(&Activities{LLM: fake, Events: sink})
	val, err := env.ExecuteActivity((&Activities{}).Decide, teamDecideInput())
	if err != nil {
		t.Fatal(err)
	}
	var d models.Decision
	if err := val.Get(&d); err != nil {
		t.Fatal(err)
	}
	if d.Target != "Data Analyst" || d.Instruction != "analyse" || d.Warning != "" || d.Usage.TotalTokens != 10 {
		t.Errorf("decision = %+v", d)
	}
	if len(fake.requests) != 2 || !strings.Contains(fake.requests[1].Messages[len(fake.requests[1].Messages)-1].Content, `"ghost" is not one of the available workers`) {
		t.Errorf("the correction does not explain the problem: %+v", fake.requests)
	}
	if fake.requests[0].JSONSchema == nil || !strings.Contains(string(fake.requests[0].JSONSchema.Schema), `"Data Analyst"`) {
		t.Error("the decision request has no JSON schema listing the options")
	}
	// Each answer streams as its own llm.stream event, tagged with the
	// supervisor's agent_id.
	streams := withAction(sink.events(models.CategoryLLM), models.ActionStream)
	if len(streams) != 2 || streams[0].Data["content"] != `{"action":"dispatch","target":"ghost"}` || streams[1].Data["agent_id"] != "ts" || streams[1].Data["attempt"] != int32(1) {
		t.Errorf("llm events = %+v", streams)
	}
	events := sink.events(models.CategoryDispatch, models.CategorySystem)
	if len(events) != 1 || events[0].Event.String() != "dispatch.worker" || events[0].Data["worker_agent_id"] != "w-a" || events[0].Data["instruction"] != "analyse" {
		t.Errorf("events = %+v", events)
	}
}

func TestDecideFallsBackWithAWarning(t *testing.T) {
	fake := &fakeLLM{answers: []string{"I cannot decide."}}
	sink := &fakeSink{}
	env := newActivityEnv(&Activities{LLM: fake, Events: sink})
	val, err := env.ExecuteActivity((&Activities{}).Decide, teamDecideInput())
	if err != nil {
		t.Fatal(err)
	}
	var d models.Decision
	if err := val.Get(&d); err != nil {
		t.Fatal(err)
	}
	// The first option not done yet; searcher is done.
	if d.Action != models.DecisionDispatch || d.Target != "Data Analyst" || !strings.Contains(d.Warning, "no valid decision after 2 corrections") {
		t.Errorf("decision = %+v", d)
	}
	if len(fake.requests) != maxCorrections+1 {
		t.Errorf("asked %d times, want %d", len(fake.requests), maxCorrections+1)
	}
	if streams := withAction(sink.events(models.CategoryLLM), models.ActionStream); len(streams) != maxCorrections+1 {
		t.Errorf("want one llm.stream event per answer, got %+v", streams)
	}
	events := sink.events(models.CategoryDispatch, models.CategorySystem)
	if len(events) != 2 || events[0].Event.String() != "system.warning" || events[1].Event.String() != "dispatch.worker" {
		t.Errorf("events = %+v", events)
	}
}

func TestLLMFailuresAreClassified(t *testing.T) {
	in := models.RespondInput{
		RunID: "r1", Purpose: models.PurposeWorker, Task: "t",
		Agent:      models.Agent{AgentID: "w-1", Name: "writer", Model: "gpt-x"},
		Source:     models.Source{AgentID: "w-1", AgentType: models.AgentTypeWorker, AgentName: "writer"},
		RunOptions: models.RunOptions{RetryMax: 30 * time.Second},
	}
	for _, tc := range []struct {
		err       *llm.Error
		retryable bool
		delay     time.Duration
		typ       string
	}{
		// A provider asking for an hour (or for a date years away) gets
		// LLM_RETRY_MAX.
		{&llm.Error{Provider: "openai", Model: "gpt-x", StatusCode: 429, Retryable: true, RetryAfter: time.Hour, Message: "come back later"}, true, 30 * time.Second, models.ErrLLMUnavailable},
		{&llm.Error{Provider: "openai", Model: "gpt-x", StatusCode: 429, Retryable: true, RetryAfter: 75 * 365 * 24 * time.Hour, Message: "see you in 2099"}, true, 30 * time.Second, models.ErrLLMUnavailable},
		// The provider refusing the key is told apart from a bad request.
		{&llm.Error{Provider: "openai", Model: "gpt-x", StatusCode: 401, Message: "bad key"}, false, 0, models.ErrLLMKeyRejected},
		{&llm.Error{Provider: "aws_bedrock", Model: "gpt-x", StatusCode: 403, Message: "AccessDeniedException"}, false, 0, models.ErrLLMKeyRejected},
		{&llm.Error{Provider: "openai", Model: "gpt-x", StatusCode: 400, Message: "bad request"}, false, 0, models.ErrLLMRejected},
		{&llm.Error{Provider: "openai", Model: "gpt-x", StatusCode: 429, Retryable: true, RetryAfter: 3 * time.Second, Message: "slow down"}, true, 3 * time.Second, models.ErrLLMUnavailable},
		{&llm.Error{Provider: "openai", Model: "gpt-x", Retryable: true, Message: "connection reset"}, true, 0, models.ErrLLMUnavailable},
	} {
		env := newActivityEnv(&Activities{LLM: &fakeLLM{err: tc.err}})
		_, err := env.ExecuteActivity((&Activities{}).Respond, in)
		var appErr *temporal.ApplicationError
		if !errors.As(err, &appErr) {
			t.Fatalf("%v: not an application error: %v", tc.err, err)
		}
		if appErr.NonRetryable() == tc.retryable || appErr.NextRetryDelay() != tc.delay {
			t.Errorf("%v: non-retryable %v, next delay %v", tc.err, appErr.NonRetryable(), appErr.NextRetryDelay())
		}
		if appErr.Type() != tc.typ {
			t.Errorf("%v: failure type %q, want %q", tc.err, appErr.Type(), tc.typ)
		}
		for _, want := range []string{`"writer"`, "w-1", `"gpt-x"`} {
			if !strings.Contains(appErr.Error(), want) {
				t.Errorf("%q does not name %s", appErr.Error(), want)
			}
		}
	}
}
