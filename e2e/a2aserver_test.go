package e2e

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/op-stack/executor/auth"
	"github.com/op-stack/executor/internal/interop"
	"github.com/op-stack/executor/llm/llmfake"
	"github.com/op-stack/executor/models"
)

// a2aHierarchy is one team with one worker; prompts carry markers (prefix
// tells the gated copy apart), and gated puts the worker behind approval.
func a2aHierarchy(name, prefix string, gated bool) map[string]any {
	w := map[string]any{"agent_id": "w-" + strings.ToLower(prefix), "name": "writer", "system_prompt": "W-" + prefix + " You write."}
	if gated {
		w["requires_approval"] = true
		w["approval_timeout"] = 86400
	}
	return map[string]any{
		"name":                    name,
		"description":             "drafts an answer (" + prefix + ")",
		"global_supervisor_agent": map[string]any{"agent_id": "gs-" + strings.ToLower(prefix), "system_prompt": "GS-" + prefix + " You lead."},
		"teams": []any{map[string]any{
			"name":                  "drafting",
			"team_supervisor_agent": map[string]any{"agent_id": "ts-" + strings.ToLower(prefix), "system_prompt": "TS-" + prefix + " You lead drafting."},
			"workers":               []any{w},
		}},
	}
}

// slowAnswer is the slow run's worker answer: 60 chunks, 100 ms apart.
var slowAnswer = strings.Repeat("slow ", 48)

// a2aRules script the runs, told apart by their tasks (a follow-up's
// prompts show its previous run's task too, so SECOND comes first).
func a2aRules() []llmfake.Rule {
	var rules []llmfake.Rule
	for _, prefix := range []string{"A2A", "GATE"} {
		for _, task := range []string{"SECOND TASK", "SLOW TASK", "FIRST TASK", "STREAMED TASK", "GATED TASK", "GATED TWO TASK", "OTHER TASK"} {
			instruction := "write"
			if task == "SLOW TASK" {
				instruction = "write slowly"
			}
			user := "Task: " + task
			rules = append(rules,
				llmfake.Rule{Name: "gs decisions " + task, SystemContains: "GS-" + prefix, UserContains: user, HasJSONSchema: true, Responses: contentResponses(
					decision("dispatch", "drafting", "draft it"), decision("finish", "", ""))},
				llmfake.Rule{Name: "final " + task, SystemContains: "GS-" + prefix, UserContains: user, Responses: contentResponses("FINAL " + task)},
				llmfake.Rule{Name: "ts decisions " + task, SystemContains: "TS-" + prefix, UserContains: user, Responses: contentResponses(
					decision("dispatch", "writer", instruction), decision("finish", "", ""))},
			)
		}
		rules = append(rules,
			llmfake.Rule{Name: "slow worker", SystemContains: "W-" + prefix, UserContains: "write slowly", Responses: []llmfake.Response{{Content: slowAnswer, ChunkSize: 4, TokenDelay: 100 * time.Millisecond}}},
			llmfake.Rule{Name: "worker", SystemContains: "W-" + prefix, Responses: contentResponses("worker output CHARLIE")})
	}
	return rules
}

// a2aOut is what e2e/interop/a2a-client.mjs prints.
type a2aOut struct {
	Card struct {
		Name       string   `json:"name"`
		Skills     []string `json:"skills"`
		Interfaces []struct {
			URL, Binding, Version string
		} `json:"interfaces"`
		Streaming bool     `json:"streaming"`
		Push      bool     `json:"push"`
		Schemes   []string `json:"schemes"`
	} `json:"card"`
	First, Second, Got, Cancelled, Gated, Approved, Gated2 a2aTask
	Streamed, SlowBefore, SlowAfter, ApprovedStream        []a2aEvent
	SlowResumeAfter                                        int64
	Listed                                                 []a2aTask
	Thread                                                 []string
	CancelAgain, Push, OtherCard, OtherGet                 *string
	OtherSend                                              *string
	OtherList                                              int
}

type a2aTask struct {
	ID         string `json:"id"`
	ContextID  string `json:"contextId"`
	State      string `json:"state"`
	StatusText string `json:"statusText"`
	Artifacts  []struct {
		ID   string `json:"id"`
		Text string `json:"text"`
	} `json:"artifacts"`
}

type a2aEvent struct {
	Kind       string `json:"kind"`
	ID         string `json:"id"`
	State      string `json:"state"`
	Seq        int64  `json:"seq"`
	ArtifactID string `json:"artifactId"`
	Append     bool   `json:"append"`
	LastChunk  bool   `json:"lastChunk"`
	Text       string `json:"text"`
	AgentID    string `json:"agentId"`
}

