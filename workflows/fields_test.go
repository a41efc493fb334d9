package workflows_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/mock"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/op-stack/executor/models"
	"github.com/op-stack/executor/workflows"
)

// toolHierarchy has one team whose one worker, writer, may call the tool
// "slow".
func toolHierarchy() models.Hierarchy {
	h := models.Hierarchy{ID: "h-tool", Name: "tools", GlobalSupervisor: models.Agent{AgentID: "gs"},
		Teams: []models.Team{{Name: "writing", Supervisor: models.Agent{AgentID: "ts-w"}, Workers: []models.Agent{
			{AgentID: "w-writer", Name: "writer", SystemPrompt: "write", Tools: []string{"slow"}},
		}}},
	}
	h.Normalize()
	return h
}

// slowToolRun scripts a writer that calls the tool "slow" once, then
// answers; the tool times out on every attempt.
func slowToolRun() *fakeActivities {
	f := &fakeActivities{decisions: map[string][]models.Decision{"gs": {dispatch("writing", "go")}, "ts-w": {dispatch("writer", "go")}}}
	f.respond = func(_ context.Context, in models.RespondInput) (*models.RespondResult, error) {
		if in.Agent.AgentID == "w-writer" && len(in.Transcript) == 0 {
			return &models.RespondResult{Model: "m", ToolCalls: []models.ToolCall{{ID: "call-1", Name: "slow", Arguments: `{"q":"x"}`}}}, nil
		}
		return &models.RespondResult{Output: "output of " + in.Agent.Name, Model: "m"}, nil
	}
	return f
}

// TestToolTimeoutIsAnErrorResult: a tool that times out on every attempt
// is an llm.tool_result with is_error naming the timeout, the model gets
// the error and answers, and the run completes.
func TestToolTimeoutIsAnErrorResult(t *testing.T) {
	f := slowToolRun()
	env := newEnv(t, f)
	env.OnActivity(a.RunTool, mock.Anything, mock.Anything).Return(nil, temporal.NewTimeoutError(enumspb.TIMEOUT_TYPE_START_TO_CLOSE, nil))
	env.ExecuteWorkflow(workflows.RunWorkflow, runInput(toolHierarchy()))
	mustComplete(t, env)
	var result models.Event
	for _, e := range f.persisted {
		if e.Event.Action == models.ActionToolResult {
			result = e
		}
	}
	d := result.Data
	if d["is_error"] != true || d["status"] != "failed" || d["tool_name"] != "slow" || d["execution_id"] == nil || d["execution_id"] != d["tool_execution_id"] ||
		!strings.Contains(d["error"].(string), "timed out") || !strings.Contains(d["error"].(string), "start-to-close") {
		t.Errorf("tool_result = %+v", d)
	}
	got := toolResults(f, "w-writer")
	if len(got) != 1 || !strings.HasPrefix(got[0], "error: tool slow timed out") {
		t.Errorf("the writer saw %q", got)
	}
	var res models.RunResult
	if err := env.GetWorkflowResult(&res); err != nil || len(res.Teams) != 1 || res.Teams[0].Status != models.TeamCompleted {
		t.Errorf("result = %+v, %v", res, err)
	}
}

// TestToolTimeoutBeforeTheChangeFailsTheTeam: a run started before
// changeToolErrorResults keeps failing the team on a tool timeout.
func TestToolTimeoutBeforeTheChangeFailsTheTeam(t *testing.T) {
	f := slowToolRun()
	env := newEnv(t, f)
	env.OnGetVersion("tool-error-results", workflow.DefaultVersion, 1).Return(workflow.DefaultVersion)
	env.OnGetVersion("baseline-i28", workflow.DefaultVersion, 1).Return(workflow.DefaultVersion) // the change asked on its own
	env.OnActivity(a.RunTool, mock.Anything, mock.Anything).Return(nil, temporal.NewTimeoutError(enumspb.TIMEOUT_TYPE_START_TO_CLOSE, nil))
	env.ExecuteWorkflow(workflows.RunWorkflow, runInput(toolHierarchy()))
	if !env.IsWorkflowCompleted() || env.GetWorkflowError() == nil {
		t.Fatalf("completed %v, error %v; want a failed run", env.IsWorkflowCompleted(), env.GetWorkflowError())
	}
}

