package e2e

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/op-stack/executor/config"
	"github.com/op-stack/executor/llm/llmfake"
	"github.com/op-stack/executor/models"
)

// TestMemoryAcrossThreads: long-term memory carries a fact from one thread
// to the next, through the real API, worker and fake model server over
// HTTP, which also serves /v1/embeddings (MEMORY_EMBEDDING_MODEL set, so
// semantic search is on). Thread 1's searcher saves the user's favourite
// colour with memory_save; thread 2 (a new run, not a follow-up) of the
// same user finds it with memory_search and uses it in its answer; a third
// run for another user (metadata user_id) searches its own namespace and
// finds nothing. The global supervisor of a fourth run has the fact
// preloaded into its prompt (memory.preload). Deleting thread 1's run
// deletes the memory it wrote.
func TestMemoryAcrossThreads(t *testing.T) {
	searcher := []llmfake.Rule{
		{Name: "searcher uses the tool's answer", SystemContains: "W-SEARCHER", HasToolResult: true,
			Responses: []llmfake.Response{{Content: "From memory:", EchoToolResult: true}}},
		{Name: "searcher saves", SystemContains: "W-SEARCHER", UserContains: "Remember",
			Responses: []llmfake.Response{{ToolCalls: []llmfake.ToolCall{toolCall(models.MemorySaveToolName,
				`{"key":"favourite_colour","value":{"fact":"the user's favourite colour is teal","kind":"preference"}}`)}}}},
		{Name: "searcher searches", SystemContains: "W-SEARCHER",
			Responses: []llmfake.Response{{ToolCalls: []llmfake.ToolCall{toolCall(models.MemorySearchToolName, `{"query":"which colour does the user like best"}`)}}}},
	}
	rules := append(searcher, referenceRulesByState(func(c string) llmfake.Response { return llmfake.Response{Content: c} }, nil)...)
	e := newEnv(t, rules, withConfig(func(c *config.Config) {
		c.MemoryEmbeddingModel = "fake-embedding"
		c.MemoryEmbeddingDimensions = 64
	}))
	body := referenceHierarchy()
	body["memory"] = map[string]any{"namespaces": [][]string{{"users", "{user_id}"}}, "preload": 3}
	body["teams"].([]any)[0].(map[string]any)["workers"].([]any)[0].(map[string]any)["tools"] = []string{models.MemorySaveToolName, models.MemorySearchToolName}
	hid := e.createHierarchy(body)

	start := func(task, user string) string {
		t.Helper()
		var out struct {
			ID string `json:"id"`
		}
		e.mustPost("/runs/start", map[string]any{"hierarchy_id": hid, "task": task, "metadata": map[string]string{"user_id": user}}, &out)
		if v := e.waitRun(out.ID, time.Minute); v.Status != models.RunCompleted {
			t.Fatalf("run %q ended %s: %s", task, v.Status, v.Error)
		}
		return out.ID
	}
	// A run of a hierarchy whose namespaces name {user_id} must say whose.
	if status, env := e.post("/runs/start", map[string]any{"hierarchy_id": hid, "task": "x"}); status != http.StatusBadRequest || !strings.Contains(env.Message, "metadata.user_id") {
		t.Errorf("start without user_id: %d %s", status, env.Message)
	}

	embeddingsBefore := llmfake.EmbeddingCalls()
	first := start("Remember that my favourite colour is teal", "u-42")
	var item struct {
		Value struct {
			Fact string `json:"fact"`
		} `json:"value"`
	}
	e.mustPost("/memory/get", map[string]any{"namespace": []string{"users", "u-42"}, "key": "favourite_colour"}, &item)
	if item.Value.Fact != "the user's favourite colour is teal" {
		t.Fatalf("saved item = %+v", item)
	}

	second := start("Pick a colour for my new bike", "u-42")
	if llmfake.EmbeddingCalls() <= embeddingsBefore+1 {
		t.Errorf("the fake's /embeddings was called %d times: the save and the search both embed", llmfake.EmbeddingCalls()-embeddingsBefore)
	}
	out := searcherOutput(t, e, second)
	if !strings.Contains(out, "teal") {
		t.Errorf("thread 2's searcher did not use the fact: %q", out)
	}
	// The model was shown the fact as memory_search's result.
	shown := false
	for _, c := range e.fake.Calls() {
		for _, m := range c.Messages {
			if m.Role == "tool" && strings.Contains(m.Content, "favourite colour is teal") && strings.Contains(c.Messages[1].Content, "bike") {
				shown = true
			}
		}
	}
	if !shown {
		t.Error("no model request of thread 2 carried memory_search's result")
	}
	var tr struct {
		Data map[string]any `json:"data"`
	}
	found := false
	for _, ev := range e.storedEvents(second) {
		if ev.Event.Action == models.ActionToolResult && ev.Data["tool_name"] == models.MemorySearchToolName {
			raw, _ := json.Marshal(ev.Data)
			found = strings.Contains(string(raw), "teal")
		}
	}
	_ = tr
	if !found {
		t.Error("no llm.tool_result event of memory_search with the fact in thread 2")
	}

	other := start("Pick a colour for my new bike", "u-7")
	if out := searcherOutput(t, e, other); strings.Contains(out, "teal") || !strings.Contains(out, `"results":[]`) {
		t.Errorf("another user's run found %q", out)
	}

	// Preload: the global supervisor's first decision of a new run shows
	// the fact.
	preloaded := start("Suggest a colour for the living room", "u-42")
	_ = preloaded
	seen := false
	for _, c := range e.fake.Calls() {
		for _, m := range c.Messages {
			if m.Role == "user" && strings.Contains(m.Content, "living room") && strings.Contains(m.Content, "From long-term memory") && strings.Contains(m.Content, "teal") {
				seen = true
			}
		}
	}
	if !seen {
		t.Error("the global supervisor's prompt did not show the preloaded memory")
	}

	// Deleting the run that wrote the fact deletes the fact.
	e.mustPost("/runs/delete", map[string]any{"id": first}, nil)
	if status, env := e.post("/memory/get", map[string]any{"namespace": []string{"users", "u-42"}, "key": "favourite_colour"}); status != http.StatusNotFound || !strings.Contains(env.Message, "not found") {
		t.Errorf("memory of a deleted run: %d %s", status, env.Message)
	}
}

