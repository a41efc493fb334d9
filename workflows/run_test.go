package workflows_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/activity"
	temporallog "go.temporal.io/sdk/log"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"

	"github.com/op-stack/executor/activities"
	"github.com/op-stack/executor/models"
	"github.com/op-stack/executor/worker"
	"github.com/op-stack/executor/workflows"
)

var a *activities.Activities

// testHierarchy has two teams: research (two workers) and writing (one).
func testHierarchy() models.Hierarchy {
	h := models.Hierarchy{
		ID:               "h-1",
		Name:             "test",
		GlobalSupervisor: models.Agent{AgentID: "gs", SystemPrompt: "lead"},
		Teams: []models.Team{
			{Name: "research", Supervisor: models.Agent{AgentID: "ts-r"}, Workers: []models.Agent{
				{AgentID: "w-search", Name: "searcher", SystemPrompt: "search"},
				{AgentID: "w-analyst", Name: "analyst", SystemPrompt: "analyse"},
			}},
			{Name: "writing", Supervisor: models.Agent{AgentID: "ts-w"}, Workers: []models.Agent{
				{AgentID: "w-writer", Name: "writer", SystemPrompt: "write"},
			}},
		},
	}
	h.Normalize()
	return h
}

// fakeActivities scripts the activities a workflow test sees: decisions per
// supervisor agent_id (consumed in order; when a script runs out the
// supervisor finishes) and worker answers, and records every call.
type fakeActivities struct {
	mu        sync.Mutex
	decisions map[string][]models.Decision
	decides   []models.DecideInput
	responds  []models.RespondInput
	statuses  []models.RunStatusUpdate
	signals   []models.EventBatch
	persisted []models.Event
	answers   []models.AnswerRecord
	respond   func(ctx context.Context, in models.RespondInput) (*models.RespondResult, error)
	// dispatchEvents makes team supervisors' decisions return their
	// dispatch.worker events, as the real Decide does (fork tests read
	// them).
	dispatchEvents bool
	// failDecide, when it returns an error, fails a decision attempt
	// before the script is consulted (every attempt is recorded).
	failDecide func(in models.DecideInput) error
}

func (f *fakeActivities) decide(_ context.Context, in models.DecideInput) (*models.Decision, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.decides = append(f.decides, in)
	if f.failDecide != nil {
		if err := f.failDecide(in); err != nil {
			return nil, err
		}
	}
	script := f.decisions[in.Source.AgentID]
	if len(script) == 0 {
		return &models.Decision{Action: models.DecisionFinish, Usage: models.Usage{TotalTokens: 1}}, nil
	}
	d := script[0]
	f.decisions[in.Source.AgentID] = script[1:]
	d.Usage = models.Usage{TotalTokens: 1}
	if f.dispatchEvents && in.ReturnEvents && d.Action == models.DecisionDispatch && in.Source.AgentType == models.AgentTypeTeamSupervisor {
		kind, data := models.DispatchEvent(in.Source, in.Options, d, in.Iteration)
		d.Events = &models.EventBatch{Producer: fmt.Sprintf("decide-%d", len(f.decides)), Seq: 1, Events: []models.Event{{
			RunID: in.RunID, Source: in.Source, Event: kind, Data: data,
		}}}
	}
	return &d, nil
}

func (f *fakeActivities) doRespond(ctx context.Context, in models.RespondInput) (*models.RespondResult, error) {
	f.mu.Lock()
	f.responds = append(f.responds, in)
	custom := f.respond
	f.mu.Unlock()
	if custom != nil {
		return custom(ctx, in)
	}
	res := &models.RespondResult{Output: "output of " + in.Agent.Name, Model: "m", Usage: models.Usage{TotalTokens: 10}}
	if f.dispatchEvents && in.ReturnEvents {
		// The llm.usage event the real activity ends with.
		res.Events = &models.EventBatch{Producer: "respond-" + in.MessageID, Seq: 1, Events: []models.Event{{
			RunID: in.RunID, Source: in.Source, Event: models.EventKind{Category: models.CategoryLLM, Action: models.ActionUsage},
			Data: map[string]any{"model": "m", "total_tokens": 10, "cost_usd": 0.0, "purpose": in.Purpose},
		}}}
	}
	return res, nil
}

func (f *fakeActivities) setStatus(_ context.Context, u models.RunStatusUpdate) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.statuses = append(f.statuses, u)
	return nil
}

func (f *fakeActivities) saveAnswer(_ context.Context, rec models.AnswerRecord) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.answers = append(f.answers, rec)
	return nil
}

func (f *fakeActivities) persist(_ context.Context, in models.PersistEventsInput) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.persisted = append(f.persisted, in.Events...)
	return nil
}

