package e2e

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/op-stack/executor/llm/llmfake"
)

func delegateWithContext(name, task string, context map[string]any) llmfake.ToolCall {
	raw, _ := json.Marshal(map[string]any{"name": name, "task": task, "context": context})
	return toolCall("delegate", string(raw))
}

// TestSubAgentRecursionAndContext: a sub-agent that lists itself delegates
// to itself (recursion, not a cycle) until its max_depth refuses the next
// level; each level sees the context its caller passed.
func TestSubAgentRecursionAndContext(t *testing.T) {
	e := newEnv(t, nil)
	rules := []llmfake.Rule{
		{Name: "searcher after", SystemContains: "W-SEARCHER", HasToolResult: true, Responses: contentResponses("searcher: done")},
		{Name: "searcher first", SystemContains: "W-SEARCHER", Responses: []llmfake.Response{
			{ToolCalls: []llmfake.ToolCall{delegateWithContext("recurser", "dig", map[string]any{"topic": "tunnelling", "level": 1})}},
		}},
		{Name: "recurser after", SystemContains: "SUB-RECURSER", HasToolResult: true, Responses: contentResponses("recurser: done")},
		{Name: "recurser first", SystemContains: "SUB-RECURSER", Responses: []llmfake.Response{
			{ToolCalls: []llmfake.ToolCall{delegateWithContext("recurser", "dig deeper", map[string]any{"topic": "tunnelling", "deeper": true})}},
		}},
	}
	e.fake.SetRules(append(rules, referenceRules(nil)...)...)
	e.mustPost("/subagents/create", map[string]any{"id": "sa-rec", "name": "recurser", "system_prompt": "SUB-RECURSER You dig.", "max_depth": 2, "sub_agents": []string{"recurser"}}, nil)
	body := referenceHierarchy()
	searcher := body["teams"].([]any)[0].(map[string]any)["workers"].([]any)[0].(map[string]any)
	searcher["sub_agents"] = []string{"recurser"}
	id := e.startRun(e.createHierarchy(body), "recursion")
	msgs := e.streamAll(id)
	if last := msgs[len(msgs)-1].Type; last != "lifecycle.completed" {
		t.Fatalf("run ended with %s", last)
	}
	depths := map[int]bool{}
	var warnings []string
	for _, m := range msgs {
		if m.Event.Source.AgentID == "sa-rec" && m.Type == "llm.stream" {
			depths[m.Event.Source.Depth] = true
		}
		if m.Type == "system.warning" {
			warnings = append(warnings, m.Event.Data["message"].(string))
		}
	}
	if len(depths) != 2 || !depths[3] || !depths[4] {
		t.Errorf("recurser streamed at depths %v, want 3 and 4 (max_depth 2)", depths)
	}
	joined := strings.Join(warnings, "\n")
	if !strings.Contains(joined, "depth") || strings.Contains(joined, "cycle") {
		t.Errorf("warnings:\n%s", joined)
	}
	var sawFirst, sawDeeper bool
	for _, c := range callsMatching(e.fake.Calls(), "SUB-RECURSER") {
		u := lastUser(c)
		sawFirst = sawFirst || strings.Contains(u, `Context from your caller (JSON):`+"\n"+`{"level":1,"topic":"tunnelling"}`)
		sawDeeper = sawDeeper || strings.Contains(u, `{"deeper":true,"topic":"tunnelling"}`)
	}
	if !sawFirst || !sawDeeper {
		t.Errorf("the recurser's prompts lack their callers' context (first %v, deeper %v)", sawFirst, sawDeeper)
	}
}
