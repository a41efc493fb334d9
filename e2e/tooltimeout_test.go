package e2e

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/op-stack/executor/config"
	"github.com/op-stack/executor/llm/llmfake"
	"github.com/op-stack/executor/models"
)

// TestToolTimeoutIsAnErrorResult: http_get of a server that never answers
// outlives TOOL_CALL_TIMEOUT on every attempt; the searcher gets an error
// tool result naming the timeout, answers, and the run completes.
func TestToolTimeoutIsAnErrorResult(t *testing.T) {
	hang := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { <-r.Context().Done() }))
	t.Cleanup(hang.Close)
	e := newEnv(t, nil, withConfig(func(c *config.Config) {
		c.ToolCallTimeout = time.Second
		c.ToolsHTTPAllowPrivate = true
		c.ToolsHTTPTimeout = time.Minute
	}))
	rules := []llmfake.Rule{
		{Name: "searcher after", SystemContains: "W-SEARCHER", HasToolResult: true, Responses: contentResponses("searcher: the source did not answer")},
		{Name: "searcher first", SystemContains: "W-SEARCHER", Responses: []llmfake.Response{
			{ToolCalls: []llmfake.ToolCall{toolCall("http_get", `{"url":"`+hang.URL+`/slow"}`)}},
		}},
	}
	e.fake.SetRules(append(rules, referenceRules(nil)...)...)
	body := referenceHierarchy()
	searcher := body["teams"].([]any)[0].(map[string]any)["workers"].([]any)[0].(map[string]any)
	searcher["tools"] = []string{"http_get"}
	id := e.startRun(e.createHierarchy(body), "tool timeout")
	msgs := e.streamAll(id)
	if last := msgs[len(msgs)-1].Type; last != "lifecycle.completed" {
		t.Fatalf("run ended with %s", last)
	}
	var call, result map[string]any
	for _, m := range msgs {
		switch m.Type {
		case "llm.tool_call":
			call = m.Event.Data
		case "llm.tool_result":
			result = m.Event.Data
		}
	}
	if call == nil || result == nil || call["execution_id"] != result["execution_id"] || result["is_error"] != true || result["status"] != "failed" {
		t.Fatalf("tool_call %+v, tool_result %+v", call, result)
	}
	if msg, _ := result["error"].(string); !strings.Contains(msg, "tool http_get timed out") || !strings.Contains(msg, "start-to-close timeout of 1s") {
		t.Errorf("error = %q", msg)
	}
	saw := false
	for _, c := range callsMatching(e.fake.Calls(), "W-SEARCHER") {
		for _, m := range c.Messages {
			saw = saw || (m.Role == "tool" && strings.Contains(m.Content, "error: tool http_get timed out"))
		}
	}
	if !saw {
		t.Error("the searcher never saw the timeout as its tool result")
	}
	if v := e.getRun(id); v.Status != models.RunCompleted || v.Result.Teams[0].Status != models.TeamCompleted {
		t.Errorf("run %s, research %s", v.Status, v.Result.Teams[0].Status)
	}
}