func (f *fakeActivities) lastStatus() models.RunStatusUpdate {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.statuses) == 0 {
		return models.RunStatusUpdate{}
	}
	return f.statuses[len(f.statuses)-1]
}

func dispatch(target, instruction string) models.Decision {
	return models.Decision{Action: models.DecisionDispatch, Target: target, Instruction: instruction, Reason: "because"}
}

func newEnv(t *testing.T, f *fakeActivities) *testsuite.TestWorkflowEnvironment {
	t.Helper()
	var suite testsuite.WorkflowTestSuite
	suite.SetLogger(temporallog.NewStructuredLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
	env := suite.NewTestWorkflowEnvironment()
	worker.Register(env, &activities.Activities{})
	// Registered by the worker from the API's Runs (app.NewWorker); a
	// queued run's test mocks it by name.
	env.RegisterActivityWithOptions(func(context.Context, models.AdmissionInput) (models.AdmissionResult, error) {
		return models.AdmissionResult{Admitted: true}, nil
	}, activity.RegisterOptions{Name: models.ActivityCheckAdmission})
	env.OnActivity(a.Decide, mock.Anything, mock.Anything).Return(f.decide)
	env.OnActivity(a.Respond, mock.Anything, mock.Anything).Return(f.doRespond)
	env.OnActivity(a.SetRunStatus, mock.Anything, mock.Anything).Return(f.setStatus)
	env.OnActivity(a.PersistEvents, mock.Anything, mock.Anything).Return(f.persist)
	env.OnActivity(a.SaveAnswer, mock.Anything, mock.Anything).Return(f.saveAnswer)
	// A team turn signals its warnings to the run's workflow.
	env.OnSignalExternalWorkflow(mock.Anything, models.RunWorkflowID("run-1"), "", models.SignalEvents, mock.Anything).Return(
		func(_, _, _, _ string, arg any) error {
			f.mu.Lock()
			defer f.mu.Unlock()
			f.signals = append(f.signals, arg.(models.EventBatch))
			return nil
		})
	return env
}

func runInput(h models.Hierarchy) models.RunInput {
	return models.RunInput{RunID: "run-1", Task: "write a report", Hierarchy: h, Options: models.RunOptions{
		DefaultModel: "m", RetryInitial: time.Millisecond, RetryMax: time.Millisecond, MaxAttempts: 3,
	}}
}

func TestRoutingLoop(t *testing.T) {
	f := &fakeActivities{decisions: map[string][]models.Decision{
		"gs":   {dispatch("research", "find sources"), dispatch("writing", "write it up")},
		"ts-r": {dispatch("searcher", "search the web"), dispatch("analyst", "analyse")},
		"ts-w": {dispatch("writer", "write")},
	}}
	env := newEnv(t, f)
	env.ExecuteWorkflow(workflows.RunWorkflow, runInput(testHierarchy()))
	if !env.IsWorkflowCompleted() || env.GetWorkflowError() != nil {
		t.Fatalf("workflow: completed %v, error %v", env.IsWorkflowCompleted(), env.GetWorkflowError())
	}
	var res models.RunResult
	if err := env.GetWorkflowResult(&res); err != nil {
		t.Fatal(err)
	}
	if res.FinalAnswer != "output of Global Supervisor" {
		t.Errorf("final answer = %q", res.FinalAnswer)
	}
	if len(res.Teams) != 2 || res.Teams[0].TeamName != "research" || res.Teams[1].TeamName != "writing" {
		t.Fatalf("teams = %+v", res.Teams)
	}
	if got := len(res.Teams[0].Workers); got != 2 || res.Teams[0].Workers[1].Instruction != "analyse" {
		t.Errorf("research turn = %+v", res.Teams[0])
	}
	// 3 worker calls + the final answer at 10 tokens; 3 global and 5 team decisions at 1.
	if res.Usage.TotalTokens != 4*10+3+5 {
		t.Errorf("usage = %d", res.Usage.TotalTokens)
	}
	// The team turn receives the global supervisor's instruction.
	for _, d := range f.decides {
		if d.Source.AgentID == "ts-w" && d.Instruction != "write it up" {
			t.Errorf("writing supervisor brief = %q", d.Instruction)
		}
	}
	if s := f.statuses; len(s) != 2 || s[0].Status != models.RunRunning || s[1].Status != models.RunCompleted || s[1].Result == nil {
		t.Errorf("statuses = %+v", s)
	}
	// The final answer sees both teams' outputs.
	final := f.responds[len(f.responds)-1]
	if final.Purpose != models.PurposeFinalAnswer || len(final.Context) != 2 {
		t.Errorf("final answer input = %+v", final)
	}
}

func TestIterationLimitEndsRunawayLoops(t *testing.T) {
	h := testHierarchy()
	h.MaxIterations = 3
	teamLoop, workerLoop := make([]models.Decision, 20), make([]models.Decision, 20)
	for i := range teamLoop {
		teamLoop[i], workerLoop[i] = dispatch("writing", "again"), dispatch("writer", "again")
	}
	f := &fakeActivities{decisions: map[string][]models.Decision{"gs": teamLoop, "ts-w": workerLoop}}
	env := newEnv(t, f)
	env.ExecuteWorkflow(workflows.RunWorkflow, runInput(h))
	var res models.RunResult
	if err := env.GetWorkflowResult(&res); err != nil {
		t.Fatal(err)
	}
	if len(res.Teams) != 3 {
		t.Errorf("want 3 team turns at max_iterations 3, got %d", len(res.Teams))
	}
	for _, tm := range res.Teams {
		if len(tm.Workers) != 3 {
			t.Errorf("want 3 worker turns per team turn, got %d", len(tm.Workers))
		}
	}
	// Team turns run inside the run's workflow: their warnings go straight
	// into its log, with no signal.
	var teamWarnings int
	for _, e := range f.persisted {
		if e.Event.Action == models.ActionWarning && e.Source.AgentType == models.AgentTypeTeamSupervisor {
			teamWarnings++
		}
	}
	if teamWarnings != 3 || len(f.signals) != 0 {
		t.Errorf("want one warning event per team turn in the log and no signal, got %d warnings and %d signals", teamWarnings, len(f.signals))
	}
	warnings := strings.Join(res.Warnings, "\n")
	if !strings.Contains(warnings, "global supervisor reached its iteration limit (3)") || !strings.Contains(warnings, `team supervisor of "writing" reached its iteration limit (3)`) {
		t.Errorf("warnings = %q", warnings)
	}
}

func TestPreventDuplicate(t *testing.T) {
	for _, prevent := range []bool{true, false} {
		h := testHierarchy()
		h.Teams[0].PreventDuplicate = prevent
		f := &fakeActivities{decisions: map[string][]models.Decision{
			"gs":   {dispatch("research", "go")},
			"ts-r": {dispatch("searcher", "1"), dispatch("searcher", "2"), dispatch("analyst", "3"), dispatch("searcher", "4")},
		}}
		env := newEnv(t, f)
		env.ExecuteWorkflow(workflows.RunWorkflow, runInput(h))
		var res models.RunResult
		if err := env.GetWorkflowResult(&res); err != nil {
			t.Fatal(err)
		}
		var offered [][]string
		for _, d := range f.decides {
			if d.Source.AgentID == "ts-r" {
				var names []string
				for _, o := range d.Options {
					names = append(names, o.Name)
				}
				offered = append(offered, names)
			}
		}
		if prevent {
			// The supervisor is offered only workers it has not dispatched;
			// when none is left the turn ends without asking again.
			if len(offered) != 2 || strings.Join(offered[0], ",") != "searcher,analyst" || strings.Join(offered[1], ",") != "analyst" {
				t.Errorf("prevent_duplicate: offered %v", offered)
			}
		} else if len(offered) != 5 || strings.Join(offered[4], ",") != "searcher,analyst" {
			t.Errorf("without prevent_duplicate: offered %v", offered)
		}
	}
}

func TestContextSharingFlags(t *testing.T) {
	for _, tc := range []struct{ global, team bool }{{false, false}, {true, false}, {false, true}, {true, true}} {
		h := testHierarchy()
		h.EnableContextSharing = tc.global
		h.Teams[0].ShareContext = tc.team
		f := &fakeActivities{decisions: map[string][]models.Decision{
			"gs":   {dispatch("research", "go"), dispatch("writing", "go")},
			"ts-r": {dispatch("searcher", "1"), dispatch("analyst", "2")},
			"ts-w": {dispatch("writer", "3")},
		}}
		env := newEnv(t, f)
		env.ExecuteWorkflow(workflows.RunWorkflow, runInput(h))
		if err := env.GetWorkflowError(); err != nil {
			t.Fatal(err)
		}
		byAgent := map[string]models.RespondInput{}
		for _, r := range f.responds {
			byAgent[r.Agent.AgentID] = r
		}
		analystSeesSearcher := hasContext(byAgent["w-analyst"], "worker searcher", "output of searcher")
		writerSeesResearch := hasContext(byAgent["w-writer"], "team research", "output of analyst")
		if analystSeesSearcher != tc.team {
			t.Errorf("share_context=%v: analyst sees the searcher's output: %v", tc.team, analystSeesSearcher)
		}
		if writerSeesResearch != tc.global {
			t.Errorf("enable_context_sharing=%v: writer sees the research team's output: %v", tc.global, writerSeesResearch)
		}
	}
}

func hasContext(in models.RespondInput, from, content string) bool {
	for _, c := range in.Context {
		// Short outputs travel whole in their references.
		if c.From == from && strings.Contains(c.Resolved(nil).Content, content) {
			return true
		}
	}
	return false
}

func TestRetryThenSuccess(t *testing.T) {
	calls := 0
	f := &fakeActivities{decisions: map[string][]models.Decision{"gs": {dispatch("writing", "go")}, "ts-w": {dispatch("writer", "go")}}}
	f.respond = func(_ context.Context, in models.RespondInput) (*models.RespondResult, error) {
		if in.Agent.AgentID == "w-writer" {
			calls++
			if calls == 1 {
				return nil, temporal.NewApplicationError("HTTP 500", models.ErrLLMUnavailable)
			}
		}
		return &models.RespondResult{Output: "ok " + in.Agent.Name}, nil
	}
	env := newEnv(t, f)
	env.ExecuteWorkflow(workflows.RunWorkflow, runInput(testHierarchy()))
	if err := env.GetWorkflowError(); err != nil {
		t.Fatalf("run failed: %v", err)
	}
	if calls != 2 {
		t.Errorf("writer called %d times, want 2 (one failure, one retry)", calls)
	}
	if f.lastStatus().Status != models.RunCompleted {
		t.Errorf("status = %+v", f.lastStatus())
	}
}

func TestNonRetryableFailureFailsTheRun(t *testing.T) {
	calls := 0
	f := &fakeActivities{decisions: map[string][]models.Decision{"gs": {dispatch("writing", "go")}, "ts-w": {dispatch("writer", "go")}}}
	f.respond = func(_ context.Context, in models.RespondInput) (*models.RespondResult, error) {
		calls++
		return nil, temporal.NewNonRetryableApplicationError(`worker "writer" (agent_id w-writer) calling model "m": HTTP 401: invalid key`, models.ErrLLMRejected, nil)
	}
	env := newEnv(t, f)
	env.ExecuteWorkflow(workflows.RunWorkflow, runInput(testHierarchy()))
	if err := env.GetWorkflowError(); err == nil {
		t.Fatal("run succeeded")
	}
	if calls != 1 {
		t.Errorf("a non-retryable failure was retried: %d calls", calls)
	}
	last := f.lastStatus()
	if last.Status != models.RunFailed || !strings.Contains(last.Error, "w-writer") || !strings.Contains(last.Error, "401") {
		t.Errorf("stored failure = %+v", last)
	}
}

func TestCancellation(t *testing.T) {
	f := &fakeActivities{decisions: map[string][]models.Decision{"gs": {dispatch("writing", "go")}, "ts-w": {dispatch("writer", "go")}}}
	f.respond = func(ctx context.Context, in models.RespondInput) (*models.RespondResult, error) {
		<-ctx.Done() // a long LLM call, stopped by the cancellation
		return nil, ctx.Err()
	}
	env := newEnv(t, f)
	env.RegisterDelayedCallback(env.CancelWorkflow, time.Second)
	env.ExecuteWorkflow(workflows.RunWorkflow, runInput(testHierarchy()))
	err := env.GetWorkflowError()
	var canceled *temporal.CanceledError
	if !errors.As(err, &canceled) {
		t.Fatalf("want a cancelled workflow, got %v", err)
	}
	if f.lastStatus().Status != models.RunCancelled {
		t.Errorf("status = %+v", f.lastStatus())
	}
}

// TestEventLog checks the run's log: activity batches are applied once
// (a re-sent batch is ignored), sequences run from 1 without gaps, and
// everything, the terminal event included, is persisted before the
// terminal status is written.
func TestEventLog(t *testing.T) {
	f := &fakeActivities{decisions: map[string][]models.Decision{"gs": {dispatch("writing", "go")}, "ts-w": {dispatch("writer", "go")}}}
	// The writer takes a moment, so the signals below arrive mid-run.
	f.respond = func(_ context.Context, in models.RespondInput) (*models.RespondResult, error) {
		if in.Agent.AgentID == "w-writer" {
			time.Sleep(200 * time.Millisecond)
		}
		return &models.RespondResult{Output: "output of " + in.Agent.Name}, nil
	}
	env := newEnv(t, f)
	batch := models.EventBatch{Producer: "p", Seq: 1, Events: []models.Event{{RunID: "run-1", Event: models.EventKind{Category: "llm", Action: "stream"}, Data: map[string]any{"content": "hi"}}}}
	env.RegisterDelayedCallback(func() { env.SignalWorkflow(models.SignalEvents, batch) }, time.Millisecond)
	env.RegisterDelayedCallback(func() { env.SignalWorkflow(models.SignalEvents, batch) }, 2*time.Millisecond)
	env.ExecuteWorkflow(workflows.RunWorkflow, runInput(testHierarchy()))
	if err := env.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for i, e := range f.persisted {
		if e.Sequence != int64(i+1) {
			t.Fatalf("persisted event %d has sequence %d", i, e.Sequence)
		}
		kinds = append(kinds, e.Event.String())
	}
	// The signalled batch lands once, wherever it interleaves.
	got := strings.Join(kinds, " ")
	if len(kinds) != 5 || !strings.HasPrefix(got, "lifecycle.started system.topology ") || !strings.HasSuffix(got, " lifecycle.completed") ||
		strings.Count(got, "llm.stream") != 1 || strings.Count(got, "dispatch.team") != 1 {
		t.Errorf("log = %s", got)
	}
	if last := f.lastStatus(); last.Status != models.RunCompleted {
		t.Errorf("status = %+v", last)
	}
	// The query answers from the log.
	val, err := env.QueryWorkflow(models.QueryEvents, models.EventQuery{After: 3})
	if err != nil {
		t.Fatal(err)
	}
	var page models.EventPage
	if err := val.Get(&page); err != nil {
		t.Fatal(err)
	}
	if len(page.Events) != 2 || page.Events[0].Sequence != 4 || !page.Terminal || page.LastSequence != 5 {
		t.Errorf("page after 3 = %+v", page)
	}
}

// diamond is four teams: b and c need a, d needs b and c.
func diamond(mode string) models.Hierarchy {
	h := models.Hierarchy{ID: "h-d", Name: "diamond", ExecutionMode: mode, GlobalSupervisor: models.Agent{AgentID: "gs"}}
	for _, n := range []string{"a", "b", "c", "d"} {
		h.Teams = append(h.Teams, models.Team{Name: n, Supervisor: models.Agent{AgentID: "ts-" + n}, Workers: []models.Agent{{AgentID: "w-" + n, Name: "worker-" + n}}})
	}
	h.Dependencies = map[string][]string{"d": {"b", "c"}, "b": {"a"}, "c": {"a"}}
	h.Normalize()
	if err := h.Validate(); err != nil {
		panic(err)
	}
	return h
}

func dispatched(f *fakeActivities, kind string) []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for _, e := range f.persisted {
		if e.Event.String() == kind {
			name, _ := e.Data["team_name"].(string)
			out = append(out, name)
		}
	}
	return out
}

