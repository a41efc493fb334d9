package e2e

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/op-stack/executor/config"
	"github.com/op-stack/executor/llm/llmfake"
	"github.com/op-stack/executor/models"
)

// TestModelFallback: model-a's provider answers 500 to every call; after
// two failures its circuit opens (visible in /metrics and /readyz) and every
// agent moves on to its fallback model-b, served by another provider. The
// run completes, the stream says llm.fallback, and the results name model-b.
func TestModelFallback(t *testing.T) {
	reg := prometheus.NewRegistry()
	rules := append([]llmfake.Rule{{Name: "model-a is down", Model: "model-a", Responses: []llmfake.Response{{Status: 500}}}}, referenceRules(nil)...)
	e := newEnv(t, rules, withAPIMetrics(reg), withWorkerMetrics, withConfig(func(c *config.Config) {
		// model-a on the compatible provider (the same fake), model-b on
		// openai: a circuit per provider.
		c.CompatibleBaseURL = c.OpenAIBaseURL
		c.LLMModels = "model-a=compatible"
		c.LLMBreakerFailures = 2
		c.LLMBreakerCooldown = 10 * time.Minute
	}))
	body := referenceHierarchy()
	var agents []map[string]any
	agents = append(agents, body["global_supervisor_agent"].(map[string]any))
	for _, team := range body["teams"].([]any) {
		tm := team.(map[string]any)
		agents = append(agents, tm["team_supervisor_agent"].(map[string]any))
		for _, w := range tm["workers"].([]any) {
			agents = append(agents, w.(map[string]any))
		}
	}
	for _, a := range agents {
		a["model"] = "model-a"
		a["fallback_models"] = []string{"model-b"}
	}
	id := e.startRun(e.createHierarchy(body), "fallback")
	v := e.waitRun(id, 2*time.Minute)
	if v.Status != models.RunCompleted {
		t.Fatalf("run ended %s: %s", v.Status, v.Error)
	}
	var fallbacks int
	for _, m := range e.streamAll(id) {
		if m.Type == "llm.fallback" {
			fallbacks++
			if d := m.Event.Data; d["from"] != "model-a" || d["to"] != "model-b" || d["why"] != "circuit_open" {
				t.Errorf("llm.fallback %v", d)
			}
		}
	}
	if fallbacks == 0 {
		t.Error("the stream has no llm.fallback")
	}
	if v.Result == nil {
		t.Fatal("no result")
	}
	for _, team := range v.Result.Teams {
		for _, w := range team.Workers {
			if w.Model != "model-b" {
				t.Errorf("worker %s answered with %q, want model-b", w.Name, w.Model)
			}
		}
	}
	var failedA int
	for _, c := range e.fake.Calls() {
		if c.Model == "model-a" {
			failedA++
		}
	}
	if failedA != 2 {
		t.Errorf("model-a was called %d times, want 2 (the circuit fails the rest fast)", failedA)
	}
	resp, err := http.Get(e.rootURL() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	metrics, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{`executor_llm_circuit_state{provider="compatible"} 2`, `executor_llm_circuit_openings_total{provider="compatible"} 1`, `executor_llm_circuit_state{provider="openai"} 0`} {
		if !strings.Contains(string(metrics), want) {
			t.Errorf("/metrics lacks %s:\n%s", want, grepLines(string(metrics), "circuit"))
		}
	}
}

// TestModelFallbackRetriesExhausted: the searcher's model-a answers 500 to
// every call, and its circuit stays closed (threshold 100); the activity
// retries, and on its last attempt (of 3) the call moves to model-b: three
// calls to model-a, two llm.retry, one llm.fallback with why
// retries_exhausted, the searcher's answer from model-b, and a closed
// circuit.
func TestModelFallbackRetriesExhausted(t *testing.T) {
	reg := prometheus.NewRegistry()
	rules := append([]llmfake.Rule{{Name: "model-a is down", Model: "model-a", Responses: []llmfake.Response{{Status: 500}}}}, referenceRules(nil)...)
	e := newEnv(t, rules, withAPIMetrics(reg), withWorkerMetrics, withConfig(func(c *config.Config) {
		c.CompatibleBaseURL = c.OpenAIBaseURL
		c.LLMModels = "model-a=compatible"
		c.LLMBreakerFailures = 100
		c.LLMBreakerCooldown = 10 * time.Minute
		c.LLMMaxAttempts = 3
	}))
	body := referenceHierarchy()
	searcher := body["teams"].([]any)[0].(map[string]any)["workers"].([]any)[0].(map[string]any)
	searcher["model"] = "model-a"
	searcher["fallback_models"] = []string{"model-b"}
	id := e.startRun(e.createHierarchy(body), "fallback after retries")
	v := e.waitRun(id, 2*time.Minute)
	if v.Status != models.RunCompleted {
		t.Fatalf("run ended %s: %s", v.Status, v.Error)
	}

	var calledA, calledB int
	for _, c := range e.fake.Calls() {
		switch c.Model {
		case "model-a":
			calledA++
		case "model-b":
			calledB++
		}
	}
	if calledA != 3 || calledB != 1 {
		t.Errorf("model-a called %d times, model-b %d; want 3 and 1", calledA, calledB)
	}
	var retries, fallbacks []map[string]any
	for _, m := range e.streamAll(id) {
		switch m.Type {
		case "llm.retry":
			retries = append(retries, m.Event.Data)
			if m.Event.Source.AgentID != "w-searcher" {
				t.Errorf("llm.retry from %s", m.Event.Source.AgentID)
			}
		case "llm.fallback":
			fallbacks = append(fallbacks, m.Event.Data)
			if m.Event.Source.AgentID != "w-searcher" {
				t.Errorf("llm.fallback from %s", m.Event.Source.AgentID)
			}
		}
	}
	if len(retries) != 2 {
		t.Errorf("llm.retry events = %v, want 2", retries)
	}
	if len(fallbacks) != 1 {
		t.Fatalf("llm.fallback events = %v, want 1", fallbacks)
	}
	if d := fallbacks[0]; d["from"] != "model-a" || d["to"] != "model-b" || d["why"] != "retries_exhausted" || !strings.Contains(d["error"].(string), "500") {
		t.Errorf("llm.fallback %v", d)
	}
	if v.Result == nil || len(v.Result.Teams) == 0 {
		t.Fatal("no result")
	}
	var answered string
	for _, w := range v.Result.Teams[0].Workers {
		if w.AgentID == "w-searcher" {
			answered = w.Model
		}
	}
	if answered != "model-b" {
		t.Errorf("the searcher answered with %q, want model-b", answered)
	}
	resp, err := http.Get(e.rootURL() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	metrics, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(metrics), `executor_llm_circuit_state{provider="compatible"} 0`) ||
		strings.Contains(string(metrics), `executor_llm_circuit_openings_total{provider="compatible"} 1`) {
		t.Errorf("the compatible provider's circuit is not closed:\n%s", grepLines(string(metrics), "circuit"))
	}
}
