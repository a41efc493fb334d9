package e2e

import (
	"strings"
	"testing"
	"time"

	"github.com/op-stack/executor/config"
	"github.com/op-stack/executor/llm/llmfake"
	"github.com/op-stack/executor/models"
)

// standInHierarchy is the reference hierarchy with the global supervisor
// on model-gs and the research team's supervisor on model-ts, served by
// another provider.
func standInHierarchy() map[string]any {
	body := referenceHierarchy()
	body["global_supervisor_agent"].(map[string]any)["model"] = "model-gs"
	research := body["teams"].([]any)[0].(map[string]any)
	research["team_supervisor_agent"].(map[string]any)["model"] = "model-ts"
	return body
}

// standInRules: model-ts answers 500 to every call; everything else as in
// the reference run (the research decisions by their prompt, whichever
// model asks).
func standInRules() []llmfake.Rule {
	return append([]llmfake.Rule{{Name: "model-ts is down", Model: "model-ts", Responses: []llmfake.Response{{Status: 500}}}}, referenceRules(nil)...)
}

func standInConfig(c *config.Config) {
	// model-ts on the compatible provider (the same fake), the rest on
	// openai.
	c.CompatibleBaseURL = c.OpenAIBaseURL
	c.LLMModels = "model-ts=compatible"
	c.LLMBreakerFailures = 100
	c.LLMMaxAttempts = 2
}

// TestSupervisorReassignment (spec 001, error recovery 3; issue 23 item
// 13): the research team's supervisor's model fails for good (500 on each
// of its 2 attempts, no fallback models). Its routing passes to the global
// supervisor's model with the research supervisor's prompt; the stream
// says so with system.supervisor_reassigned (both agent_ids, both models),
// model-ts is not asked again in the turn, and the run completes with
// both research workers' outputs and a warning.
func TestSupervisorReassignment(t *testing.T) {
	e := newEnv(t, standInRules(), withConfig(standInConfig))
	id := e.startRun(e.createHierarchy(standInHierarchy()), "Explain quantum tunnelling")
	v := e.waitRun(id, 2*time.Minute)
	if v.Status != models.RunCompleted {
		t.Fatalf("run ended %s: %s", v.Status, v.Error)
	}
	var onTS, standIn int
	for _, c := range e.fake.Calls() {
		switch {
		case c.Model == "model-ts":
			onTS++
		case c.Model == "model-gs" && c.RuleName == "research decisions":
			standIn++
		}
	}
	// One decision fails on both attempts; the stand-in makes the turn's
	// two decisions (searcher, then analyst; with prevent_duplicate the
	// turn then ends without asking).
	if onTS != 2 || standIn != 2 {
		t.Errorf("model-ts called %d times (want 2), the stand-in decided %d times (want 2)", onTS, standIn)
	}
	var reassigned []sseMessage
	msgs := e.streamAll(id)
	checkLog(t, id, msgs)
	for _, m := range msgs {
		if m.Type == "system.supervisor_reassigned" {
			reassigned = append(reassigned, m)
		}
	}
	if len(reassigned) != 1 {
		t.Fatalf("system.supervisor_reassigned events: %d, want 1", len(reassigned))
	}
	ev := reassigned[0].Event
	d := ev.Data
	if ev.Source.AgentID != "ts-research" || ev.Source.AgentType != models.AgentTypeTeamSupervisor ||
		d["agent_id"] != "ts-research" || d["stand_in_agent_id"] != "gs-1" || d["team_name"] != "research" ||
		d["from_model"] != "model-ts" || d["to_model"] != "model-gs" || !strings.Contains(d["error"].(string), "500") {
		t.Errorf("system.supervisor_reassigned = %+v from %+v", d, ev.Source)
	}
	if v.Result == nil || len(v.Result.Teams) != 2 || v.Result.Teams[0].Status != models.TeamCompleted || len(v.Result.Teams[0].Workers) != 2 {
		t.Fatalf("result teams = %+v", v.Result)
	}
	warned := false
	for _, w := range v.Result.Warnings {
		warned = warned || strings.Contains(w, `its routing passes to the global supervisor's model "model-gs"`)
	}
	if !warned {
		t.Errorf("warnings = %q", v.Result.Warnings)
	}
	// Stored like every other event.
	stored := 0
	for _, ev := range e.storedEvents(id) {
		if ev.Event.Action == models.ActionSupervisorReassigned {
			stored++
		}
	}
	if stored != 1 {
		t.Errorf("%d system.supervisor_reassigned events stored, want 1", stored)
	}
}
