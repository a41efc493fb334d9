package e2e

import (
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/op-stack/executor/config"
	"github.com/op-stack/executor/llm/llmfake"
	"github.com/op-stack/executor/models"
	"github.com/op-stack/executor/pricing"
)

// js quotes a Go value as a JavaScript literal.
func js(v any) string {
	raw, _ := json.Marshal(v)
	return string(raw)
}

// setField types value into the editor's input for an API field path (as
// a person would: input, then change when leaving it).
func (b *browser) setField(field, value string) {
	b.t.Helper()
	ok := eval[bool](b, fmt.Sprintf(`(() => {
	  const el = [...document.querySelectorAll('#hierarchy-form [data-field]')].find((e) => e.dataset.field === %s);
	  if (!el || !('value' in el)) return false;
	  el.value = %s;
	  el.dispatchEvent(new Event('input', { bubbles: true }));
	  el.dispatchEvent(new Event('change', { bubbles: true }));
	  return true; })()`, js(field), js(value)))
	if !ok {
		b.t.Fatalf("the editor has no input for %s", field)
	}
}

// clickJS clicks the element a JavaScript expression finds.
func (b *browser) clickJS(what, expr string) {
	b.t.Helper()
	if !eval[bool](b, `(() => { const el = `+expr+`; if (!el) return false; el.click(); return true; })()`) {
		b.t.Fatalf("%s: no element %s (page errors: %v)", what, expr, b.pageErrors())
	}
}

// editorJSON is the body the editor's JSON view holds.
func (b *browser) editorJSON() map[string]any {
	b.t.Helper()
	var body map[string]any
	if err := json.Unmarshal([]byte(eval[string](b, `document.getElementById('hierarchy-json').value`)), &body); err != nil {
		b.t.Fatalf("the JSON view is not JSON: %v", err)
	}
	return body
}

// setValue sets a form control outside the editor and tells the page.
func (b *browser) setValue(selector, value string) {
	b.t.Helper()
	if !eval[bool](b, fmt.Sprintf(`(() => { const el = document.querySelector(%s); if (!el) return false;
	  el.value = %s; el.dispatchEvent(new Event('input', { bubbles: true })); el.dispatchEvent(new Event('change', { bubbles: true })); return true; })()`,
		js(selector), js(value))) {
		b.t.Fatalf("no element %s", selector)
	}
}

// usageByAgent sums a stored log's llm.usage per agent.
func usageByAgent(events []models.Event) map[string][2]float64 {
	out := map[string][2]float64{}
	for _, ev := range events {
		if ev.Event.String() == "llm.usage" {
			s := out[ev.Source.AgentID]
			s[0] += number(ev.Data["total_tokens"])
			s[1] += number(ev.Data["cost_usd"])
			out[ev.Source.AgentID] = s
		}
	}
	return out
}

