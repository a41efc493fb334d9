package workflows_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/op-stack/executor/models"
	"github.com/op-stack/executor/workflows"
)

// steerHierarchy is testHierarchy with a third team, editing, that depends
// on research.
func steerHierarchy() models.Hierarchy {
	h := testHierarchy()
	h.Teams = append(h.Teams, models.Team{Name: "editing", Supervisor: models.Agent{AgentID: "ts-e"}, Workers: []models.Agent{
		{AgentID: "w-editor", Name: "editor", SystemPrompt: "edit"},
	}})
	h.Dependencies = map[string][]string{"editing": {"research"}}
	h.Normalize()
	if err := h.Validate(); err != nil {
		panic(err)
	}
	return h
}

// steerUpdate sends a steering update and records its answer, or why it
// was refused.
func steerUpdate(env *testsuite.TestWorkflowEnvironment, name string, arg any, answers *[]string) {
	env.UpdateWorkflow(name, name+"-"+time.Now().String(), &testsuite.TestUpdateCallback{
		OnAccept: func() {},
		OnReject: func(err error) { *answers = append(*answers, "rejected: "+err.Error()) },
		OnComplete: func(v any, err error) {
			if err != nil {
				*answers = append(*answers, "error: "+err.Error())
				return
			}
			*answers = append(*answers, v.(string))
		},
	}, arg)
}

// whenStarted calls do once started is set.
func whenStarted(env *testsuite.TestWorkflowEnvironment, started *atomic.Bool, do func()) {
	var check func()
	check = func() {
		if !started.Load() {
			env.RegisterDelayedCallback(check, time.Millisecond)
			return
		}
		do()
	}
	env.RegisterDelayedCallback(check, time.Millisecond)
}

// TestCancelTeamMidStream cancels the research team while its analyst's
// LLM call is in flight: the turn ends cancelled
// with the reason and the searcher's finished output kept (partial), the
// editing team that depends on it is skipped, the global supervisor is told
// and routes on to writing, and the run completes. Cancelling a team that
// is not running, or is not in the hierarchy, is refused by the validator.
func TestCancelTeamMidStream(t *testing.T) {
	f := &fakeActivities{decisions: map[string][]models.Decision{
		"gs":   {dispatch("research", "find sources"), dispatch("writing", "write it up")},
		"ts-r": {dispatch("searcher", "search"), dispatch("analyst", "analyse")},
		"ts-w": {dispatch("writer", "write")},
	}}
	var started atomic.Bool
	f.respond = func(ctx context.Context, in models.RespondInput) (*models.RespondResult, error) {
		if in.Agent.AgentID == "w-analyst" {
			started.Store(true)
			// Heartbeats carry the cancellation, as the real activity's do.
			for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
				activity.RecordHeartbeat(ctx)
				if ctx.Err() != nil {
					return nil, ctx.Err()
				}
			}
		}
		return &models.RespondResult{Output: "output of " + in.Agent.Name, Usage: models.Usage{TotalTokens: 10}}, nil
	}
	env := newEnv(t, f)
	var answers []string
	whenStarted(env, &started, func() {
		steerUpdate(env, models.UpdateCancelTeam, models.CancelTeamRequest{TeamName: "writing"}, &answers)
		steerUpdate(env, models.UpdateCancelTeam, models.CancelTeamRequest{TeamName: "nope"}, &answers)
		steerUpdate(env, models.UpdateCancelTeam, models.CancelTeamRequest{TeamName: "research", Reason: "wrong direction", By: "alice"}, &answers)
	})
	env.ExecuteWorkflow(workflows.RunWorkflow, runInput(steerHierarchy()))
	if err := env.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}
	var res models.RunResult
	if err := env.GetWorkflowResult(&res); err != nil {
		t.Fatal(err)
	}
	if len(answers) != 3 || !strings.Contains(answers[0], `team "writing" is not running (not started)`) ||
		!strings.Contains(answers[1], `team "nope" is not in the run's hierarchy`) || answers[2] != "research" {
		t.Errorf("answers = %q", answers)
	}
	// (The test environment resolves an activity's cancellation without
	// cancelling its context; e2e's TestSteerCancelTeam checks that the
	// model call itself is abandoned.)
	got := map[string]models.TeamOutput{}
	for _, o := range res.Teams {
		got[o.TeamName] = o
	}
	r := got["research"]
	if r.Status != models.TeamCancelled || r.Error != "cancelled by alice: wrong direction" || !r.Partial ||
		len(r.Workers) != 1 || r.Workers[0].Name != "searcher" {
		t.Errorf("research = %+v", r)
	}
	if got["writing"].Status != models.TeamCompleted {
		t.Errorf("writing = %+v", got["writing"])
	}
	if e := got["editing"]; e.Status != models.TeamSkipped || !strings.Contains(e.Error, `upstream team "research" cancelled`) {
		t.Errorf("editing = %+v", e)
	}
	if len(res.Errors) != 0 || f.lastStatus().Status != models.RunCompleted {
		t.Errorf("errors %+v, status %q", res.Errors, f.lastStatus().Status)
	}
	// The global supervisor's next decision was told, and not offered it.
	f.mu.Lock()
	var told bool
	for _, d := range f.decides {
		if d.Source.AgentID != "gs" || d.Iteration != 2 {
			continue
		}
		told = len(d.Guidance) == 1 && strings.Contains(d.Guidance[0], `Team "research" was cancelled by alice: wrong direction`)
		for _, o := range d.Options {
			if o.Name == "research" || o.Name == "editing" {
				t.Errorf("offered %q after it was cancelled", o.Name)
			}
		}
	}
	var ev *models.Event
	for i, e := range f.persisted {
		if e.Event.String() == "dispatch.team_cancelled" {
			ev = &f.persisted[i]
		}
	}
	f.mu.Unlock()
	if !told {
		t.Error("the global supervisor was not told of the cancellation")
	}
	if ev == nil || ev.Source.AgentType != models.AgentTypeOperator || ev.Source.AgentID != "alice" ||
		ev.Data["team_name"] != "research" || ev.Data["reason"] != "wrong direction" {
		t.Errorf("dispatch.team_cancelled = %+v", ev)
	}
}

