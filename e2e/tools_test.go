package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/op-stack/executor/llm/llmfake"
	"github.com/op-stack/executor/models"
	"github.com/op-stack/executor/store"
)

func toolCall(name, args string) llmfake.ToolCall {
	return llmfake.ToolCall{Name: name, Arguments: args}
}

func delegateCall(name, task string) llmfake.ToolCall {
	raw, _ := json.Marshal(map[string]string{"name": name, "task": task})
	return toolCall("delegate", string(raw))
}

// startToolsRun starts a run whose searcher calls three tools in one turn
// (one fails), then delegates to a sub-agent that delegates again; the
// deepest one tries a cycle, a too-deep sub-agent and one not on its
// allowlist.
func startToolsRun(t *testing.T) (*testEnv, string) {
	var rules []llmfake.Rule
	e := newEnv(t, nil)
	// The searcher: round 1 three tools; round 2 delegate; round 3 answer.
	rules = append(rules,
		llmfake.Rule{Name: "searcher after tools", SystemContains: "W-SEARCHER", HasToolResult: true, Responses: []llmfake.Response{
			{ToolCalls: []llmfake.ToolCall{delegateCall("researcher", "research tunnelling")}},
			{Content: "searcher: 42, and the research says tunnelling is real"},
		}},
		llmfake.Rule{Name: "searcher first", SystemContains: "W-SEARCHER", Responses: []llmfake.Response{
			{ToolCalls: []llmfake.ToolCall{
				toolCall("calculator", `{"expression":"2*21"}`),
				toolCall("current_time", `{"timezone":"Europe/Paris"}`),
				toolCall("http_get", `{"url":"`+e.fake.RootURL()+`/secret"}`),
			}},
		}},
		llmfake.Rule{Name: "researcher after", SystemContains: "SUB-RESEARCHER", HasToolResult: true, Responses: contentResponses("researcher: checked and summarised")},
		llmfake.Rule{Name: "researcher first", SystemContains: "SUB-RESEARCHER", Responses: []llmfake.Response{
			{ToolCalls: []llmfake.ToolCall{delegateCall("checker", "check the facts")}},
		}},
		llmfake.Rule{Name: "checker after", SystemContains: "SUB-CHECKER", HasToolResult: true, Responses: contentResponses("checker: facts hold")},
		llmfake.Rule{Name: "checker first", SystemContains: "SUB-CHECKER", Responses: []llmfake.Response{
			{ToolCalls: []llmfake.ToolCall{delegateCall("researcher", "loop"), delegateCall("deep", "go deeper"), delegateCall("ghost", "boo")}},
		}},
	)
	e.fake.SetRules(append(rules, referenceRules(nil)...)...)

	// A sub-agent may only name existing sub-agents, so the cycle
	// researcher → checker → researcher is closed by an update.
	researcher := map[string]any{"id": "sa-researcher", "name": "researcher", "system_prompt": "SUB-RESEARCHER You research."}
	for _, sa := range []map[string]any{
		researcher,
		{"id": "sa-deep", "name": "deep", "system_prompt": "SUB-DEEP", "max_depth": 2},
		{"id": "sa-checker", "name": "checker", "system_prompt": "SUB-CHECKER You check.", "sub_agents": []string{"researcher", "deep"}},
	} {
		e.mustPost("/subagents/create", sa, nil)
	}
	researcher["sub_agents"] = []string{"checker"}
	e.mustPost("/subagents/update", researcher, nil)
	body := referenceHierarchy()
	searcher := body["teams"].([]any)[0].(map[string]any)["workers"].([]any)[0].(map[string]any)
	searcher["tools"] = []string{"calculator", "current_time", "http_get"}
	searcher["sub_agents"] = []string{"researcher"}
	id := e.startRun(e.createHierarchy(body), "tools")
	return e, id
}

