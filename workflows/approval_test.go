package workflows_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/op-stack/executor/models"
	"github.com/op-stack/executor/workflows"
)

// approvalHierarchy is testHierarchy with the writer's turn gated.
func approvalHierarchy(gate func(w *models.Agent)) models.Hierarchy {
	h := testHierarchy()
	gate(&h.Teams[1].Workers[0])
	return h
}

func writerScript() *fakeActivities {
	return &fakeActivities{decisions: map[string][]models.Decision{"gs": {dispatch("writing", "go")}, "ts-w": {dispatch("writer", "write it")}}}
}

// approvals queries the run's pending approvals.
func approvals(t *testing.T, env *testsuite.TestWorkflowEnvironment) []models.Approval {
	t.Helper()
	v, err := env.QueryWorkflow(models.QueryApprovals)
	if err != nil {
		t.Fatalf("approvals query: %v", err)
	}
	var out []models.Approval
	if err := v.Get(&out); err != nil {
		t.Fatal(err)
	}
	return out
}

// decision is what one approve or reject update answered.
type decision struct {
	res models.ApprovalResolution
	err string
}

// resolve sends an approve or reject update and records its answer.
func resolve(env *testsuite.TestWorkflowEnvironment, name string, d models.ApprovalDecision, answers *[]decision) {
	env.UpdateWorkflow(name, name+"-"+time.Now().String(), &testsuite.TestUpdateCallback{
		OnAccept: func() {},
		OnReject: func(err error) { *answers = append(*answers, decision{err: "rejected: " + err.Error()}) },
		OnComplete: func(v any, err error) {
			if err != nil {
				*answers = append(*answers, decision{err: "error: " + err.Error()})
				return
			}
			*answers = append(*answers, decision{res: v.(models.ApprovalResolution)})
		},
	}, d)
}

func statusTrail(f *fakeActivities) string {
	var out []string
	for _, s := range f.statuses {
		out = append(out, s.Status)
	}
	return strings.Join(out, ",")
}

func approvalEvents(f *fakeActivities) []models.Event {
	var out []models.Event
	for _, e := range f.persisted {
		if e.Event.Category == models.CategoryApproval {
			out = append(out, e)
		}
	}
	return out
}

func runResult(t *testing.T, env *testsuite.TestWorkflowEnvironment) models.RunResult {
	t.Helper()
	mustComplete(t, env)
	var res models.RunResult
	if err := env.GetWorkflowResult(&res); err != nil {
		t.Fatal(err)
	}
	return res
}

func writerInstructions(f *fakeActivities) []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for _, in := range f.responds {
		if in.Agent.AgentID == "w-writer" {
			out = append(out, in.Instruction)
		}
	}
	return out
}

