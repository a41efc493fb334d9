package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	cdplog "github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"

	"github.com/op-stack/executor/auth"
	"github.com/op-stack/executor/config"
	"github.com/op-stack/executor/llm/llmfake"
	"github.com/op-stack/executor/models"
	"github.com/op-stack/executor/pricing"
)

// browser is one headless Chromium tab driven over the DevTools protocol,
// with what the page did on the side: every URL it requested and every
// script error (exceptions, console.error, CSP and other non-network
// errors of the browser's log).
type browser struct {
	t      *testing.T
	ctx    context.Context
	mu     sync.Mutex
	urls   []string
	errors []string
	shots  string // where screenshots go
}

// chromium is Debian's headless Chromium (`make browser` installs it), or
// CHROMIUM_PATH.
func chromium(t *testing.T) string {
	if p := os.Getenv("CHROMIUM_PATH"); p != "" {
		return p
	}
	for _, p := range []string{"/usr/bin/chromium", "/usr/bin/chromium-browser"} {
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	if p, err := exec.LookPath("chromium"); err == nil {
		return p
	}
	if os.Getenv("CI") != "" {
		t.Fatal("no Chromium: run `make browser` (as root it installs Debian's chromium), or set CHROMIUM_PATH")
	}
	// Outside CI a machine without Chromium skips the browser layer;
	// `make test` says so loudly (scripts/test-layers.sh).
	t.Skip("SKIPPED: no Chromium for the web console's browser test: run `make browser` (as root it installs Debian's chromium), or set CHROMIUM_PATH")
	return ""
}

func newBrowser(t *testing.T) *browser {
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(chromium(t)),
		chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU,
		chromedp.NoFirstRun, chromedp.NoDefaultBrowserCheck,
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1400, 1100),
	}
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	t.Cleanup(cancelAlloc)
	b := &browser{t: t}
	ctx, cancel := chromedp.NewContext(actx, chromedp.WithListener(b.listen))
	t.Cleanup(cancel)
	b.ctx = ctx
	b.shots = os.Getenv("TEST_ARTIFACTS_DIR")
	if b.shots == "" {
		b.shots = "artifacts"
	}
	if err := os.MkdirAll(b.shots, 0o755); err != nil {
		t.Fatal(err)
	}
	// The first action starts the browser: no timeout on it (a timeout
	// would stop the browser with it).
	err := chromedp.Do(ctx, chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
		if _, err := cdp.Call(ctx, tg, network.Enable, network.EnableParams{}); err != nil {
			return err
		}
		if _, err := cdp.Call(ctx, tg, cdplog.Enable, cdp.Empty{}); err != nil {
			return err
		}
		_, err := cdp.Call(ctx, tg, runtime.Enable, cdp.Empty{})
		return err
	}))
	if err != nil {
		t.Fatalf("start Chromium: %v", err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			b.screenshot("console-failure")
		}
	})
	return b
}

// listen runs on the tab's reading loop: it only records.
func (b *browser) listen(ev any) {
	b.mu.Lock()
	defer b.mu.Unlock()
	switch ev := ev.(type) {
	case *network.EventRequestWillBeSent:
		b.urls = append(b.urls, ev.Request.URL)
	case *runtime.EventExceptionThrown:
		d := ev.ExceptionDetails
		msg := d.Text
		if d.Exception != nil {
			msg += " " + d.Exception.Description
		}
		b.errors = append(b.errors, fmt.Sprintf("exception at %s:%d: %s", d.URL, d.LineNumber, msg))
	case *runtime.EventConsoleAPICalled:
		if ev.Type == runtime.ConsoleAPICalledTypeError {
			var parts []string
			for _, a := range ev.Args {
				parts = append(parts, a.Description+string(a.Value))
			}
			b.errors = append(b.errors, "console.error: "+strings.Join(parts, " "))
		}
	case *cdplog.EventEntryAdded:
		// Network errors are the API's answers (a 401 before the key is
		// given, a stream cut on purpose); anything else is the page's.
		if e := ev.Entry; e.Source != cdplog.EntrySourceNetwork && e.Level == cdplog.EntryLevelError {
			b.errors = append(b.errors, fmt.Sprintf("%s: %s (%s)", e.Source, e.Text, e.URL))
		}
	}
}

