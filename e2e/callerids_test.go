package e2e

import (
	"bufio"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/op-stack/executor/auth"
	"github.com/op-stack/executor/models"
	"github.com/op-stack/executor/store"
)

// TestCallerSetIDs: runs/start and spec 001's execute take the caller's
// run id and the id of the final answer's message (spec 003); the run
// answers under that id, the final answer is stored and streamed under
// that message id; a taken id is a 409, a malformed one a 400.
func TestCallerSetIDs(t *testing.T) {
	e := newEnv(t, referenceRules(nil))
	hid := e.createHierarchy(referenceHierarchy())
	var started struct {
		ID         string `json:"id"`
		WorkflowID string `json:"workflow_id"`
	}
	e.mustPost("/runs/start", map[string]any{"hierarchy_id": hid, "task": "ids", "id": "chat-42.run_1", "message_id": "msg-client-42", "user_message_id": "msg-user-42"}, &started)
	// The caller's id is the run's id in its tenant; the workflow is named
	// by the run's key, generated (issue 23, item 8).
	if started.ID != "chat-42.run_1" || !strings.HasPrefix(started.WorkflowID, "run-") || strings.Contains(started.WorkflowID, "chat-42") {
		t.Fatalf("start = %+v", started)
	}
	if v := e.waitRun(started.ID, time.Minute); v.Status != models.RunCompleted {
		t.Fatalf("run ended %s: %s", v.Status, v.Error)
	}
	var tree struct {
		Messages []*store.Message `json:"messages"`
	}
	e.mustPost("/runs/messages", map[string]any{"id": started.ID}, &tree)
	found := false
	for _, m := range tree.Messages {
		if m.AgentID == "gs-1" {
			found = m.ID == "msg-client-42" && strings.Contains(m.Content, "FINAL ANSWER")
		}
	}
	if !found {
		t.Errorf("no final answer message under msg-client-42: %+v", tree.Messages)
	}
	// The user's message (spec 003: stored under the client's id) comes
	// first, the final answer, which filled its reservation, last.
	if n := len(tree.Messages); n < 2 || tree.Messages[0].ID != "msg-user-42" || tree.Messages[0].AgentType != models.AgentTypeUser ||
		tree.Messages[0].Content != "ids" || tree.Messages[n-1].ID != "msg-client-42" {
		t.Errorf("messages: want the user's message first and the final answer last: %+v", tree.Messages)
	}
	for _, m := range tree.Messages {
		if m.AgentType == "reserved" {
			t.Errorf("a reservation is listed: %+v", m)
		}
	}
	streamed := false
	for _, ev := range e.storedEvents(started.ID) {
		if ev.Event.Action == models.ActionStream && ev.Source.AgentID == "gs-1" && ev.Data["message_id"] == "msg-client-42" {
			streamed = true
		}
	}
	if !streamed {
		t.Error("the final answer's llm.stream events do not carry message_id msg-client-42")
	}

	for name, c := range map[string]struct {
		body   map[string]any
		status int
		code   int
		field  string
	}{
		"taken run id":          {map[string]any{"id": "chat-42.run_1"}, http.StatusConflict, 40902, "id"},
		"taken message id":      {map[string]any{"id": "chat-43", "message_id": "msg-client-42"}, http.StatusConflict, 40902, "message_id"},
		"taken user message id": {map[string]any{"id": "chat-43", "user_message_id": "msg-user-42"}, http.StatusConflict, 40902, "user_message_id"},
		"empty id":              {map[string]any{"id": ""}, http.StatusBadRequest, 40001, "id"},
		"space in id":           {map[string]any{"id": "a b"}, http.StatusBadRequest, 40001, "id"},
		"slash in id":           {map[string]any{"id": "a/b"}, http.StatusBadRequest, 40001, "id"},
		"run id too long":       {map[string]any{"id": strings.Repeat("r", 65)}, http.StatusBadRequest, 40001, "id"},
		"bad message id":        {map[string]any{"message_id": "-x"}, http.StatusBadRequest, 40001, "message_id"},
	} {
		body := map[string]any{"hierarchy_id": hid, "task": "again"}
		for k, v := range c.body {
			body[k] = v
		}
		status, env := e.post("/runs/start", body)
		if status != c.status || env.Code != c.code || !strings.Contains(env.Message, c.field) {
			t.Errorf("%s: status %d code %d message %q", name, status, env.Code, env.Message)
		}
	}
	// Nothing was stored for the refused starts.
	if _, err := e.store.GetTenantRun(t.Context(), "", "", "chat-43"); err == nil {
		t.Error("a refused start stored run chat-43")
	}

	// Spec 001: execution_id.
	var ex struct {
		ExecutionID string `json:"execution_id"`
	}
	e.mustV1("POST", "/hierarchical-teams/"+hid+"/execute", map[string]any{"task": "v1 ids", "execution_id": "exec-client-7"}, "EXECUTION_STARTED", &ex)
	if ex.ExecutionID != "exec-client-7" {
		t.Errorf("execute answered execution_id %q", ex.ExecutionID)
	}
	e.waitRun("exec-client-7", time.Minute)
	if status, env := e.doV1("POST", "/hierarchical-teams/"+hid+"/execute", map[string]any{"task": "v1 ids", "execution_id": "exec-client-7"}); status != http.StatusConflict || env.Success {
		t.Errorf("a taken execution_id: status %d %+v", status, env)
	}
}