// TestApprovalBeforeTimeoutWithEditedInstruction: the writer's turn waits
// (no LLM call) with the run waiting_approval; it is approved an hour
// later, before its day-long timeout, with an edited instruction, which
// the writer then gets. A second approval of the same gate is refused by
// the validator.
func TestApprovalBeforeTimeoutWithEditedInstruction(t *testing.T) {
	f := writerScript()
	env := newEnv(t, f)
	var pending []models.Approval
	var progress models.Progress
	var writerCalls int
	var answers []decision
	env.RegisterDelayedCallback(func() {
		pending = approvals(t, env)
		if v, err := env.QueryWorkflow(models.QueryProgress); err == nil {
			_ = v.Get(&progress)
		}
		writerCalls = len(writerInstructions(f))
		edited := "write it short"
		id := ""
		if len(pending) == 1 {
			id = pending[0].ApprovalID
		}
		resolve(env, models.UpdateApprove, models.ApprovalDecision{ApprovalID: id, Comment: "ok", Instruction: &edited, By: "api_key:alice"}, &answers)
		resolve(env, models.UpdateApprove, models.ApprovalDecision{ApprovalID: id, By: "api_key:bob"}, &answers)
		resolve(env, models.UpdateReject, models.ApprovalDecision{ApprovalID: "apr_nope", Comment: "x"}, &answers)
	}, time.Hour)
	env.ExecuteWorkflow(workflows.RunWorkflow, runInput(approvalHierarchy(func(w *models.Agent) {
		w.RequiresApproval, w.ApprovalTimeout = true, 24*3600
	})))
	res := runResult(t, env)
	if len(pending) != 1 || pending[0].Kind != models.ApprovalKindAgent || pending[0].AgentID != "w-writer" ||
		pending[0].Instruction != "write it" || pending[0].DefaultDecision != models.ApprovalRejected || pending[0].TimeoutAt == "" {
		t.Fatalf("pending = %+v", pending)
	}
	if writerCalls != 0 || progress.Status != models.RunWaitingApproval {
		t.Errorf("while waiting: %d writer calls, status %q", writerCalls, progress.Status)
	}
	if got := writerInstructions(f); len(got) != 1 || got[0] != "write it short" {
		t.Errorf("writer's instructions = %v", got)
	}
	if len(answers) != 3 || answers[0].res.Decision != models.ApprovalApproved || !answers[0].res.Edited || answers[0].res.By != "api_key:alice" {
		t.Fatalf("answers = %+v", answers)
	}
	if !strings.Contains(answers[1].err, "already been resolved") || !strings.Contains(answers[2].err, "no pending approval") {
		t.Errorf("duplicate and unknown answers = %+v", answers[1:])
	}
	if got := statusTrail(f); got != "running,waiting_approval,running,completed" {
		t.Errorf("statuses = %s", got)
	}
	events := approvalEvents(f)
	if len(events) != 2 || events[0].Event.Action != models.ActionRequested || events[1].Event.Action != models.ActionResolved ||
		events[0].Data["approval_id"] != pending[0].ApprovalID || events[1].Data["decided_by"] != "api_key:alice" ||
		events[1].Data["instruction"] != "write it short" || events[0].Source.AgentID != "w-writer" {
		t.Errorf("approval events = %+v", events)
	}
	if w := res.Teams[0].Workers; len(w) != 1 || w[0].Instruction != "write it short" {
		t.Errorf("writing's workers = %+v", w)
	}
}

// TestApprovalTimeoutDecidesByDefault: nobody decides within the gate's
// timeout (a workflow timer): approval_default "approve" lets the writer
// go with its instruction; a later approval is refused as resolved.
func TestApprovalTimeoutDecidesByDefault(t *testing.T) {
	f := writerScript()
	// The writer works twice: the run is still live when the late
	// approval of its first gate comes.
	f.decisions["ts-w"] = append(f.decisions["ts-w"], dispatch("writer", "write it"))
	env := newEnv(t, f)
	var answers []decision
	var pendingAfter []models.Approval
	env.RegisterDelayedCallback(func() {
		pendingAfter = approvals(t, env)
	}, 90*time.Minute)
	var id string
	env.RegisterDelayedCallback(func() {
		if p := approvals(t, env); len(p) == 1 {
			id = p[0].ApprovalID
		}
	}, time.Minute)
	env.RegisterDelayedCallback(func() {
		resolve(env, models.UpdateApprove, models.ApprovalDecision{ApprovalID: id}, &answers)
	}, 100*time.Minute)
	env.ExecuteWorkflow(workflows.RunWorkflow, runInput(approvalHierarchy(func(w *models.Agent) {
		w.RequiresApproval, w.ApprovalTimeout, w.ApprovalDefault = true, 3600, models.ApprovalDefaultApprove
	})))
	runResult(t, env)
	if got := writerInstructions(f); len(got) != 2 || got[0] != "write it" {
		t.Errorf("writer's instructions = %v", got)
	}
	events := approvalEvents(f)
	if len(events) != 4 || events[1].Data["decision"] != models.ApprovalApproved || events[1].Data["decided_by"] != models.ApprovalTimeoutActor {
		t.Errorf("approval events = %+v", events)
	}
	if id == "" {
		t.Fatal("no pending approval a minute in")
	}
	if len(pendingAfter) != 1 || pendingAfter[0].ApprovalID == id {
		t.Errorf("pending after the first timeout = %+v", pendingAfter)
	}
	if len(answers) != 1 || !strings.Contains(answers[0].err, "already been resolved") {
		t.Errorf("an approval after the timeout: %+v", answers)
	}
}

