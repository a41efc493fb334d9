package workflows_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/mock"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/op-stack/executor/models"
	"github.com/op-stack/executor/workflows"
)

// delegationHierarchy has one team whose one worker, writer, may delegate
// to the sub-agent h1.
func delegationHierarchy() models.Hierarchy {
	h := models.Hierarchy{ID: "h-del", Name: "delegation", GlobalSupervisor: models.Agent{AgentID: "gs"},
		Teams: []models.Team{{Name: "writing", Supervisor: models.Agent{AgentID: "ts-w"}, Workers: []models.Agent{
			{AgentID: "w-writer", Name: "writer", SystemPrompt: "write", SubAgents: []string{"h1"}},
		}}},
	}
	h.Normalize()
	return h
}

// fanOut scripts a delegation tree: in its first round, the agent with
// agent_id k answers with calls[k] delegate calls to the sub-agent
// target[k]; every other answer is final. Sub-agent "hN" has agent_id
// "sa-hN" and may delegate to target["sa-hN"].
type fanOut struct {
	calls  map[string]int
	target map[string]string
}

func (s fanOut) respond(_ context.Context, in models.RespondInput) (*models.RespondResult, error) {
	n := s.calls[in.Agent.AgentID]
	if len(in.Transcript) > 0 || n == 0 {
		return &models.RespondResult{Output: "output of " + in.Agent.Name, Model: "m", Usage: models.Usage{TotalTokens: 1}}, nil
	}
	res := &models.RespondResult{Model: "m", Usage: models.Usage{TotalTokens: 1}}
	for i := range n {
		res.ToolCalls = append(res.ToolCalls, models.ToolCall{
			ID: fmt.Sprintf("call-%s-%d", in.Agent.AgentID, i), Name: models.DelegateToolName,
			Arguments: fmt.Sprintf(`{"name": %q, "task": "part %d"}`, s.target[in.Agent.AgentID], i),
		})
	}
	return res, nil
}

func (s fanOut) loadSubAgent(_ context.Context, name string) (*models.SubAgent, error) {
	def := &models.SubAgent{ID: "sa-" + name, Name: name, SystemPrompt: "help", Enabled: true, MaxDepth: 10}
	if next := s.target[def.ID]; next != "" {
		def.SubAgents = []string{next}
	}
	return def, nil
}

func newDelegationEnv(t *testing.T, f *fakeActivities, s fanOut) *testsuite.TestWorkflowEnvironment {
	t.Helper()
	f.respond = s.respond
	env := newEnv(t, f)
	env.OnActivity(a.LoadSubAgent, mock.Anything, mock.Anything).Return(s.loadSubAgent)
	return env
}

// subAgentTurns counts the sub-agent turns started, per sub-agent agent_id.
func subAgentTurns(f *fakeActivities) map[string]int {
	f.mu.Lock()
	defer f.mu.Unlock()
	turns := map[string]int{}
	for _, in := range f.responds {
		if in.Source.AgentType == models.AgentTypeSubAgent && len(in.Transcript) == 0 {
			turns[in.Agent.AgentID]++
		}
	}
	return turns
}

// capWarnings returns the system.warning events of delegations refused by
// cap (per_turn or per_run), from the run's log and from the signals of
// sub-agents.
func capWarnings(f *fakeActivities, which string) []models.Event {
	f.mu.Lock()
	defer f.mu.Unlock()
	events := append([]models.Event(nil), f.persisted...)
	for _, b := range f.signals {
		events = append(events, b.Events...)
	}
	var out []models.Event
	for _, e := range events {
		if e.Event.Category == models.CategorySystem && e.Event.Action == models.ActionWarning && e.Data["cap"] == which {
			out = append(out, e)
		}
	}
	return out
}

// toolResults returns the tool results the agent agentID saw in its
// second round.
func toolResults(f *fakeActivities, agentID string) []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, in := range f.responds {
		if in.Agent.AgentID != agentID || len(in.Transcript) == 0 {
			continue
		}
		var out []string
		for _, m := range in.Transcript {
			if m.Role == "tool" {
				out = append(out, m.Content)
			}
		}
		return out
	}
	return nil
}

