package agui

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/op-stack/executor/agui/aguitest"
	"github.com/op-stack/executor/internal/interop"
	"github.com/op-stack/executor/models"
)

// The logs under testdata were recorded from real runs (e2e
// TestRecordAGUILogs): tools and nested sub-agents, reasoning with a
// retried stream, two approval gates, teams at work together, and a run
// cancelled while a worker streams.
var logs = []string{"tools", "reasoning-retry", "approvals", "parallel", "cancelled"}

func loadLog(t *testing.T, name string) []models.Event {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name+".json"))
	if err != nil {
		t.Fatal(err)
	}
	var evs []models.Event
	if err := json.Unmarshal(b, &evs); err != nil {
		t.Fatal(err)
	}
	return evs
}

// translate runs a log through a Translator; out[i] is what event i made.
func translate(opts Options, log []models.Event) [][]Event {
	tr := New(opts)
	out := make([][]Event, len(log))
	for i, e := range log {
		out[i] = tr.Next(e)
	}
	return out
}

func flat(groups [][]Event) []Event {
	var out []Event
	for _, g := range groups {
		out = append(out, g...)
	}
	return out
}

func ofType(evs []Event, typ string) []Event {
	var out []Event
	for _, e := range evs {
		if e.Type() == typ {
			out = append(out, e)
		}
	}
	return out
}

// TestRunLifecycle: the run opens with RUN_STARTED (the task as its
// input's user message) and ends with RUN_FINISHED (the final answer, the
// usage per model); nothing follows it.
func TestRunLifecycle(t *testing.T) {
	log := loadLog(t, "tools")
	evs := flat(translate(Options{}, log))
	first, last := evs[0], evs[len(evs)-1]
	if first.Type() != RunStarted || first["runId"] != log[0].RunID || first["threadId"] != log[0].RunID || first["protocolVersion"] != "1.0" {
		t.Fatalf("first event = %v", first)
	}
	msgs := first["input"].(map[string]any)["messages"].([]any)
	if len(msgs) != 1 || msgs[0].(map[string]any)["content"] != "tools" || msgs[0].(map[string]any)["role"] != "user" {
		t.Errorf("RUN_STARTED input messages = %v", msgs)
	}
	if last.Type() != RunFinished || last["result"] != "FINAL ANSWER: tunnelling explained." ||
		!reflect.DeepEqual(last["outcome"], map[string]any{"type": "success"}) {
		t.Fatalf("last event = %v", last)
	}
	usage := last["usage"].([]any)
	var calls int
	for _, e := range log {
		if e.Event.Action == models.ActionUsage {
			calls++
		}
	}
	if len(usage) != 1 || usage[0].(map[string]any)["model"] != "test-model" || usage[0].(map[string]any)["inputTokens"].(int64) <= 0 {
		t.Errorf("RUN_FINISHED usage = %v", usage)
	}
	if got := len(ofType(evs, Custom)); got < calls {
		t.Errorf("%d CUSTOM events for %d llm.usage", got, calls)
	}
	if m := last.Metadata(); m["sequence"] != log[len(log)-1].Sequence {
		t.Errorf("RUN_FINISHED metadata = %v, want the terminal event's sequence", m)
	}
	if ofType(evs, RunStarted)[0]["parentRunId"] != nil {
		t.Error("a run that is no fork has a parentRunId")
	}
	// A follow-up run's thread is its lifecycle.started's thread_id, unless
	// the caller names it.
	followUp := append([]models.Event{}, log...)
	followUp[0].Data = map[string]any{"task": "tools", "thread_id": "thread-1", "previous_run_id": "prev-1"}
	if got := flat(translate(Options{}, followUp))[0]; got["threadId"] != "thread-1" {
		t.Errorf("follow-up's RUN_STARTED = %v", got)
	}
	if got := flat(translate(Options{ThreadID: "thread-2"}, followUp))[0]; got["threadId"] != "thread-2" {
		t.Errorf("RUN_STARTED with Options.ThreadID = %v", got)
	}
	forked := flat(translate(Options{RunID: "fork-1", ParentRunID: "orig-1"}, log))
	if forked[0]["parentRunId"] != "orig-1" || forked[0]["runId"] != "fork-1" || forked[0]["input"].(map[string]any)["parentRunId"] != "orig-1" {
		t.Errorf("fork's RUN_STARTED = %v", forked[0])
	}
}

