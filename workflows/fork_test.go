package workflows_test

import (
	"context"
	"encoding/json"
	"sort"
	"strings"
	"testing"

	"go.temporal.io/sdk/temporal"

	"github.com/op-stack/executor/models"
	"github.com/op-stack/executor/workflows"
)

// runOriginal runs h to its end with f and returns its stored events (in
// sequence order) and result, as the API would read them for a fork.
func runOriginal(t *testing.T, f *fakeActivities, h models.Hierarchy) ([]models.Event, *models.RunResult) {
	t.Helper()
	f.dispatchEvents = true
	env := newEnv(t, f)
	env.ExecuteWorkflow(workflows.RunWorkflow, runInput(h))
	if !env.IsWorkflowCompleted() {
		t.Fatal("the original run did not end")
	}
	events := append([]models.Event(nil), f.persisted...)
	sort.Slice(events, func(i, j int) bool { return events[i].Sequence < events[j].Sequence })
	// Stored events are read back from JSON.
	raw, _ := json.Marshal(events)
	events = nil
	if err := json.Unmarshal(raw, &events); err != nil {
		t.Fatal(err)
	}
	return events, f.lastStatus().Result
}

// forkInput builds the fork's input as runs/fork does: the analysis of the
// original, the seed at the point pick chooses, the changes applied to a
// copy of the hierarchy.
func forkInput(t *testing.T, events []models.Event, result *models.RunResult, h models.Hierarchy, pick func(models.ForkPoint) bool, ch models.ForkChanges) (models.RunInput, models.ForkPoint) {
	t.Helper()
	an := models.AnalyzeFork(events, result)
	var point *models.ForkPoint
	for i := range an.Points {
		if pick(an.Points[i]) {
			point = &an.Points[i]
			break
		}
	}
	if point == nil {
		t.Fatalf("no such fork point among %+v", an.Points)
	}
	seed := an.Seed("run-1", *point)
	if err := models.ApplyForkChanges(seed, *point, ch, &h, "write a report"); err != nil {
		t.Fatal(err)
	}
	// The seed travels as JSON in the workflow input.
	raw, _ := json.Marshal(seed)
	seed = nil
	if err := json.Unmarshal(raw, &seed); err != nil {
		t.Fatal(err)
	}
	in := runInput(h)
	in.RunID, in.Fork = "fork-1", seed
	return in, *point
}

func decidesBy(f *fakeActivities, agentID string) []models.DecideInput {
	var out []models.DecideInput
	for _, d := range f.decides {
		if d.Source.AgentID == agentID {
			out = append(out, d)
		}
	}
	return out
}

func respondsBy(f *fakeActivities) []string {
	var out []string
	for _, r := range f.responds {
		out = append(out, r.Agent.AgentID)
	}
	return out
}

// checkGapFree checks that the fork's own events go on from the fork
// point without a gap, and are the fork's.
func checkGapFree(t *testing.T, events []models.Event, after int64) {
	t.Helper()
	sort.Slice(events, func(i, j int) bool { return events[i].Sequence < events[j].Sequence })
	if len(events) == 0 || events[0].Sequence != after+1 {
		t.Fatalf("the fork's first event is not %d: %+v", after+1, events)
	}
	for i, e := range events {
		if e.Sequence != after+1+int64(i) || e.RunID != "fork-1" {
			t.Fatalf("event %d: sequence %d run %q, want %d of fork-1", i, e.Sequence, e.RunID, after+1+int64(i))
		}
	}
}