// TestToolEventsCarrySpec004Names: tool_call and tool_result carry spec
// 004's execution_id, status and tool_input next to the earlier names.
func TestToolEventsCarrySpec004Names(t *testing.T) {
	call := models.ToolCallData(models.ToolCall{ID: "c1", Name: "calculator", Arguments: `{"expression":"1+1"}`}, "exec_0123456789ab")
	if call["execution_id"] != "exec_0123456789ab" || call["tool_execution_id"] != "exec_0123456789ab" || call["status"] != "running" ||
		call["tool_input"].(map[string]any)["expression"] != "1+1" || call["arguments"] == nil || call["call_id"] != "c1" {
		t.Errorf("tool_call data = %+v", call)
	}
	ok := models.ToolResultData(models.ToolCall{ID: "c1", Name: "calculator"}, "exec_0123456789ab", models.ToolOutput{Content: "2"})
	if ok["execution_id"] != "exec_0123456789ab" || ok["status"] != "completed" || ok["result"] != "2" || ok["is_error"] != false || ok["call_id"] != "c1" {
		t.Errorf("tool_result data = %+v", ok)
	}
	bad := models.ToolResultData(models.ToolCall{ID: "c1", Name: "calculator"}, "exec_0123456789ab", models.ToolOutput{Content: "boom", IsError: true})
	if bad["status"] != "failed" || bad["error"] != "boom" || bad["is_error"] != true {
		t.Errorf("failed tool_result data = %+v", bad)
	}
}

// analystFails scripts the test hierarchy's research team: the searcher
// answers, then the analyst's call is rejected (not retried).
func analystFails() *fakeActivities {
	f := &fakeActivities{decisions: map[string][]models.Decision{
		"gs": {dispatch("research", "go")}, "ts-r": {dispatch("searcher", "search"), dispatch("analyst", "analyse")},
	}}
	f.respond = func(_ context.Context, in models.RespondInput) (*models.RespondResult, error) {
		if in.Agent.AgentID == "w-analyst" {
			return nil, temporal.NewNonRetryableApplicationError("HTTP 400: invalid request", models.ErrLLMRejected, nil)
		}
		return &models.RespondResult{Output: "output of " + in.Agent.Name, Model: "m", Usage: models.Usage{TotalTokens: 10}}, nil
	}
	return f
}

// TestFailedTeamKeepsFinishedWorkers: the failed research turn keeps the
// searcher's output, marked partial, in the stored result of the failed
// run; a run started before changePartialResults drops it.
func TestFailedTeamKeepsFinishedWorkers(t *testing.T) {
	for _, before := range []bool{false, true} {
		f := analystFails()
		env := newEnv(t, f)
		if before {
			env.OnGetVersion("partial-results", workflow.DefaultVersion, 1).Return(workflow.DefaultVersion)
			env.OnGetVersion("baseline-i28", workflow.DefaultVersion, 1).Return(workflow.DefaultVersion) // the change asked on its own
		}
		env.ExecuteWorkflow(workflows.RunWorkflow, runInput(testHierarchy()))
		if !env.IsWorkflowCompleted() || env.GetWorkflowError() == nil {
			t.Fatalf("completed %v, error %v; want a failed run", env.IsWorkflowCompleted(), env.GetWorkflowError())
		}
		last := f.lastStatus()
		if last.Status != models.RunFailed || last.Result == nil || len(last.Result.Teams) == 0 {
			t.Fatalf("last status = %+v", last)
		}
		team := last.Result.Teams[0]
		if before {
			if team.Partial || len(team.Workers) != 0 {
				t.Errorf("before the change: research = %+v", team)
			}
			continue
		}
		if team.Status != models.TeamFailed || !team.Partial || len(team.Workers) != 1 || team.Workers[0].Output != "output of searcher" {
			t.Errorf("research = %+v", team)
		}
		if last.Result.Usage.TotalTokens < 10 {
			t.Errorf("the searcher's usage is not counted: %+v", last.Result.Usage)
		}
	}
}

// selfDelegationEnv scripts a writer that delegates to h1, and h1 (max_depth
// 3, allowed to call itself) delegating to itself in its first round.
func selfDelegationEnv(t *testing.T, f *fakeActivities) *testsuite.TestWorkflowEnvironment {
	s := fanOut{calls: map[string]int{"w-writer": 1, "sa-h1": 1}, target: map[string]string{"w-writer": "h1", "sa-h1": "h1"}}
	f.respond = s.respond
	env := newEnv(t, f)
	env.OnActivity(a.LoadSubAgent, mock.Anything, mock.Anything).Return(func(_ context.Context, name string) (*models.SubAgent, error) {
		return &models.SubAgent{ID: "sa-" + name, Name: name, SystemPrompt: "help", Enabled: true, MaxDepth: 3, SubAgents: []string{"h1"}}, nil
	})
	return env
}

