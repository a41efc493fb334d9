package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/op-stack/executor/auth"
	"github.com/op-stack/executor/llm/llmfake"
	"github.com/op-stack/executor/models"
	"github.com/op-stack/executor/store"
)

// followHierarchy is one team with one worker; every prompt carries a
// marker the fake's rules match on.
func followHierarchy(name string) map[string]any {
	return map[string]any{
		"name":                    name,
		"global_supervisor_agent": map[string]any{"agent_id": "gs-follow", "system_prompt": "GS-FOLLOW You lead."},
		"teams": []any{map[string]any{
			"name":                  "drafting",
			"team_supervisor_agent": map[string]any{"agent_id": "ts-follow", "system_prompt": "TS-FOLLOW You lead drafting."},
			"workers":               []any{map[string]any{"agent_id": "w-follow", "name": "writer", "system_prompt": "W-FOLLOW You write."}},
		}},
	}
}

// firstAnswer is longer than a preview, so a follow-up's prompts get it by
// reference: only a prompt built from the stored message has its end.
var firstAnswer = "FIRST FINAL ANSWER BRAVO " + strings.Repeat("detail ", 60) + "END-OF-BRAVO"

// followRules script three runs told apart by their tasks (each run's
// prompts say "Task: <its task>"; a follow-up's also show its previous
// run's task, so the rules of later runs come first).
func followRules() []llmfake.Rule {
	var rules []llmfake.Rule
	for _, r := range []struct{ task, answer string }{{"THIRD TASK", "THIRD FINAL"}, {"SECOND TASK", "SECOND FINAL"}, {"", firstAnswer}} {
		user := ""
		if r.task != "" {
			user = "Task: " + r.task
		}
		rules = append(rules,
			llmfake.Rule{Name: "gs decisions " + r.task, SystemContains: "GS-FOLLOW", UserContains: user, HasJSONSchema: true, Responses: contentResponses(
				decision("dispatch", "drafting", "draft it"), decision("finish", "", ""))},
			llmfake.Rule{Name: "final " + r.task, SystemContains: "GS-FOLLOW", UserContains: user, Responses: contentResponses(r.answer)},
			llmfake.Rule{Name: "ts decisions " + r.task, SystemContains: "TS-FOLLOW", UserContains: user, Responses: contentResponses(
				decision("dispatch", "writer", "write"), decision("finish", "", ""))},
		)
	}
	return append(rules, llmfake.Rule{Name: "worker", SystemContains: "W-FOLLOW", Responses: contentResponses("worker output CHARLIE")})
}