// a2aClientScript returns the client script's path, e2e/interop's
// packages installed (interop.Dir: skipped without node and npm, except in
// CI, where it must run).
func a2aClientScript(t *testing.T) string {
	t.Helper()
	dir := interop.Dir(t, "@a2a-js/sdk/package.json")
	return filepath.Join(dir, "a2a-client.mjs")
}

// TestA2AServer drives two hierarchies' A2A agents with the real
// @a2a-js/sdk client (e2e/interop/a2a-client.mjs): the card, a blocking
// send, a streamed send, a follow-up in the same context, GetTask and
// ListTasks, a slow task resubscribed mid-stream after a sequence and
// cancelled, an approval answered on an input-required task, push config
// refused, and another tenant's key seeing nothing. The outcomes are
// checked against the executor API.
func TestA2AServer(t *testing.T) {
	script := a2aClientScript(t)
	e := newEnv(t, a2aRules(), withAuth)
	scopes := []auth.Scope{auth.ScopeHierarchiesRead, auth.ScopeHierarchiesWrite, auth.ScopeRunsRead, auth.ScopeRunsWrite}
	keyA, keyB := e.issueKey("tenant-a", scopes...), e.issueKey("tenant-b", scopes...)
	var h, g struct {
		ID string `json:"hierarchy_id"`
	}
	e.mustCall("POST", "/api/executor/v1/hierarchies/create", keyA, a2aHierarchy("a2a-agent", "A2A", false), &h)
	e.mustCall("POST", "/api/executor/v1/hierarchies/create", keyA, a2aHierarchy("a2a-gated", "GATE", true), &g)

	cmd := exec.Command("node", script)
	cmd.Env = append(os.Environ(), "BASE="+e.rootURL(), "KEY="+keyA, "OTHER_KEY="+keyB, "HIERARCHY="+h.ID, "GATED="+g.ID)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	raw, err := cmd.Output()
	if err != nil {
		t.Fatalf("a2a-client.mjs: %v\n%s\n%s", err, raw, stderr.String())
	}
	var out a2aOut
	if err := json.Unmarshal(raw, &out); err != nil {
		t.Fatalf("a2a-client.mjs printed %s: %v", raw, err)
	}
	type apiRun struct {
		runView
		ThreadID      string `json:"thread_id"`
		PreviousRunID string `json:"previous_run_id"`
	}
	get := func(id string) apiRun {
		t.Helper()
		var v apiRun
		e.mustCall("POST", "/api/executor/v1/runs/get", keyA, map[string]any{"id": id}, &v)
		return v
	}

	// The card.
	c := out.Card
	if c.Name != "a2a-agent" || !slices.Equal(c.Skills, []string{h.ID}) || !c.Streaming || c.Push || !slices.Equal(c.Schemes, []string{"bearer"}) ||
		len(c.Interfaces) != 1 || c.Interfaces[0].URL != e.rootURL()+"/a2a/"+h.ID || c.Interfaces[0].Binding != "JSONRPC" || c.Interfaces[0].Version != "1.0" {
		t.Errorf("card = %+v", c)
	}

	// The blocking send: the run's final answer, its thread as context.
	r1 := get(out.First.ID)
	if out.First.State != "TASK_STATE_COMPLETED" || r1.Status != models.RunCompleted || r1.Task != "FIRST TASK" || out.First.ContextID != r1.ThreadID ||
		len(out.First.Artifacts) != 1 || out.First.Artifacts[0].ID != "final_answer" || out.First.Artifacts[0].Text != r1.FinalAnswer || r1.FinalAnswer != "FINAL FIRST TASK" {
		t.Errorf("first = %+v; run %+v", out.First, r1)
	}

	// The streamed send: the task, working, the worker's answer in chunks
	// under its agent_id, the final answer, completed.
	s := out.Streamed
	if len(s) < 4 || s[0].Kind != "task" || s[len(s)-1].Kind != "status" || s[len(s)-1].State != "TASK_STATE_COMPLETED" {
		t.Fatalf("streamed = %+v", s)
	}
	rs := get(s[0].ID)
	answers := map[string]string{}
	var working bool
	var final string
	var lastSeq int64
	for _, ev := range s[1:] {
		if ev.Seq != 0 {
			if ev.Seq < lastSeq {
				t.Errorf("sequence went back: %+v after %d", ev, lastSeq)
			}
			lastSeq = ev.Seq
		}
		switch {
		case ev.Kind == "status" && ev.State == "TASK_STATE_WORKING":
			working = true
		case ev.Kind == "artifact" && ev.ArtifactID == "final_answer":
			final = ev.Text
		case ev.Kind == "artifact":
			answers[ev.AgentID] += ev.Text
		}
	}
	if !working || final != rs.FinalAnswer || rs.FinalAnswer != "FINAL STREAMED TASK" || answers["w-a2a"] != "worker output CHARLIE" || rs.Status != models.RunCompleted {
		t.Errorf("streamed: working %v final %q answers %q; run %s %q", working, final, answers, rs.Status, rs.FinalAnswer)
	}

	// The follow-up: same context, previous_run_id the first run.
	r2 := get(out.Second.ID)
	if out.Second.State != "TASK_STATE_COMPLETED" || out.Second.ContextID != out.First.ContextID || r2.PreviousRunID != out.First.ID || r2.ThreadID != r1.ThreadID || r2.Task != "SECOND TASK" {
		t.Errorf("second = %+v; run %+v", out.Second, r2)
	}
	if out.Got.ID != out.First.ID || out.Got.State != "TASK_STATE_COMPLETED" {
		t.Errorf("GetTask = %+v", out.Got)
	}
	ids := map[string]bool{}
	for _, l := range out.Listed {
		ids[l.ID] = true
	}
	if !ids[out.First.ID] || !ids[out.Second.ID] || !ids[rs.ID] || len(out.Listed) != 3 {
		t.Errorf("ListTasks = %+v (three tasks then; none of the gated hierarchy)", out.Listed)
	}
	if !slices.Equal(out.Thread, []string{out.Second.ID, out.First.ID}) {
		t.Errorf("ListTasks of the context = %v", out.Thread)
	}

	// The slow task: resubscribed after a sequence, no event again, then
	// cancelled.
	if out.SlowResumeAfter == 0 || len(out.SlowAfter) < 3 || out.SlowAfter[0].Kind != "task" {
		t.Fatalf("slow: before %+v; resumed after %d: %+v", out.SlowBefore, out.SlowResumeAfter, out.SlowAfter)
	}
	slowID := out.SlowAfter[0].ID
	for _, ev := range out.SlowAfter[1:] {
		if ev.Seq != 0 && ev.Seq <= out.SlowResumeAfter {
			t.Errorf("resubscribed stream repeats event %d (resumed after %d)", ev.Seq, out.SlowResumeAfter)
		}
	}
	end := out.SlowAfter[len(out.SlowAfter)-1]
	var rSlow apiRun
	waitFor(t, time.Minute, "the slow run's end", func() bool { rSlow = get(slowID); return models.IsTerminal(rSlow.Status) })
	if end.Kind != "status" || end.State != "TASK_STATE_CANCELED" || rSlow.Status != models.RunCancelled {
		t.Errorf("slow stream ended with %+v; run %s", end, rSlow.Status)
	}
	// Every chunk of the worker's answer before the cancel, once.
	var text string
	for _, ev := range append(out.SlowBefore, out.SlowAfter...) {
		if ev.Kind == "artifact" && ev.AgentID == "w-a2a" {
			text += ev.Text
		}
	}
	if !strings.HasPrefix(slowAnswer, text) || text == "" {
		t.Errorf("slow answer seen = %q, want a prefix of %q", text, slowAnswer)
	}
	if out.CancelAgain == nil || !strings.Contains(*out.CancelAgain, "cancel") {
		t.Errorf("cancelling an ended task: %v", out.CancelAgain)
	}

	// The approval.
	rg := get(out.Approved.ID)
	if out.Gated.State != "TASK_STATE_INPUT_REQUIRED" || !strings.Contains(out.Gated.StatusText, "approve") ||
		out.Approved.ID != out.Gated.ID || out.Approved.State != "TASK_STATE_COMPLETED" || rg.Status != models.RunCompleted || rg.FinalAnswer != "FINAL GATED TASK" {
		t.Errorf("gated = %+v, approved = %+v; run %s", out.Gated, out.Approved, rg.Status)
	}
	var resolved bool
	for _, ev := range e.storedEvents(rg.ID) {
		if ev.Event.Category == models.CategoryApproval && ev.Event.Action == models.ActionResolved && ev.Data["decision"] == models.ApprovalApproved && ev.Data["comment"] == "go ahead" {
			resolved = true
		}
	}
	if !resolved {
		t.Error("no approval.resolved approved with the comment 'go ahead'")
	}

	// Push notifications: the SDK reports the refusal in its own words;
	// the server's message names the reason.
	// The streamed answer: the task (working), then only events after the
	// approval's resolution, the worker's answer among them, to the end.
	var resolvedAt int64
	for _, ev := range e.storedEvents(out.Gated2.ID) {
		if ev.Event.Category == models.CategoryApproval && ev.Event.Action == models.ActionResolved {
			resolvedAt = ev.Sequence
		}
	}
	as := out.ApprovedStream
	var worker string
	for _, ev := range as {
		if ev.Seq != 0 && ev.Seq <= resolvedAt {
			t.Errorf("streamed answer repeats event %d (the approval resolved at %d)", ev.Seq, resolvedAt)
		}
		if ev.Kind == "artifact" && ev.AgentID == "w-gate" {
			worker += ev.Text
		}
	}
	if out.Gated2.State != "TASK_STATE_INPUT_REQUIRED" || resolvedAt == 0 || len(as) < 3 || as[0].Kind != "task" || as[0].State != "TASK_STATE_WORKING" ||
		worker != "worker output CHARLIE" || as[len(as)-1].State != "TASK_STATE_COMPLETED" {
		t.Errorf("gated2 %+v; streamed answer %+v", out.Gated2, as)
	}

	if out.Push == nil || !strings.Contains(*out.Push, "Push Notification is not supported") {
		t.Errorf("push config: %v", deref(out.Push))
	}

	// Another tenant.
	if out.OtherCard == nil || out.OtherGet == nil || !strings.Contains(strings.ToLower(*out.OtherGet), "not found") || out.OtherList != 0 || out.OtherSend == nil {
		t.Errorf("other tenant: card %v get %v list %d send %v", out.OtherCard, out.OtherGet, out.OtherList, out.OtherSend)
	}
	var page struct {
		Total int `json:"total"`
	}
	e.mustCall("POST", "/api/executor/v1/runs/list", keyA, map[string]any{"hierarchy_id": h.ID}, &page)
	if page.Total != 4 {
		t.Errorf("tenant A has %d runs of the hierarchy, want 4 (the other tenant's send started none)", page.Total)
	}

	// Scopes: a read-only key reads but cannot send; no key is refused.
	ro := e.issueKey("tenant-a", auth.ScopeRunsRead)
	rpc := func(key, method string, params any) (int, string) {
		status, body := e.call("POST", "/a2a/"+h.ID, key, map[string]any{"jsonrpc": "2.0", "id": 1, "method": method, "params": params})
		return status, string(body)
	}
	if status, body := rpc(ro, "GetTask", map[string]any{"id": out.First.ID}); status != http.StatusOK || !strings.Contains(body, `"TASK_STATE_COMPLETED"`) {
		t.Errorf("read-only GetTask: %d %s", status, body)
	}
	if status, body := rpc(ro, "SendMessage", map[string]any{"message": map[string]any{"messageId": "m", "role": "ROLE_USER", "parts": []any{map[string]any{"text": "x"}}}}); status != http.StatusOK || !strings.Contains(body, "runs:write") {
		t.Errorf("read-only SendMessage: %d %s", status, body)
	}
	if status, body := rpc(keyA, "CreateTaskPushNotificationConfig", map[string]any{"taskId": out.First.ID, "url": "http://127.0.0.1:9/hook"}); status != http.StatusOK || !strings.Contains(body, "no webhooks") || !strings.Contains(body, "-32003") {
		t.Errorf("push config: %d %s", status, body)
	}
	if status, body := rpc(keyA, "ListTasks", map[string]any{"status": "TASK_STATE_BOGUS"}); status != http.StatusOK || !strings.Contains(body, "-32602") {
		t.Errorf("ListTasks with an unknown state: %d %s", status, body)
	}
	// Refusals in A2A's words: a message to an ended task (-32004), an
	// unknown context (-32602), a resume point that is no sequence.
	msg := func(extra map[string]any) map[string]any {
		m := map[string]any{"messageId": "m2", "role": "ROLE_USER", "parts": []any{map[string]any{"text": "more"}}}
		for k, v := range extra {
			m[k] = v
		}
		return map[string]any{"message": m}
	}
	if status, body := rpc(keyA, "SendMessage", msg(map[string]any{"taskId": out.First.ID})); status != http.StatusOK || !strings.Contains(body, "-32004") || !strings.Contains(body, "contextId") {
		t.Errorf("message to an ended task: %d %s", status, body)
	}
	if status, body := rpc(keyA, "SendMessage", msg(map[string]any{"contextId": "no-such-thread"})); status != http.StatusOK || !strings.Contains(body, "-32602") {
		t.Errorf("message with an unknown context: %d %s", status, body)
	}
	{
		raw, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 3, "method": "SubscribeToTask", "params": map[string]any{"id": out.First.ID}})
		req, _ := http.NewRequest(http.MethodPost, e.rootURL()+"/a2a/"+h.ID, bytes.NewReader(raw))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+keyA)
		req.Header.Set("Last-Event-ID", "x")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if !strings.Contains(string(body), "-32602") || !strings.Contains(string(body), "Last-Event-ID") {
			t.Errorf("SubscribeToTask with Last-Event-ID x: %d %s", resp.StatusCode, body)
		}
	}
	if status, _ := rpc("", "GetTask", map[string]any{"id": out.First.ID}); status != http.StatusUnauthorized {
		t.Errorf("GetTask without a key: %d", status)
	}
}

func deref(s *string) string {
	if s == nil {
		return "<nil>"
	}
	return *s
}