func mustComplete(t *testing.T, env *testsuite.TestWorkflowEnvironment) {
	t.Helper()
	if !env.IsWorkflowCompleted() || env.GetWorkflowError() != nil {
		t.Fatalf("workflow: completed %v, error %v", env.IsWorkflowCompleted(), env.GetWorkflowError())
	}
}

// TestDelegationsPerTurnAreCapped: an answer with 30 delegate calls runs
// MAX_DELEGATIONS_PER_TURN sub-agents; the model gets a refusal for each
// of the others and the stream a system.warning.
func TestDelegationsPerTurnAreCapped(t *testing.T) {
	f := &fakeActivities{decisions: map[string][]models.Decision{"gs": {dispatch("writing", "go")}, "ts-w": {dispatch("writer", "go")}}}
	env := newDelegationEnv(t, f, fanOut{calls: map[string]int{"w-writer": 30}, target: map[string]string{"w-writer": "h1"}})
	env.ExecuteWorkflow(workflows.RunWorkflow, runInput(delegationHierarchy())) // the default caps: 8 per turn, 64 per run
	mustComplete(t, env)

	if got := subAgentTurns(f)["sa-h1"]; got != workflows.DefaultMaxDelegationsPerTurn {
		t.Errorf("sub-agent turns = %d, want %d", got, workflows.DefaultMaxDelegationsPerTurn)
	}
	results := toolResults(f, "w-writer")
	if len(results) != 30 {
		t.Fatalf("tool results = %d, want 30", len(results))
	}
	for i, r := range results {
		ran := strings.Contains(r, `"ok":true`)
		refused := strings.HasPrefix(r, "error: delegation refused: cap reached") && strings.Contains(r, "MAX_DELEGATIONS_PER_TURN")
		if (i < 8 && !ran) || (i >= 8 && !refused) {
			t.Errorf("tool result %d = %s", i, r)
		}
	}
	warnings := capWarnings(f, "per_turn")
	if len(warnings) != 22 {
		t.Fatalf("per-turn cap warnings = %d, want 22", len(warnings))
	}
	if w := warnings[0]; w.Source.AgentID != "w-writer" || !strings.Contains(w.Data["message"].(string), "MAX_DELEGATIONS_PER_TURN") || w.Data["tool_execution_id"] == "" {
		t.Errorf("warning = %+v", w)
	}
	if len(capWarnings(f, "per_run")) != 0 {
		t.Error("per-run cap warnings in a run under the per-run cap")
	}
}

// TestDelegationsPerTurnCountEveryToolRound: the per-turn cap counts over
// all the tool rounds of a turn, not per answer.
func TestDelegationsPerTurnCountEveryToolRound(t *testing.T) {
	f := &fakeActivities{decisions: map[string][]models.Decision{"gs": {dispatch("writing", "go")}, "ts-w": {dispatch("writer", "go")}}}
	env := newDelegationEnv(t, f, fanOut{target: map[string]string{"w-writer": "h1"}})
	rounds := 0
	f.respond = func(_ context.Context, in models.RespondInput) (*models.RespondResult, error) {
		if in.Agent.AgentID != "w-writer" {
			return &models.RespondResult{Output: "done", Model: "m"}, nil
		}
		rounds++
		if rounds > 3 {
			return &models.RespondResult{Output: "written", Model: "m"}, nil
		}
		res := &models.RespondResult{Model: "m"}
		for i := range 2 {
			res.ToolCalls = append(res.ToolCalls, models.ToolCall{ID: fmt.Sprintf("c%d-%d", rounds, i), Name: models.DelegateToolName, Arguments: `{"name": "h1", "task": "t"}`})
		}
		return res, nil
	}
	in := runInput(delegationHierarchy())
	in.Options.MaxDelegationsPerTurn = 3
	env.ExecuteWorkflow(workflows.RunWorkflow, in)
	mustComplete(t, env)
	if got := subAgentTurns(f)["sa-h1"]; got != 3 {
		t.Errorf("sub-agent turns over 3 rounds of 2 calls = %d, want 3", got)
	}
	if got := len(capWarnings(f, "per_turn")); got != 3 {
		t.Errorf("per-turn cap warnings = %d, want 3", got)
	}
}