func TestParallelDiamond(t *testing.T) {
	f := &fakeActivities{decisions: map[string][]models.Decision{
		"ts-a": {dispatch("worker-a", "x")}, "ts-b": {dispatch("worker-b", "x")}, "ts-c": {dispatch("worker-c", "x")}, "ts-d": {dispatch("worker-d", "x")},
	}}
	env := newEnv(t, f)
	env.ExecuteWorkflow(workflows.RunWorkflow, runInput(diamond(models.ExecutionModeParallel)))
	var res models.RunResult
	if err := env.GetWorkflowResult(&res); err != nil {
		t.Fatal(err)
	}
	// a alone, then b and c together, then d.
	if got := strings.Join(dispatched(f, "dispatch.team"), ","); got != "a,b,c,d" {
		t.Errorf("dispatch order %s", got)
	}
	var order []string
	for _, e := range f.persisted {
		if e.Event.String() == "dispatch.team" || (e.Event.String() == "dispatch.worker") {
			order = append(order, e.Event.Action+":"+fmt.Sprint(e.Data["team_name"], e.Data["worker_name"]))
		}
	}
	// b and c are dispatched before either team's supervisor dispatches a
	// worker: they run at once.
	joined := strings.Join(order, " ")
	if !strings.Contains(joined, "team:b<nil> team:c<nil>") {
		t.Errorf("b and c did not start together: %s", joined)
	}
	// The dependent team receives its upstream teams' outputs.
	for _, r := range f.responds {
		if r.Agent.AgentID == "w-d" && (!hasContext(r, "team b", "output of worker-b") || !hasContext(r, "team c", "output of worker-c") || hasContext(r, "team a", "")) {
			t.Errorf("team d's worker context = %+v", r.Context)
		}
	}
	if len(res.Teams) != 4 {
		t.Errorf("teams = %+v", res.Teams)
	}
	for _, tm := range res.Teams {
		if tm.Status != models.TeamCompleted || tm.StartedAt == nil || tm.CompletedAt == nil {
			t.Errorf("team %s: %+v", tm.TeamName, tm)
		}
	}
}

