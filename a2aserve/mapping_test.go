package a2aserve

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/op-stack/executor/models"
)

func TestStateMapping(t *testing.T) {
	want := map[string]a2a.TaskState{
		models.RunQueued: a2a.TaskStateSubmitted, models.RunPending: a2a.TaskStateSubmitted, models.RunRunning: a2a.TaskStateWorking, models.RunPaused: a2a.TaskStateWorking,
		models.RunWaitingApproval: a2a.TaskStateInputRequired, models.RunCompleted: a2a.TaskStateCompleted,
		models.RunFailed: a2a.TaskStateFailed, models.RunTimedOut: a2a.TaskStateFailed, models.RunCancelled: a2a.TaskStateCanceled,
	}
	for _, status := range models.RunStatuses {
		got, ok := want[status]
		if !ok {
			t.Fatalf("status %q has no expected state: add it", status)
		}
		if s := State(status); s != got {
			t.Errorf("State(%q) = %s, want %s", status, s, got)
		}
		// Back: a state filters by the status it comes from (paused,
		// timed_out and queued share theirs with running, failed and
		// pending).
		if status != models.RunPaused && status != models.RunTimedOut && status != models.RunQueued && RunStatus(got) != status {
			t.Errorf("RunStatus(%s) = %q, want %q", got, RunStatus(got), status)
		}
	}
	if RunStatus(a2a.TaskStateRejected) != "" || RunStatus(a2a.TaskState("TASK_STATE_BOGUS")) != "" {
		t.Error("a state no run has maps to a status")
	}
}

func TestTaskOf(t *testing.T) {
	done := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	r := run{ID: "r2", HierarchyID: "h", Task: "do it", Status: models.RunCompleted, FinalAnswer: "the answer", ThreadID: "r1", CreatedAt: done.Add(-time.Minute), CompletedAt: &done}
	task := taskOf(r, nil, true)
	if task.ID != "r2" || task.ContextID != "r1" || task.Status.State != a2a.TaskStateCompleted || !task.Status.Timestamp.Equal(done) {
		t.Errorf("task = %+v", task)
	}
	if len(task.Artifacts) != 1 || task.Artifacts[0].ID != FinalAnswerArtifactID || task.Artifacts[0].Parts[0].Text() != "the answer" {
		t.Errorf("artifacts = %+v", task.Artifacts)
	}
	if len(task.History) != 1 || task.History[0].Role != a2a.MessageRoleUser || task.History[0].Parts[0].Text() != "do it" {
		t.Errorf("history = %+v", task.History)
	}
	if got := taskOf(r, nil, false); got.History != nil {
		t.Errorf("history without asking: %+v", got.History)
	}

	r.Status, r.Error = models.RunFailed, "the model failed"
	if task := taskOf(r, nil, false); task.Status.State != a2a.TaskStateFailed || task.Status.Message.Parts[0].Text() != "the model failed" || task.Artifacts != nil {
		t.Errorf("failed task = %+v", task)
	}

	r.Status = models.RunWaitingApproval
	task = taskOf(r, []approval{{ID: "ap1", Kind: "agent", AgentID: "w1", AgentName: "writer", Instruction: "write the draft"}, {ID: "ap2", Kind: "tool", AgentID: "w2", Tool: "http_get", Reason: "network"}}, false)
	text := task.Status.Message.Parts[0].Text()
	if task.Status.State != a2a.TaskStateInputRequired || !strings.Contains(text, "approval ap1 for writer: write the draft") ||
		!strings.Contains(text, "approval ap2 for w2: run tool http_get (network)") || !strings.Contains(text, "'approve [comment]'") {
		t.Errorf("input-required task = %+v: %s", task.Status, text)
	}
	if meta, _ := task.Status.Message.Metadata["approvals"].([]any); len(meta) != 2 {
		t.Errorf("approvals metadata = %v", task.Status.Message.Metadata)
	}
}

func ev(seq int64, cat, act string, src models.Source, data map[string]any) models.Event {
	return models.Event{RunID: "r1", Sequence: seq, Timestamp: "2026-01-02T03:04:05.000Z", Source: src, Event: models.EventKind{Category: cat, Action: act}, Data: data}
}

