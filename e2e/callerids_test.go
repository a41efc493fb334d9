package e2e

import (
	"net/http"
	"strings"
	"testing"
	"time"

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
	if started.ID != "chat-42.run_1" || started.WorkflowID != "run-chat-42.run_1" {
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
	if _, err := e.store.GetRun(t.Context(), "chat-43"); err == nil {
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