func TestSequentialOffersOnlyReadyTeams(t *testing.T) {
	f := &fakeActivities{decisions: map[string][]models.Decision{
		"gs":   {dispatch("a", "1"), dispatch("c", "2"), dispatch("b", "3"), dispatch("d", "4")},
		"ts-a": {dispatch("worker-a", "x")}, "ts-b": {dispatch("worker-b", "x")}, "ts-c": {dispatch("worker-c", "x")}, "ts-d": {dispatch("worker-d", "x")},
	}}
	env := newEnv(t, f)
	env.ExecuteWorkflow(workflows.RunWorkflow, runInput(diamond(models.ExecutionModeSequential)))
	if err := env.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}
	var offered []string
	for _, d := range f.decides {
		if d.Source.AgentID == "gs" {
			offered = append(offered, strings.Join(optionNames(d.Options), "+"))
		}
	}
	want := "a | a+b+c | a+b+c | a+b+c+d | a+b+c+d"
	if got := strings.Join(offered, " | "); got != want {
		t.Errorf("offered %s, want %s", got, want)
	}
}

func optionNames(options []models.Option) []string {
	var names []string
	for _, o := range options {
		names = append(names, o.Name)
	}
	return names
}

func TestFailedUpstreamSkipsDependents(t *testing.T) {
	h := diamond(models.ExecutionModeParallel)
	h.Teams = append(h.Teams, models.Team{Name: "e", Supervisor: models.Agent{AgentID: "ts-e"}, Workers: []models.Agent{{AgentID: "w-e", Name: "worker-e"}}})
	h.Normalize()
	if err := h.Validate(); err != nil {
		t.Fatal(err)
	}
	f := &fakeActivities{decisions: map[string][]models.Decision{
		"ts-a": {dispatch("worker-a", "x")}, "ts-e": {dispatch("worker-e", "x")},
	}}
	f.respond = func(_ context.Context, in models.RespondInput) (*models.RespondResult, error) {
		if in.Agent.AgentID == "w-a" {
			return nil, temporal.NewNonRetryableApplicationError("HTTP 400: bad request", models.ErrLLMRejected, nil)
		}
		return &models.RespondResult{Output: "ok"}, nil
	}
	env := newEnv(t, f)
	env.ExecuteWorkflow(workflows.RunWorkflow, runInput(h))
	if env.GetWorkflowError() == nil {
		t.Fatal("the run succeeded")
	}
	last := f.lastStatus()
	if last.Status != models.RunFailed || last.Result == nil {
		t.Fatalf("status = %+v", last)
	}
	status := map[string]string{}
	reasons := map[string]string{}
	for _, tm := range last.Result.Teams {
		status[tm.TeamName], reasons[tm.TeamName] = tm.Status, tm.Error
	}
	if status["a"] != "failed" || status["b"] != "skipped" || status["c"] != "skipped" || status["d"] != "skipped" || status["e"] != "completed" {
		t.Errorf("team statuses = %v", status)
	}
	if !strings.Contains(reasons["b"], `upstream team "a" failed`) || !strings.Contains(reasons["d"], "upstream team") {
		t.Errorf("skip reasons = %v", reasons)
	}
	if len(last.Result.Errors) != 1 || !strings.Contains(last.Result.Errors[0].Message, "HTTP 400") || !strings.Contains(last.Error, `team "a" failed`) {
		t.Errorf("errors = %+v, error %q", last.Result.Errors, last.Error)
	}
}