// searcherOutput is what run id's searcher answered.
func searcherOutput(t *testing.T, e *testEnv, id string) string {
	t.Helper()
	var msgs struct {
		Messages []struct {
			AgentID string `json:"agent_id"`
			Content string `json:"content"`
		} `json:"messages"`
	}
	e.mustPost("/runs/messages", map[string]any{"id": id}, &msgs)
	for _, m := range msgs.Messages {
		if m.AgentID == "w-searcher" {
			return m.Content
		}
	}
	t.Fatalf("run %s has no message of the searcher: %+v", id, msgs)
	return ""
}

// TestConsoleMemory drives the console's memory page in headless
// Chromium: it lists the tenant's namespaces and items, saves an edited
// value (memory/put), deletes an item (memory/delete) and adds one from
// its form; the API reads back each change. No script fails.
func TestConsoleMemory(t *testing.T) {
	e := newEnv(t, accessRules())
	e.mustPost("/memory/put", map[string]any{"namespace": []string{"users", "u-1"}, "key": "drink", "value": map[string]any{"fact": "tea"}}, nil)
	e.mustPost("/memory/put", map[string]any{"namespace": []string{"users", "u-2"}, "key": "pet", "value": map[string]any{"fact": "a cat"}}, nil)

	b := newBrowser(t)
	b.do("open the memory page", chromedp.Navigate(e.rootURL()+"/memory"))
	b.waitJS("the memory page", `document.body.dataset.ready === 'true'`, 30*time.Second)
	spaces := eval[[]string](b, `[...document.querySelectorAll('#memory-namespaces a[data-namespace]')].map((a) => a.dataset.namespace)`)
	if strings.Join(spaces, ",") != "users/u-1,users/u-2" || !eval[bool](b, `!!document.querySelector('#nav-memory.current')`) {
		t.Errorf("namespaces shown = %v", spaces)
	}
	b.waitJS("both items", `document.querySelectorAll('#memory-results tr[data-key]').length === 2`, 30*time.Second)

	// Edit u-1's value and save it.
	eval[bool](b, `(() => { const r = document.querySelector('#memory-results tr[data-key="drink"]');
	  r.querySelector('textarea').value = '{"fact": "green tea"}'; r.querySelector('button.memory-save').click(); return true; })()`)
	waitFor(t, 30*time.Second, "the edited value", func() bool {
		var it struct {
			Value map[string]string `json:"value"`
		}
		e.mustPost("/memory/get", map[string]any{"namespace": []string{"users", "u-1"}, "key": "drink"}, &it)
		return it.Value["fact"] == "green tea"
	})

	// Delete u-2's item (the confirmation answered yes).
	eval[bool](b, `(() => { window.confirm = () => true;
	  document.querySelector('#memory-results tr[data-key="pet"] button.memory-delete').click(); return true; })()`)
	waitFor(t, 30*time.Second, "the deleted item gone", func() bool {
		status, _ := e.post("/memory/get", map[string]any{"namespace": []string{"users", "u-2"}, "key": "pet"})
		return status == http.StatusNotFound
	})

	// Add an item from the form.
	eval[bool](b, `(() => { document.getElementById('memory-new-namespace').value = 'teams/research';
	  document.getElementById('memory-new-key').value = 'sun'; document.getElementById('memory-new-value').value = '{"fact": "a star"}';
	  document.getElementById('memory-add-button').click(); return true; })()`)
	b.waitJS("the new item listed", `!!document.querySelector('#memory-results tr[data-key="sun"]')`, 30*time.Second)
	var it struct {
		Value map[string]string `json:"value"`
	}
	e.mustPost("/memory/get", map[string]any{"namespace": []string{"teams", "research"}, "key": "sun"}, &it)
	if it.Value["fact"] != "a star" {
		t.Errorf("added item = %+v", it)
	}
	b.screenshot("console-memory")
	if errs := b.pageErrors(); len(errs) > 0 {
		t.Errorf("page errors: %v", errs)
	}
}
