package workflows_test

import (
	"context"
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/op-stack/executor/models"
	"github.com/op-stack/executor/workflows"
)

// mcpGateScript is writerScript whose writer, in its first round, calls
// an MCP tool its listing gated (wipe, destructive under its server's
// policy) and one it did not (read); RunTool records the calls it runs.
func mcpGateScript(t *testing.T) (*fakeActivities, *testsuite.TestWorkflowEnvironment, *[]models.ToolInput) {
	f := writerScript()
	var mu sync.Mutex
	f.respond = func(_ context.Context, in models.RespondInput) (*models.RespondResult, error) {
		mu.Lock()
		defer mu.Unlock()
		if in.Agent.AgentID == "w-writer" && len(in.Transcript) == 0 {
			return &models.RespondResult{
				ToolCalls: []models.ToolCall{
					{ID: "c1", Name: "mcp_srv__wipe", Arguments: `{"path":"/a"}`},
					{ID: "c2", Name: "mcp_srv__read", Arguments: `{}`},
				},
				MCPGates: []models.MCPToolGate{{Function: "mcp_srv__wipe", Server: "srv", Tool: "wipe", Reason: models.MCPApprovalDestructive}},
			}, nil
		}
		return &models.RespondResult{Output: "done"}, nil
	}
	env := newEnv(t, f)
	ran := &[]models.ToolInput{}
	env.OnActivity(a.RunTool, mock.Anything, mock.Anything).Return(func(_ context.Context, in models.ToolInput) (*models.ToolOutput, error) {
		mu.Lock()
		defer mu.Unlock()
		*ran = append(*ran, in)
		return &models.ToolOutput{Content: "ran " + in.Call.Name}, nil
	})
	return f, env, ran
}

func mcpWriter(w *models.Agent) { w.Tools = []string{"mcp:srv/*"} }

// TestMCPToolApproval: a call of an MCP tool that the LLM call's listing
// gated waits for a person (the run waiting_approval, approval.requested
// naming the server, the tool and why), while the ungated tool's call
// runs after it; approved with edited arguments, the tool gets those;
// rejected, it never runs and the model gets an error result.
func TestMCPToolApproval(t *testing.T) {
	for _, approve := range []bool{true, false} {
		f, env, ran := mcpGateScript(t)
		var answers []decision
		var pending []models.Approval
		var ranBefore int
		env.RegisterDelayedCallback(func() {
			pending = approvals(t, env)
			ranBefore = len(*ran)
			if len(pending) != 1 {
				return
			}
			if approve {
				resolve(env, models.UpdateApprove, models.ApprovalDecision{ApprovalID: pending[0].ApprovalID, Arguments: json.RawMessage(`{"path":"/b"}`), By: "api_key:k"}, &answers)
			} else {
				resolve(env, models.UpdateReject, models.ApprovalDecision{ApprovalID: pending[0].ApprovalID, Comment: "not that", By: "api_key:k"}, &answers)
			}
		}, time.Hour)
		env.ExecuteWorkflow(workflows.RunWorkflow, runInput(approvalHierarchy(mcpWriter)))
		runResult(t, env)
		if len(pending) != 1 || pending[0].Kind != models.ApprovalKindTool || pending[0].Tool != "mcp_srv__wipe" ||
			pending[0].MCPServer != "srv" || pending[0].MCPTool != "wipe" || pending[0].Reason != models.MCPApprovalDestructive ||
			pending[0].Arguments != `{"path":"/a"}` {
			t.Fatalf("pending = %+v", pending)
		}
		if ranBefore != 0 {
			t.Errorf("%d calls ran before the decision", ranBefore)
		}
		if got := statusTrail(f); got != "running,waiting_approval,running,completed" {
			t.Errorf("statuses = %s", got)
		}
		evs := approvalEvents(f)
		if len(evs) != 2 || evs[0].Data["mcp_server"] != "srv" || evs[0].Data["mcp_tool"] != "wipe" || evs[0].Data["reason"] != "destructive" || evs[0].Data["tool"] != "mcp_srv__wipe" {
			t.Errorf("approval events = %+v", evs)
		}
		results := toolResults(f, "w-writer")
		if approve {
			if len(*ran) != 2 || (*ran)[0].Call.Name != "mcp_srv__wipe" || (*ran)[0].Call.Arguments != `{"path":"/b"}` || (*ran)[1].Call.Name != "mcp_srv__read" {
				t.Fatalf("approved: ran %+v", *ran)
			}
			// The activity is told which call a person approved.
			if !(*ran)[0].MCPApproved || (*ran)[1].MCPApproved {
				t.Errorf("approved: mcp_approved %v, %v: want the wipe's only", (*ran)[0].MCPApproved, (*ran)[1].MCPApproved)
			}
			if len(results) != 2 || results[0] != "ran mcp_srv__wipe" {
				t.Errorf("approved: results %q", results)
			}
			continue
		}
		if len(*ran) != 1 || (*ran)[0].Call.Name != "mcp_srv__read" {
			t.Errorf("rejected: ran %+v, want only the ungated call", *ran)
		}
		if len(results) != 2 || results[0] != "error: tool call rejected by api_key:k: not that" {
			t.Errorf("rejected: results %q", results)
		}
		var rejected bool
		for _, e := range f.persisted {
			if e.Event.Action == models.ActionToolResult && e.Data["tool_name"] == "mcp_srv__wipe" {
				rejected = e.Data["is_error"] == true && e.Data["mcp_server"] == "srv"
			}
		}
		if !rejected {
			t.Errorf("no llm.tool_result with is_error and mcp_server for the rejected call")
		}
	}
}