func TestTimeoutKeepsPartialResults(t *testing.T) {
	h := testHierarchy()
	h.MaxExecutionTime = 1
	f := &fakeActivities{decisions: map[string][]models.Decision{
		"gs": {dispatch("research", "1"), dispatch("writing", "2")}, "ts-r": {dispatch("searcher", "s")}, "ts-w": {dispatch("writer", "w")},
	}}
	f.respond = func(ctx context.Context, in models.RespondInput) (*models.RespondResult, error) {
		if in.Agent.AgentID == "w-writer" {
			<-ctx.Done() // overruns the time limit
			return nil, ctx.Err()
		}
		return &models.RespondResult{Output: "output of " + in.Agent.Name}, nil
	}
	env := newEnv(t, f)
	// The blocked activity stops the test clock from skipping ahead, so the
	// one-second limit passes in real time.
	env.SetTestTimeout(30 * time.Second)
	env.ExecuteWorkflow(workflows.RunWorkflow, runInput(h))
	if env.GetWorkflowError() == nil {
		t.Fatal("the run succeeded")
	}
	last := f.lastStatus()
	if last.Status != models.RunTimedOut || !strings.Contains(last.Error, "max_execution_time of 1s") {
		t.Fatalf("status = %+v", last)
	}
	if r := last.Result; r == nil || len(r.Teams) != 2 || r.Teams[0].Status != "completed" || r.Teams[0].Workers[0].Output != "output of searcher" ||
		r.Teams[1].Status != "failed" || r.Errors[len(r.Errors)-1].ErrorCode != "EXECUTION_TIMEOUT" {
		t.Errorf("partial result = %+v", r)
	}
}