// TestConsoleStudio builds a two-team hierarchy in the console's editor
// (form and JSON view in sync both ways; teams and workers added, removed
// and reordered; a tool, an approval gate, a dependency and a budget set in
// the form; the API's field error shown at that field), runs it, approves
// the gate with an edited instruction from the run page, forks the finished
// run from the page with a changed prompt, compares the fork with its
// origin (answers, tokens and cost per agent against the stored logs), and
// edits the hierarchy afterwards: the old run's page still shows its own
// snapshot and says the hierarchy changed; a follow-up starts from it.
func TestConsoleStudio(t *testing.T) {
	const edited = "analyse only the 2021 papers"
	rules := append([]llmfake.Rule{
		{Name: "searcher after tool", SystemContains: "W-SEARCHER", HasToolResult: true, Responses: contentResponses("searcher: 2*21 is 42")},
		{Name: "searcher first", SystemContains: "W-SEARCHER", Responses: []llmfake.Response{
			{ToolCalls: []llmfake.ToolCall{toolCall("calculator", `{"expression":"2*21"}`)}},
		}},
		{Name: "writer for children", SystemContains: "for children", Responses: contentResponses("Tunnels for kids: a ball that sometimes goes through the wall.")},
	}, referenceRules(nil)...)
	e := newEnv(t, rules, withConfig(func(c *config.Config) {
		c.LLMPrices = pricing.Table{"test-model": {Input: 2, Output: 10}}
	}))
	// An MCP server of the tenant: the editor offers its tools (it need
	// not answer; the hierarchy below does not use it).
	e.mustPost("/mcp-servers/create", map[string]any{"name": "docs", "url": "http://127.0.0.1:9/mcp", "allowed_tools": []string{"search"}}, nil)
	root := e.rootURL()
	b := newBrowser(t)

	b.do("open the console", chromedp.Navigate(root+"/"))
	b.waitJS("the editor", `document.body.dataset.ready === 'true' && document.querySelector('#create-panel[data-mode="create"]')`, 30*time.Second)
	offered := eval[[]string](b, `[...document.querySelectorAll('#hierarchy-form [data-field="teams[0].workers[0].tools"] input[data-key]')].map((i) => i.dataset.key)`)
	if want := "calculator current_time http_get memory_save memory_search save_file mcp:docs/* mcp:docs/search"; strings.Join(offered, " ") != want {
		t.Fatalf("the editor offers tools %v, want %s (tools/list and mcp-servers/list)", offered, want)
	}
	mcpBox := `document.querySelector('#hierarchy-form [data-field="teams[0].workers[0].tools"] input[data-key="mcp:docs/search"]')`
	b.clickJS("an MCP tool", mcpBox)
	if tools := b.editorJSON()["teams"].([]any)[0].(map[string]any)["workers"].([]any)[0].(map[string]any)["tools"]; fmt.Sprint(tools) != "[mcp:docs/search]" {
		t.Errorf("after ticking an MCP tool the JSON's tools are %v", tools)
	}
	b.clickJS("the MCP tool, unticked", mcpBox)

	// The example's one team becomes "research"; a second team is added.
	b.setField("name", "studio")
	b.setField("global_supervisor_agent.agent_id", "gs-1")
	b.setField("global_supervisor_agent.system_prompt", "GS-PROMPT You lead the research.")
	b.setField("teams[0].name", "research")
	b.setField("teams[0].team_supervisor_agent.agent_id", "ts-research")
	b.setField("teams[0].team_supervisor_agent.system_prompt", "TS-RESEARCH You lead research.")
	for i, w := range [][4]string{{"w-searcher", "searcher", "search", "W-SEARCHER You search."}, {"w-analyst", "analyst", "analysis", "W-ANALYST You analyse."}} {
		p := fmt.Sprintf("teams[0].workers[%d].", i)
		b.setField(p+"agent_id", w[0])
		b.setField(p+"name", w[1])
		b.setField(p+"role", w[2])
		b.setField(p+"system_prompt", w[3])
	}
	b.clickJS("the calculator", `document.querySelector('#hierarchy-form [data-field="teams[0].workers[0].tools"] input[data-key="calculator"]')`)
	b.clickJS("the analyst's gate", `document.querySelector('#hierarchy-form [data-field="teams[0].workers[1].requires_approval"]')`)
	// A worker added and removed again.
	b.clickJS("add a worker", `document.querySelector('#hierarchy-form [data-team-index="0"] > button[data-action="add-worker"]')`)
	if n := len(b.editorJSON()["teams"].([]any)[0].(map[string]any)["workers"].([]any)); n != 3 {
		t.Fatalf("after adding a worker the JSON has %d workers, want 3", n)
	}
	b.clickJS("remove it", `document.querySelector('#hierarchy-form [data-field="teams[0].workers[2]"] button[data-action="remove-worker"]')`)
	b.clickJS("add a team", `document.querySelector('#hierarchy-form button[data-action="add-team"]')`)
	b.setField("teams[1].name", "writing")
	b.setField("teams[1].team_supervisor_agent.agent_id", "ts-writing")
	b.setField("teams[1].team_supervisor_agent.system_prompt", "TS-WRITING You lead writing.")
	b.setField("teams[1].workers[0].agent_id", "w-writer")
	b.setField("teams[1].workers[0].name", "writer")
	b.setField("teams[1].workers[0].role", "writing")
	b.setField("teams[1].workers[0].system_prompt", "W-WRITER You write.")
	// Reordered: writing first, then back.
	b.clickJS("move writing up", `document.querySelector('#hierarchy-form [data-team-index="1"] button[data-action="team-up"]')`)
	if name := b.editorJSON()["teams"].([]any)[0].(map[string]any)["name"]; name != "writing" {
		t.Errorf("after moving writing up the JSON's first team is %v", name)
	}
	b.clickJS("move writing down", `document.querySelector('#hierarchy-form [data-team-index="0"] button[data-action="team-down"]')`)
	b.clickJS("writing depends on research", `document.querySelector('#hierarchy-form [data-team-index="1"] input[data-depends-on="research"]')`)
	b.setField("budget.max_tokens", "100000")

	// The JSON view edits the form too.
	body := b.editorJSON()
	body["teams"].([]any)[1].(map[string]any)["workers"].([]any)[0].(map[string]any)["role"] = "author"
	raw, _ := json.MarshalIndent(body, "", "  ")
	b.setValue("#hierarchy-json", string(raw))
	if v := eval[string](b, `[...document.querySelectorAll('#hierarchy-form [data-field]')].find((e) => e.dataset.field === 'teams[1].workers[0].role').value`); v != "author" {
		t.Errorf("after editing the JSON the form's role is %q, want author", v)
	}
	b.setField("teams[1].workers[0].role", "writing")

	// A duplicate agent_id: the API's error at that field of the form.
	b.setField("teams[1].workers[0].agent_id", "w-searcher")
	b.do("create (refused)", chromedp.Click(chromedp.CSS("#create-hierarchy")))
	b.waitJS("the field error in the form", `document.querySelector('#hierarchy-form .input-error')`, 30*time.Second)
	fe := eval[map[string]string](b, `(() => { const e = document.querySelector('#hierarchy-form .input-error');
	  const input = [...document.querySelectorAll('#hierarchy-form [data-field]')].find((x) => x.dataset.field === e.dataset.field);
	  return { field: e.dataset.field, at: e.dataset.shownAt, text: e.textContent, invalid: String(!!input && input.classList.contains('invalid')) }; })()`)
	if fe["field"] != "teams[1].workers[0].agent_id" || fe["at"] != fe["field"] || fe["invalid"] != "true" || !strings.Contains(fe["text"], `duplicate agent_id "w-searcher"`) {
		t.Errorf("field error in the form = %+v", fe)
	}
	b.screenshot("studio-field-error")
	b.setField("teams[1].workers[0].agent_id", "w-writer")
	b.do("create", chromedp.Click(chromedp.CSS("#create-hierarchy")))
	b.waitJS("the hierarchy created", `document.querySelector('#create-panel[data-mode="edit"]') && /^Created /.test(document.getElementById('create-result').textContent)`, 30*time.Second)
	hid := eval[string](b, `document.getElementById('create-panel').dataset.hierarchyId`)
	b.screenshot("studio-editor")

	// What was stored is what the form built.
	var stored models.Hierarchy
	e.mustPost("/hierarchies/get", map[string]any{"hierarchy_id": hid}, &stored)
	shape := []string{}
	for _, tm := range stored.Teams {
		shape = append(shape, "team:"+tm.Name+"/"+tm.Supervisor.AgentID)
		for _, w := range tm.Workers {
			shape = append(shape, fmt.Sprintf("%s:%s:%v:%v", w.AgentID, w.Name, w.Tools, w.RequiresApproval))
		}
	}
	want := "team:research/ts-research w-searcher:searcher:[calculator]:false w-analyst:analyst:[]:true team:writing/ts-writing w-writer:writer:[]:false"
	if got := strings.Join(shape, " "); got != want {
		t.Errorf("stored hierarchy\n%s\nwant\n%s", got, want)
	}
	if fmt.Sprint(stored.Dependencies) != "map[writing:[research]]" || stored.Budget == nil || stored.Budget.MaxTokens != 100000 || stored.Name != "studio" {
		t.Errorf("stored dependencies %v, budget %+v, name %q", stored.Dependencies, stored.Budget, stored.Name)
	}

	// Run it from the runs page; approve the gate with an edit.
	b.do("open the runs page", chromedp.Navigate(root+"/runs?hierarchy_id="+hid))
	b.waitJS("the runs page", `document.body.dataset.ready === 'true'`, 30*time.Second)
	b.do("start a run", chromedp.SetValue(chromedp.CSS("#start-task"), "Explain quantum tunnelling"), chromedp.Click(chromedp.CSS("#start-run")))
	b.waitJS("the run page", `document.body.dataset.page === 'run' && document.body.dataset.ready === 'true'`, 30*time.Second)
	id := eval[string](b, `decodeURIComponent(location.pathname.slice('/runs/'.length))`)
	pending := `document.querySelector('.approval.pending[data-agent-id="w-analyst"]')`
	b.waitJS("the analyst's approval", pending, 60*time.Second)
	b.setValue(`.approval.pending[data-agent-id="w-analyst"] textarea.edit`, edited)
	b.do("approve with an edit", chromedp.Click(chromedp.CSS(`.approval.pending[data-agent-id="w-analyst"] button.approve`)))
	b.waitJS("the approval resolved", `document.querySelector('.approval[data-agent-id="w-analyst"][data-decision="approved"]')`, 60*time.Second)
	b.waitJS("the run's end", `document.body.dataset.runStatus === 'completed' && document.body.dataset.connection === 'ended'`, 2*time.Minute)
	var resolved map[string]any
	for _, ev := range e.storedEvents(id) {
		if ev.Event.String() == "approval.resolved" {
			resolved = ev.Data
		}
	}
	if resolved == nil || resolved["decision"] != "approved" || resolved["edited"] != true || resolved["instruction"] != edited {
		t.Errorf("approval.resolved = %v, want approved with the edited instruction", resolved)
	}
	if !callsSay(callsMatching(e.fake.Calls(), "W-ANALYST"), edited) {
		t.Errorf("the analyst was not given the edited instruction %q", edited)
	}

	// Fork it from the page: after the writer's dispatch, with a new prompt.
	b.waitJS("the fork points", `Number(document.getElementById('steering').dataset.forkPoints) > 0`, 30*time.Second)
	ok := eval[bool](b, `(() => { const sel = document.getElementById('fork-point');
	  const o = [...sel.options].find((x) => x.dataset.kind === 'dispatch.worker' && x.textContent.endsWith('/ writer'));
	  if (!o) return false; sel.value = o.value; return true; })()`)
	if !ok {
		t.Fatalf("no dispatch.worker fork point for the writer: %v", eval[[]string](b, `[...document.getElementById('fork-point').options].map((o) => o.textContent)`))
	}
	b.setValue("#fork-agent", "w-writer")
	b.setValue("#fork-agent-prompt", "W-WRITER You write for children.")
	b.setValue("#fork-max-tokens", "90000")
	b.do("fork", chromedp.Click(chromedp.CSS("#fork-run")))
	b.waitJS("the fork's answer", `document.querySelector('#steer-log li[data-action="fork"]')`, 30*time.Second)
	if eval[string](b, `document.querySelector('#steer-log li[data-action="fork"]').dataset.ok`) != "true" {
		t.Fatalf("fork refused: %s", eval[string](b, `document.querySelector('#steer-log li[data-action="fork"]').textContent`))
	}
	fork := eval[string](b, `document.querySelector('#steer-log li[data-action="fork"]').dataset.runId`)
	b.screenshot("studio-forked")
	var fv struct {
		Status     string `json:"status"`
		ForkedFrom struct {
			RunID string `json:"run_id"`
		} `json:"forked_from"`
		ExecutionConfig struct {
			Budget struct {
				MaxTokens int64 `json:"max_tokens"`
			} `json:"budget"`
		} `json:"execution_config"`
	}
	e.mustPost("/runs/get", map[string]any{"id": fork}, &fv)
	if fv.ForkedFrom.RunID != id || fv.ExecutionConfig.Budget.MaxTokens != 90000 {
		t.Errorf("fork %s forked from %q with budget %+v, want from %s with the page's 90000 tokens", fork, fv.ForkedFrom.RunID, fv.ExecutionConfig, id)
	}
	b.clickJS("open the fork", `document.querySelector('#steer-log li[data-action="fork"] a.fork-link')`)
	b.waitJS("the fork's page", `location.pathname === '/runs/`+fork+`' && document.body.dataset.ready === 'true'`, 30*time.Second)
	b.waitJS("the fork's end", `document.body.dataset.runStatus === 'completed' && document.body.dataset.connection === 'ended'`, 2*time.Minute)
	if e.waitRun(fork, time.Minute).Status != models.RunCompleted {
		t.Fatalf("the fork did not complete")
	}

	// Compare the fork with its origin.
	b.clickJS("compare with the origin", `document.getElementById('compare-origin')`)
	b.waitJS("the compare view", `document.body.dataset.page === 'compare' && document.body.dataset.ready === 'true' && document.querySelector('#compare-table')`, 30*time.Second)
	b.screenshot("studio-compare")
	type cell struct {
		Tokens float64 `json:"tokens"`
		Cost   float64 `json:"cost"`
		Answer string  `json:"answer"`
		Absent bool    `json:"absent"`
	}
	rows := eval[map[string]struct {
		Same bool `json:"same"`
		A    cell `json:"a"`
		B    cell `json:"b"`
	}](b, `(() => { const out = {};
	  const cell = (td) => ({ tokens: Number(td.dataset.tokens || 0), cost: Number(td.dataset.costUsd || 0),
	    answer: td.querySelector('.answer') ? td.querySelector('.answer').textContent : '', absent: td.dataset.absent === 'true' });
	  for (const tr of document.querySelectorAll('#compare-table tr[data-agent-id]')) {
	    out[tr.dataset.agentId] = { same: tr.dataset.same === 'true', a: cell(tr.querySelector('td[data-run="a"]')), b: cell(tr.querySelector('td[data-run="b"]')) };
	  }
	  return out; })()`)
	if rel := eval[string](b, `(document.getElementById('compare-relation') || {}).textContent || ''`); !strings.Contains(rel, "A is a fork of B") {
		t.Errorf("compare relation %q", rel)
	}
	forkEvents, origEvents := e.storedEvents(fork), e.storedEvents(id)
	keptFork, _ := laneTexts(forkEvents)
	keptOrig, _ := laneTexts(origEvents)
	ua, ub := usageByAgent(forkEvents), usageByAgent(origEvents)
	if len(rows) != 6 {
		t.Errorf("compare shows %d agents, want 6", len(rows))
	}
	near := func(a, b float64) bool { return math.Abs(a-b) < 1e-9 }
	for agent, r := range rows {
		if r.A.Answer != keptFork[agent] || r.B.Answer != keptOrig[agent] {
			t.Errorf("%s: answers %q / %q, the logs %q / %q", agent, r.A.Answer, r.B.Answer, keptFork[agent], keptOrig[agent])
		}
		if r.A.Tokens != ua[agent][0] || !near(r.A.Cost, ua[agent][1]) || r.B.Tokens != ub[agent][0] || !near(r.B.Cost, ub[agent][1]) {
			t.Errorf("%s: shown %v $%v / %v $%v; the logs sum %v / %v", agent, r.A.Tokens, r.A.Cost, r.B.Tokens, r.B.Cost, ua[agent], ub[agent])
		}
	}
	if w := rows["w-writer"]; w.Same || !strings.Contains(w.A.Answer, "Tunnels for kids") || w.B.Answer != "output of W-WRITER" {
		t.Errorf("the writer's row: %+v", w)
	}
	if s := rows["w-searcher"]; !s.Same || s.A.Answer != "searcher: 2*21 is 42" {
		t.Errorf("the searcher's row (copied into the fork): %+v", s)
	}

	// Edit the hierarchy now that it has runs: the old run keeps its snapshot.
	b.do("edit the hierarchy", chromedp.Navigate(root+"/?h="+hid+"&edit=1"))
	b.waitJS("the editor, editing", `document.querySelector('#create-panel[data-mode="edit"]') && document.getElementById('editor-note').dataset.runs`, 30*time.Second)
	if n := eval[string](b, `document.getElementById('editor-note').dataset.runs`); n != "2" {
		t.Errorf("the editor says %s runs used the hierarchy, want 2", n)
	}
	b.setField("teams[1].workers[0].agent_id", "w-author")
	b.do("save", chromedp.Click(chromedp.CSS("#create-hierarchy")))
	b.waitJS("saved", `/^Saved /.test(document.getElementById('create-result').textContent)`, 30*time.Second)
	e.mustPost("/hierarchies/get", map[string]any{"hierarchy_id": hid}, &stored)
	if got := stored.Teams[1].Workers[0].AgentID; got != "w-author" {
		t.Errorf("after saving, the writer's agent_id is %q", got)
	}
	b.do("open the first run again", chromedp.Navigate(root+"/runs/"+id))
	b.waitJS("the snapshot note", `document.body.dataset.ready === 'true' && document.getElementById('snapshot-note')`, 30*time.Second)
	lanes := eval[[]string](b, `[...document.querySelectorAll('.lane[data-agent-id]')].map((l) => l.dataset.agentId).sort()`)
	if strings.Join(lanes, ",") != "gs-1,ts-research,ts-writing,w-analyst,w-searcher,w-writer" {
		t.Errorf("the old run's lanes are %v, want its own agents", lanes)
	}

	// A follow-up on the thread, from the same page.
	b.setValue("#follow-up-task", "Now in five bullet points")
	b.do("start a follow-up", chromedp.Click(chromedp.CSS("#follow-up")))
	b.waitJS("the follow-up's answer", `document.querySelector('#steer-log li[data-action="follow-up"]')`, 30*time.Second)
	if ok := eval[string](b, `document.querySelector('#steer-log li[data-action="follow-up"]').dataset.ok`); ok != "true" {
		t.Fatalf("follow-up refused: %s", eval[string](b, `document.querySelector('#steer-log li[data-action="follow-up"]').textContent`))
	}
	next := eval[string](b, `document.querySelector('#steer-log li[data-action="follow-up"]').dataset.runId`)
	var nv struct {
		Task          string `json:"task"`
		ThreadID      string `json:"thread_id"`
		PreviousRunID string `json:"previous_run_id"`
	}
	e.mustPost("/runs/get", map[string]any{"id": next}, &nv)
	if nv.PreviousRunID != id || nv.ThreadID != id || nv.Task != "Now in five bullet points" {
		t.Errorf("follow-up = %+v, want a follow-up of %s on its thread", nv, id)
	}
	e.waitRun(next, time.Minute)
	if errs := b.pageErrors(); len(errs) > 0 {
		t.Errorf("script errors: %v", errs)
	}
}