func (b *browser) do(what string, actions ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 90*time.Second)
	defer cancel()
	if err := chromedp.Do(ctx, actions...); err != nil {
		b.t.Fatalf("%s: %v (page errors: %v)", what, err, b.pageErrors())
	}
}

// eval evaluates a JavaScript expression into out.
func eval[T any](b *browser, expr string) T {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 30*time.Second)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](expr))
	if err != nil {
		b.t.Fatalf("evaluate %s: %v", expr, err)
	}
	return v
}

// waitJS waits until a JavaScript expression is truthy: a condition, not
// a sleep, so a loaded machine only makes it slower. It asks from here
// rather than with chromedp.Poll, whose wait does not survive the page
// navigating (a form that opens another page, a reload).
func (b *browser) waitJS(what, expr string, timeout time.Duration) {
	b.t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		ctx, cancel := context.WithTimeout(b.ctx, 10*time.Second)
		ok, err := chromedp.Run(ctx, chromedp.Evaluate[bool]("!!("+expr+")"))
		cancel()
		if err == nil && ok {
			return
		}
		if time.Now().After(deadline) {
			b.screenshot("console-failure")
			b.t.Fatalf("waiting for %s: not after %v (last error %v; page errors: %v)", what, timeout, err, b.pageErrors())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (b *browser) screenshot(name string) {
	ctx, cancel := context.WithTimeout(b.ctx, 30*time.Second)
	defer cancel()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		b.t.Logf("screenshot %s: %v", name, err)
		return
	}
	path := filepath.Join(b.shots, name+".png")
	if err := os.WriteFile(path, png, 0o644); err != nil {
		b.t.Logf("screenshot %s: %v", name, err)
		return
	}
	b.t.Logf("screenshot: %s", path)
}

func (b *browser) pageErrors() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]string(nil), b.errors...)
}

func (b *browser) requested() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]string(nil), b.urls...)
}

// keyPanelHidden checks that the page did not ask for the key again.
func (b *browser) keyPanelHidden(where string) {
	b.t.Helper()
	if !eval[bool](b, `document.getElementById('key-panel').hidden`) {
		b.t.Errorf("%s: the console asked for the key again", where)
	}
}

// consoleState is what the run page shows, read from its DOM.
type consoleState struct {
	Lanes map[string]struct {
		Team    string  `json:"team"`
		Text    string  `json:"text"`
		Void    string  `json:"void"`
		Retries int     `json:"retries"`
		Tokens  int     `json:"tokens"`
		Cost    float64 `json:"cost"`
	} `json:"lanes"`
	Teams map[string]struct {
		Tokens int     `json:"tokens"`
		Cost   float64 `json:"cost"`
	} `json:"teams"`
	Cards []struct {
		ID     string `json:"id"`
		Lane   string `json:"lane"`
		Status string `json:"status"`
		Input  string `json:"input"`
		Result string `json:"result"`
	} `json:"cards"`
	Run struct {
		Tokens int     `json:"tokens"`
		Cost   float64 `json:"cost"`
	} `json:"run"`
	Tree []struct {
		Team    string   `json:"team"`
		Workers []string `json:"workers"`
	} `json:"tree"`
	Approvals []struct {
		Agent    string `json:"agent"`
		Decision string `json:"decision"`
	} `json:"approvals"`
	Gaps int   `json:"gaps"`
	Last int64 `json:"last"`
}

