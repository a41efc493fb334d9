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