// TestApprovalTimeoutRejectsByDefault: without approval_default the gate
// rejects when its timeout (here the run's APPROVAL_TIMEOUT) runs out;
// the writer never runs and its answer is the rejection.
func TestApprovalTimeoutRejectsByDefault(t *testing.T) {
	f := writerScript()
	env := newEnv(t, f)
	in := runInput(approvalHierarchy(func(w *models.Agent) { w.RequiresApproval = true }))
	in.Options.ApprovalTimeout = 30 * time.Minute
	env.ExecuteWorkflow(workflows.RunWorkflow, in)
	res := runResult(t, env)
	if got := writerInstructions(f); len(got) != 0 {
		t.Errorf("writer ran: %v", got)
	}
	if w := res.Teams[0].Workers; len(w) != 1 || !strings.HasPrefix(w[0].Output, "rejected by timeout: no decision within the approval timeout of 30m0s") {
		t.Errorf("writing's workers = %+v", w)
	}
}

// TestApprovalRejectionTellsTheSupervisor: a rejected worker does not run;
// the team supervisor's next decision sees "rejected by <who>: comment" as
// its answer, and the run goes on to complete.
func TestApprovalRejectionTellsTheSupervisor(t *testing.T) {
	f := writerScript()
	env := newEnv(t, f)
	var answers []decision
	env.RegisterDelayedCallback(func() {
		p := approvals(t, env)
		if len(p) != 1 {
			t.Errorf("pending = %+v", p)
			return
		}
		edited := "x"
		resolve(env, models.UpdateReject, models.ApprovalDecision{ApprovalID: p[0].ApprovalID, Comment: "x", Instruction: &edited}, &answers)
		resolve(env, models.UpdateReject, models.ApprovalDecision{ApprovalID: p[0].ApprovalID, Comment: "not today", By: "oidc:bob"}, &answers)
	}, time.Hour)
	env.ExecuteWorkflow(workflows.RunWorkflow, runInput(approvalHierarchy(func(w *models.Agent) { w.RequiresApproval = true })))
	res := runResult(t, env)
	if len(answers) != 2 || !strings.Contains(answers[0].err, "rejection takes a comment") || answers[1].res.Decision != models.ApprovalRejected {
		t.Fatalf("answers = %+v", answers)
	}
	if got := writerInstructions(f); len(got) != 0 {
		t.Errorf("writer ran: %v", got)
	}
	w := res.Teams[0].Workers
	if len(w) != 1 || w[0].Output != "rejected by oidc:bob: not today" {
		t.Fatalf("writing's workers = %+v", w)
	}
	// The team supervisor decided again after the rejection, and saw it.
	f.mu.Lock()
	defer f.mu.Unlock()
	var after *models.DecideInput
	for i := range f.decides {
		if f.decides[i].Source.AgentID == "ts-w" {
			after = &f.decides[i]
		}
	}
	raw, _ := json.Marshal(after.Context)
	if !strings.Contains(string(raw), "rejected by oidc:bob: not today") {
		t.Errorf("team supervisor's context = %s", raw)
	}
}

// TestTeamSupervisorGate: a team supervisor with requires_approval waits
// before its turn; rejected, the team does nothing and the global
// supervisor sees the rejection as the team's result.
func TestTeamSupervisorGate(t *testing.T) {
	f := writerScript()
	env := newEnv(t, f)
	h := testHierarchy()
	h.Teams[1].Supervisor.RequiresApproval = true
	var answers []decision
	var pending []models.Approval
	env.RegisterDelayedCallback(func() {
		pending = approvals(t, env)
		if len(pending) == 1 {
			resolve(env, models.UpdateReject, models.ApprovalDecision{ApprovalID: pending[0].ApprovalID, Comment: "skip writing", By: "api_key:k1"}, &answers)
		}
	}, time.Hour)
	env.ExecuteWorkflow(workflows.RunWorkflow, runInput(h))
	res := runResult(t, env)
	if len(pending) != 1 || pending[0].AgentType != models.AgentTypeTeamSupervisor || pending[0].Instruction != "go" {
		t.Fatalf("pending = %+v", pending)
	}
	f.mu.Lock()
	for _, d := range f.decides {
		if d.Source.AgentID == "ts-w" {
			t.Errorf("the rejected team supervisor decided")
		}
	}
	f.mu.Unlock()
	if w := res.Teams[0].Workers; len(w) != 1 || !strings.Contains(w[0].Output, "rejected by api_key:k1: skip writing") {
		t.Errorf("writing's workers = %+v", w)
	}
}