// Long answers stay out of the run's state and of later activities' inputs:
// the workflow keeps a preview and passes a reference to the stored message.
func TestLongOutputsTravelByReference(t *testing.T) {
	long := strings.Repeat("finding ", 1000)
	f := &fakeActivities{decisions: map[string][]models.Decision{
		"gs":   {dispatch("research", "go"), dispatch("writing", "go")},
		"ts-r": {dispatch("searcher", "1")},
		"ts-w": {dispatch("writer", "2")},
	}}
	f.respond = func(_ context.Context, in models.RespondInput) (*models.RespondResult, error) {
		return &models.RespondResult{Output: long, Model: "m"}, nil
	}
	h := testHierarchy()
	h.EnableContextSharing = true
	env := newEnv(t, f)
	env.ExecuteWorkflow(workflows.RunWorkflow, runInput(h))
	if err := env.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}
	var res models.RunResult
	if err := env.GetWorkflowResult(&res); err != nil {
		t.Fatal(err)
	}
	for _, team := range res.Teams {
		for _, w := range team.Workers {
			if !w.OutputTruncated || w.MessageID == "" || w.OutputChars != len(long) || len(w.Output) > models.OutputPreviewChars+3 {
				t.Errorf("worker %s in the result: truncated=%v message=%q chars=%d preview %d bytes; want a preview of a %d-character answer",
					w.Name, w.OutputTruncated, w.MessageID, w.OutputChars, len(w.Output), len(long))
			}
		}
	}
	// The second global decision and the writer see the research team's
	// answer by reference only.
	var refs int
	for _, in := range append([]models.ContextItem{}, f.decides[len(f.decides)-1].Context...) {
		for _, r := range in.Refs {
			if strings.Contains(r.Text, long) || !r.Truncated || r.MessageID == "" {
				t.Errorf("decision context ref %+v carries the answer or no reference", r)
			}
			refs++
		}
	}
	for _, r := range f.responds {
		if r.Agent.AgentID == "w-writer" && len(models.TruncatedRefs(r.Context)) != 1 {
			t.Errorf("writer context = %+v, want one truncated reference to the searcher's answer", r.Context)
		}
	}
	if refs == 0 {
		t.Error("the last global decision saw no earlier output")
	}
}

