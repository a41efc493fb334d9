package models

import (
	"errors"
	"strings"
	"testing"
)

// forkLog builds a run's events from short specs: "gs dispatch.team T",
// "ts T dispatch.worker W", "w T llm.stream", "w T llm.usage N",
// "gs llm.stream", "sys error T", "gs skip X T".
func forkLog(t *testing.T, specs ...string) []Event {
	t.Helper()
	var l EventLog
	for _, spec := range specs {
		f := strings.Fields(spec)
		e := Event{RunID: "r", Data: map[string]any{}}
		team := func(name string) *string { return &name }
		switch f[0] {
		case "gs":
			e.Source = Source{AgentID: "gs", AgentType: AgentTypeGlobalSupervisor}
		case "ts":
			e.Source = Source{AgentID: "ts-" + f[1], AgentType: AgentTypeTeamSupervisor, TeamName: team(f[1])}
		case "w":
			e.Source = Source{AgentID: "w-" + f[1], AgentType: AgentTypeWorker, TeamName: team(f[1])}
		case "sys":
			e.Source = Source{AgentID: "system", AgentType: AgentTypeSystem}
		}
		kind := f[len(f)-1]
		switch {
		case f[0] == "gs" && f[1] == "dispatch.team":
			e.Event, e.Data["team_name"], e.Data["iteration"], e.Data["instruction"] = EventKind{CategoryDispatch, ActionTeam}, f[2], float64(len(l.Events)), "do "+f[2]
		case f[0] == "ts" && f[2] == "dispatch.worker":
			e.Event, e.Data["worker_name"], e.Data["iteration"], e.Data["instruction"] = EventKind{CategoryDispatch, ActionWorker}, f[3], float64(1), "go"
		case f[0] == "w" && f[2] == "llm.usage":
			e.Event, e.Data["total_tokens"], e.Data["cost_usd"] = EventKind{CategoryLLM, ActionUsage}, float64(10), 0.5
		case f[0] == "sys" && f[1] == "error":
			e.Event, e.Data["team_name"] = EventKind{CategorySystem, ActionError}, f[2]
		case f[0] == "gs" && f[1] == "skip":
			e.Event, e.Data["message"] = EventKind{CategorySystem, ActionWarning}, `team "`+f[2]+`" skipped: upstream team "`+f[3]+`" failed`
		case kind == "llm.stream":
			e.Event = EventKind{CategoryLLM, ActionStream}
		default:
			t.Fatalf("bad spec %q", spec)
		}
		l.Append(e)
	}
	return l.Events
}

func kinds(points []ForkPoint) string {
	var out []string
	for _, p := range points {
		out = append(out, strings.TrimPrefix(p.Kind, "dispatch.")+"@"+string(rune('0'+p.Sequence)))
	}
	return strings.Join(out, " ")
}

