package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/op-stack/executor/llm/llmfake"
	"github.com/op-stack/executor/models"
)

// forkRules script a run of the reference hierarchy that runs research
// twice and never writes: the global supervisor dispatches research, then
// research again, then finishes (its last answer repeats); a fork after
// the first research turn is forced to writing.
func forkRules() []llmfake.Rule {
	rules := []llmfake.Rule{
		{Name: "global decisions", SystemContains: "GS-PROMPT", HasJSONSchema: true, Responses: contentResponses(
			decision("dispatch", "research", "collect sources"), decision("dispatch", "research", "dig deeper"), decision("finish", "", ""))},
		{Name: "final answer", SystemContains: "GS-PROMPT", Responses: contentResponses("FINAL ANSWER: tunnelling explained.")},
		{Name: "research decisions", SystemContains: "TS-RESEARCH", Responses: contentResponses(
			decision("dispatch", "searcher", "find papers"), decision("dispatch", "analyst", "analyse them"), decision("finish", "", ""),
			decision("dispatch", "searcher", "find more papers"), decision("finish", "", ""))},
		{Name: "writing decisions", SystemContains: "TS-WRITING", Responses: contentResponses(
			decision("dispatch", "writer", "write it"), decision("finish", "", ""))},
	}
	for _, marker := range []string{"W-SEARCHER", "W-ANALYST", "W-WRITER"} {
		rules = append(rules, llmfake.Rule{Name: marker, SystemContains: marker, Responses: []llmfake.Response{{Content: "output of " + marker + " " + strings.Repeat("token ", 8), ChunkSize: 12}}})
	}
	return rules
}

// forkPointsOf lists a run's fork points through the API.
func (e *testEnv) forkPointsOf(id string) []models.ForkPoint {
	e.t.Helper()
	var out struct {
		Points []models.ForkPoint `json:"points"`
	}
	e.mustPost("/runs/fork-points", map[string]any{"id": id}, &out)
	return out.Points
}

type forkAnswer struct {
	ID         string            `json:"id"`
	ForkedFrom models.ForkedFrom `json:"forked_from"`
	ForkPoint  models.ForkPoint  `json:"fork_point"`
}