// TestMCPGateTimeout: an MCP gate nobody decides resolves by the agent's
// approval_default when its approval_timeout runs out, as other gates do.
func TestMCPGateTimeout(t *testing.T) {
	f, env, ran := mcpGateScript(t)
	env.ExecuteWorkflow(workflows.RunWorkflow, runInput(approvalHierarchy(func(w *models.Agent) {
		mcpWriter(w)
		w.ApprovalTimeout, w.ApprovalDefault = 600, models.ApprovalDefaultReject
	})))
	runResult(t, env)
	if len(*ran) != 1 || (*ran)[0].Call.Name != "mcp_srv__read" {
		t.Errorf("ran %+v, want only the ungated call", *ran)
	}
	if evs := approvalEvents(f); len(evs) != 2 || evs[1].Data["decided_by"] != models.ApprovalTimeoutActor || evs[1].Data["decision"] != models.ApprovalRejected {
		t.Errorf("approval events = %+v", evs)
	}
}

// TestMCPGateWithoutApprovals: where nobody can be asked (a run started
// before approval gates, as a sub-agent's turn), a gated MCP call is
// refused with an error result and never runs.
func TestMCPGateWithoutApprovals(t *testing.T) {
	f, env, ran := mcpGateScript(t)
	env.OnGetVersion("approval-gates", workflow.DefaultVersion, 1).Return(workflow.DefaultVersion)
	env.OnGetVersion("baseline-i28", workflow.DefaultVersion, 1).Return(workflow.DefaultVersion) // the change asked on its own
	env.ExecuteWorkflow(workflows.RunWorkflow, runInput(approvalHierarchy(mcpWriter)))
	runResult(t, env)
	if len(*ran) != 1 || (*ran)[0].Call.Name != "mcp_srv__read" {
		t.Errorf("ran %+v, want only the ungated call", *ran)
	}
	if r := toolResults(f, "w-writer"); len(r) != 2 || r[0] != `error: tool call refused: MCP tool srv/wipe needs a person's approval (destructive), which worker "writer" cannot ask for` {
		t.Errorf("results %q", r)
	}
}

// TestMCPGatesBeforeTheChange: a run whose history predates
// mcp-approval-gates schedules a gated MCP call's activity at once, as it
// did (no gate, no marker); the activity, not approved, refuses it.
func TestMCPGatesBeforeTheChange(t *testing.T) {
	f, env, ran := mcpGateScript(t)
	env.OnGetVersion("mcp-approval-gates", workflow.DefaultVersion, 1).Return(workflow.DefaultVersion)
	env.OnGetVersion("baseline-i28", workflow.DefaultVersion, 1).Return(workflow.DefaultVersion) // the change asked on its own
	env.ExecuteWorkflow(workflows.RunWorkflow, runInput(approvalHierarchy(mcpWriter)))
	runResult(t, env)
	if len(*ran) != 2 || (*ran)[0].MCPApproved || len(approvalEvents(f)) != 0 {
		t.Errorf("ran %+v, approval events %d: want both calls at once", *ran, len(approvalEvents(f)))
	}
}