// TestAgentsAreSubagents: every agent below the global supervisor works
// as a sub-agent invocation, nested as in the run's tree; a sub-agent
// names the delegate call that started it; every event names its agent.
func TestAgentsAreSubagents(t *testing.T) {
	log := loadLog(t, "tools")
	evs := flat(translate(Options{}, log))
	started := map[string]Event{} // agent_id → its SUBAGENT_STARTED
	byID := map[string]string{}   // subagentRunId → agent_id
	for _, e := range ofType(evs, SubagentStarted) {
		id := e.Metadata()["agent_id"].(string)
		if _, ok := started[id]; !ok {
			started[id] = e
		}
		byID[e["subagentRunId"].(string)] = id
	}
	parent := func(agent string) string {
		p, _ := started[agent]["parentSubagentRunId"].(string)
		return byID[p]
	}
	for agent, want := range map[string]string{
		"ts-research": "", "w-searcher": "ts-research", "w-analyst": "ts-research",
		"sa-researcher": "w-searcher", "sa-checker": "sa-researcher", "ts-writing": "", "w-writer": "ts-writing",
	} {
		if _, ok := started[agent]; !ok {
			t.Errorf("no SUBAGENT_STARTED for %s", agent)
		} else if got := parent(agent); got != want {
			t.Errorf("%s's parent = %q, want %q", agent, got, want)
		}
	}
	// The sub-agents name the delegate calls that started them.
	calls := map[string]string{} // tool_execution_id → caller
	for _, e := range log {
		if e.Event.Action == models.ActionToolCall && e.Data["tool_name"] == models.DelegateToolName {
			calls[e.Data["tool_execution_id"].(string)] = e.Source.AgentID
		}
	}
	for _, agent := range []string{"sa-researcher", "sa-checker"} {
		id, _ := started[agent]["parentToolCallId"].(string)
		if calls[id] != parent(agent) {
			t.Errorf("%s: parentToolCallId %q is not a delegate call of its caller %s", agent, id, parent(agent))
		}
	}
	// Steps: a team turn and each worker dispatch.
	var steps []string
	for _, e := range ofType(evs, StepStarted) {
		steps = append(steps, e["stepName"].(string))
	}
	if want := "team:research worker:searcher worker:analyst team:writing worker:writer"; strings.Join(steps, " ") != want {
		t.Errorf("steps = %v, want %s", steps, want)
	}
	if got := ofType(evs, StepStarted)[0].Metadata(); got["instruction"] != "collect sources" || got["agent_id"] != "gs-1" {
		t.Errorf("team step metadata = %v", got)
	}
	// Every event but the run's own names its agent, and what an agent
	// below the global supervisor does is attributed to its invocation.
	for _, e := range evs {
		switch e.Type() {
		case RunStarted, RunFinished, RunError:
			continue
		}
		m := e.Metadata()
		if m == nil || m["agent_id"] == nil {
			t.Errorf("%s without agent metadata: %v", e.Type(), e)
			continue
		}
		agent := m["agent_id"].(string)
		switch e.Type() {
		case TextMessageStart, TextMessageContent, TextMessageEnd, ToolCallStart, ToolCallArgs, ToolCallEnd, ToolCallResult:
			sub, _ := e["subagentRunId"].(string)
			if agent == "gs-1" && sub != "" || agent != "gs-1" && byID[sub] != agent {
				t.Errorf("%s of %s attributed to %q", e.Type(), agent, sub)
			}
		}
	}
}