func TestForkPointsSequential(t *testing.T) {
	events := forkLog(t,
		"gs llm.stream",          // 1
		"gs dispatch.team a",     // 2
		"ts a dispatch.worker x", // 3
		"w a llm.stream",         // 4
		"w a llm.usage",          // 5
		"ts a dispatch.worker y", // 6
		"w a llm.usage",          // 7
		"gs dispatch.team b",     // 8
		"ts b dispatch.worker z", // 9
		"w b llm.usage",          // 10 (b fails after it)
		"sys error b",            // 11
		"gs skip c b",            // 12
		"gs llm.stream",          // 13
	)
	result := &RunResult{Teams: []TeamOutput{
		{Turn: 1, TeamName: "a", Status: TeamCompleted, Workers: []WorkerOutput{{Name: "x", Output: "X"}, {Name: "y", Output: "Y"}}},
		{Turn: 2, TeamName: "b", Status: TeamFailed, Error: "boom"},
		{TeamName: "c", Status: TeamSkipped},
	}, Errors: []ErrorInfo{{Message: `team "b" failed: boom`, Context: map[string]any{"team_name": "b"}}}}
	an := AnalyzeFork(events, result)
	if got := kinds(an.Points); got != "team@2 worker@3 worker@6 team.finished@7 team@8 worker@9 team.finished@<" {
		t.Fatalf("points = %s", got)
	}
	// Inside the x's answer: x's dispatch.
	if p, err := an.Resolve(4); err != nil || p.Sequence != 3 {
		t.Errorf("Resolve(4) = %+v, %v", p, err)
	}
	// The global supervisor's own stream is no point: 400 with the nearest.
	_, err := an.Resolve(13)
	var e *Error
	if !errors.As(err, &e) || e.Code != CodeSequenceNotForkable || !strings.Contains(e.Message, "nearest before: 12") || !strings.Contains(e.Message, "nearest after: none") {
		t.Errorf("Resolve(13) = %v", err)
	}
	if _, err := an.Resolve(1); err == nil || !strings.Contains(err.Error(), "nearest before: none; nearest after: 2") {
		t.Errorf("Resolve(1) = %v", err)
	}

	// At y's dispatch: x's answer copied, y planned, the turn's usage its own.
	seed := an.Seed("r", ForkPoint{Sequence: 6, Kind: ForkAtWorkerDispatch, Turn: 1, TeamName: "a"})
	if seed.Turn == nil || len(seed.Turn.Outputs) != 1 || seed.Turn.Outputs[0].Output != "X" || len(seed.Turn.Planned) != 1 || seed.Turn.Planned[0].Worker != "y" ||
		seed.Usage.TotalTokens != 0 || seed.Turns != 1 || len(seed.Teams) != 0 {
		t.Errorf("seed at 6 = %+v turn %+v", seed, seed.Turn)
	}
	// After the failed turn: both turns, the skip and the error; usage of
	// every call, by team and agent.
	seed = an.Seed("r", an.Points[len(an.Points)-1])
	if seed.Turn != nil || len(seed.Teams) != 3 || len(seed.Errors) != 1 || seed.Usage.TotalTokens != 30 || seed.Usage.CostUSD != 1.5 ||
		seed.TeamUsage["a"].TotalTokens != 20 || seed.AgentUsage["w-b"].TotalTokens != 10 || seed.Iteration != 7 {
		t.Errorf("seed at 12 = %+v", seed)
	}
	// Changes: next_team only after a finished turn, and not to a skipped team.
	h := &Hierarchy{Teams: []Team{{Name: "a", Workers: []Agent{{AgentID: "w-x", Name: "x"}}}, {Name: "b"}, {Name: "c"}}}
	if err := ApplyForkChanges(seed, an.Points[len(an.Points)-1], ForkChanges{NextTeam: "c"}, h, "task"); err == nil || !strings.Contains(err.Error(), "skipped") {
		t.Errorf("next_team to a skipped team: %v", err)
	}
	if err := ApplyForkChanges(an.Seed("r", an.Points[0]), an.Points[0], ForkChanges{NextTeam: "a"}, h, "task"); err == nil {
		t.Error("next_team at a dispatch.team point was accepted")
	}
	at2 := an.Seed("r", an.Points[0])
	if err := ApplyForkChanges(at2, an.Points[0], ForkChanges{TeamInstructions: map[string]string{"a": "new"}, NextWorker: "x",
		Agents: []AgentChange{{AgentID: "w-x", SystemPrompt: ptr("better")}}}, h, "task"); err != nil {
		t.Fatal(err)
	}
	if at2.Turn.Instruction != "new" || len(at2.Turn.Planned) != 1 || !at2.Turn.Planned[0].Forced || at2.Turn.Planned[0].Instruction != "new" || h.Teams[0].Workers[0].SystemPrompt != "better" {
		t.Errorf("changes at 2 = %+v, hierarchy %+v", at2.Turn, h.Teams[0])
	}
	if err := ApplyForkChanges(an.Seed("r", an.Points[0]), an.Points[0], ForkChanges{TeamInstructions: map[string]string{"b": "x"}}, h, "task"); err == nil {
		t.Error("an instruction for a team the fork does not start was accepted")
	}
}

func ptr(s string) *string { return &s }

// In a run whose teams work at once, a point is forkable only while no
// other team turn is at work.
func TestForkPointsParallel(t *testing.T) {
	events := forkLog(t,
		"gs dispatch.team a",     // 1
		"gs dispatch.team b",     // 2
		"ts a dispatch.worker x", // 3
		"ts b dispatch.worker y", // 4
		"w a llm.usage",          // 5 (a ends)
		"w b llm.usage",          // 6 (b ends)
		"gs dispatch.team c",     // 7
		"ts c dispatch.worker z", // 8
		"w c llm.usage",          // 9
	)
	result := &RunResult{Teams: []TeamOutput{
		{Turn: 1, TeamName: "a", Status: TeamCompleted, Workers: []WorkerOutput{{Name: "x"}}},
		{Turn: 2, TeamName: "b", Status: TeamCompleted, Workers: []WorkerOutput{{Name: "y"}}},
		{Turn: 3, TeamName: "c", Status: TeamCompleted, Workers: []WorkerOutput{{Name: "z"}}},
	}}
	an := AnalyzeFork(events, result)
	if got := kinds(an.Points); got != "team@1 team.finished@6 team@7 worker@8 team.finished@9" {
		t.Fatalf("points = %s", got)
	}
}