const readConsoleState = `(() => {
  const num = (v) => Number(v || 0);
  const lanes = {};
  for (const l of document.querySelectorAll('.lane[data-agent-id]')) {
    const u = l.querySelector('.agent-usage').dataset;
    lanes[l.dataset.agentId] = {
      team: l.closest('.team-group').dataset.team,
      text: [...l.querySelectorAll('.call:not(.superseded) .text')].map((e) => e.textContent).join(''),
      void: [...l.querySelectorAll('.call.superseded .text')].map((e) => e.textContent).join(''),
      retries: l.querySelectorAll('.retry-mark').length,
      tokens: num(u.tokens), cost: num(u.costUsd),
    };
  }
  const teams = {};
  for (const g of document.querySelectorAll('.team-group')) {
    const u = g.querySelector('.team-usage').dataset;
    teams[g.dataset.team] = { tokens: num(u.tokens), cost: num(u.costUsd) };
  }
  const cards = [...document.querySelectorAll('.tool-card')].map((c) => ({
    id: c.dataset.toolExecutionId, lane: c.closest('.lane').dataset.agentId, status: c.dataset.status || '',
    input: c.querySelector('.tool-input').textContent, result: c.querySelector('.tool-result').textContent }));
  const r = document.getElementById('run-usage').dataset;
  const tree = [...document.querySelectorAll('#dispatch-tree li.dispatch[data-team]')].map((n) => ({
    team: n.dataset.team, workers: [...n.querySelectorAll('li.dispatch[data-agent-id]')].map((w) => w.dataset.agentId) }));
  const approvals = [...document.querySelectorAll('.approval')].map((a) => ({ agent: a.dataset.agentId, decision: a.dataset.decision || '' }));
  return { lanes, teams, cards, run: { tokens: num(r.tokens), cost: num(r.costUsd) }, tree, approvals,
    gaps: num(document.body.dataset.gaps), last: num(document.body.dataset.lastSequence) };
})()`

// laneTexts is each agent's text in a stored log, as the README tells a
// client to read it: its llm.stream pieces in order, less the text of a
// call that an llm.retry (of that call's attempt) or an llm.fallback
// voids. A call ends with its llm.usage; tool calls and results also
// end the text before them.
func laneTexts(events []models.Event) (kept, voided map[string]string) {
	type call struct {
		attempt float64
		text    strings.Builder
		void    bool
	}
	calls := map[string][]*call{}
	open := map[string]*call{}
	for _, ev := range events {
		id := ev.Source.AgentID
		switch ev.Event.String() {
		case "llm.stream":
			a := number(ev.Data["attempt"])
			if open[id] == nil || open[id].attempt != a {
				open[id] = &call{attempt: a}
				calls[id] = append(calls[id], open[id])
			}
			open[id].text.WriteString(ev.Data["content"].(string))
		case "llm.retry":
			if c := open[id]; c != nil && c.attempt == number(ev.Data["previous_attempt"]) {
				c.void, open[id] = true, nil
			}
		case "llm.fallback":
			if c := open[id]; c != nil {
				c.void, open[id] = true, nil
			}
		case "llm.usage", "llm.tool_call", "llm.tool_result":
			open[id] = nil
		}
	}
	kept, voided = map[string]string{}, map[string]string{}
	for id, cs := range calls {
		for _, c := range cs {
			if c.void {
				voided[id] += c.text.String()
			} else {
				kept[id] += c.text.String()
			}
		}
	}
	return kept, voided
}

func number(v any) float64 {
	switch n := v.(type) {
	case float64:
		return n
	case int:
		return float64(n)
	case int64:
		return float64(n)
	case json.Number:
		f, _ := n.Float64()
		return f
	}
	return math.NaN()
}