// TestToolCalls: each llm.tool_call is a TOOL_CALL_START/ARGS/END under
// its spec 004 tool_execution_id, and its result a TOOL_CALL_RESULT.
func TestToolCalls(t *testing.T) {
	log := loadLog(t, "tools")
	evs := flat(translate(Options{}, log))
	args := map[string]string{}
	for _, e := range ofType(evs, ToolCallArgs) {
		args[e["toolCallId"].(string)] += e["delta"].(string)
	}
	results := map[string]string{}
	for _, e := range ofType(evs, ToolCallResult) {
		results[e["toolCallId"].(string)] = e["content"].(string)
	}
	n := 0
	for _, e := range log {
		switch e.Event.Action {
		case models.ActionToolCall:
			n++
			id := e.Data["tool_execution_id"].(string)
			var want, got any
			_ = json.Unmarshal([]byte(args[id]), &got)
			b, _ := json.Marshal(e.Data["tool_input"])
			_ = json.Unmarshal(b, &want)
			if !reflect.DeepEqual(got, want) {
				t.Errorf("tool call %s: args %s, want %s", id, args[id], b)
			}
		case models.ActionToolResult:
			id := e.Data["tool_execution_id"].(string)
			if e.Data["is_error"] == true && results[id] != e.Data["error"] {
				t.Errorf("failed tool %s: result %q, want its error", id, results[id])
			}
			if e.Data["tool_name"] == "calculator" && !strings.Contains(results[id], `"result":42`) {
				t.Errorf("calculator result = %q", results[id])
			}
		}
	}
	if n != 8 || len(ofType(evs, ToolCallStart)) != 8 || len(ofType(evs, ToolCallEnd)) != 8 || len(results) != 8 {
		t.Errorf("%d tool calls: %d starts, %d ends, %d results", n, len(ofType(evs, ToolCallStart)), len(ofType(evs, ToolCallEnd)), len(results))
	}
}

// TestRetryStartsANewMessage: AG-UI cannot take text back, so a retried
// attempt writes a new message and a CUSTOM event names the superseded
// reasoning; the reasoning is REASONING_* events.
func TestRetryStartsANewMessage(t *testing.T) {
	log := loadLog(t, "reasoning-retry")
	evs := flat(translate(Options{}, log))
	var retry Event
	for _, e := range ofType(evs, Custom) {
		if e["name"] == "executor.llm.retry" {
			retry = e
		}
	}
	if retry == nil {
		t.Fatal("no CUSTOM executor.llm.retry")
	}
	v := retry["value"].(map[string]any)
	spans := ofType(evs, ReasoningStart)
	if len(spans) != 2 || v["superseded_reasoning_id"] != spans[0]["messageId"] {
		t.Fatalf("reasoning spans %v, retry %v", spans, v)
	}
	reasoning := map[string]string{}
	for _, e := range ofType(evs, ReasoningMessageContent) {
		reasoning[e["messageId"].(string)] += e["delta"].(string)
	}
	if got := reasoning[spans[1]["messageId"].(string)]; got != "The sources agree; keep it short." {
		t.Errorf("second attempt's reasoning = %q", got)
	}
	var writer []string
	for _, e := range ofType(evs, TextMessageStart) {
		if e.Metadata()["agent_id"] == "w-writer" {
			writer = append(writer, e["messageId"].(string))
		}
	}
	if len(writer) != 1 || !strings.HasSuffix(writer[0], "~1") {
		t.Errorf("writer's messages = %v, want one, of the second attempt (suffix ~1)", writer)
	}
}