// TestForkAfterFirstTeamTurn: the original ran research twice; a fork
// after the first research turn sends the next turn to writing, and calls
// no model for research.
func TestForkAfterFirstTeamTurn(t *testing.T) {
	h := testHierarchy()
	orig := &fakeActivities{decisions: map[string][]models.Decision{
		"gs":   {dispatch("research", "find sources"), dispatch("research", "find more")},
		"ts-r": {dispatch("searcher", "search"), {Action: models.DecisionFinish}, dispatch("analyst", "analyse")},
	}}
	events, result := runOriginal(t, orig, h)
	if len(result.Teams) != 2 || result.Teams[1].TeamName != "research" {
		t.Fatalf("original teams = %+v", result.Teams)
	}
	in, point := forkInput(t, events, result, h, func(p models.ForkPoint) bool { return p.Kind == models.ForkAtTeamFinished && p.Turn == 1 }, models.ForkChanges{})

	f := &fakeActivities{decisions: map[string][]models.Decision{"gs": {dispatch("writing", "write it up")}, "ts-w": {dispatch("writer", "write")}}}
	env := newEnv(t, f)
	env.ExecuteWorkflow(workflows.RunWorkflow, in)
	if err := env.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}
	var res models.RunResult
	if err := env.GetWorkflowResult(&res); err != nil {
		t.Fatal(err)
	}
	// No call for the copied part: research's supervisor and workers are
	// not asked again; the global supervisor is asked for its second
	// decision, seeing research done.
	if got := decidesBy(f, "ts-r"); len(got) != 0 {
		t.Errorf("research's supervisor was asked again: %+v", got)
	}
	gs := decidesBy(f, "gs")
	if len(gs) < 1 || gs[0].Iteration != 2 || strings.Join(gs[0].Completed, ",") != "research" {
		t.Fatalf("global supervisor's decisions = %+v", gs)
	}
	if got := strings.Join(respondsBy(f), ","); got != "w-writer,gs" {
		t.Errorf("model answers = %s, want the writer's and the final answer only", got)
	}
	if len(res.Teams) != 2 || res.Teams[0].TeamName != "research" || res.Teams[1].TeamName != "writing" || res.Teams[1].Turn != 2 {
		t.Fatalf("fork's teams = %+v", res.Teams)
	}
	if res.Teams[0].Workers[0].Output != result.Teams[0].Workers[0].Output {
		t.Errorf("research's copied output = %+v, want %+v", res.Teams[0], result.Teams[0])
	}
	// The fork's usage is the copied part's (the searcher's 10 tokens, the
	// only llm.usage event before the point) and its own calls'.
	if own := len(f.decides) + 10*len(f.responds); res.Usage.TotalTokens != 10+own {
		t.Errorf("fork's usage = %d tokens, want 10 copied + %d", res.Usage.TotalTokens, own)
	}
	checkGapFree(t, f.persisted, point.Sequence)
	for _, e := range f.persisted {
		if e.Event.Action == models.ActionStarted || e.Event.Action == models.ActionTopology {
			t.Errorf("the fork emitted %s again at %d", e.Event, e.Sequence)
		}
	}
	if st := f.statuses[0]; st.Status != models.RunRunning {
		t.Errorf("the fork's first status write = %+v", st)
	}
}

// TestForkAtWorkerDispatch: a fork at the analyst's dispatch runs the
// analyst first, with the searcher's answer copied, without asking
// research's supervisor for that dispatch; a forced next_worker follows.
func TestForkAtWorkerDispatch(t *testing.T) {
	h := testHierarchy()
	orig := &fakeActivities{decisions: map[string][]models.Decision{
		"gs":   {dispatch("research", "find sources"), dispatch("writing", "write it up")},
		"ts-r": {dispatch("searcher", "search"), dispatch("analyst", "analyse")},
		"ts-w": {dispatch("writer", "write")},
	}}
	events, result := runOriginal(t, orig, h)
	in, point := forkInput(t, events, result, h, func(p models.ForkPoint) bool {
		return p.Kind == models.ForkAtWorkerDispatch && p.WorkerName == "analyst"
	}, models.ForkChanges{NextWorker: "searcher"})
	if in.Fork.Turn == nil || len(in.Fork.Turn.Outputs) != 1 || in.Fork.Turn.Iteration != 2 {
		t.Fatalf("seed's turn = %+v", in.Fork.Turn)
	}

	f := &fakeActivities{decisions: map[string][]models.Decision{"gs": {dispatch("writing", "write it up")}, "ts-w": {dispatch("writer", "write")}}, dispatchEvents: true}
	env := newEnv(t, f)
	env.ExecuteWorkflow(workflows.RunWorkflow, in)
	if err := env.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}
	var res models.RunResult
	if err := env.GetWorkflowResult(&res); err != nil {
		t.Fatal(err)
	}
	// The analyst (planned), the searcher (forced), then the writing turn.
	if got := strings.Join(respondsBy(f), ","); got != "w-analyst,w-search,w-writer,gs" {
		t.Errorf("model answers = %s", got)
	}
	// research's supervisor is asked once: after the forced dispatch, at
	// its fourth iteration (two copied, one forced).
	tsr := decidesBy(f, "ts-r")
	if len(tsr) != 1 || tsr[0].Iteration != 4 || len(tsr[0].Completed) != 2 {
		t.Fatalf("research supervisor's decisions = %+v", tsr)
	}
	r := res.Teams[0]
	if r.TeamName != "research" || len(r.Workers) != 3 || r.Workers[0].Output != "output of searcher" || r.Workers[1].Name != "analyst" || r.Workers[2].Name != "searcher" {
		t.Fatalf("research's turn in the fork = %+v (all %+v)", r, res.Teams)
	}
	checkGapFree(t, f.persisted, point.Sequence)
	// The forced dispatch is on the stream, the copied one is not again.
	var forced int
	for _, e := range f.persisted {
		if e.Event.Action == models.ActionWorker {
			if e.Data["worker_name"] == "analyst" {
				t.Errorf("the copied dispatch was emitted again at %d", e.Sequence)
			}
			if strings.Contains(e.Data["reason"].(string), "next_worker") {
				forced++
			}
		}
	}
	if forced != 1 {
		t.Errorf("forced dispatch events = %d, want 1", forced)
	}
}