// TestToolsAndSubAgents runs startToolsRun's scenario: every tool call pairs
// with its result and every refusal reaches its model as an error result.
func TestToolsAndSubAgents(t *testing.T) {
	e, id := startToolsRun(t)
	msgs := e.streamAll(id)
	checkLog(t, id, msgs)
	if last := msgs[len(msgs)-1].Type; last != "lifecycle.completed" {
		t.Fatalf("run ended with %s", last)
	}

	// Tool calls and results pair up by tool_execution_id and name.
	calls, results := map[string]models.Event{}, map[string]models.Event{}
	var warnings []string
	paths := map[string]string{}
	for _, m := range msgs {
		ev := m.Event
		switch m.Type {
		case "llm.tool_call":
			calls[ev.Data["tool_execution_id"].(string)] = ev
		case "llm.tool_result":
			results[ev.Data["tool_execution_id"].(string)] = ev
		case "system.warning":
			warnings = append(warnings, ev.Data["message"].(string))
		}
		paths[ev.Source.AgentID] = strings.Join(ev.Source.Path, "/") + " depth " + itoa(ev.Source.Depth) + " " + ev.Source.AgentType
	}
	if len(calls) != 8 || len(results) != 8 {
		t.Errorf("%d tool calls and %d results, want 8 each (3 tools + 5 delegations)", len(calls), len(results))
	}
	byTool := map[string][]models.Event{}
	for execID, call := range calls {
		res, ok := results[execID]
		if !ok {
			t.Errorf("tool call %s has no result", execID)
			continue
		}
		if !strings.HasPrefix(execID, "exec_") || len(execID) != len("exec_")+12 {
			t.Errorf("tool_execution_id %q is not exec_ + 12 hex", execID)
		}
		if call.Data["tool_name"] != res.Data["tool_name"] || call.Source.AgentID != res.Source.AgentID || call.Sequence > res.Sequence {
			t.Errorf("call %+v does not pair with result %+v", call.Data, res.Data)
		}
		// Spec 004's names, next to the earlier ones.
		wantStatus := "completed"
		if res.Data["is_error"] == true {
			wantStatus = "failed"
		}
		if call.Data["execution_id"] != execID || res.Data["execution_id"] != execID || call.Data["status"] != "running" ||
			call.Data["tool_input"] == nil || res.Data["status"] != wantStatus || res.Data["call_id"] != call.Data["call_id"] {
			t.Errorf("spec 004 fields: call %+v result %+v", call.Data, res.Data)
		}
		byTool[call.Data["tool_name"].(string)] = append(byTool[call.Data["tool_name"].(string)], res)
	}
	// The calculator answers JSON: spec 004's result is that object, not a
	// string holding it.
	if r := byTool["calculator"]; len(r) != 1 || r[0].Data["is_error"] != false {
		t.Errorf("calculator result = %+v", r)
	} else if obj, ok := r[0].Data["result"].(map[string]any); !ok || fmt.Sprint(obj["result"]) != "42" {
		t.Errorf("calculator result = %#v, want the object {expression, result: 42}", r[0].Data["result"])
	}
	if r := byTool["current_time"]; len(r) != 1 || !strings.Contains(resultText(r[0].Data["result"]), "Europe/Paris") {
		t.Errorf("current_time result = %+v", r)
	}
	if r := byTool["http_get"]; len(r) != 1 || r[0].Data["is_error"] != true || !strings.Contains(strings.ToLower(r[0].Data["error"].(string)), "loopback") {
		t.Errorf("http_get of a loopback URL = %+v", r)
	}
	if len(e.fake.Calls()) > 0 {
		for _, c := range e.fake.Calls() {
			if c.Path == "/secret" {
				t.Error("http_get reached the loopback server")
			}
		}
	}
	refusals := 0
	for _, r := range byTool["delegate"] {
		if r.Data["is_error"] == true {
			refusals++
		}
	}
	if len(byTool["delegate"]) != 5 || refusals != 3 {
		t.Errorf("delegations: %d, refused %d; want 5 and 3", len(byTool["delegate"]), refusals)
	}
	joined := strings.Join(warnings, "\n")
	for _, want := range []string{"cycle", "depth", "not on the allowlist"} {
		if !strings.Contains(joined, want) {
			t.Errorf("no %s refusal among the warnings:\n%s", want, joined)
		}
	}

	// Nested agents stream under their own path and depth.
	want := map[string]string{
		"w-searcher":    "gs-1/ts-research/w-searcher depth 2 worker",
		"sa-researcher": "gs-1/ts-research/w-searcher/sa-researcher depth 3 sub_agent",
		"sa-checker":    "gs-1/ts-research/w-searcher/sa-researcher/sa-checker depth 4 sub_agent",
		"gs-1":          "gs-1 depth 0 global_supervisor",
	}
	for agent, p := range want {
		if paths[agent] != p {
			t.Errorf("%s streams as %q, want %q", agent, paths[agent], p)
		}
	}

	// Each turn's output is a message under the id its stream carried, in
	// a tree: checker under researcher under searcher.
	streamIDs := map[string]string{}
	for _, m := range msgs {
		if m.Type == "llm.stream" {
			if mid, ok := m.Event.Data["message_id"].(string); ok {
				streamIDs[m.Event.Source.AgentID] = mid
			}
		}
	}
	var tree struct {
		Messages []*store.Message `json:"messages"`
	}
	e.mustPost("/runs/messages", map[string]any{"id": id}, &tree)
	find := func(list []*store.Message, agent string) *store.Message {
		for _, m := range list {
			if m.AgentID == agent {
				return m
			}
		}
		return nil
	}
	top := find(tree.Messages, "w-searcher")
	if top == nil || top.ID != streamIDs["w-searcher"] || !strings.Contains(top.Content, "searcher: 42") {
		t.Fatalf("searcher message = %+v (stream message_id %s)", top, streamIDs["w-searcher"])
	}
	research := find(top.Children, "sa-researcher")
	if research == nil || research.ID != streamIDs["sa-researcher"] || research.Depth != 3 || *research.ParentMessageID != top.ID {
		t.Fatalf("researcher message = %+v", research)
	}
	checker := find(research.Children, "sa-checker")
	if checker == nil || checker.Content != "checker: facts hold" || checker.Depth != 4 {
		t.Fatalf("checker message = %+v", checker)
	}
	if gs := find(tree.Messages, "gs-1"); gs == nil || !strings.Contains(gs.Content, "FINAL ANSWER") {
		t.Errorf("final answer message = %+v", gs)
	}
}