// TestApprovalIsAnInterrupt: approval.requested ends the AG-UI run with
// an interrupt outcome (the gated worker's turn suspended), and
// approval.resolved starts the next one, whose input answers the
// interrupt.
func TestApprovalIsAnInterrupt(t *testing.T) {
	log := loadLog(t, "approvals")
	groups := translate(Options{}, log)
	var requested, resolved []models.Event
	for _, e := range log {
		switch e.Event.String() {
		case "approval.requested":
			requested = append(requested, e)
		case "approval.resolved":
			resolved = append(resolved, e)
		}
	}
	if len(requested) != 2 || len(resolved) != 2 {
		t.Fatalf("log has %d requests and %d resolutions", len(requested), len(resolved))
	}
	for i, req := range requested {
		g := groups[req.Sequence-1]
		fin := g[len(g)-1]
		outcome, _ := fin["outcome"].(map[string]any)
		if fin.Type() != RunFinished || outcome["type"] != "interrupt" {
			t.Fatalf("approval.requested made %v", g)
		}
		in := outcome["interrupts"].([]any)[0].(map[string]any)
		if in["id"] != req.Data["approval_id"] || in["reason"] != "approval" || in["message"] != req.Data["instruction"] ||
			!strings.HasPrefix(in["subagentRunId"].(string), req.Source.AgentID+"@") {
			t.Errorf("interrupt = %v", in)
		}
		if i == 1 && in["expiresAt"] != req.Data["timeout_at"] {
			t.Errorf("interrupt with a timeout = %v", in)
		}
		var suspended bool
		for _, e := range ofType(g, SubagentFinished) {
			o := e["outcome"].(map[string]any)
			if o["type"] != "suspended" {
				t.Errorf("SUBAGENT_FINISHED at an interrupt: %v", e)
			}
			if e["subagentRunId"] == in["subagentRunId"] && reflect.DeepEqual(o["interruptIds"], []any{in["id"]}) {
				suspended = true
			}
		}
		if !suspended {
			t.Errorf("the gated agent's turn is not suspended on its interrupt: %v", g)
		}
		r := groups[resolved[i].Sequence-1]
		if r[0].Type() != RunStarted {
			t.Fatalf("approval.resolved made %v", r)
		}
		entry := r[0]["input"].(map[string]any)["resume"].([]any)[0].(map[string]any)
		if entry["interruptId"] != in["id"] || entry["status"] != "resolved" || entry["payload"].(map[string]any)["decision"] != resolved[i].Data["decision"] {
			t.Errorf("resume entry = %v", entry)
		}
		// The turns open at the interrupt are open again, with their ids.
		if s := ofType(r, SubagentStarted); len(s) != 2 || s[1]["subagentRunId"] != in["subagentRunId"] {
			t.Errorf("re-opened turns = %v", s)
		}
	}
}

// TestResumeIsTheSuffix: a stream resumed after any sequence N sends, for
// each event after N, exactly what the whole stream sends for it; before
// the first, a prelude that only re-opens (RUN_STARTED, steps,
// sub-agents, messages) what is open at N, and nothing when no AG-UI run
// is open there.
func TestResumeIsTheSuffix(t *testing.T) {
	reopening := map[string]bool{RunStarted: true, StepStarted: true, SubagentStarted: true, TextMessageStart: true, ReasoningStart: true, ReasoningMessageStart: true}
	for _, name := range logs {
		log := loadLog(t, name)
		full := translate(Options{}, log)
		for n := 0; n < len(log); n++ {
			after := log[n].Sequence
			got := translate(Options{After: after}, log)
			for i := 0; i <= n; i++ {
				if len(got[i]) != 0 {
					t.Fatalf("%s after %d: event %d sent %v", name, after, log[i].Sequence, got[i])
				}
			}
			if n+1 == len(log) {
				continue
			}
			first := got[n+1]
			if len(first) < len(full[n+1]) || !reflect.DeepEqual(first[len(first)-len(full[n+1]):], full[n+1]) {
				t.Fatalf("%s after %d: first event sent %v, want (prelude +) %v", name, after, first, full[n+1])
			}
			prelude := first[:len(first)-len(full[n+1])]
			for _, e := range prelude {
				if !reopening[e.Type()] || e.Metadata()["sequence"] != nil {
					t.Errorf("%s after %d: prelude has %v", name, after, e)
				}
			}
			// A run is open after N exactly when the whole stream's last
			// run event up to N is RUN_STARTED.
			open := false
			for _, e := range flat(full[:n+1]) {
				switch e.Type() {
				case RunStarted:
					open = true
				case RunFinished, RunError:
					open = false
				}
			}
			if open != (len(prelude) > 0 && prelude[0].Type() == RunStarted) {
				t.Errorf("%s after %d: run open %v, prelude %v", name, after, open, prelude)
			}
			if !reflect.DeepEqual(got[n+2:], full[n+2:]) {
				t.Fatalf("%s after %d: the rest differs", name, after)
			}
		}
	}
}