// TestDelegationsPerRunCountNestedSubAgents: the per-run cap counts the
// sub-agents of sub-agents. The writer delegates 3 tasks to h1, each h1
// delegates 3 to h2: 12 sub-agents uncapped, 5 with a cap of 5.
func TestDelegationsPerRunCountNestedSubAgents(t *testing.T) {
	f := &fakeActivities{decisions: map[string][]models.Decision{"gs": {dispatch("writing", "go")}, "ts-w": {dispatch("writer", "go")}}}
	env := newDelegationEnv(t, f, fanOut{
		calls:  map[string]int{"w-writer": 3, "sa-h1": 3},
		target: map[string]string{"w-writer": "h1", "sa-h1": "h2"},
	})
	in := runInput(delegationHierarchy())
	in.Options.MaxDelegationsPerRun = 5
	env.ExecuteWorkflow(workflows.RunWorkflow, in)
	mustComplete(t, env)

	// The first h1 is lent 4 and starts 3 h2; the second gets the last one,
	// which it has spent on itself: its 3 calls are refused; the writer's
	// third call is refused.
	turns := subAgentTurns(f)
	if turns["sa-h1"] != 2 || turns["sa-h2"] != 3 {
		t.Errorf("sub-agent turns = %v, want 2 h1 and 3 h2", turns)
	}
	warnings := capWarnings(f, "per_run")
	if len(warnings) != 4 {
		t.Fatalf("per-run cap warnings = %d, want 4", len(warnings))
	}
	from := map[string]int{}
	for _, w := range warnings {
		from[w.Source.AgentID]++
		if !strings.Contains(w.Data["message"].(string), "MAX_DELEGATIONS_PER_RUN") {
			t.Errorf("warning = %v", w.Data)
		}
	}
	if from["sa-h1"] != 3 || from["w-writer"] != 1 {
		t.Errorf("warnings by agent = %v", from)
	}
	if r := toolResults(f, "w-writer"); len(r) != 3 || !strings.Contains(r[2], "delegation refused: cap reached") {
		t.Errorf("writer's tool results = %v", r)
	}
}

// TestDelegationCountSurvivesContinueAsNew: the run's count is in the
// state continue-as-new carries, and the next execution spends from it.
func TestDelegationCountSurvivesContinueAsNew(t *testing.T) {
	script := fanOut{calls: map[string]int{"w-writer": 3}, target: map[string]string{"w-writer": "h1"}}
	f := &fakeActivities{decisions: map[string][]models.Decision{"gs": {dispatch("writing", "go")}, "ts-w": {dispatch("writer", "go")}}}
	env := newDelegationEnv(t, f, script)
	f.respond = func(ctx context.Context, in models.RespondInput) (*models.RespondResult, error) {
		if in.Agent.AgentID == "w-writer" && len(in.Transcript) > 0 {
			// The history is long by the end of the first team turn. (The
			// workflow reads this after the activity completes.)
			env.SetContinueAsNewSuggested(true)
		}
		return script.respond(ctx, in)
	}
	in := runInput(delegationHierarchy())
	in.Options.MaxDelegationsPerRun = 5
	env.ExecuteWorkflow(workflows.RunWorkflow, in)
	var can *workflow.ContinueAsNewError
	if !errors.As(env.GetWorkflowError(), &can) {
		t.Fatalf("want continue-as-new after the first team turn, got %v", env.GetWorkflowError())
	}
	var next models.RunInput
	if err := converter.GetDefaultDataConverter().FromPayloads(can.Input, &next); err != nil {
		t.Fatal(err)
	}
	if next.State == nil || next.State.Delegations != 3 {
		t.Fatalf("carried state = %+v, want 3 delegations", next.State)
	}

	// The next execution: the writer's 3 calls get the 2 left.
	f2 := &fakeActivities{decisions: map[string][]models.Decision{"gs": {dispatch("writing", "again")}, "ts-w": {dispatch("writer", "again")}}}
	env2 := newDelegationEnv(t, f2, script)
	env2.ExecuteWorkflow(workflows.RunWorkflow, next)
	mustComplete(t, env2)
	if got := subAgentTurns(f2)["sa-h1"]; got != 2 {
		t.Errorf("sub-agent turns after continue-as-new = %d, want 2", got)
	}
	if got := len(capWarnings(f2, "per_run")); got != 1 {
		t.Errorf("per-run cap warnings after continue-as-new = %d, want 1", got)
	}
}