func TestTranslator(t *testing.T) {
	team := "drafting"
	gs := models.Source{AgentID: "gs", AgentType: models.AgentTypeGlobalSupervisor, AgentName: "lead"}
	w := models.Source{AgentID: "w1", AgentType: models.AgentTypeWorker, AgentName: "writer", TeamName: &team, Depth: 2}
	tr := newTranslator("r1", "t1")
	var out []a2a.Event
	for _, e := range []models.Event{
		ev(1, models.CategoryLifecycle, models.ActionStarted, gs, nil),
		ev(2, models.CategoryLifecycle, models.ActionStarted, w, nil),
		ev(3, models.CategoryLLM, models.ActionStream, w, map[string]any{"content": "hel", "message_id": "m1"}),
		ev(4, models.CategoryLLM, models.ActionStream, w, map[string]any{"content": "lo", "message_id": "m1"}),
		ev(5, models.CategoryLLM, models.ActionStream, w, map[string]any{"content": "", "message_id": "m1"}),
		ev(6, models.CategoryApproval, models.ActionRequested, w, map[string]any{"approval_id": "ap1", "kind": "tool", "tool": "http_get"}),
	} {
		out = append(out, tr.event(e)...)
	}
	if !tr.waiting() {
		t.Error("not waiting after approval.requested")
	}
	if len(out) != 4 {
		t.Fatalf("events = %d: %+v", len(out), out)
	}
	st, ok := out[0].(*a2a.TaskStatusUpdateEvent)
	if !ok || st.Status.State != a2a.TaskStateWorking || st.TaskID != "r1" || st.ContextID != "t1" || st.Metadata["sequence"] != int64(1) {
		t.Errorf("first = %+v", out[0])
	}
	a1, ok1 := out[1].(*a2a.TaskArtifactUpdateEvent)
	a2, ok2 := out[2].(*a2a.TaskArtifactUpdateEvent)
	if !ok1 || !ok2 || a1.Artifact.ID != a2.Artifact.ID || a1.Append || !a2.Append || a1.Artifact.Parts[0].Text()+a2.Artifact.Parts[0].Text() != "hello" ||
		a1.Artifact.Metadata["agent_id"] != "w1" || a1.Artifact.Metadata["team_name"] != "drafting" || a2.Metadata["sequence"] != int64(4) {
		t.Errorf("answer chunks = %+v %+v", out[1], out[2])
	}
	in, ok := out[3].(*a2a.TaskStatusUpdateEvent)
	if !ok || in.Status.State != a2a.TaskStateInputRequired || !strings.Contains(in.Status.Message.Parts[0].Text(), "run tool http_get") || in.Metadata["agent_id"] != "w1" {
		t.Errorf("input-required = %+v", out[3])
	}
	res := tr.event(ev(7, models.CategoryApproval, models.ActionResolved, w, map[string]any{"approval_id": "ap1", "decision": "approved"}))
	if len(res) != 1 || res[0].(*a2a.TaskStatusUpdateEvent).Status.State != a2a.TaskStateWorking || tr.waiting() {
		t.Errorf("resolved = %+v", res)
	}
	// A later answer of the same agent is an artifact of its own.
	next := tr.event(ev(8, models.CategoryLLM, models.ActionStream, w, map[string]any{"content": "again", "message_id": "m2"}))
	if len(next) != 1 || next[0].(*a2a.TaskArtifactUpdateEvent).Artifact.ID == a1.Artifact.ID || next[0].(*a2a.TaskArtifactUpdateEvent).Append {
		t.Errorf("second answer = %+v", next)
	}

	fin := tr.final(run{ID: "r1", ThreadID: "t1", Status: models.RunCompleted, FinalAnswer: "done"}, 9)
	if len(fin) != 2 {
		t.Fatalf("final = %+v", fin)
	}
	if a, ok := fin[0].(*a2a.TaskArtifactUpdateEvent); !ok || a.Artifact.ID != FinalAnswerArtifactID || !a.LastChunk || a.Artifact.Parts[0].Text() != "done" {
		t.Errorf("final artifact = %+v", fin[0])
	}
	if s, ok := fin[1].(*a2a.TaskStatusUpdateEvent); !ok || s.Status.State != a2a.TaskStateCompleted || s.Metadata["sequence"] != int64(9) {
		t.Errorf("final status = %+v", fin[1])
	}
	cancelled := newTranslator("r1", "t1").final(run{ID: "r1", ThreadID: "t1", Status: models.RunCancelled}, 3)
	if len(cancelled) != 1 || cancelled[0].(*a2a.TaskStatusUpdateEvent).Status.State != a2a.TaskStateCanceled {
		t.Errorf("cancelled final = %+v", cancelled)
	}
}

func TestDecision(t *testing.T) {
	for _, c := range []struct {
		in       string
		approve  bool
		comment  string
		accepted bool
	}{
		{"approve", true, "", true},
		{"Approved. looks fine", true, "looks fine", true},
		{"yes go ahead", true, "go ahead", true},
		{"reject: too risky", false, "too risky", true},
		{"no", false, "", true},
		{"maybe later", false, "", false},
		{"", false, "", false},
	} {
		approve, comment, ok := decision(c.in)
		if approve != c.approve || comment != c.comment || ok != c.accepted {
			t.Errorf("decision(%q) = %v %q %v", c.in, approve, comment, ok)
		}
	}
}

func TestCard(t *testing.T) {
	raw, err := json.Marshal(Card("h1", "research", "", "sequential", "https://ex.example/a2a/h1"))
	if err != nil {
		t.Fatal(err)
	}
	var card map[string]any
	if err := json.Unmarshal(raw, &card); err != nil {
		t.Fatal(err)
	}
	ifaces := card["supportedInterfaces"].([]any)
	iface := ifaces[0].(map[string]any)
	if len(ifaces) != 1 || iface["url"] != "https://ex.example/a2a/h1" || iface["protocolBinding"] != "JSONRPC" || iface["protocolVersion"] != "1.0" {
		t.Errorf("interfaces = %v", ifaces)
	}
	skill := card["skills"].([]any)[0].(map[string]any)
	if card["name"] != "research" || skill["id"] != "h1" || !strings.Contains(card["description"].(string), "research") {
		t.Errorf("card = %s", raw)
	}
	scheme := card["securitySchemes"].(map[string]any)["bearer"].(map[string]any)["httpAuthSecurityScheme"].(map[string]any)
	if scheme["scheme"] != "Bearer" || card["capabilities"].(map[string]any)["streaming"] != true || card["capabilities"].(map[string]any)["pushNotifications"] != nil {
		t.Errorf("card = %s", raw)
	}
}