// TestRetriedTurnStoresOneMessage: the writer's stream is cut and retried;
// its message is stored once, with the retried attempt's output.
func TestRetriedTurnStoresOneMessage(t *testing.T) {
	full := strings.Repeat("complete ", 20)
	e := newEnv(t, referenceRules(map[string][]llmfake.Response{"W-WRITER": {{Content: full, DropAfterChunks: 6}, {Content: full}}}))
	id := e.startRun(e.createHierarchy(referenceHierarchy()), "retry")
	e.streamAll(id)
	tree, err := e.store.MessageTree(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	writers := 0
	for _, m := range tree {
		if m.AgentID == "w-writer" {
			writers++
			if m.Content != full {
				t.Errorf("writer message = %q", m.Content)
			}
		}
	}
	// Three workers and the final answer; the writer once.
	if writers != 1 || len(tree) != 4 {
		t.Errorf("%d writer messages, %d in all", writers, len(tree))
	}
}

func itoa(n int) string {
	raw, _ := json.Marshal(n)
	return string(raw)
}

// resultText is a tool result as text: a string as it is, a JSON value
// (spec 004's object) encoded as JSON.
func resultText(v any) string {
	if s, ok := v.(string); ok {
		return s
	}
	raw, _ := json.Marshal(v)
	return string(raw)
}