// TestToolApproval: a tool in the worker's approval_tools waits before it
// runs, showing its arguments; approved with edited arguments, the tool
// gets those; rejected, the model gets an error tool result.
func TestToolApproval(t *testing.T) {
	for _, approve := range []bool{true, false} {
		f := writerScript()
		var mu sync.Mutex
		f.respond = func(_ context.Context, in models.RespondInput) (*models.RespondResult, error) {
			mu.Lock()
			defer mu.Unlock()
			if in.Agent.AgentID == "w-writer" && len(in.Transcript) == 0 {
				return &models.RespondResult{ToolCalls: []models.ToolCall{{ID: "c1", Name: "http_get", Arguments: `{"url":"https://a.example"}`}}}, nil
			}
			return &models.RespondResult{Output: "done"}, nil
		}
		env := newEnv(t, f)
		var toolArgs []string
		env.OnActivity(a.RunTool, mock.Anything, mock.Anything).Return(func(_ context.Context, in models.ToolInput) (*models.ToolOutput, error) {
			toolArgs = append(toolArgs, in.Call.Arguments)
			return &models.ToolOutput{Content: "page"}, nil
		})
		var answers []decision
		var pending []models.Approval
		env.RegisterDelayedCallback(func() {
			pending = approvals(t, env)
			if len(pending) != 1 {
				return
			}
			if approve {
				resolve(env, models.UpdateApprove, models.ApprovalDecision{ApprovalID: pending[0].ApprovalID, Arguments: json.RawMessage(`{"url":"https://b.example"}`)}, &answers)
			} else {
				resolve(env, models.UpdateReject, models.ApprovalDecision{ApprovalID: pending[0].ApprovalID, Comment: "no web", By: "api_key:k"}, &answers)
			}
		}, time.Hour)
		env.ExecuteWorkflow(workflows.RunWorkflow, runInput(approvalHierarchy(func(w *models.Agent) {
			w.Tools, w.ApprovalTools = []string{"http_get"}, []string{"http_get"}
		})))
		runResult(t, env)
		if len(pending) != 1 || pending[0].Kind != models.ApprovalKindTool || pending[0].Tool != "http_get" || pending[0].Arguments != `{"url":"https://a.example"}` {
			t.Fatalf("pending = %+v", pending)
		}
		results := toolResults(f, "w-writer")
		if approve {
			if len(toolArgs) != 1 || toolArgs[0] != `{"url":"https://b.example"}` || len(results) != 1 || results[0] != "page" {
				t.Errorf("approved: tool args %v, results %v", toolArgs, results)
			}
		} else if len(toolArgs) != 0 || len(results) != 1 || results[0] != "error: tool call rejected by api_key:k: no web" {
			t.Errorf("rejected: tool args %v, results %v", toolArgs, results)
		}
	}
}