// refusals returns the messages of the delegation refusals signalled.
func refusals(f *fakeActivities) []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for _, b := range append([]models.EventBatch{{Events: f.persisted}}, f.signals...) {
		for _, e := range b.Events {
			if msg, _ := e.Data["message"].(string); e.Event.Action == models.ActionWarning && strings.HasPrefix(msg, "delegation refused") {
				out = append(out, msg)
			}
		}
	}
	return out
}

// TestSubAgentMayCallItself: a sub-agent delegating to itself is recursion,
// bounded by its max_depth (3 levels run, the 4th is refused for depth, not
// as a cycle); before changeSelfDelegation it was refused as a cycle.
func TestSubAgentMayCallItself(t *testing.T) {
	f := &fakeActivities{decisions: map[string][]models.Decision{"gs": {dispatch("writing", "go")}, "ts-w": {dispatch("writer", "go")}}}
	env := selfDelegationEnv(t, f)
	env.ExecuteWorkflow(workflows.RunWorkflow, runInput(delegationHierarchy()))
	mustComplete(t, env)
	if got := subAgentTurns(f)["sa-h1"]; got != 3 {
		t.Errorf("h1 turns = %d, want 3 (its max_depth)", got)
	}
	if r := refusals(f); len(r) != 1 || !strings.Contains(r[0], "depth") {
		t.Errorf("refusals = %q, want one for depth", r)
	}

	f = &fakeActivities{decisions: map[string][]models.Decision{"gs": {dispatch("writing", "go")}, "ts-w": {dispatch("writer", "go")}}}
	env = selfDelegationEnv(t, f)
	env.OnGetVersion("self-delegation", workflow.DefaultVersion, 1).Return(workflow.DefaultVersion)
	env.OnGetVersion("baseline-i28", workflow.DefaultVersion, 1).Return(workflow.DefaultVersion) // the change asked on its own
	env.ExecuteWorkflow(workflows.RunWorkflow, runInput(delegationHierarchy()))
	mustComplete(t, env)
	if got := subAgentTurns(f)["sa-h1"]; got != 1 {
		t.Errorf("before the change: h1 turns = %d, want 1", got)
	}
	if r := refusals(f); len(r) != 1 || !strings.Contains(r[0], "cycle") {
		t.Errorf("before the change: refusals = %q, want one cycle", r)
	}
}

// TestDelegateContextReachesTheSubAgent: the delegate tool's optional
// context reaches the sub-agent's prompt input as compact JSON.
func TestDelegateContextReachesTheSubAgent(t *testing.T) {
	f := &fakeActivities{decisions: map[string][]models.Decision{"gs": {dispatch("writing", "go")}, "ts-w": {dispatch("writer", "go")}}}
	f.respond = func(_ context.Context, in models.RespondInput) (*models.RespondResult, error) {
		if in.Agent.AgentID == "w-writer" && len(in.Transcript) == 0 {
			return &models.RespondResult{Model: "m", ToolCalls: []models.ToolCall{{ID: "c1", Name: models.DelegateToolName,
				Arguments: `{"name": "h1", "task": "check", "context": {"urls": ["https://example.org"], "tone": "brief"}}`}}}, nil
		}
		return &models.RespondResult{Output: "output of " + in.Agent.Name, Model: "m"}, nil
	}
	env := newEnv(t, f)
	env.OnActivity(a.LoadSubAgent, mock.Anything, mock.Anything).Return(fanOut{}.loadSubAgent)
	env.ExecuteWorkflow(workflows.RunWorkflow, runInput(delegationHierarchy()))
	mustComplete(t, env)
	var got []string
	for _, in := range f.responds {
		if in.Agent.AgentID == "sa-h1" {
			got = append(got, in.CallerContext)
		} else if in.CallerContext != "" {
			t.Errorf("%s got a caller context", in.Agent.AgentID)
		}
	}
	if len(got) != 1 || got[0] != `{"urls":["https://example.org"],"tone":"brief"}` {
		t.Errorf("sub-agent caller context = %q", got)
	}
}