// TestRedirectAtNextTurn redirects the analyst while the searcher works:
// the analyst's next prompt input carries the guidance, the searcher's
// does not; guidance for the global supervisor reaches its next decision;
// an unknown agent_id is refused naming it; dispatch.redirect records who
// sent it and to whom.
func TestRedirectAtNextTurn(t *testing.T) {
	f := &fakeActivities{decisions: map[string][]models.Decision{
		"gs":   {dispatch("research", "find sources")},
		"ts-r": {dispatch("searcher", "search"), dispatch("analyst", "analyse")},
	}}
	var started, redirected atomic.Bool
	f.respond = func(_ context.Context, in models.RespondInput) (*models.RespondResult, error) {
		if in.Agent.AgentID == "w-search" {
			started.Store(true)
			for !redirected.Load() {
				time.Sleep(5 * time.Millisecond)
			}
		}
		return &models.RespondResult{Output: "output of " + in.Agent.Name, Usage: models.Usage{TotalTokens: 10}}, nil
	}
	env := newEnv(t, f)
	var answers []string
	whenStarted(env, &started, func() {
		steerUpdate(env, models.UpdateRedirect, models.RedirectRequest{AgentID: "w-nobody", Message: "x"}, &answers)
		steerUpdate(env, models.UpdateRedirect, models.RedirectRequest{AgentID: "w-analyst", Message: "focus on costs", By: "bob"}, &answers)
		steerUpdate(env, models.UpdateRedirect, models.RedirectRequest{AgentID: "gs", Message: "keep it short", By: "bob"}, &answers)
		// The worker's call ends only once the run has answered all three,
		// so the guidance is queued before the next step however slowly a
		// loaded machine runs the test environment.
		var answered func()
		answered = func() {
			if len(answers) < 3 {
				env.RegisterDelayedCallback(answered, time.Millisecond)
				return
			}
			redirected.Store(true)
		}
		answered()
	})
	env.ExecuteWorkflow(workflows.RunWorkflow, runInput(testHierarchy()))
	if err := env.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}
	if len(answers) != 3 || !strings.Contains(answers[0], `agent_id "w-nobody" is not an agent`) || answers[1] != "w-analyst" || answers[2] != "gs" {
		t.Errorf("answers = %q", answers)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, in := range f.responds {
		want := ""
		if in.Agent.AgentID == "w-analyst" {
			want = "focus on costs"
		}
		if got := strings.Join(in.Guidance, "|"); got != want {
			t.Errorf("%s's guidance = %q, want %q", in.Agent.AgentID, got, want)
		}
	}
	var gsGuided int
	for _, d := range f.decides {
		if strings.Join(d.Guidance, "|") == "keep it short" && d.Source.AgentID == "gs" {
			gsGuided++
		} else if len(d.Guidance) > 0 {
			t.Errorf("%s decided with guidance %q", d.Source.AgentID, d.Guidance)
		}
	}
	if gsGuided != 1 {
		t.Errorf("the global supervisor's next decision had the guidance %d times", gsGuided)
	}
	var redirects []string
	for _, e := range f.persisted {
		if e.Event.String() == "dispatch.redirect" {
			redirects = append(redirects, e.Source.AgentType+":"+e.Source.AgentID+"→"+e.Data["agent_id"].(string)+":"+e.Data["message"].(string))
		}
	}
	if got := strings.Join(redirects, ","); got != "operator:bob→w-analyst:focus on costs,operator:bob→gs:keep it short" {
		t.Errorf("redirects = %s", got)
	}
}

