package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	sse "github.com/tmaxmax/go-sse"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/workflowservice/v1"

	"github.com/op-stack/executor/config"
	"github.com/op-stack/executor/llm/llmfake"
	"github.com/op-stack/executor/models"
)

// sseMessage is one message as a client written against contract 002 sees
// it: the SSE id and event fields and the parsed envelope.
type sseMessage struct {
	ID    string
	Type  string
	Event models.Event
}

// openStream connects to the run's stream like a browser EventSource
// (GET, Last-Event-ID) or, with post, like contract 002's client.
func (e *testEnv) openStream(runID string, lastEventID int64, post bool) *http.Response {
	e.t.Helper()
	var req *http.Request
	if post {
		req, _ = http.NewRequest(http.MethodPost, e.apiURL+"/runs/stream", strings.NewReader(fmt.Sprintf(`{"id":%q}`, runID)))
		req.Header.Set("Content-Type", "application/json")
	} else {
		req, _ = http.NewRequest(http.MethodGet, e.apiURL+"/runs/"+runID+"/stream", nil)
	}
	req.Header.Set("Accept", "text/event-stream")
	if lastEventID > 0 {
		req.Header.Set("Last-Event-ID", strconv.FormatInt(lastEventID, 10))
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatalf("open stream: %v", err)
	}
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		e.t.Fatalf("stream answered %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	return resp
}

// readStream reads messages until the server ends the stream or stop
// returns true, and reports whether the server ended it.
func (e *testEnv) readStream(resp *http.Response, stop func(sseMessage) bool) ([]sseMessage, bool) {
	e.t.Helper()
	defer resp.Body.Close()
	var out []sseMessage
	for ev, err := range sse.Read(resp.Body, &sse.ReadConfig{MaxEventSize: 4 << 20}) {
		if err != nil {
			e.t.Fatalf("read stream: %v", err)
		}
		m := sseMessage{ID: ev.LastEventID, Type: ev.Type}
		if err := json.Unmarshal([]byte(ev.Data), &m.Event); err != nil {
			e.t.Fatalf("event data is not the envelope: %v: %q", err, ev.Data)
		}
		out = append(out, m)
		if stop != nil && stop(m) {
			return out, false
		}
	}
	return out, true
}

// streamAll reads a whole run's stream from the start.
func (e *testEnv) streamAll(runID string) []sseMessage {
	e.t.Helper()
	msgs, ended := e.readStream(e.openStream(runID, 0, true), nil)
	if !ended {
		e.t.Fatal("stream did not end")
	}
	return msgs
}

// checkLog checks what every client relies on: the envelope's fields, SSE
// ids equal to sequences from 1 with no gap, and a terminal lifecycle
// event at the end.
func checkLog(t *testing.T, runID string, msgs []sseMessage) {
	t.Helper()
	if len(msgs) == 0 {
		t.Fatal("empty stream")
	}
	for i, m := range msgs {
		ev := m.Event
		if ev.Sequence != int64(i+1) || m.ID != strconv.Itoa(i+1) {
			t.Fatalf("message %d: id %q sequence %d", i, m.ID, ev.Sequence)
		}
		if m.Type != ev.Event.String() || ev.RunID != runID {
			t.Fatalf("message %d: SSE event %q, envelope %s, run %q", i, m.Type, ev.Event, ev.RunID)
		}
		if _, err := time.Parse(models.TimestampLayout, ev.Timestamp); err != nil || len(ev.Timestamp) != len("2025-12-30T10:30:00.123Z") {
			t.Fatalf("message %d: timestamp %q", i, ev.Timestamp)
		}
		if ev.Source.AgentType == models.AgentTypeGlobalSupervisor && ev.Source.TeamName != nil {
			t.Fatalf("message %d: the global supervisor has team_name %q", i, *ev.Source.TeamName)
		}
		if ev.Event.Category == models.CategoryLLM {
			if ev.Data["agent_id"] != ev.Source.AgentID || ev.Data["attempt"] == nil {
				t.Fatalf("message %d: llm event data %+v", i, ev.Data)
			}
			if _, ok := ev.Data["content"].(string); !ok {
				t.Fatalf("message %d: llm event without content", i)
			}
		}
		for k := range ev.Data {
			if strings.HasPrefix(k, "_") {
				t.Fatalf("message %d: legacy field %s", i, k)
			}
		}
	}
	if first := msgs[0].Event.Event.String(); first != "lifecycle.started" {
		t.Errorf("first event %s", first)
	}
	if msgs[1].Event.Event.String() != "system.topology" {
		t.Errorf("second event %s, want system.topology", msgs[1].Event.Event)
	}
	switch last := msgs[len(msgs)-1].Event.Event; last.String() {
	case "lifecycle.completed", "lifecycle.failed", "lifecycle.cancelled":
	default:
		t.Errorf("stream ends with %s", last)
	}
}

// TestStream reads a whole run like a contract 002 client and checks the
// agent_ids of spec 000 (SC-001, SC-002) at all three levels.
func TestStream(t *testing.T) {
	e := newEnv(t, referenceRules(map[string][]llmfake.Response{
		"W-SEARCHER": {{Content: strings.Repeat("token ", 50), Reasoning: "let me think", TokenDelay: 5 * time.Millisecond}},
	}))
	id := e.startRun(e.createHierarchy(referenceHierarchy()), "stream it")
	msgs := e.streamAll(id)
	checkLog(t, id, msgs)
	if last := msgs[len(msgs)-1].Event; last.Event.String() != "lifecycle.completed" || last.Data["final_answer"] != "FINAL ANSWER: tunnelling explained." {
		t.Errorf("last event = %+v", last)
	}

	created := map[string]string{"gs-1": "global_supervisor", "ts-research": "team_supervisor", "ts-writing": "team_supervisor", "w-searcher": "worker", "w-analyst": "worker", "w-writer": "worker"}
	text := map[string]string{}
	seen := map[string]int{}
	for _, m := range msgs {
		ev := m.Event
		if ev.Event.Category != models.CategoryLLM {
			continue
		}
		if created[ev.Source.AgentID] != ev.Source.AgentType {
			t.Errorf("llm event from agent_id %q (%s) that was not created as such", ev.Source.AgentID, ev.Source.AgentType)
		}
		seen[ev.Source.AgentID]++
		if ev.Event.Action == models.ActionStream {
			text[ev.Source.AgentID] += ev.Data["content"].(string)
		}
	}
	for id := range created {
		if seen[id] == 0 {
			t.Errorf("no llm event from %s", id)
		}
	}
	if text["w-searcher"] != strings.Repeat("token ", 50) || text["w-writer"] != "output of W-WRITER" {
		t.Errorf("streamed text: searcher %q, writer %q", text["w-searcher"], text["w-writer"])
	}
	if !strings.Contains(text["gs-1"], "FINAL ANSWER") || !strings.Contains(text["ts-research"], `"target":"searcher"`) {
		t.Errorf("supervisor text: %q / %q", text["gs-1"], text["ts-research"])
	}
	var reasoning string
	var dispatchWorker, dispatchTeam int
	for _, m := range msgs {
		switch m.Type {
		case "llm.reasoning":
			reasoning += m.Event.Data["content"].(string)
			if m.Event.Source.AgentID != "w-searcher" {
				t.Errorf("reasoning event = %+v", m.Event)
			}
		case "dispatch.worker":
			dispatchWorker++
			if m.Event.Data["instruction"] == "" || m.Event.Data["worker_agent_id"] == nil || m.Event.Source.AgentType != "team_supervisor" {
				t.Errorf("dispatch.worker = %+v", m.Event)
			}
		case "dispatch.team":
			dispatchTeam++
		}
	}
	if reasoning != "let me think" || dispatchWorker != 3 || dispatchTeam != 2 {
		t.Errorf("reasoning %q, dispatch.worker %d, dispatch.team %d", reasoning, dispatchWorker, dispatchTeam)
	}

	// A finished run replays from the database, identically, without a
	// single workflow query. (The stream ends with the terminal event; the
	// terminal status is written just after it.)
	e.waitRun(id, 30*time.Second)
	before := e.api.StreamStats().Queries
	again := e.streamAll(id)
	if e.api.StreamStats().Queries != before {
		t.Error("streaming a finished run queried the workflow")
	}
	if len(again) != len(msgs) {
		t.Fatalf("replay has %d events, live had %d", len(again), len(msgs))
	}
	for i := range msgs {
		a, _ := json.Marshal(msgs[i].Event)
		b, _ := json.Marshal(again[i].Event)
		if string(a) != string(b) {
			t.Fatalf("replayed event %d differs:\n%s\n%s", i, a, b)
		}
	}
	// runs/events returns the stored log, filtered.
	var page struct {
		Events []models.Event `json:"events"`
	}
	e.mustPost("/runs/events", map[string]any{"id": id, "agent_id": "w-searcher", "types": []string{"llm.stream"}}, &page)
	if len(page.Events) == 0 {
		t.Fatal("runs/events returned nothing for the searcher")
	}
	for _, ev := range page.Events {
		if ev.Source.AgentID != "w-searcher" || ev.Event.String() != "llm.stream" {
			t.Errorf("filtered event = %+v", ev)
		}
	}
}

// TestStreamResume drops the connection mid-run and resumes with
// Last-Event-ID; several subscribers receive identical streams.
func TestStreamResume(t *testing.T) {
	e := newEnv(t, referenceRules(map[string][]llmfake.Response{
		"W-SEARCHER": {{Content: strings.Repeat("slow ", 40), TokenDelay: 10 * time.Millisecond}},
		"W-ANALYST":  {{Content: strings.Repeat("slower ", 40), TokenDelay: 10 * time.Millisecond}},
	}))
	id := e.startRun(e.createHierarchy(referenceHierarchy()), "resume")

	var wg sync.WaitGroup
	full := make([][]sseMessage, 3)
	for i := range full {
		wg.Add(1)
		go func() {
			defer wg.Done()
			full[i], _ = e.readStream(e.openStream(id, 0, i%2 == 0), nil)
		}()
	}

	// Drop after the first few llm.stream events of the searcher, then
	// resume, twice.
	var resumed []sseMessage
	var last int64
	for round := 0; round < 3; round++ {
		stopAfter := len(resumed) + 5
		msgs, ended := e.readStream(e.openStream(id, last, false), func(m sseMessage) bool {
			return round < 2 && len(resumed)+1 >= stopAfter
		})
		for _, m := range msgs {
			resumed = append(resumed, m)
		}
		if len(msgs) > 0 {
			last = msgs[len(msgs)-1].Event.Sequence
		}
		if ended {
			break
		}
	}
	wg.Wait()
	checkLog(t, id, resumed)
	for i, f := range full {
		if len(f) != len(resumed) {
			t.Fatalf("subscriber %d got %d events, the resumed client %d", i, len(f), len(resumed))
		}
		for j := range f {
			if f[j].ID != resumed[j].ID || f[j].Event.Data["content"] != resumed[j].Event.Data["content"] {
				t.Fatalf("subscriber %d event %d differs", i, j)
			}
		}
	}
}

// TestStreamRetry cuts a worker's stream mid-answer: the stream shows the
// partial output of attempt 1, an llm.retry, and the complete output of
// attempt 2.
func TestStreamRetry(t *testing.T) {
	full := strings.Repeat("complete ", 20)
	e := newEnv(t, referenceRules(map[string][]llmfake.Response{
		"W-WRITER": {{Content: full, DropAfterChunks: 6}, {Content: full}},
	}))
	id := e.startRun(e.createHierarchy(referenceHierarchy()), "retry")
	msgs := e.streamAll(id)
	checkLog(t, id, msgs)
	byAttempt := map[float64]string{}
	retries := 0
	for _, m := range msgs {
		if m.Event.Source.AgentID != "w-writer" {
			continue
		}
		attempt, _ := m.Event.Data["attempt"].(float64)
		switch m.Type {
		case "llm.stream":
			byAttempt[attempt] += m.Event.Data["content"].(string)
		case "llm.retry":
			retries++
			if attempt != 2 || len(byAttempt[1]) == 0 {
				t.Errorf("llm.retry %+v after attempt-1 text %q", m.Event.Data, byAttempt[1])
			}
		}
	}
	if retries != 1 || byAttempt[2] != full || byAttempt[1] == "" || byAttempt[1] == full {
		t.Errorf("retries %d; attempt 1 %q; attempt 2 %q", retries, byAttempt[1], byAttempt[2])
	}
}

// TestStreamGeneratedAgentIDs: a hierarchy created without agent_ids
// streams the generated ids that hierarchies/get returns.
func TestStreamGeneratedAgentIDs(t *testing.T) {
	e := newEnv(t, referenceRules(nil))
	body := referenceHierarchy()
	delete(body["global_supervisor_agent"].(map[string]any), "agent_id")
	for _, tm := range body["teams"].([]any) {
		delete(tm.(map[string]any)["team_supervisor_agent"].(map[string]any), "agent_id")
		for _, w := range tm.(map[string]any)["workers"].([]any) {
			delete(w.(map[string]any), "agent_id")
		}
	}
	hid := e.createHierarchy(body)
	var h models.Hierarchy
	e.mustPost("/hierarchies/get", map[string]any{"hierarchy_id": hid}, &h)
	known := map[string]bool{}
	for _, id := range h.AgentIDs() {
		known[id] = true
	}
	msgs := e.streamAll(e.startRun(hid, "generated ids"))
	streamed := map[string]bool{}
	for _, m := range msgs {
		if m.Event.Event.Category == models.CategoryLLM {
			if !known[m.Event.Source.AgentID] {
				t.Errorf("streamed agent_id %q is not one get returns", m.Event.Source.AgentID)
			}
			streamed[m.Event.Source.AgentID] = true
		}
	}
	if len(streamed) != len(known) {
		t.Errorf("streamed %d of the %d agents", len(streamed), len(known))
	}
}

// TestLongRunStaysBounded runs 211 LLM calls that stream 2,000 tokens each
// (10 team turns of 10 workers with a decision each, plus the global
// supervisor's), with continue-as-new forced often: every execution stays
// far below Temporal's limits, and the log is complete and gap-free.
func TestLongRunStaysBounded(t *testing.T) {
	if testing.Short() {
		t.Skip("long")
	}
	long := strings.Repeat("abcd", 2000) // 2,000 four-character tokens
	var workers []any
	rules := []llmfake.Rule{
		{SystemContains: "BIG-GS", HasJSONSchema: true, Responses: []llmfake.Response{{Content: decisionWithReason("big", long)}}},
		{SystemContains: "BIG-GS", Responses: []llmfake.Response{{Content: long}}},
	}
	// In each turn the team supervisor picks w0…w9 in order: the k-th
	// decision's prompt lists w0…w(k-1) as done (longest list first).
	for k := 9; k >= 0; k-- {
		var done []string
		for i := 0; i < k; i++ {
			done = append(done, fmt.Sprintf("w%d", i))
		}
		rule := llmfake.Rule{SystemContains: "BIG-TS", Responses: []llmfake.Response{{Content: decisionWithReason(fmt.Sprintf("w%d", k), long)}}}
		if k > 0 {
			rule.UserContains = "Already done: " + strings.Join(done, ", ") + "\n"
		}
		rules = append(rules, rule)
	}
	for i := 0; i < 10; i++ {
		name := fmt.Sprintf("w%d", i)
		workers = append(workers, map[string]any{"agent_id": "agent-" + name, "name": name, "system_prompt": "WORKER-" + name + " "})
		rules = append(rules, llmfake.Rule{SystemContains: "WORKER-" + name + " ", Responses: []llmfake.Response{{Content: long}}})
	}
	e := newEnv(t, rules, withConfig(func(c *config.Config) { c.ContinueAsNewAfter = 500 }))
	hid := e.createHierarchy(map[string]any{
		"name":                    "big",
		"global_supervisor_agent": map[string]any{"agent_id": "big-gs", "system_prompt": "BIG-GS"},
		"teams": []any{map[string]any{
			"name": "big", "prevent_duplicate": true, "workers": workers,
			"team_supervisor_agent": map[string]any{"agent_id": "big-ts", "system_prompt": "BIG-TS"},
		}},
	})
	id := e.startRun(hid, "long run")
	ctx := context.Background()
	if err := e.temporal.GetWorkflow(ctx, models.RunWorkflowID(id), "").Get(ctx, nil); err != nil {
		t.Fatalf("%v\n%s", err, lastEvents(t, e, models.RunWorkflowID(id)))
	}
	if n := len(e.fake.Calls()); n != 211 {
		t.Errorf("%d LLM calls, want 211", n)
	}
	// Every call's usage row is kept: activity ids start again from 1 in
	// each execution, and the rows' ids must not collide across them.
	if recorded, err := e.store.LLMCalls(ctx, id); err != nil || len(recorded) != 211 {
		t.Errorf("%d llm_call rows (%v), want one per call: 211", len(recorded), err)
	}

	// Every execution of the run (continue-as-new chain) and its team turns.
	resp, err := e.temporal.ListWorkflow(ctx, listRequest(fmt.Sprintf("WorkflowId STARTS_WITH 'run-%s'", id)))
	if err != nil {
		t.Fatal(err)
	}
	runs := 0
	for _, info := range resp.Executions {
		if info.GetType().GetName() == models.RunWorkflowName {
			runs++
		}
		if info.GetHistoryLength() > 20000 {
			t.Errorf("%s/%s has %d history events", info.GetExecution().GetWorkflowId(), info.GetExecution().GetRunId(), info.GetHistoryLength())
		}
		if info.GetType().GetName() == models.RunWorkflowName && info.GetStatus() != enumspb.WORKFLOW_EXECUTION_STATUS_CONTINUED_AS_NEW && info.GetStatus() != enumspb.WORKFLOW_EXECUTION_STATUS_COMPLETED {
			t.Errorf("run execution status %s", info.GetStatus())
		}
	}
	if runs < 2 {
		t.Errorf("the run never continued as new (%d executions)", runs)
	}
	t.Logf("211 calls x 2,000 tokens: %d run executions, %d executions in all", runs, len(resp.Executions))

	// The stored log is complete: gap-free, every worker's text whole.
	all := e.storedEvents(id)
	text := map[string]int{}
	for i, ev := range all {
		if ev.Sequence != int64(i+1) {
			t.Fatalf("stored event %d has sequence %d", i, ev.Sequence)
		}
		if ev.Event.String() == "llm.stream" {
			text[ev.Source.AgentID] += len(ev.Data["content"].(string))
		}
	}
	if last := all[len(all)-1].Event.String(); last != "lifecycle.completed" {
		t.Errorf("last stored event %s", last)
	}
	for i := 0; i < 10; i++ {
		if got := text[fmt.Sprintf("agent-w%d", i)]; got != 10*len(long) {
			t.Errorf("worker w%d streamed %d characters over 10 turns, want %d", i, got, 10*len(long))
		}
	}
}

func decisionWithReason(target, reason string) string {
	raw, _ := json.Marshal(map[string]string{"action": "dispatch", "target": target, "instruction": "go", "reason": reason})
	return string(raw)
}

func listRequest(query string) *workflowservice.ListWorkflowExecutionsRequest {
	return &workflowservice.ListWorkflowExecutionsRequest{Namespace: "default", Query: query, PageSize: 1000}
}

// lastEvents describes the end of a workflow's history, for failures.
func lastEvents(t *testing.T, e *testEnv, workflowID string) string {
	h := historyJSON(t, e.temporal, workflowID)
	if len(h) > 3000 {
		h = h[len(h)-3000:]
	}
	return h
}