// The LLM activities only call the model: the workflow stores each final
// answer (under the message id its stream carried) and every call's usage
// record in a local activity of its own, so a database failure there is
// retried without calling the model again.
func TestAnswersAreStoredByTheWorkflow(t *testing.T) {
	f := &fakeActivities{decisions: map[string][]models.Decision{
		"gs":   {dispatch("research", "go")},
		"ts-r": {dispatch("searcher", "1")},
	}}
	f.respond = func(_ context.Context, in models.RespondInput) (*models.RespondResult, error) {
		if !in.DeferWrites {
			t.Errorf("%s was asked to store its own answer", in.Agent.AgentID)
		}
		call := models.LLMCallRecord{ID: "call-" + in.MessageID, RunID: in.RunID, AgentID: in.Agent.AgentID, Status: "ok", TotalTokens: 7}
		return &models.RespondResult{Output: "answer of " + in.Agent.AgentID, Model: "m", Calls: []models.LLMCallRecord{call}}, nil
	}
	env := newEnv(t, f)
	env.ExecuteWorkflow(workflows.RunWorkflow, runInput(testHierarchy()))
	if err := env.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}
	saved := map[string]models.AnswerRecord{}
	for _, rec := range f.answers {
		if rec.MessageID != "" {
			saved[rec.Source.AgentID] = rec
		}
	}
	for _, r := range f.responds {
		rec, ok := saved[r.Agent.AgentID]
		if !ok || rec.MessageID != r.MessageID || rec.Content != "answer of "+r.Agent.AgentID || len(rec.Calls) != 1 || rec.Calls[0].ID != "call-"+r.MessageID {
			t.Errorf("answer of %s stored as %+v (found %v), want message %s with its call", r.Agent.AgentID, rec, ok, r.MessageID)
		}
	}
	if len(saved) != 2 {
		t.Errorf("stored the answers of %d agents, want the searcher's and the final answer", len(saved))
	}
	for _, d := range f.decides {
		if !d.DeferWrites {
			t.Errorf("decision of %s was asked to store its own usage", d.Source.AgentID)
		}
	}
}