// TestCancelTeamInParallel cancels team b of the diamond in parallel mode
// while its worker works: c, at work beside it, completes; d, which needs
// b, is skipped; the run completes.
func TestCancelTeamInParallel(t *testing.T) {
	f := &fakeActivities{decisions: map[string][]models.Decision{
		"ts-a": {dispatch("worker-a", "x")}, "ts-b": {dispatch("worker-b", "x")}, "ts-c": {dispatch("worker-c", "x")}, "ts-d": {dispatch("worker-d", "x")},
	}}
	var started atomic.Bool
	f.respond = func(ctx context.Context, in models.RespondInput) (*models.RespondResult, error) {
		if in.Agent.AgentID == "w-b" {
			started.Store(true)
			for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
				activity.RecordHeartbeat(ctx)
				if ctx.Err() != nil {
					return nil, ctx.Err()
				}
			}
		}
		return &models.RespondResult{Output: "output of " + in.Agent.Name, Usage: models.Usage{TotalTokens: 10}}, nil
	}
	env := newEnv(t, f)
	var answers []string
	whenStarted(env, &started, func() {
		steerUpdate(env, models.UpdateCancelTeam, models.CancelTeamRequest{TeamName: "b", Reason: "not needed"}, &answers)
	})
	env.ExecuteWorkflow(workflows.RunWorkflow, runInput(diamond(models.ExecutionModeParallel)))
	if err := env.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}
	var res models.RunResult
	if err := env.GetWorkflowResult(&res); err != nil {
		t.Fatal(err)
	}
	if len(answers) != 1 || answers[0] != "b" {
		t.Errorf("answers = %q", answers)
	}
	status := map[string]string{}
	for _, o := range res.Teams {
		status[o.TeamName] = o.Status
	}
	want := map[string]string{"a": models.TeamCompleted, "b": models.TeamCancelled, "c": models.TeamCompleted, "d": models.TeamSkipped}
	for n, s := range want {
		if status[n] != s {
			t.Errorf("team %s: %q, want %q (%+v)", n, status[n], s, res.Teams)
		}
	}
	if len(res.Errors) != 0 || f.lastStatus().Status != models.RunCompleted {
		t.Errorf("errors %+v, status %q", res.Errors, f.lastStatus().Status)
	}
}

// TestSteerRefusedBeforeTheChange: a run started before steering
// (steer-teams change id) refuses both updates, and runs as it did.
func TestSteerRefusedBeforeTheChange(t *testing.T) {
	f := &fakeActivities{decisions: map[string][]models.Decision{"gs": {dispatch("writing", "go")}, "ts-w": {dispatch("writer", "go")}}}
	writer := &slowWriter{}
	writer.install(f)
	env := newEnv(t, f)
	env.OnGetVersion("steer-teams", workflow.DefaultVersion, 1).Return(workflow.DefaultVersion)
	env.OnGetVersion("baseline-i28", workflow.DefaultVersion, 1).Return(workflow.DefaultVersion) // the change asked on its own
	var answers []string
	writer.whenWriterStarted(env, func() {
		steerUpdate(env, models.UpdateCancelTeam, models.CancelTeamRequest{TeamName: "writing"}, &answers)
		steerUpdate(env, models.UpdateRedirect, models.RedirectRequest{AgentID: "gs", Message: "x"}, &answers)
		writer.paused.Store(true)
	})
	env.ExecuteWorkflow(workflows.RunWorkflow, runInput(testHierarchy()))
	if err := env.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}
	if len(answers) != 2 || !strings.Contains(answers[0], "before steering") || !strings.Contains(answers[1], "before steering") {
		t.Errorf("answers = %q", answers)
	}
	var res models.RunResult
	if err := env.GetWorkflowResult(&res); err != nil {
		t.Fatal(err)
	}
	if len(res.Teams) != 1 || res.Teams[0].Status != models.TeamCompleted {
		t.Errorf("teams = %+v", res.Teams)
	}
}
