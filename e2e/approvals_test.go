package e2e

import (
	"encoding/json"
	"net/http"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/op-stack/executor/llm/llmfake"
	"github.com/op-stack/executor/models"
)

// approvalHierarchy is the reference hierarchy with the analyst's and the
// writer's turns gated.
func approvalHierarchy() map[string]any {
	h := referenceHierarchy()
	teams := h["teams"].([]any)
	teams[0].(map[string]any)["workers"].([]any)[1].(map[string]any)["requires_approval"] = true
	writer := teams[1].(map[string]any)["workers"].([]any)[0].(map[string]any)
	writer["requires_approval"] = true
	writer["approval_timeout"] = 86400
	return h
}

// pendingApprovals lists a run's pending approvals through the API.
func (e *testEnv) pendingApprovals(id string) []models.Approval {
	e.t.Helper()
	var out struct {
		Status    string            `json:"status"`
		Approvals []models.Approval `json:"approvals"`
	}
	e.mustPost("/runs/approvals", map[string]any{"id": id}, &out)
	return out.Approvals
}

// waitApproval waits for the run's one pending approval of agentID.
func (e *testEnv) waitApproval(id, agentID string) models.Approval {
	e.t.Helper()
	var found models.Approval
	waitFor(e.t, 30*time.Second, "an approval of "+agentID, func() bool {
		for _, a := range e.pendingApprovals(id) {
			if a.AgentID == agentID {
				found = a
				return true
			}
		}
		return false
	})
	return found
}

// TestApprovalGates runs the reference hierarchy with the analyst and the
// writer gated, on a worker process. The analyst's gate is approved
// through the Temporal CLI (`temporal workflow update execute`); while
// the writer's gate is open (the run waiting_approval in the API and in
// RunStatus, no writer call made) the worker is killed and another
// started, and the approval, with an edited instruction, still completes
// the run. A second approval of the same gate is a conflict, an unknown
// one a bad request, and the stream carries both gates' requests and
// resolutions.
func TestApprovalGates(t *testing.T) {
	e := newEnv(t, referenceRules(nil), withoutWorker)
	first := e.workerProcess()
	id := e.startRun(e.createHierarchy(approvalHierarchy()), "Explain quantum tunnelling")

	analyst := e.waitApproval(id, "w-analyst")
	if analyst.Kind != models.ApprovalKindAgent || analyst.Instruction != "analyse them" || analyst.TimeoutAt != "" {
		t.Fatalf("analyst's approval = %+v", analyst)
	}
	if v := e.getRun(id); v.Status != models.RunWaitingApproval {
		t.Errorf("runs/get while waiting: %s", v.Status)
	}
	input, _ := json.Marshal(map[string]any{"approval_id": analyst.ApprovalID, "comment": "fine", "by": "cli:operator"})
	cmd := exec.Command(temporalCLI, "workflow", "update", "execute", "--workflow-id", models.RunWorkflowID(id),
		"--name", models.UpdateApprove, "--input", string(input), "--address", e.cfg.TemporalAddress)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("temporal workflow update execute: %v\n%s", err, b)
	}
	// The validator refuses the same approval again.
	cmd = exec.Command(temporalCLI, "workflow", "update", "execute", "--workflow-id", models.RunWorkflowID(id),
		"--name", models.UpdateApprove, "--input", string(input), "--address", e.cfg.TemporalAddress)
	if b, err := cmd.CombinedOutput(); err == nil || !strings.Contains(string(b), "already been resolved") {
		t.Errorf("a second CLI approval: %v\n%s", err, b)
	}

	writer := e.waitApproval(id, "w-writer")
	if writer.Instruction != "write it" || writer.DefaultDecision != models.ApprovalRejected {
		t.Fatalf("writer's approval = %+v", writer)
	}
	waitFor(t, 10*time.Second, "RunStatus=\"waiting_approval\" in visibility", func() bool {
		return len(e.executions(`WorkflowId = '`+models.RunWorkflowID(id)+`' AND RunStatus = "waiting_approval"`)) == 1
	})
	if n := len(callsMatching(e.fake.Calls(), "W-WRITER")); n != 0 {
		t.Fatalf("the writer was called %d times before its approval", n)
	}

	// The worker dies while the run waits; another takes over.
	if err := first.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	first.Wait()
	e.workerProcess()

	status, env := e.post("/runs/approve", map[string]any{"id": id, "approval_id": "apr_unknown"})
	if status != http.StatusBadRequest || env.ErrorCode != models.CodeInvalidParameters.Name {
		t.Errorf("approving an unknown approval: %d %+v", status, env)
	}
	status, env = e.post("/runs/reject", map[string]any{"id": id, "approval_id": writer.ApprovalID})
	if status != http.StatusBadRequest {
		t.Errorf("rejecting without a comment: %d %+v", status, env)
	}
	var approved struct {
		Approval models.ApprovalResolution `json:"approval"`
	}
	e.mustPost("/runs/approve", map[string]any{"id": id, "approval_id": writer.ApprovalID, "comment": "shorter", "instruction": "write it in one line"}, &approved)
	if a := approved.Approval; a.Decision != models.ApprovalApproved || !a.Edited || a.By != "anonymous" || a.Instruction != "write it in one line" {
		t.Errorf("approve answered %+v", a)
	}
	status, env = e.post("/runs/approve", map[string]any{"id": id, "approval_id": writer.ApprovalID})
	if status != http.StatusConflict {
		t.Errorf("approving twice: %d %+v", status, env)
	}

	v := e.waitRun(id, 2*time.Minute)
	if v.Status != models.RunCompleted || v.FinalAnswer != "FINAL ANSWER: tunnelling explained." {
		t.Fatalf("run ended %s (%s): %q", v.Status, v.Error, v.FinalAnswer)
	}
	calls := callsMatching(e.fake.Calls(), "W-WRITER")
	if len(calls) != 1 {
		t.Fatalf("writer called %d times", len(calls))
	}
	raw, _ := json.Marshal(calls[0].Messages)
	if !strings.Contains(string(raw), "write it in one line") {
		t.Errorf("the writer's prompt lacks the edited instruction: %s", raw)
	}
	var got []string
	for _, ev := range e.storedEvents(id) {
		if ev.Event.Category == models.CategoryApproval {
			got = append(got, ev.Event.Action+":"+ev.Source.AgentID+":"+fmtAny(ev.Data["decided_by"]))
		}
	}
	want := "requested:w-analyst:,resolved:w-analyst:cli:operator,requested:w-writer:,resolved:w-writer:anonymous"
	if strings.Join(got, ",") != want {
		t.Errorf("approval events = %v, want %s", got, want)
	}
	if a := e.pendingApprovals(id); len(a) != 0 {
		t.Errorf("approvals of a completed run = %+v", a)
	}
}