// TestFollowUpRuns: run 2 starts with previous_run_id = run 1 and its
// supervisors' prompts show run 1's task, whole final answer and team
// results; both runs are one thread, listed by thread_id; run 3 (spec
// 001's execute, following run 2) stays in the thread. A previous run
// of another tenant is 404, of another hierarchy 400, still going 409.
func TestFollowUpRuns(t *testing.T) {
	e := newEnv(t, followRules(), withAuth)
	scopes := []auth.Scope{auth.ScopeHierarchiesRead, auth.ScopeHierarchiesWrite, auth.ScopeRunsRead, auth.ScopeRunsWrite}
	keyA, keyB := e.issueKey("tenant-a", scopes...), e.issueKey("tenant-b", scopes...)
	const v1 = "/api/v1/hierarchical-teams/"
	const runs = "/api/executor/v1/runs/"
	var h struct {
		ID string `json:"hierarchy_id"`
	}
	e.mustCall("POST", "/api/executor/v1/hierarchies/create", keyA, followHierarchy("follow"), &h)
	type started struct {
		ID       string `json:"id"`
		ThreadID string `json:"thread_id"`
	}
	var run1 started
	e.mustCall("POST", runs+"start", keyA, map[string]any{"hierarchy_id": h.ID, "task": "FIRST TASK ALPHA"}, &run1)
	if run1.ThreadID != run1.ID {
		t.Errorf("first run's thread = %q, want its id %q", run1.ThreadID, run1.ID)
	}

	get := func(key, id string) (v struct {
		runView
		ThreadID      string `json:"thread_id"`
		PreviousRunID string `json:"previous_run_id"`
	}) {
		t.Helper()
		deadline := time.Now().Add(time.Minute)
		for {
			e.mustCall("POST", runs+"get", key, map[string]any{"id": id}, &v)
			if models.IsTerminal(v.Status) {
				return v
			}
			if time.Now().After(deadline) {
				t.Fatalf("run %s still %s", id, v.Status)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	v1Run := get(keyA, run1.ID)
	if v1Run.Status != models.RunCompleted || v1Run.FinalAnswer != firstAnswer || v1Run.ThreadID != run1.ID || v1Run.PreviousRunID != "" {
		t.Fatalf("run 1 = %s %q thread %q previous %q", v1Run.Status, v1Run.Error, v1Run.ThreadID, v1Run.PreviousRunID)
	}
	before := len(e.fake.Calls())

	var run2 started
	e.mustCall("POST", runs+"start", keyA, map[string]any{"hierarchy_id": h.ID, "task": "SECOND TASK: make it shorter", "previous_run_id": run1.ID}, &run2)
	if run2.ThreadID != run1.ID {
		t.Errorf("follow-up's thread = %q, want %q", run2.ThreadID, run1.ID)
	}
	v2 := get(keyA, run2.ID)
	if v2.Status != models.RunCompleted || v2.FinalAnswer != "SECOND FINAL" || v2.ThreadID != run1.ID || v2.PreviousRunID != run1.ID {
		t.Fatalf("run 2 = %s %q answer %q thread %q previous %q", v2.Status, v2.Error, v2.FinalAnswer, v2.ThreadID, v2.PreviousRunID)
	}

	// Run 2's supervisors saw run 1: its task, its whole final answer (read
	// from its message: the preview lacks the end) and its team's results.
	calls := e.fake.Calls()[before:]
	gsCalls, tsCalls, workerCalls := callsMatching(calls, "GS-FOLLOW"), callsMatching(calls, "TS-FOLLOW"), callsMatching(calls, "W-FOLLOW")
	if len(gsCalls) != 3 || len(tsCalls) != 2 || len(workerCalls) != 1 {
		t.Fatalf("run 2's calls: %d global, %d team, %d worker", len(gsCalls), len(tsCalls), len(workerCalls))
	}
	for _, c := range gsCalls {
		p := lastUser(c)
		if !strings.Contains(p, "FIRST TASK ALPHA") || !strings.Contains(p, "FIRST FINAL ANSWER BRAVO") || !strings.Contains(p, "END-OF-BRAVO") || !strings.Contains(p, "worker output CHARLIE") {
			t.Errorf("global supervisor's prompt of run 2 lacks run 1's task, final answer or team results:\n%s", p)
		}
	}
	for _, c := range tsCalls {
		if p := lastUser(c); !strings.Contains(p, "FIRST TASK ALPHA") || !strings.Contains(p, "END-OF-BRAVO") {
			t.Errorf("team supervisor's prompt of run 2 lacks run 1:\n%s", p)
		}
	}
	if p := lastUser(workerCalls[0]); strings.Contains(p, "FIRST FINAL ANSWER") {
		t.Errorf("the worker saw the previous run:\n%s", p)
	}
	// lifecycle.started says which run this follows.
	for _, ev := range e.storedEvents(run2.ID) {
		if ev.Event.Category == models.CategoryLifecycle && ev.Event.Action == models.ActionStarted &&
			(ev.Data["previous_run_id"] != run1.ID || ev.Data["thread_id"] != run1.ID) {
			t.Errorf("lifecycle.started = %v", ev.Data)
		}
	}

	// Run 3 through spec 001's execute, following run 2: same thread.
	status, raw := e.call("POST", v1+h.ID+"/execute", keyA, map[string]any{"task": "THIRD TASK", "previous_run_id": run2.ID})
	var exec struct {
		Data struct {
			ExecutionID string `json:"execution_id"`
			ThreadID    string `json:"thread_id"`
		} `json:"data"`
	}
	if status != http.StatusOK || json.Unmarshal(raw, &exec) != nil || exec.Data.ThreadID != run1.ID {
		t.Fatalf("spec 001 follow-up: %d %s", status, raw)
	}
	if v3 := get(keyA, exec.Data.ExecutionID); v3.Status != models.RunCompleted || v3.PreviousRunID != run2.ID || v3.ThreadID != run1.ID {
		t.Errorf("run 3 = %s thread %q previous %q", v3.Status, v3.ThreadID, v3.PreviousRunID)
	}
	status, raw = e.call("GET", "/api/v1/executions/"+exec.Data.ExecutionID, keyA, nil)
	if status != http.StatusOK || !bytes.Contains(raw, []byte(`"previous_run_id":"`+run2.ID+`"`)) || !bytes.Contains(raw, []byte(`"thread_id":"`+run1.ID+`"`)) {
		t.Errorf("spec 001 execution: %d %s", status, raw)
	}

	// A run still going (pending here, with no workflow) cannot be
	// followed up with multitask_strategy reject: 409. It is a thread of
	// its own. (The default, enqueue, queues behind it: e2e/queue_test.go.)
	pending := &store.Run{ID: "pending-" + models.NewID(), TenantID: "tenant-a", HierarchyID: h.ID, WorkflowID: "run-none", Task: "t"}
	if err := e.store.CreateRun(context.Background(), pending); err != nil {
		t.Fatal(err)
	}
	status, raw = e.call("POST", runs+"start", keyA, map[string]any{"hierarchy_id": h.ID, "task": "x", "previous_run_id": pending.ID, "multitask_strategy": "reject"})
	if status != http.StatusConflict || !bytes.Contains(raw, []byte("EXECUTION_IN_PROGRESS")) || !bytes.Contains(raw, []byte("previous_run_id")) {
		t.Errorf("follow-up of a pending run: %d %s, want 409 EXECUTION_IN_PROGRESS", status, raw)
	}
	status, raw = e.call("POST", v1+h.ID+"/execute", keyA, map[string]any{"task": "x", "previous_run_id": pending.ID, "multitask_strategy": "reject"})
	if status != http.StatusConflict {
		t.Errorf("follow-up of a pending run (spec 001): %d %s, want 409", status, raw)
	}

	// runs/list by thread: the three runs, newest first; the pending run
	// of the same hierarchy is not in it.
	var list struct {
		Items []struct {
			ID            string `json:"id"`
			ThreadID      string `json:"thread_id"`
			PreviousRunID string `json:"previous_run_id"`
		} `json:"items"`
		Total int `json:"total"`
	}
	e.mustCall("POST", runs+"list", keyA, map[string]any{"thread_id": run1.ID}, &list)
	if list.Total != 3 || len(list.Items) != 3 || list.Items[0].ID != exec.Data.ExecutionID || list.Items[1].ID != run2.ID || list.Items[2].ID != run1.ID ||
		list.Items[1].PreviousRunID != run1.ID || list.Items[2].ThreadID != run1.ID {
		t.Errorf("thread %s lists %+v", run1.ID, list)
	}
	// Tenant B sees none of tenant A's thread.
	e.mustCall("POST", runs+"list", keyB, map[string]any{"thread_id": run1.ID}, &list)
	if list.Total != 0 {
		t.Errorf("tenant B lists tenant A's thread: %+v", list)
	}

	// Tenant B cannot follow up tenant A's run: 404, as for any run it
	// cannot see, on both surfaces.
	var hb struct {
		ID string `json:"hierarchy_id"`
	}
	e.mustCall("POST", "/api/executor/v1/hierarchies/create", keyB, followHierarchy("b"), &hb)
	status, raw = e.call("POST", runs+"start", keyB, map[string]any{"hierarchy_id": hb.ID, "task": "steal", "previous_run_id": run1.ID})
	if status != http.StatusNotFound || !bytes.Contains(raw, []byte("EXECUTION_NOT_FOUND")) || bytes.Contains(raw, []byte("FIRST TASK")) {
		t.Errorf("tenant B following tenant A's run: %d %s, want 404", status, raw)
	}
	status, raw = e.call("POST", v1+hb.ID+"/execute", keyB, map[string]any{"task": "steal", "previous_run_id": run1.ID})
	if status != http.StatusNotFound {
		t.Errorf("tenant B following tenant A's run (spec 001): %d %s, want 404", status, raw)
	}
	// Another hierarchy of the same tenant: 400 naming previous_run_id.
	var h2 struct {
		ID string `json:"hierarchy_id"`
	}
	e.mustCall("POST", "/api/executor/v1/hierarchies/create", keyA, followHierarchy("other"), &h2)
	status, raw = e.call("POST", runs+"start", keyA, map[string]any{"hierarchy_id": h2.ID, "task": "x", "previous_run_id": run1.ID})
	if status != http.StatusBadRequest || !bytes.Contains(raw, []byte("INVALID_PARAMETERS")) || !bytes.Contains(raw, []byte("previous_run_id")) {
		t.Errorf("follow-up on another hierarchy: %d %s, want 400 naming previous_run_id", status, raw)
	}
}