// TestFailures: a team's failure ends its turn with SUBAGENT_ERROR, a
// failed run is RUN_ERROR (after closing what is open), and a cancelled
// one RUN_FINISHED with outcome cancelled.
func TestFailures(t *testing.T) {
	log := loadLog(t, "tools")
	cut := log[:40] // the searcher has answered; the research team is at work
	last := cut[len(cut)-1]
	next := func(kind models.EventKind, src models.Source, data map[string]any) models.Event {
		last = models.Event{RunID: last.RunID, Timestamp: last.Timestamp, Sequence: last.Sequence + 1, Source: src, Event: kind, Data: data}
		return last
	}
	sys := models.Source{AgentID: "system", AgentType: models.AgentTypeSystem, AgentName: "system"}
	failed := append(append([]models.Event{}, cut...),
		next(models.EventKind{Category: models.CategorySystem, Action: models.ActionError}, sys, map[string]any{"team_name": "research", "message": "the analyst's model is gone"}),
		next(models.EventKind{Category: models.CategoryLifecycle, Action: models.ActionFailed}, log[0].Source, map[string]any{"error": "no team left", "error_code": "EXECUTION_FAILED"}),
	)
	evs := flat(translate(Options{}, failed))
	errs := ofType(evs, SubagentError)
	if len(errs) != 1 || errs[0]["message"] != "the analyst's model is gone" || errs[0].Metadata()["agent_id"] != "ts-research" {
		t.Fatalf("SUBAGENT_ERROR = %v", errs)
	}
	end := evs[len(evs)-1]
	if end.Type() != RunError || end["message"] != "no team left" || end["code"] != "EXECUTION_FAILED" {
		t.Fatalf("last event = %v", end)
	}
	if s, f := len(ofType(evs, SubagentStarted)), len(ofType(evs, SubagentFinished))+len(errs); s != f {
		t.Errorf("%d sub-agents started, %d ended", s, f)
	}

	last = cut[len(cut)-1]
	cancelled := append(append([]models.Event{}, cut...),
		next(models.EventKind{Category: models.CategoryLifecycle, Action: models.ActionCancelled}, log[0].Source, map[string]any{"reason": "user"}))
	evs = flat(translate(Options{}, cancelled))
	if end := evs[len(evs)-1]; end.Type() != RunFinished || !reflect.DeepEqual(end["outcome"], map[string]any{"type": "cancelled"}) {
		t.Errorf("cancelled run ends with %v", end)
	}
	if s, f := len(ofType(evs, StepStarted)), len(ofType(evs, StepFinished)); s != f {
		t.Errorf("%d steps started, %d finished", s, f)
	}
}

// TestTeamsTogether: teams at work together are sub-agents open at the
// same time, their workers' messages interleaved; a team's turn ends when
// the next dispatch lists it among the completed teams.
func TestTeamsTogether(t *testing.T) {
	log := loadLog(t, "parallel")
	groups := translate(Options{}, log)
	open, most := map[string]bool{}, 0
	ended := map[string]int64{} // team supervisor → sequence its turn ended at
	for i, g := range groups {
		for _, e := range g {
			switch e.Type() {
			case SubagentStarted:
				open[e["subagentRunId"].(string)] = true
			case SubagentFinished:
				delete(open, e["subagentRunId"].(string))
				if id := e.Metadata()["agent_id"].(string); strings.HasPrefix(id, "ts-") {
					ended[id] = log[i].Sequence
				}
			}
			most = max(most, len(open))
		}
	}
	// Two teams with a worker each, plus nothing else: 4 at once.
	if most != 4 {
		t.Errorf("at most %d sub-agents open at once, want 4 (two teams and their workers)", most)
	}
	for e := range slices.Values(log) {
		if e.Event.String() == "dispatch.team" && e.Data["team_name"] == "analysis" && ended["ts-research"] != e.Sequence {
			t.Errorf("research's turn ended at %d, want %d (the dispatch that lists it completed)", ended["ts-research"], e.Sequence)
		}
	}
}