// TestApprovalWhilePaused: a run paused while a gate is open reads paused;
// approved meanwhile, the worker still waits for the resume, which finds
// no gate open and reads running.
func TestApprovalWhilePaused(t *testing.T) {
	f := writerScript()
	env := newEnv(t, f)
	var pauses []string
	var answers []decision
	var atResume int
	env.RegisterDelayedCallback(func() { update(env, models.UpdatePause, &pauses) }, time.Hour)
	env.RegisterDelayedCallback(func() {
		if p := approvals(t, env); len(p) == 1 {
			resolve(env, models.UpdateApprove, models.ApprovalDecision{ApprovalID: p[0].ApprovalID, By: "api_key:k"}, &answers)
		}
	}, 2*time.Hour)
	env.RegisterDelayedCallback(func() {
		atResume = len(writerInstructions(f))
		update(env, models.UpdateResume, &pauses)
	}, 3*time.Hour)
	env.ExecuteWorkflow(workflows.RunWorkflow, runInput(approvalHierarchy(func(w *models.Agent) { w.RequiresApproval = true })))
	runResult(t, env)
	if len(answers) != 1 || answers[0].res.Decision != models.ApprovalApproved {
		t.Fatalf("answers = %+v", answers)
	}
	if atResume != 0 || len(writerInstructions(f)) != 1 {
		t.Errorf("writer calls: %d before the resume, %d in all", atResume, len(writerInstructions(f)))
	}
	if got := strings.Join(pauses, ","); got != "paused,running" {
		t.Errorf("pause answers = %s", got)
	}
	if got := statusTrail(f); got != "running,waiting_approval,paused,running,completed" {
		t.Errorf("statuses = %s", got)
	}
}

// TestCancelWhileWaitingApproval: a run cancelled while a gate is open
// stops waiting at once and ends cancelled, the gate no longer pending.
func TestCancelWhileWaitingApproval(t *testing.T) {
	f := writerScript()
	env := newEnv(t, f)
	env.RegisterDelayedCallback(env.CancelWorkflow, time.Hour)
	env.ExecuteWorkflow(workflows.RunWorkflow, runInput(approvalHierarchy(func(w *models.Agent) { w.RequiresApproval = true })))
	var canceled *temporal.CanceledError
	if err := env.GetWorkflowError(); !errors.As(err, &canceled) {
		t.Fatalf("want a cancelled workflow, got %v", err)
	}
	if got := statusTrail(f); got != "running,waiting_approval,cancelled" {
		t.Errorf("statuses = %s", got)
	}
	if p := approvals(t, env); len(p) != 0 {
		t.Errorf("pending after the cancel = %+v", p)
	}
	if n := len(writerInstructions(f)); n != 0 {
		t.Errorf("writer called %d times", n)
	}
}

// TestRunsBeforeApprovalsIgnoreGates: a run started before approval gates
// (approval-gates at its default version) runs a requires_approval worker
// at once, and its validator refuses any decision.
func TestRunsBeforeApprovalsIgnoreGates(t *testing.T) {
	f := writerScript()
	env := newEnv(t, f)
	env.OnGetVersion("approval-gates", workflow.DefaultVersion, 1).Return(workflow.DefaultVersion)
	env.OnGetVersion("baseline-i28", workflow.DefaultVersion, 1).Return(workflow.DefaultVersion) // the change asked on its own
	var answers []decision
	// The writer's call waits until the decision is answered, so that it
	// reaches the run while it runs however a loaded machine times the
	// test environment's clock.
	var answered atomic.Bool
	f.respond = func(_ context.Context, in models.RespondInput) (*models.RespondResult, error) {
		for in.Agent.AgentID == "w-writer" && !answered.Load() {
			time.Sleep(5 * time.Millisecond)
		}
		return &models.RespondResult{Output: "output of " + in.Agent.Name}, nil
	}
	var decide func()
	sent := false
	decide = func() {
		if !sent {
			resolve(env, models.UpdateApprove, models.ApprovalDecision{ApprovalID: "apr_x"}, &answers)
			sent = true
		}
		if len(answers) == 0 {
			env.RegisterDelayedCallback(decide, time.Millisecond)
			return
		}
		answered.Store(true)
	}
	env.RegisterDelayedCallback(decide, time.Millisecond)
	env.ExecuteWorkflow(workflows.RunWorkflow, runInput(approvalHierarchy(func(w *models.Agent) { w.RequiresApproval = true })))
	runResult(t, env)
	if got := writerInstructions(f); len(got) != 1 {
		t.Errorf("writer's instructions = %v", got)
	}
	if len(answers) != 1 || !strings.Contains(answers[0].err, "before approval gates") {
		t.Errorf("answers = %+v", answers)
	}
	if got := statusTrail(f); got != "running,completed" {
		t.Errorf("statuses = %s", got)
	}
}