func fmtAny(v any) string {
	s, _ := v.(string)
	return s
}

// TestToolApprovalAndRejection: the searcher's calculator call waits,
// arguments shown, and runs with the arguments the approver edits; the
// analyst's turn is rejected, and the research supervisor reads the
// rejection as its answer and goes on to the run's end.
func TestToolApprovalAndRejection(t *testing.T) {
	e := newEnv(t, nil)
	e.fake.SetRules(append([]llmfake.Rule{
		{Name: "searcher after", SystemContains: "W-SEARCHER", HasToolResult: true, Responses: contentResponses("searcher: done")},
		{Name: "searcher first", SystemContains: "W-SEARCHER", Responses: []llmfake.Response{
			{ToolCalls: []llmfake.ToolCall{toolCall("calculator", `{"expression":"2*21"}`)}},
		}},
	}, referenceRules(nil)...)...)
	body := approvalHierarchy()
	searcher := body["teams"].([]any)[0].(map[string]any)["workers"].([]any)[0].(map[string]any)
	searcher["tools"], searcher["approval_tools"] = []string{"calculator"}, []string{"calculator"}
	id := e.startRun(e.createHierarchy(body), "tools with approval")

	call := e.waitApproval(id, "w-searcher")
	if call.Kind != models.ApprovalKindTool || call.Tool != "calculator" || call.Arguments != `{"expression":"2*21"}` {
		t.Fatalf("tool approval = %+v", call)
	}
	status, env := e.post("/runs/approve", map[string]any{"id": id, "approval_id": call.ApprovalID, "instruction": "x"})
	if status != http.StatusConflict {
		t.Errorf("an instruction on a tool gate: %d %+v", status, env)
	}
	e.mustPost("/runs/approve", map[string]any{"id": id, "approval_id": call.ApprovalID, "arguments": map[string]any{"expression": "6*7+1"}}, nil)

	analyst := e.waitApproval(id, "w-analyst")
	e.mustPost("/runs/reject", map[string]any{"id": id, "approval_id": analyst.ApprovalID, "comment": "no analysis today"}, nil)
	writer := e.waitApproval(id, "w-writer")
	e.mustPost("/runs/approve", map[string]any{"id": id, "approval_id": writer.ApprovalID}, nil)

	v := e.waitRun(id, time.Minute)
	if v.Status != models.RunCompleted {
		t.Fatalf("run ended %s: %s", v.Status, v.Error)
	}
	after := callsMatching(e.fake.Calls(), "W-SEARCHER")
	raw, _ := json.Marshal(after[len(after)-1].Messages)
	if !strings.Contains(string(raw), "43") {
		t.Errorf("the searcher's tool result is not 6*7+1: %s", raw)
	}
	if n := len(callsMatching(e.fake.Calls(), "W-ANALYST")); n != 0 {
		t.Errorf("the rejected analyst was called %d times", n)
	}
	workers := v.Result.Teams[0].Workers
	if len(workers) != 2 || workers[1].Output != "rejected by anonymous: no analysis today" {
		t.Errorf("research workers = %+v", workers)
	}
}