// TestEncode: one "data:" line per event, "id:" on the last only.
func TestEncode(t *testing.T) {
	var b bytes.Buffer
	evs := []Event{{"type": TextMessageEnd, "messageId": "m1"}, {"type": StepFinished, "stepName": "a\nb"}}
	if err := Encode(&b, 42, evs); err != nil {
		t.Fatal(err)
	}
	want := "data: {\"messageId\":\"m1\",\"type\":\"TEXT_MESSAGE_END\"}\n\nid: 42\ndata: {\"stepName\":\"a\\nb\",\"type\":\"STEP_FINISHED\"}\n\n"
	if b.String() != want {
		t.Errorf("Encode wrote %q, want %q", b.String(), want)
	}
	b.Reset()
	if err := Encode(&b, 0, evs[:1]); err != nil || strings.Contains(b.String(), "id:") {
		t.Errorf("Encode with seq 0 wrote %q, %v", b.String(), err)
	}
}

// TestWithAGUIPackages validates the encoded streams of every recorded
// log, whole and resumed after each of its events, with @ag-ui/core's
// schemas and @ag-ui/client's own pipeline (e2e/interop/agui-validate.mjs),
// and checks that each agent's answers arrive whole and attributed.
func TestWithAGUIPackages(t *testing.T) {
	dir := interopDir(t)
	for _, name := range logs {
		t.Run(name, func(t *testing.T) {
			log := loadLog(t, name)
			var lines bytes.Buffer
			write := func(stream string, opts Options) {
				s := NewStream(opts)
				for _, e := range log {
					b, err := s.Frame(e)
					if err != nil {
						t.Fatal(err)
					}
					if b == nil {
						continue
					}
					line, _ := json.Marshal(map[string]any{"stream": stream, "seq": e.Sequence, "sse": string(b)})
					lines.Write(append(line, '\n'))
				}
			}
			write("full", Options{})
			for _, e := range log[:len(log)-1] {
				write("resume@"+itoa(e.Sequence), Options{After: e.Sequence})
			}
			file := filepath.Join(t.TempDir(), name+".jsonl")
			if err := os.WriteFile(file, lines.Bytes(), 0o644); err != nil {
				t.Fatal(err)
			}
			cmd := exec.Command("node", filepath.Join(dir, "agui-validate.mjs"), file)
			cmd.Dir = dir
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			out, err := cmd.Output()
			if err != nil {
				t.Fatalf("agui-validate.mjs: %v\n%s", err, stderr.String())
			}
			var res struct {
				Messages []map[string]any `json:"messages"`
				Streams  int              `json:"streams"`
			}
			if err := json.Unmarshal(out, &res); err != nil {
				t.Fatalf("agui-validate.mjs printed %s: %v", out, err)
			}
			if res.Streams != len(log) {
				t.Errorf("%d streams validated, want %d", res.Streams, len(log))
			}
			checkAnswers(t, log, res.Messages)
		})
	}
}