// delegateModeRun runs a writer that delegates four tasks to h1 (which has
// a tool and may delegate) in its first round, with options.mode
// no_tools, no_delegation, an unknown mode and none, and returns h1's
// agent per task and the refusals.
func delegateModeRun(t *testing.T, modeVersion workflow.Version) (map[string]models.Agent, []string) {
	t.Helper()
	f := &fakeActivities{decisions: map[string][]models.Decision{"gs": {dispatch("writing", "go")}, "ts-w": {dispatch("writer", "go")}}}
	f.respond = func(_ context.Context, in models.RespondInput) (*models.RespondResult, error) {
		if in.Agent.AgentID == "w-writer" && len(in.Transcript) == 0 {
			var calls []models.ToolCall
			for i, options := range []string{`, "options": {"mode": "no_tools"}`, `, "options": {"mode": "no_delegation"}`, `, "options": {"mode": "everything"}`, ``} {
				calls = append(calls, models.ToolCall{ID: fmt.Sprintf("c%d", i), Name: models.DelegateToolName,
					Arguments: fmt.Sprintf(`{"name": "h1", "task": "task %d"%s}`, i, options)})
			}
			return &models.RespondResult{Model: "m", ToolCalls: calls}, nil
		}
		return &models.RespondResult{Output: "output of " + in.Agent.Name, Model: "m"}, nil
	}
	env := newEnv(t, f)
	env.OnActivity(a.LoadSubAgent, mock.Anything, mock.Anything).Return(func(_ context.Context, name string) (*models.SubAgent, error) {
		return &models.SubAgent{ID: "sa-" + name, Name: name, SystemPrompt: "help", Enabled: true, MaxDepth: 3,
			Tools: []string{"calculator"}, SubAgents: []string{"h2"}}, nil
	})
	if modeVersion == workflow.DefaultVersion {
		env.OnGetVersion("delegate-mode", workflow.DefaultVersion, 1).Return(workflow.DefaultVersion)
		env.OnGetVersion("baseline-i28", workflow.DefaultVersion, 1).Return(workflow.DefaultVersion) // the change asked on its own
	}
	env.ExecuteWorkflow(workflows.RunWorkflow, runInput(delegationHierarchy()))
	mustComplete(t, env)
	got := map[string]models.Agent{}
	for _, in := range f.responds {
		if in.Agent.AgentID == "sa-h1" {
			got[in.Task] = in.Agent
		}
	}
	return got, refusals(f)
}

// TestDelegateModeNarrowsTheSubAgent (spec 003, issue 23 item 20): the
// delegate tool's options.mode runs the sub-agent without tools or
// sub-agents (no_tools) or without sub-agents (no_delegation); no mode runs
// it as defined, and an unknown mode is refused to the calling model. A run
// from before changeDelegateMode ignores the options, as it did.
func TestDelegateModeNarrowsTheSubAgent(t *testing.T) {
	got, refused := delegateModeRun(t, 1)
	if a := got["task 0"]; len(a.Tools) != 0 || len(a.SubAgents) != 0 {
		t.Errorf("no_tools: tools %v, sub-agents %v", a.Tools, a.SubAgents)
	}
	if a := got["task 1"]; len(a.Tools) != 1 || len(a.SubAgents) != 0 {
		t.Errorf("no_delegation: tools %v, sub-agents %v", a.Tools, a.SubAgents)
	}
	if a, ran := got["task 2"]; ran {
		t.Errorf("an unknown mode ran the sub-agent with %+v", a)
	}
	if a := got["task 3"]; len(a.Tools) != 1 || len(a.SubAgents) != 1 {
		t.Errorf("no mode: tools %v, sub-agents %v", a.Tools, a.SubAgents)
	}
	if len(refused) != 1 || !strings.Contains(refused[0], `options.mode "everything" is not one of default, no_delegation, no_tools`) {
		t.Errorf("refusals = %q", refused)
	}

	got, refused = delegateModeRun(t, workflow.DefaultVersion)
	if len(got) != 4 || len(refused) != 0 {
		t.Fatalf("before the change: %d tasks ran, refusals %q; want 4 and none", len(got), refused)
	}
	for task, a := range got {
		if len(a.Tools) != 1 || len(a.SubAgents) != 1 {
			t.Errorf("before the change, %s: tools %v, sub-agents %v", task, a.Tools, a.SubAgents)
		}
	}
}