// callsSay reports whether some message of some call contains s.
func callsSay(calls []llmfake.Call, s string) bool {
	for _, c := range calls {
		for _, m := range c.Messages {
			if strings.Contains(m.Content, s) {
				return true
			}
		}
	}
	return false
}

// TestConsoleSteering drives the run page's steering buttons against a
// live run: cancelling a team that is not at work shows the API's 409;
// pause and resume at an approval gate; a redirect whose guidance reaches
// the writer's prompt; the reject button (refused without a comment, then
// with one); cancelling the writing team while its writer streams (the run
// completes without it); and, on a second run at work, the Cancel run
// button.
func TestConsoleSteering(t *testing.T) {
	const guidance = "Keep it short."
	rules := append([]llmfake.Rule{
		// The second run's global supervisor thinks for a minute: the run
		// is at work when its Cancel button is pressed.
		{Name: "slow decision", SystemContains: "GS-SLOW", HasJSONSchema: true, Responses: []llmfake.Response{
			{Content: decision("finish", "", ""), FirstTokenDelay: time.Minute}}},
		{Name: "slow final", SystemContains: "GS-SLOW", Responses: contentResponses("never")},
	}, referenceRules(map[string][]llmfake.Response{
		// Long enough to be cancelled in the middle.
		"W-WRITER": {{Content: strings.Repeat("slow words ", 400), TokenDelay: 50 * time.Millisecond}},
	})...)
	e := newEnv(t, rules)
	h := referenceHierarchy()
	h["teams"].([]any)[0].(map[string]any)["workers"].([]any)[1].(map[string]any)["requires_approval"] = true
	hid := e.createHierarchy(h)
	id := e.startRun(hid, "Explain quantum tunnelling")
	root := e.rootURL()
	b := newBrowser(t)

	b.do("open the run", chromedp.Navigate(root+"/runs/"+id))
	pending := `document.querySelector('.approval.pending[data-agent-id="w-analyst"]')`
	b.waitJS("the analyst's approval", `document.body.dataset.ready === 'true' && `+pending, 60*time.Second)
	b.waitJS("the team list", `document.querySelector('#cancel-team-name option[value="writing"]')`, 30*time.Second)
	logEntry := func(action string, n int) string {
		return fmt.Sprintf(`document.querySelectorAll('#steer-log li[data-action="%s"]').length >= %d`, action, n)
	}
	lastOK := func(action string) (bool, string) {
		v := eval[[]string](b, fmt.Sprintf(`(() => { const li = document.querySelector('#steer-log li[data-action="%s"]'); return [li.dataset.ok, li.textContent]; })()`, action))
		return v[0] == "true", v[1]
	}

	// Writing has not started: the API's 409, shown.
	b.setValue("#cancel-team-name", "writing")
	b.do("cancel a team not at work", chromedp.Click(chromedp.CSS("#cancel-team")))
	b.waitJS("the refusal", logEntry("cancel-team", 1), 30*time.Second)
	if ok, text := lastOK("cancel-team"); ok || !strings.Contains(text, "TEAM_NOT_RUNNING") {
		t.Errorf("cancelling a team not at work shows ok=%v %q, want the API's TEAM_NOT_RUNNING", ok, text)
	}

	// Pause and resume at the gate.
	b.do("pause", chromedp.Click(chromedp.CSS("#pause-run")))
	b.waitJS("paused", `document.body.dataset.runStatus === 'paused' && !document.getElementById('resume-run').hidden`, 30*time.Second)
	if ok, text := lastOK("pause"); !ok {
		t.Errorf("pause: %s", text)
	}
	b.do("resume", chromedp.Click(chromedp.CSS("#resume-run")))
	b.waitJS("resumed", `document.body.dataset.runStatus === 'waiting_approval'`, 30*time.Second)
	if ok, text := lastOK("resume"); !ok {
		t.Errorf("resume: %s", text)
	}

	// Redirect the writer before it starts.
	b.setValue("#redirect-agent", "w-writer")
	b.setValue("#redirect-message", guidance)
	b.do("redirect", chromedp.Click(chromedp.CSS("#redirect")))
	b.waitJS("the redirect's answer", logEntry("redirect", 1), 30*time.Second)
	if ok, text := lastOK("redirect"); !ok {
		t.Errorf("redirect: %s", text)
	}

	// Reject: a comment is required, then the gate is rejected.
	card := `.approval.pending[data-agent-id="w-analyst"]`
	b.do("reject without a comment", chromedp.Click(chromedp.CSS(card+" button.reject")))
	if msg := eval[string](b, `document.querySelector('`+card+` .error').textContent`); !strings.Contains(msg, "comment") {
		t.Errorf("rejecting without a comment says %q", msg)
	}
	b.setValue(card+" input.comment", "not needed")
	b.do("reject", chromedp.Click(chromedp.CSS(card+" button.reject")))
	b.waitJS("the rejection", `document.querySelector('.approval[data-agent-id="w-analyst"][data-decision="rejected"]')`, 60*time.Second)

	// Cancel writing while the writer streams.
	b.waitJS("the writer streaming", `document.querySelector('.lane[data-agent-id="w-writer"] .call .text')`, 90*time.Second)
	b.setValue("#cancel-team-name", "writing")
	b.setValue("#cancel-team-reason", "enough")
	b.do("cancel writing", chromedp.Click(chromedp.CSS("#cancel-team")))
	b.waitJS("the cancellation's answer", logEntry("cancel-team", 2), 30*time.Second)
	if ok, text := lastOK("cancel-team"); !ok {
		t.Errorf("cancel team: %s", text)
	}
	b.waitJS("the run's end", `document.body.dataset.connection === 'ended'`, 2*time.Minute)
	b.screenshot("steering-final")
	v := e.waitRun(id, time.Minute)
	if v.Status != models.RunCompleted || len(v.Result.Teams) != 2 || v.Result.Teams[1].Status != "cancelled" {
		t.Errorf("run %s, teams %+v: want completed with writing cancelled", v.Status, v.Result)
	}
	var cancelled, rejected map[string]any
	for _, ev := range e.storedEvents(id) {
		switch ev.Event.String() {
		case "dispatch.team_cancelled":
			cancelled = ev.Data
		case "approval.resolved":
			rejected = ev.Data
		}
	}
	if cancelled == nil || cancelled["team_name"] != "writing" || !strings.Contains(fmt.Sprint(cancelled["reason"]), "enough") {
		t.Errorf("dispatch.team_cancelled = %v", cancelled)
	}
	if rejected == nil || rejected["decision"] != "rejected" || rejected["comment"] != "not needed" {
		t.Errorf("approval.resolved = %v, want rejected with the comment", rejected)
	}
	if !callsSay(callsMatching(e.fake.Calls(), "W-WRITER"), guidance) {
		t.Errorf("the writer's prompt lacks the guidance %q", guidance)
	}
	if len(callsMatching(e.fake.Calls(), "W-ANALYST")) != 0 {
		t.Errorf("the rejected analyst was called")
	}

	// A second run, cancelled whole from its page while it works.
	slow := referenceHierarchy()
	slow["global_supervisor_agent"] = map[string]any{"agent_id": "gs-slow", "system_prompt": "GS-SLOW You lead."}
	id2 := e.startRun(e.createHierarchy(slow), "Explain it again")
	b.do("open the second run", chromedp.Navigate(root+"/runs/"+id2))
	b.waitJS("it works", `document.body.dataset.ready === 'true' && document.body.dataset.runStatus === 'running' && !document.getElementById('cancel-run').hidden`, 60*time.Second)
	b.do("cancel the run", chromedp.Click(chromedp.CSS("#cancel-run")))
	b.waitJS("cancelled", `document.body.dataset.runStatus === 'cancelled' && document.body.dataset.connection === 'ended'`, 60*time.Second)
	if v := e.waitRun(id2, time.Minute); v.Status != models.RunCancelled {
		t.Errorf("second run %s, want cancelled", v.Status)
	}
	if errs := b.pageErrors(); len(errs) > 0 {
		t.Errorf("script errors: %v", errs)
	}
}