// checkAnswers: every answer in the log is a message of the client's,
// whole, named after its agent and attributed to it (aguitest.CheckAnswers).
func checkAnswers(t *testing.T, log []models.Event, msgs []map[string]any) {
	t.Helper()
	aguitest.CheckAnswers(t, log, msgs)
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// interopDir is e2e/interop with its packages installed (npm ci, as the
// lock file pins them). Without node and npm the test is skipped, except
// in CI.
func interopDir(t *testing.T) string {
	t.Helper()
	return interop.Dir(t, "@ag-ui/client/package.json", "@ag-ui/core/package.json")
}

// TestHTTPAgentReconnects serves a recorded run the way the route will
// (docs/ag-ui.md), over real HTTP, to @ag-ui/client's HttpAgent running
// docs/ag-ui.md's example (e2e/interop/agui-httpagent.mjs). The server is
// a named stand-in for the route: it streams the log through a Stream,
// resuming after ?after= or Last-Event-ID, and ends the first connection in
// the middle of the run, with a message open and both approvals still to
// come. The client must reconnect, answer both interrupts with
// runs/approve, and end with every answer whole and attributed.
func TestHTTPAgentReconnects(t *testing.T) {
	dir := interopDir(t)
	log := loadLog(t, "approvals")
	const cut = 9 // the searcher's answer is open after it
	var (
		mu          sync.Mutex
		connections []int64
		approved    []string
	)
	mux := http.NewServeMux()
	mux.HandleFunc("POST /api/executor/v1/runs/approve", func(w http.ResponseWriter, r *http.Request) {
		var body struct {
			ID         string `json:"id"`
			ApprovalID string `json:"approval_id"`
		}
		_ = json.NewDecoder(r.Body).Decode(&body)
		mu.Lock()
		approved = append(approved, body.ApprovalID)
		mu.Unlock()
		_, _ = w.Write([]byte(`{"code":0,"data":{},"message":"success"}`))
	})
	mux.HandleFunc("/api/executor/v1/runs/{id}/stream", func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("format") != "ag-ui" || r.PathValue("id") != log[0].RunID || r.Header.Get("Authorization") == "" {
			http.Error(w, "not this stream", http.StatusNotFound)
			return
		}
		after, _ := strconv.ParseInt(r.URL.Query().Get("after"), 10, 64)
		if v := r.Header.Get("Last-Event-ID"); v != "" {
			after, _ = strconv.ParseInt(v, 10, 64)
		}
		mu.Lock()
		connections = append(connections, after)
		first := len(connections) == 1
		mu.Unlock()
		w.Header().Set("Content-Type", MediaType)
		s := NewStream(Options{After: after})
		for _, e := range log {
			b, err := s.Frame(e)
			if err != nil {
				t.Error(err)
				return
			}
			_, _ = w.Write(b)
			w.(http.Flusher).Flush()
			if first && e.Sequence == cut {
				return
			}
		}
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()

	cmd := exec.Command("node", filepath.Join(dir, "agui-httpagent.mjs"), srv.URL+"/api/executor/v1", log[0].RunID)
	cmd.Dir = dir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("agui-httpagent.mjs: %v\n%s", err, stderr.String())
	}
	var res struct {
		Messages    []map[string]any `json:"messages"`
		Approved    []string         `json:"approved"`
		Connections int              `json:"connections"`
		Last        int64            `json:"last"`
	}
	if err := json.Unmarshal(out, &res); err != nil {
		t.Fatalf("agui-httpagent.mjs printed %s: %v", out, err)
	}
	if !reflect.DeepEqual(connections, []int64{0, cut}) || res.Connections != 2 || res.Last != log[len(log)-1].Sequence {
		t.Errorf("connections resumed after %v (client: %d, last %d), want [0 %d]", connections, res.Connections, res.Last, cut)
	}
	var want []string
	for _, e := range log {
		if e.Event.String() == "approval.requested" {
			want = append(want, e.Data["approval_id"].(string))
		}
	}
	if !reflect.DeepEqual(res.Approved, want) || !reflect.DeepEqual(approved, want) {
		t.Errorf("approved %v (server saw %v), want %v", res.Approved, approved, want)
	}
	checkAnswers(t, log, res.Messages)
}

// TestQueuedRunStartsWithItsStart: a queued run's log opens with
// lifecycle.queued (docs/queue.md); it makes nothing, so the AG-UI run is
// the same as the log without it, opening with RUN_STARTED and the task.
func TestQueuedRunStartsWithItsStart(t *testing.T) {
	log := loadLog(t, "tools")
	queued := models.Event{RunID: log[0].RunID, Sequence: 0, Timestamp: log[0].Timestamp, Source: log[0].Source,
		Event: models.EventKind{Category: models.CategoryLifecycle, Action: models.ActionQueued}, Data: map[string]any{"reason": models.QueueReasonLimit, "position": 1}}
	with := translate(Options{}, append([]models.Event{queued}, log...))
	if len(with[0]) != 0 {
		t.Fatalf("lifecycle.queued made %v", with[0])
	}
	got, want := flat(with[1:]), flat(translate(Options{}, log))
	gotJSON, _ := json.Marshal(got)
	wantJSON, _ := json.Marshal(want)
	if string(gotJSON) != string(wantJSON) {
		t.Errorf("a queued run's AG-UI events differ from its log without lifecycle.queued:\n%s\nwant\n%s", gotJSON, wantJSON)
	}
}