// TestForkRun forks a finished run after its first team turn, through the
// API, against the dev server and the fake LLM server over HTTP.
func TestForkRun(t *testing.T) {
	e := newEnv(t, forkRules())
	hid := e.createHierarchy(referenceHierarchy())
	orig := e.startRun(hid, "Explain quantum tunnelling")
	// A run still going cannot be forked yet.
	if status, env := e.post("/runs/fork", map[string]any{"id": orig, "after_sequence": 1}); status != 409 || env.ErrorCode != models.CodeExecutionInProgress.Name {
		t.Errorf("fork of a running run: %d %+v", status, env)
	}
	origView := e.waitRun(orig, time.Minute)
	if origView.Status != models.RunCompleted || len(origView.Result.Teams) != 2 {
		t.Fatalf("original = %+v", origView)
	}
	origEvents := e.storedEvents(orig)
	callsBefore := len(e.fake.Calls())

	// A fork of a run the caller cannot see is 404.
	if status, env := e.post("/runs/fork", map[string]any{"id": "no-such-run", "after_sequence": 3}); status != 404 || env.ErrorCode != models.CodeExecutionNotFound.Name {
		t.Errorf("fork of an unknown run: %d %+v", status, env)
	}

	points := e.forkPointsOf(orig)
	var after *models.ForkPoint
	for i := range points {
		if points[i].Kind == models.ForkAtTeamFinished && points[i].Turn == 1 {
			after = &points[i]
		}
	}
	if after == nil || after.TeamName != "research" {
		t.Fatalf("no point after the first research turn among %+v", points)
	}

	// An event that is no fork point: 400 naming the nearest ones.
	notPoint := int64(1) // lifecycle.started
	status, env := e.post("/runs/fork", map[string]any{"id": orig, "after_sequence": notPoint})
	if status != 400 || env.ErrorCode != models.CodeSequenceNotForkable.Name || !strings.Contains(env.Message, "nearest before: none") ||
		!strings.Contains(env.Message, "nearest after: ") {
		t.Errorf("fork at sequence 1: %d %+v", status, env)
	}
	// In the middle of the searcher's streamed answer: its dispatch.
	var streamSeq, searcherDispatch int64
	for _, ev := range origEvents {
		if ev.Event.Action == models.ActionWorker && ev.Data["worker_name"] == "searcher" && searcherDispatch == 0 {
			searcherDispatch = ev.Sequence
		}
		if searcherDispatch > 0 && streamSeq == 0 && ev.Event.Action == models.ActionStream && ev.Source.AgentID == "w-searcher" {
			streamSeq = ev.Sequence
		}
	}

	// A change that cannot apply at the point: 400 naming it.
	status, env = e.post("/runs/fork", map[string]any{"id": orig, "after_sequence": points[0].Sequence, "changes": map[string]any{"next_team": "writing"}})
	if status != 400 || env.ErrorCode != models.CodeInvalidParameters.Name || !strings.Contains(env.Message, "changes.next_team") {
		t.Errorf("next_team at a dispatch.team point: %d %+v", status, env)
	}
	if n := len(e.fake.Calls()); n != callsBefore {
		t.Fatalf("refused forks called the model %d times", n-callsBefore)
	}

	// The fork: after research's first turn, the next turn forced to
	// writing, with its own instruction and a new prompt for the writer.
	var fork forkAnswer
	e.mustPost("/runs/fork", map[string]any{"id": orig, "after_sequence": after.Sequence, "changes": map[string]any{
		"next_team":         "writing",
		"team_instructions": map[string]any{"writing": "WRITE FOR CHILDREN"},
		"agents":            []any{map[string]any{"agent_id": "w-writer", "system_prompt": "W-WRITER-BETTER You write simply."}},
	}}, &fork)
	if fork.ID == "" || fork.ID == orig || fork.ForkedFrom != (models.ForkedFrom{RunID: orig, Sequence: after.Sequence}) {
		t.Fatalf("fork answer = %+v", fork)
	}
	view := e.waitRun(fork.ID, time.Minute)
	if view.Status != models.RunCompleted {
		t.Fatalf("fork ended %s: %s", view.Status, view.Error)
	}

	// The fake's log: nothing repeated for the copied part.
	forkCalls := e.fake.Calls()[callsBefore:]
	for _, marker := range []string{"TS-RESEARCH", "W-SEARCHER", "W-ANALYST"} {
		if n := len(callsMatching(forkCalls, marker)); n != 0 {
			t.Errorf("the fork called %s %d times: the copied part was repeated", marker, n)
		}
	}
	if n := len(callsMatching(forkCalls, "W-WRITER-BETTER")); n != 1 {
		t.Errorf("the fork called the writer with its new prompt %d times, want 1", n)
	}
	if ts := callsMatching(forkCalls, "TS-WRITING"); len(ts) == 0 || !strings.Contains(ts[0].Messages[len(ts[0].Messages)-1].Content, "WRITE FOR CHILDREN") {
		t.Errorf("writing's supervisor was not given the fork's instruction: %+v", ts)
	}
	// The global supervisor: its decision after writing and the final
	// answer; the forced dispatch asked nobody.
	if n := len(callsMatching(forkCalls, "GS-PROMPT")); n != 2 {
		t.Errorf("the fork called the global supervisor %d times, want 2", n)
	}

	// Results: the copied research turn, then writing.
	res := view.Result
	if len(res.Teams) != 2 || res.Teams[0].TeamName != "research" || res.Teams[1].TeamName != "writing" || res.Teams[1].Turn != 2 || res.Teams[1].Instruction != "WRITE FOR CHILDREN" {
		t.Fatalf("fork's teams = %+v", res.Teams)
	}
	if !reflect.DeepEqual(res.Teams[0].Workers, origView.Result.Teams[0].Workers) {
		t.Errorf("copied research turn = %+v, want %+v", res.Teams[0].Workers, origView.Result.Teams[0].Workers)
	}

	// The fork's stream from 0: gap-free, the copied events identical
	// apart from run_id, then the fork's own, the forced dispatch first.
	msgs := e.streamAll(fork.ID)
	for i, m := range msgs {
		if m.Event.Sequence != int64(i+1) {
			t.Fatalf("stream message %d has sequence %d", i, m.Event.Sequence)
		}
	}
	if int64(len(msgs)) <= after.Sequence {
		t.Fatalf("the fork's stream has %d events, the fork point is %d", len(msgs), after.Sequence)
	}
	for i := int64(0); i < after.Sequence; i++ {
		want := origEvents[i]
		want.RunID = fork.ID
		if got := msgs[i].Event; !sameEvent(got, want) {
			t.Fatalf("copied event %d differs:\n got %+v\nwant %+v", i+1, got, want)
		}
	}
	first := msgs[after.Sequence].Event
	if first.Event.String() != "dispatch.team" || first.Data["team_name"] != "writing" || first.RunID != fork.ID {
		t.Errorf("the fork's first own event = %+v", first)
	}
	if last := msgs[len(msgs)-1].Event; last.Event.String() != "lifecycle.completed" {
		t.Errorf("the fork's stream ends with %s", last.Event)
	}

	// The original is untouched.
	if again := e.storedEvents(orig); !reflect.DeepEqual(again, origEvents) {
		t.Error("the original's events changed")
	}
	if again := e.getRun(orig); !reflect.DeepEqual(again.Result, origView.Result) || again.Status != origView.Status {
		t.Errorf("the original's result changed: %+v", again.Result)
	}

	// runs/get, runs/list and the search attribute show the fork.
	var got struct {
		ForkedFrom      *models.ForkedFrom `json:"forked_from"`
		ExecutionConfig map[string]any     `json:"execution_config"`
		Usage           struct {
			TotalTokens int `json:"total_tokens"`
		} `json:"usage"`
	}
	e.mustPost("/runs/get", map[string]any{"id": fork.ID}, &got)
	if got.ForkedFrom == nil || *got.ForkedFrom != fork.ForkedFrom || got.ExecutionConfig == nil {
		t.Errorf("runs/get of the fork: %+v", got)
	}
	var copied int
	for _, ev := range origEvents[:after.Sequence] {
		if ev.Event.String() == "llm.usage" {
			copied += models.UsageOfEvent(ev).TotalTokens
		}
	}
	if copied == 0 || got.Usage.TotalTokens <= copied {
		t.Errorf("fork's usage = %d tokens, want the copied %d and more", got.Usage.TotalTokens, copied)
	}
	var list struct {
		Items []struct {
			ID         string             `json:"id"`
			ForkedFrom *models.ForkedFrom `json:"forked_from"`
		} `json:"items"`
		Total int `json:"total"`
	}
	e.mustPost("/runs/list", map[string]any{"forked_from": orig}, &list)
	if list.Total != 1 || list.Items[0].ID != fork.ID || list.Items[0].ForkedFrom == nil {
		t.Errorf("runs/list forked_from = %+v", list)
	}
	waitFor(t, 30*time.Second, "ForkedFrom in visibility", func() bool {
		resp, err := e.temporal.ListWorkflow(context.Background(), listRequest(`ForkedFrom = "`+orig+`"`))
		return err == nil && len(resp.Executions) == 1 && resp.Executions[0].GetExecution().GetWorkflowId() == models.RunWorkflowID(fork.ID)
	})

	// A fork in the middle of the searcher's answer starts from its
	// dispatch, and the same Idempotency-Key gives the same fork.
	if streamSeq == 0 {
		t.Fatal("no llm.stream event of the searcher in the original")
	}
	var mid, midAgain forkAnswer
	e.mustPostWithHeader("/runs/fork", map[string]any{"id": orig, "after_sequence": streamSeq}, "Idempotency-Key", "fork-mid", &mid)
	e.mustPostWithHeader("/runs/fork", map[string]any{"id": orig, "after_sequence": streamSeq}, "Idempotency-Key", "fork-mid", &midAgain)
	if mid.ForkPoint.Sequence != searcherDispatch || mid.ForkPoint.Kind != models.ForkAtWorkerDispatch || midAgain.ID != mid.ID {
		t.Errorf("mid-stream forks = %+v, %+v (searcher's dispatch %d)", mid, midAgain, searcherDispatch)
	}
	if v := e.waitRun(mid.ID, time.Minute); v.Status != models.RunCompleted {
		t.Errorf("the mid-stream fork ended %s: %s", v.Status, v.Error)
	}
}

// sameEvent compares two events as their JSON.
func sameEvent(a, b models.Event) bool {
	ra, _ := json.Marshal(a)
	rb, _ := json.Marshal(b)
	return string(ra) == string(rb)
}

// mustPostWithHeader is mustPost with one request header set.
func (e *testEnv) mustPostWithHeader(path string, body any, header, value string, out any) {
	e.t.Helper()
	raw, _ := json.Marshal(body)
	req, _ := http.NewRequest(http.MethodPost, e.apiURL+path, bytes.NewReader(raw))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(header, value)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatalf("POST %s: %v", path, err)
	}
	defer resp.Body.Close()
	var env envelope
	if err := json.NewDecoder(resp.Body).Decode(&env); err != nil || resp.StatusCode != http.StatusOK || env.Code != 0 {
		e.t.Fatalf("POST %s: status %d: %v %+v", path, resp.StatusCode, err, env)
	}
	if err := json.Unmarshal(env.Data, out); err != nil {
		e.t.Fatal(err)
	}
}