// TestConsole drives the web console in headless Chromium with access
// control on, against the fake LLM server: it gives the key once, creates
// a hierarchy from JSON (first with a duplicate agent_id, whose error
// shows at that field), checks the tree's agent_ids, starts a run from
// the runs page and watches it: 2 teams, a tool call, a retried stream and
// an approval gate approved from the page. It reloads the page at the
// gate, cuts the stream once its token has expired, and reloads again
// while the writer streams. At the end every lane holds exactly its
// agent's text in the stored log, with the retried attempt's text greyed;
// each tool_execution_id has one card with its result; costs equal the
// sums of llm.usage per agent, team and run; the dispatch tree matches
// the log; the key was never in a URL; and no script failed.
func TestConsole(t *testing.T) {
	full := strings.Repeat("The report covers tunnelling. ", 12)
	rules := append([]llmfake.Rule{
		{Name: "searcher after tool", SystemContains: "W-SEARCHER", HasToolResult: true, Responses: contentResponses("searcher: 2*21 is 42")},
		{Name: "searcher first", SystemContains: "W-SEARCHER", Responses: []llmfake.Response{
			{ToolCalls: []llmfake.ToolCall{toolCall("calculator", `{"expression":"2*21"}`)}},
		}},
	}, referenceRules(map[string][]llmfake.Response{
		// Attempt 1 is cut after 6 chunks (a retry); attempt 2 streams
		// slowly enough to be reloaded in the middle.
		"W-WRITER": {{Content: full, DropAfterChunks: 6}, {Content: full, TokenDelay: 40 * time.Millisecond}},
	})...)
	e := newEnv(t, rules, withAuth, withConfig(func(c *config.Config) {
		c.LLMPrices = pricing.Table{"test-model": {Input: 2, Output: 10}}
		// Short, so that the page must fetch a new token to reconnect.
		c.StreamTokenTTL = 3 * time.Second
	}))
	key := e.issueKey("console", auth.ScopeHierarchiesRead, auth.ScopeHierarchiesWrite, auth.ScopeRunsRead, auth.ScopeRunsWrite)
	root := e.rootURL()
	b := newBrowser(t)

	// The key, asked once.
	b.do("open the console", chromedp.Navigate(root+"/"))
	b.do("the key form", chromedp.WaitVisible(chromedp.CSS("#key-form")))
	b.do("give the key", chromedp.SendKeys(chromedp.CSS("#key-input"), key), chromedp.Click(chromedp.CSS("#key-form button")))
	b.waitJS("the hierarchies page", `document.body.dataset.ready === 'true'`, 30*time.Second)

	// A duplicate agent_id: the API's error shows at that field.
	body := referenceHierarchy()
	body["name"] = "console"
	teams := body["teams"].([]any)
	teams[0].(map[string]any)["workers"].([]any)[0].(map[string]any)["tools"] = []string{"calculator"}
	teams[0].(map[string]any)["workers"].([]any)[1].(map[string]any)["requires_approval"] = true
	writer := teams[1].(map[string]any)["workers"].([]any)[0].(map[string]any)
	writer["agent_id"] = "w-searcher"
	bad, _ := json.MarshalIndent(body, "", "  ")
	b.do("paste the bad hierarchy", chromedp.SetValue(chromedp.CSS("#hierarchy-json"), string(bad)), chromedp.Click(chromedp.CSS("#create-hierarchy")))
	b.waitJS("the field error", `document.querySelector('#create-errors .field-error[data-field]')`, 30*time.Second)
	fieldErr := eval[map[string]string](b, `(() => { const e = document.querySelector('#create-errors .field-error');
	  return { field: e.dataset.field, text: e.textContent, line: e.closest('li.error-line').firstChild.textContent }; })()`)
	if fieldErr["field"] != "teams[1].workers[0].agent_id" || !strings.Contains(fieldErr["text"], `duplicate agent_id "w-searcher"`) ||
		strings.TrimSpace(fieldErr["line"]) != `"agent_id": "w-searcher",` {
		t.Errorf("field error = %+v", fieldErr)
	}
	b.screenshot("console-field-error")

	writer["agent_id"] = "w-writer"
	good, _ := json.MarshalIndent(body, "", "  ")
	b.do("create the hierarchy", chromedp.SetValue(chromedp.CSS("#hierarchy-json"), string(good)), chromedp.Click(chromedp.CSS("#create-hierarchy")))
	b.waitJS("the tree", `document.querySelectorAll('#hierarchy-tree .agent[data-agent-id]').length > 0`, 30*time.Second)
	treeIDs := eval[[]string](b, `[...document.querySelectorAll('#hierarchy-tree .agent[data-agent-id]')].map((a) => a.dataset.agentId)`)
	sort.Strings(treeIDs)
	if want := []string{"gs-1", "ts-research", "ts-writing", "w-analyst", "w-searcher", "w-writer"}; strings.Join(treeIDs, ",") != strings.Join(want, ",") {
		t.Errorf("tree agent_ids = %v, want %v", treeIDs, want)
	}
	hid := eval[string](b, `new URLSearchParams(location.search).get('h')`)
	if n := eval[int](b, `document.querySelectorAll('#hierarchy-list tr[data-hierarchy-id]').length`); n != 1 {
		t.Errorf("the list shows %d hierarchies, want 1", n)
	}
	b.screenshot("console-hierarchy")

	// Start the run from the runs page, its filter in the URL.
	b.do("open the runs page", chromedp.Navigate(root+"/runs?hierarchy_id="+hid))
	b.waitJS("the runs page", `document.body.dataset.ready === 'true'`, 30*time.Second)
	b.keyPanelHidden("runs page")
	if v := eval[string](b, `document.getElementById('start-hierarchy').value`); v != hid {
		t.Errorf("the start form's hierarchy is %q, want the URL's %q", v, hid)
	}
	b.do("start a run", chromedp.SetValue(chromedp.CSS("#start-task"), "Explain quantum tunnelling"), chromedp.Click(chromedp.CSS("#start-run")))
	b.waitJS("the run page", `document.body.dataset.page === 'run' && document.body.dataset.ready === 'true'`, 30*time.Second)
	id := eval[string](b, `decodeURIComponent(location.pathname.slice('/runs/'.length))`)
	b.keyPanelHidden("run page")

	// The gate: the analyst waits; reload there, mid-run.
	pending := `document.querySelector('.approval.pending[data-agent-id="w-analyst"]')`
	b.waitJS("the analyst's approval", pending, 60*time.Second)
	if n := eval[int](b, `document.querySelectorAll('.tool-card').length`); n != 1 {
		t.Errorf("%d tool cards before the gate, want 1", n)
	}
	b.screenshot("console-run-gate")
	before := eval[int64](b, `Number(document.body.dataset.lastSequence)`)
	b.do("reload at the gate", chromedp.Reload())
	b.waitJS("the reloaded run page", `document.body.dataset.ready === 'true'`, 30*time.Second)
	b.keyPanelHidden("reloaded run page")
	if from := eval[int64](b, `Number(document.body.dataset.resumedFrom)`); from < before || from == 0 {
		t.Errorf("after the reload the stream resumed after %d, want the %d events drawn before", from, before)
	}
	b.waitJS("the approval, redrawn", pending, 30*time.Second)

	// The stream token has expired: a cut connection reconnects with a
	// new one, after the last event.
	b.waitJS("the stream token to expire", `Date.now() > Number(document.body.dataset.tokenExpires) + 500`, 30*time.Second)
	tokens := eval[int](b, `Number(document.body.dataset.streamTokens)`)
	e.server.CloseClientConnections()
	b.waitJS("a reconnection with a new token", fmt.Sprintf(`Number(document.body.dataset.streamTokens) > %d && document.body.dataset.connection === 'live'`, tokens), 60*time.Second)

	b.do("approve", chromedp.Click(chromedp.CSS(`.approval.pending[data-agent-id="w-analyst"] button.approve`)))
	b.waitJS("the approval resolved", `document.querySelector('.approval[data-agent-id="w-analyst"][data-decision="approved"]')`, 60*time.Second)

	// Reload again while the writer streams its second attempt (if the
	// machine is so slow that the run ends first, this reload is after
	// the end, which must show the same).
	b.waitJS("the writer's second attempt", `document.querySelector('.lane[data-agent-id="w-writer"] .call[data-attempt="2"]') || document.body.dataset.runStatus === 'completed'`, 90*time.Second)
	midStream := eval[bool](b, `document.body.dataset.runStatus !== 'completed'`)
	b.screenshot("console-run-streaming")
	b.do("reload while the writer streams", chromedp.Reload())
	b.waitJS("the reloaded run page", `document.body.dataset.ready === 'true'`, 30*time.Second)
	t.Logf("second reload while the writer streamed: %v", midStream)

	b.waitJS("the run's end", `document.body.dataset.runStatus === 'completed' && document.body.dataset.connection === 'ended'`, 2*time.Minute)
	b.screenshot("console-run-final")
	var v runView
	e.mustCall("POST", "/api/executor/v1/runs/get", key, map[string]any{"id": id}, &v)
	if v.Status != models.RunCompleted {
		t.Fatalf("run ended %s: %s", v.Status, v.Error)
	}
	events := e.storedEvents(id)
	got := eval[consoleState](b, readConsoleState)

	// Nothing lost, nothing doubled: the page applied every event, in order.
	if got.Last != events[len(events)-1].Sequence || got.Gaps != 0 {
		t.Errorf("the page ends at event %d with %d gaps; the log has %d events", got.Last, got.Gaps, len(events))
	}

	// Each lane is its agent's text in the stored log, in its team.
	kept, voided := laneTexts(events)
	teamOf := map[string]string{}
	for _, ev := range events {
		if ev.Source.TeamName != nil {
			teamOf[ev.Source.AgentID] = *ev.Source.TeamName
		} else if ev.Source.AgentType == models.AgentTypeGlobalSupervisor {
			teamOf[ev.Source.AgentID] = ""
		}
	}
	if len(got.Lanes) != 6 {
		t.Errorf("%d lanes, want 6", len(got.Lanes))
	}
	for agent, text := range kept {
		lane, ok := got.Lanes[agent]
		if !ok {
			t.Errorf("no lane for %s", agent)
			continue
		}
		if lane.Text != text {
			t.Errorf("lane %s shows\n%q\nthe log has\n%q", agent, lane.Text, text)
		}
		if lane.Void != voided[agent] {
			t.Errorf("lane %s greys %q, the log voids %q", agent, lane.Void, voided[agent])
		}
		if lane.Team != teamOf[agent] {
			t.Errorf("lane %s is in team %q, want %q", agent, lane.Team, teamOf[agent])
		}
	}
	if w := got.Lanes["w-writer"]; w.Text != full || w.Void == "" || !strings.HasPrefix(full, w.Void) || w.Retries != 1 {
		t.Errorf("writer lane: text %q, greyed %q, %d retry marks; want the whole answer once and attempt 1's part greyed", w.Text, w.Void, w.Retries)
	}

	// One card per tool_execution_id, in its agent's lane, with its result.
	results := map[string]models.Event{}
	for _, ev := range events {
		if ev.Event.String() == "llm.tool_result" {
			results[ev.Data["tool_execution_id"].(string)] = ev
		}
	}
	if len(got.Cards) != len(results) || len(results) != 1 {
		t.Errorf("%d tool cards, %d tool results in the log (want 1 each)", len(got.Cards), len(results))
	}
	seen := map[string]bool{}
	for _, c := range got.Cards {
		res, ok := results[c.ID]
		switch {
		case !ok || seen[c.ID]:
			t.Errorf("card %s: in the log %v, seen before %v", c.ID, ok, seen[c.ID])
		case c.Lane != res.Source.AgentID || c.Status != res.Data["status"] || c.Result != resultText(res.Data["result"]) || !strings.Contains(c.Input, "2*21"):
			t.Errorf("card %+v, result event %+v", c, res.Data)
		}
		seen[c.ID] = true
	}

	// Costs and tokens: the sums of llm.usage per agent, team and run.
	type sum struct {
		tokens int
		cost   float64
	}
	byAgent, byTeam := map[string]*sum{}, map[string]*sum{}
	var run sum
	for _, ev := range events {
		if ev.Event.String() != "llm.usage" {
			continue
		}
		if ev.Data["cost_usd"] == nil {
			t.Fatalf("usage without a cost: %+v", ev.Data)
		}
		tok, usd := int(number(ev.Data["total_tokens"])), number(ev.Data["cost_usd"])
		team := ""
		if ev.Source.TeamName != nil {
			team = *ev.Source.TeamName
		}
		for _, s := range []*sum{get(byAgent, ev.Source.AgentID), get(byTeam, team), &run} {
			s.tokens += tok
			s.cost += usd
		}
	}
	near := func(a, b float64) bool { return math.Abs(a-b) < 1e-9 }
	if run.cost == 0 || got.Run.Tokens != run.tokens || !near(got.Run.Cost, run.cost) {
		t.Errorf("run usage shown %+v, the log sums %+v", got.Run, run)
	}
	for agent, s := range byAgent {
		if l := got.Lanes[agent]; l.Tokens != s.tokens || !near(l.Cost, s.cost) {
			t.Errorf("lane %s shows %d tokens $%v, the log sums %d $%v", agent, l.Tokens, l.Cost, s.tokens, s.cost)
		}
	}
	for team, s := range byTeam {
		if g := got.Teams[team]; g.Tokens != s.tokens || !near(g.Cost, s.cost) {
			t.Errorf("team %q shows %+v, the log sums %d $%v", team, g, s.tokens, s.cost)
		}
	}

	// The dispatch tree is the log's dispatch events.
	var tree []string
	for _, ev := range events {
		switch ev.Event.String() {
		case "dispatch.team":
			tree = append(tree, "team:"+ev.Data["team_name"].(string))
		case "dispatch.worker":
			tree = append(tree, *ev.Source.TeamName+"/"+ev.Data["worker_agent_id"].(string))
		}
	}
	var shown []string
	for _, n := range got.Tree {
		shown = append(shown, "team:"+n.Team)
		for _, w := range n.Workers {
			shown = append(shown, n.Team+"/"+w)
		}
	}
	if strings.Join(shown, " ") != strings.Join(tree, " ") || len(tree) != 5 {
		t.Errorf("dispatch tree %v, the log %v", shown, tree)
	}
	if len(got.Approvals) != 1 || got.Approvals[0].Agent != "w-analyst" || got.Approvals[0].Decision != "approved" {
		t.Errorf("approvals shown %+v", got.Approvals)
	}
	for _, ev := range events {
		if ev.Event.String() == "approval.resolved" && !strings.HasPrefix(fmt.Sprint(ev.Data["decided_by"]), "api_key:") {
			t.Errorf("approval decided by %v, want the key's id", ev.Data["decided_by"])
		}
	}

	// The key never went into a URL; the stream used stream tokens.
	streams := 0
	tokenURL := regexp.MustCompile(`/api/executor/v1/runs/` + regexp.QuoteMeta(id) + `/stream\?token=ost_[A-Za-z0-9_-]+&after=\d+$`)
	for _, u := range b.requested() {
		if strings.Contains(u, key) {
			t.Errorf("the key is in a URL: %s", u)
		}
		if strings.Contains(u, "/stream?") {
			streams++
			if !tokenURL.MatchString(u) {
				t.Errorf("stream URL %s", u)
			}
		}
	}
	// The first load, the reload at the gate, the reconnection, and the
	// second reload when the run was still going.
	if want := map[bool]int{true: 4, false: 3}[midStream]; streams < want {
		t.Errorf("%d stream requests, want at least %d", streams, want)
	}
	if errs := b.pageErrors(); len(errs) > 0 {
		t.Errorf("script errors: %v", errs)
	}
}

func get[K comparable, V any](m map[K]*V, k K) *V {
	if m[k] == nil {
		m[k] = new(V)
	}
	return m[k]
}