// TestRunIDsPerTenantEndToEnd (issue 23, item 8): two tenants start a run
// under the same caller-chosen id (it used to be "is taken" for the
// second). Each run completes; each tenant reads, lists, streams (with a
// stream token, as a browser does), pages the events and messages of its
// own run under that id, with that id as every event's run_id, and starts
// a follow-up of it by that id. Neither sees the other's task or answer.
func TestRunIDsPerTenantEndToEnd(t *testing.T) {
	e := newEnv(t, accessRules(), withAuth)
	keys := map[string]string{
		"a": e.issueKey("tenant-a", auth.ScopeHierarchiesWrite, auth.ScopeRunsRead, auth.ScopeRunsWrite),
		"b": e.issueKey("tenant-b", auth.ScopeHierarchiesWrite, auth.ScopeRunsRead, auth.ScopeRunsWrite),
	}
	const shared = "chat-7.run_1"
	hierarchies, workflows := map[string]string{}, map[string]string{}
	for _, tenant := range []string{"a", "b"} {
		var h struct {
			ID string `json:"hierarchy_id"`
		}
		e.mustCall("POST", "/api/executor/v1/hierarchies/create", keys[tenant], accessHierarchy("shared ids "+tenant), &h)
		hierarchies[tenant] = h.ID
		var run struct {
			ID         string `json:"id"`
			WorkflowID string `json:"workflow_id"`
		}
		e.mustCall("POST", "/api/executor/v1/runs/start", keys[tenant], map[string]any{"hierarchy_id": h.ID, "task": "task of tenant " + tenant, "id": shared, "message_id": "answer-1"}, &run)
		if run.ID != shared {
			t.Fatalf("tenant %s's run answers id %q", tenant, run.ID)
		}
		workflows[tenant] = run.WorkflowID
	}
	if workflows["a"] == workflows["b"] {
		t.Fatalf("both tenants' runs have workflow %s", workflows["a"])
	}
	if status, raw := e.call("POST", "/api/executor/v1/runs/start", keys["a"], map[string]any{"hierarchy_id": hierarchies["a"], "task": "again", "id": shared}); status != http.StatusConflict {
		t.Fatalf("tenant a reusing its own run id: %d %s", status, raw)
	}

	for _, tenant := range []string{"a", "b"} {
		key := keys[tenant]
		var v struct {
			ID         string `json:"id"`
			Task       string `json:"task"`
			Status     string `json:"status"`
			WorkflowID string `json:"workflow_id"`
			ThreadID   string `json:"thread_id"`
		}
		waitFor(t, time.Minute, "tenant "+tenant+"'s run to complete", func() bool {
			e.mustCall("POST", "/api/executor/v1/runs/get", key, map[string]any{"id": shared}, &v)
			return models.IsTerminal(v.Status)
		})
		if v.Status != models.RunCompleted || v.ID != shared || v.Task != "task of tenant "+tenant || v.WorkflowID != workflows[tenant] || v.ThreadID != shared {
			t.Fatalf("tenant %s reads %+v", tenant, v)
		}

		// The stream, with a stream token: every event names the run by
		// the tenant's id, and the run's own task.
		var tok struct {
			StreamURL string `json:"stream_url"`
		}
		e.mustCall("POST", "/api/executor/v1/runs/stream-token", key, map[string]any{"id": shared}, &tok)
		resp, err := http.Get(e.rootURL() + tok.StreamURL)
		if err != nil {
			t.Fatal(err)
		}
		var events, last int
		var lastName string
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			line := sc.Text()
			if name, ok := strings.CutPrefix(line, "event: "); ok {
				lastName = name
			}
			data, ok := strings.CutPrefix(line, "data: ")
			if !ok {
				continue
			}
			var ev models.Event
			if err := json.Unmarshal([]byte(data), &ev); err != nil {
				t.Fatalf("tenant %s: event %q: %v", tenant, data, err)
			}
			if ev.RunID != shared {
				t.Fatalf("tenant %s's stream: event %d has run_id %q, want %q", tenant, ev.Sequence, ev.RunID, shared)
			}
			if strings.Contains(data, "task of tenant "+map[string]string{"a": "b", "b": "a"}[tenant]) {
				t.Fatalf("tenant %s's stream shows the other tenant's task: %s", tenant, data)
			}
			events++
			last = int(ev.Sequence)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || events == 0 || events != last || lastName != "lifecycle.completed" {
			t.Fatalf("tenant %s's stream: status %d, %d events, last %d (%s)", tenant, resp.StatusCode, events, last, lastName)
		}

		// The stored events, paged, and the messages: the same id.
		var page struct {
			Events []models.Event `json:"events"`
		}
		e.mustCall("POST", "/api/executor/v1/runs/events", key, map[string]any{"id": shared}, &page)
		if len(page.Events) != events {
			t.Fatalf("tenant %s: runs/events has %d events, the stream %d", tenant, len(page.Events), events)
		}
		for _, ev := range page.Events {
			if ev.RunID != shared {
				t.Fatalf("tenant %s: runs/events event %d has run_id %q", tenant, ev.Sequence, ev.RunID)
			}
		}
		var tree struct {
			RunID    string           `json:"run_id"`
			Messages []*store.Message `json:"messages"`
		}
		e.mustCall("POST", "/api/executor/v1/runs/messages", key, map[string]any{"id": shared}, &tree)
		if tree.RunID != shared || len(tree.Messages) == 0 || tree.Messages[len(tree.Messages)-1].ID != "answer-1" {
			t.Fatalf("tenant %s's messages: %+v", tenant, tree)
		}
		for _, m := range tree.Messages {
			if m.RunID != shared {
				t.Fatalf("tenant %s: message %s has run_id %q", tenant, m.ID, m.RunID)
			}
		}

		// A follow-up names the run by the tenant's id and joins its thread.
		var next struct {
			ID       string `json:"id"`
			ThreadID string `json:"thread_id"`
		}
		e.mustCall("POST", "/api/executor/v1/runs/start", key, map[string]any{"hierarchy_id": hierarchies[tenant], "task": "follow-up of " + tenant, "previous_run_id": shared}, &next)
		if next.ThreadID != shared {
			t.Fatalf("tenant %s's follow-up is in thread %q, want %q", tenant, next.ThreadID, shared)
		}
		var fu struct {
			Status        string `json:"status"`
			PreviousRunID string `json:"previous_run_id"`
		}
		waitFor(t, time.Minute, "tenant "+tenant+"'s follow-up", func() bool {
			e.mustCall("POST", "/api/executor/v1/runs/get", key, map[string]any{"id": next.ID}, &fu)
			return models.IsTerminal(fu.Status)
		})
		if fu.Status != models.RunCompleted || fu.PreviousRunID != shared {
			t.Fatalf("tenant %s's follow-up: %+v", tenant, fu)
		}
		var thread struct {
			Items []struct {
				ID string `json:"id"`
			} `json:"items"`
		}
		e.mustCall("POST", "/api/executor/v1/runs/list", key, map[string]any{"thread_id": shared}, &thread)
		if len(thread.Items) != 2 {
			t.Fatalf("tenant %s's thread %s lists %+v, want its 2 runs", tenant, shared, thread.Items)
		}
	}
}