// TestForkAfterFailedTurn: research fails, writing (which depends on it)
// is skipped; a fork after the failed turn carries the failure, its error
// and the skip, runs the independent review team, and fails as the
// original did, without calling a model for research.
func TestForkAfterFailedTurn(t *testing.T) {
	h := testHierarchy()
	h.Teams = append(h.Teams, models.Team{Name: "review", Supervisor: models.Agent{AgentID: "ts-v"}, Workers: []models.Agent{{AgentID: "w-rev", Name: "reviewer", SystemPrompt: "review"}}})
	h.Dependencies = map[string][]string{"writing": {"research"}}
	h.Normalize()
	failAnalyst := func(_ context.Context, in models.RespondInput) (*models.RespondResult, error) {
		if in.Agent.AgentID == "w-analyst" {
			return nil, temporal.NewNonRetryableApplicationError("analyst: HTTP 401", models.ErrLLMRejected, nil)
		}
		return &models.RespondResult{Output: "output of " + in.Agent.Name, Model: "m", Usage: models.Usage{TotalTokens: 10}}, nil
	}
	orig := &fakeActivities{decisions: map[string][]models.Decision{
		"gs":   {dispatch("research", "find sources")},
		"ts-r": {dispatch("analyst", "analyse")},
	}, respond: failAnalyst}
	events, result := runOriginal(t, orig, h)
	if len(result.Errors) == 0 || len(result.Teams) != 2 || result.Teams[1].Status != models.TeamSkipped {
		t.Fatalf("original result = %+v", result)
	}
	in, point := forkInput(t, events, result, h, func(p models.ForkPoint) bool { return p.Kind == models.ForkAtTeamFinished && p.TeamName == "research" }, models.ForkChanges{})
	if len(in.Fork.Teams) != 2 || len(in.Fork.Errors) != 1 {
		t.Fatalf("seed = %+v", in.Fork)
	}

	f := &fakeActivities{decisions: map[string][]models.Decision{"gs": {dispatch("review", "check it")}, "ts-v": {dispatch("reviewer", "check")}}}
	env := newEnv(t, f)
	env.ExecuteWorkflow(workflows.RunWorkflow, in)
	if env.GetWorkflowError() == nil {
		t.Fatal("the fork of a failed run succeeded")
	}
	if got := strings.Join(respondsBy(f), ","); got != "w-rev" {
		t.Errorf("model answers = %s, want the reviewer's only", got)
	}
	gs := decidesBy(f, "gs")
	if len(gs) == 0 || len(gs[0].Options) != 1 || gs[0].Options[0].Name != "review" {
		t.Fatalf("global supervisor was offered %+v", gs)
	}
	last := f.lastStatus()
	if last.Status != models.RunFailed || last.Result == nil || len(last.Result.Teams) != 3 || last.Result.Teams[0].Status != models.TeamFailed ||
		last.Result.Teams[1].Status != models.TeamSkipped || last.Result.Teams[2].TeamName != "review" || last.Result.Errors[0].Message != result.Errors[0].Message {
		t.Fatalf("fork's stored end = %+v", last)
	}
	checkGapFree(t, f.persisted, point.Sequence)
}