// TestRunsBeforeDelegationCapsAreNotCapped: a run that started before the
// caps (GetVersion answers the default version) delegates as it did.
func TestRunsBeforeDelegationCapsAreNotCapped(t *testing.T) {
	f := &fakeActivities{decisions: map[string][]models.Decision{"gs": {dispatch("writing", "go")}, "ts-w": {dispatch("writer", "go")}}}
	env := newDelegationEnv(t, f, fanOut{calls: map[string]int{"w-writer": 30}, target: map[string]string{"w-writer": "h1"}})
	env.OnGetVersion("delegation-caps", workflow.DefaultVersion, 1).Return(workflow.DefaultVersion)
	env.OnGetVersion("baseline-i28", workflow.DefaultVersion, 1).Return(workflow.DefaultVersion) // the change asked on its own
	env.ExecuteWorkflow(workflows.RunWorkflow, runInput(delegationHierarchy()))
	mustComplete(t, env)
	if got := subAgentTurns(f)["sa-h1"]; got != 30 {
		t.Errorf("sub-agent turns = %d, want all 30", got)
	}
	if len(capWarnings(f, "per_turn"))+len(capWarnings(f, "per_run")) != 0 {
		t.Error("cap warnings in a run without caps")
	}
}

// TestParallelTeamsShareTheRunsDelegations: two teams run at once and each
// worker delegates 3 tasks under a per-run cap of 4: exactly 4 sub-agents
// run (a delegation made while the other team's sub-agent holds the
// budget waits for it, rather than running over the cap or deadlocking).
func TestParallelTeamsShareTheRunsDelegations(t *testing.T) {
	h := models.Hierarchy{ID: "h-p", Name: "parallel", ExecutionMode: models.ExecutionModeParallel, GlobalSupervisor: models.Agent{AgentID: "gs"}}
	for _, n := range []string{"a", "b"} {
		h.Teams = append(h.Teams, models.Team{Name: n, Supervisor: models.Agent{AgentID: "ts-" + n}, Workers: []models.Agent{
			{AgentID: "w-" + n, Name: "worker-" + n, SubAgents: []string{"h1"}},
		}})
	}
	h.Normalize()
	if err := h.Validate(); err != nil {
		t.Fatal(err)
	}
	f := &fakeActivities{decisions: map[string][]models.Decision{"ts-a": {dispatch("worker-a", "x")}, "ts-b": {dispatch("worker-b", "x")}}}
	env := newDelegationEnv(t, f, fanOut{
		calls:  map[string]int{"w-a": 3, "w-b": 3},
		target: map[string]string{"w-a": "h1", "w-b": "h1"},
	})
	in := runInput(h)
	in.Options.MaxDelegationsPerRun = 4
	env.ExecuteWorkflow(workflows.RunWorkflow, in)
	mustComplete(t, env)
	if got := subAgentTurns(f)["sa-h1"]; got != 4 {
		t.Errorf("sub-agent turns = %d, want 4", got)
	}
	if got := len(capWarnings(f, "per_run")); got != 2 {
		t.Errorf("per-run cap warnings = %d, want 2", got)
	}
}