// A call that keeps timing out fails the run with an error that names the
// agent, the model and the limit, not Temporal's bare "StartToClose".
func TestTimedOutCallNamesAgentModelAndLimit(t *testing.T) {
	f := &fakeActivities{decisions: map[string][]models.Decision{"gs": {dispatch("writing", "go")}, "ts-w": {dispatch("writer", "go")}}}
	f.respond = func(context.Context, models.RespondInput) (*models.RespondResult, error) {
		return nil, temporal.NewTimeoutError(enumspb.TIMEOUT_TYPE_START_TO_CLOSE, nil)
	}
	in := runInput(testHierarchy())
	in.Options.LLMCallTimeout = 90 * time.Second
	env := newEnv(t, f)
	env.ExecuteWorkflow(workflows.RunWorkflow, in)
	err := env.GetWorkflowError()
	if err == nil {
		t.Fatal("the run did not fail")
	}
	for _, want := range []string{`worker "writer"`, "w-writer", `model "m"`, "start-to-close timeout of 1m30s"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("run error %q does not name %s", err, want)
		}
	}
}

// TestRoutedParallelDispatchesSeveralTeams: in routed mode with
// max_parallel_teams 2 the global supervisor dispatches b and c at once
// (and a third team, which the limit leaves out); they run together, it is
// asked again when one completes (told which is still at work, offered
// only ready teams not at work: d needs both), and dispatches d once both
// are done.
func TestRoutedParallelDispatchesSeveralTeams(t *testing.T) {
	both := dispatch("b", "do b")
	both.Also = []models.DispatchTarget{{Target: "c", Instruction: "do c"}, {Target: "a", Instruction: "again"}}
	f := &fakeActivities{decisions: map[string][]models.Decision{
		"gs":   {dispatch("a", "do a"), both, {Action: models.DecisionFinish}, dispatch("d", "do d")},
		"ts-a": {dispatch("worker-a", "x")}, "ts-b": {dispatch("worker-b", "x")}, "ts-c": {dispatch("worker-c", "x")}, "ts-d": {dispatch("worker-d", "x")},
	}}
	// Workers take a moment; peak is how many were at work at once.
	var busy, peak atomic.Int32
	f.respond = func(_ context.Context, in models.RespondInput) (*models.RespondResult, error) {
		if in.Purpose == models.PurposeWorker {
			n := busy.Add(1)
			for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
			}
			time.Sleep(100 * time.Millisecond)
			busy.Add(-1)
		}
		return &models.RespondResult{Output: "output of " + in.Agent.Name}, nil
	}
	env := newEnv(t, f)
	in := runInput(diamond(models.ExecutionModeSequential))
	in.Options.MaxParallelTeams = 2
	env.ExecuteWorkflow(workflows.RunWorkflow, in)
	var res models.RunResult
	if err := env.GetWorkflowResult(&res); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(dispatched(f, "dispatch.team"), ","); got != "a,b,c,d" {
		t.Errorf("dispatch order %s", got)
	}
	if peak.Load() != 2 {
		t.Errorf("at most %d workers at work at once, want 2 (b and c)", peak.Load())
	}
	var gs []models.DecideInput
	for _, d := range f.decides {
		if d.Source.AgentID == "gs" {
			gs = append(gs, d)
		}
	}
	if len(gs) != 5 {
		t.Fatalf("%d global decisions, want 5", len(gs))
	}
	for i, want := range []struct {
		options, running string
		max              int
	}{
		{"a", "", 2},
		{"a,b,c", "", 2},
		{"a,b", "c", 1}, // b done first; d waits for c
		{"a,b,c,d", "", 2},
		{"a,b,c,d", "", 2},
	} {
		d := gs[i]
		if i == 2 && strings.Join(d.Running, ",") == "b" {
			want.options = "a,c" // or c done first
			want.running = "b"
		}
		if got := strings.Join(optionNames(d.Options), ","); got != want.options || strings.Join(d.Running, ",") != want.running || d.MaxTargets != want.max {
			t.Errorf("global decision %d: options %s running %v max %d; want %s, %s, %d", i+1, got, d.Running, d.MaxTargets, want.options, want.running, want.max)
		}
	}
	if len(res.Teams) != 4 {
		t.Errorf("teams = %+v", res.Teams)
	}
}
