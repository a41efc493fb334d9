package spec001

import (
	"slices"
	"strings"
	"testing"

	"github.com/op-stack/executor/models"
)

// v1Log builds a 002 log: each entry's source, type and data.
type v1LogEntry struct {
	src  models.Source
	kind string
	data map[string]any
}

func v1Log(entries ...v1LogEntry) []models.Event {
	var log models.EventLog
	var out []models.Event
	for _, e := range entries {
		cat, act, _ := strings.Cut(e.kind, ".")
		out = append(out, log.Append(models.Event{RunID: "r1", Timestamp: "2026-01-01T00:00:00.000Z", Source: e.src, Event: models.EventKind{Category: cat, Action: act}, Data: e.data}))
	}
	return out
}

// testTranslator is run r1's translator, of hierarchy h1, with the
// result URL the API gives it.
func testTranslator(teamIDs map[string]string) *translator {
	return newTranslator(Execution{ID: "r1", HierarchyID: "h1", ResultURL: "/api/v1/executions/r1/results", TeamIDs: teamIDs})
}

func translateAll(tr *translator, log []models.Event) (types []string, evs []event) {
	for _, e := range log {
		for _, ev := range tr.translate(e) {
			types = append(types, ev.Type)
			evs = append(evs, ev)
		}
	}
	return types, evs
}

var (
	tGS     = models.Source{AgentID: "gs", AgentType: models.AgentTypeGlobalSupervisor, AgentName: "boss", Path: []string{"gs"}}
	teamA   = "a"
	teamB   = "b"
	tTSA    = models.Source{AgentID: "ts-a", AgentType: models.AgentTypeTeamSupervisor, AgentName: "lead a", TeamName: &teamA}
	tTSB    = models.Source{AgentID: "ts-b", AgentType: models.AgentTypeTeamSupervisor, AgentName: "lead b", TeamName: &teamB}
	tWA     = models.Source{AgentID: "w-a", AgentType: models.AgentTypeWorker, AgentName: "wa", TeamName: &teamA, Path: []string{"gs", "ts-a", "w-a"}}
	tWB     = models.Source{AgentID: "w-b", AgentType: models.AgentTypeWorker, AgentName: "wb", TeamName: &teamB}
	tSub    = models.Source{AgentID: "sub", AgentType: models.AgentTypeSubAgent, AgentName: "helper", TeamName: &teamA, Depth: 3, Path: []string{"gs", "ts-a", "w-a", "sub"}}
	tSystem = models.Source{AgentID: "system", AgentType: models.AgentTypeSystem, AgentName: "system"}
)

// TestV1TranslatorParallelFailure follows a parallel run whose team b
// fails while team a works with tools, a retry and a sub-agent, and which
// then fails: the worker answers, the failure and the terminal event are
// spec 001's.
func TestV1TranslatorParallelFailure(t *testing.T) {
	log := v1Log(
		v1LogEntry{tGS, "lifecycle.started", map[string]any{"task": "t"}},
		v1LogEntry{tSystem, "system.topology", map[string]any{"execution_mode": "parallel"}},
		v1LogEntry{tGS, "dispatch.team", map[string]any{"team_name": "a", "reason": "ready"}},
		v1LogEntry{tGS, "dispatch.team", map[string]any{"team_name": "b", "reason": "ready"}},
		v1LogEntry{tTSA, "dispatch.worker", map[string]any{"worker_name": "wa", "worker_agent_id": "w-a", "instruction": "do a", "reason": "fits"}},
		v1LogEntry{tTSB, "dispatch.worker", map[string]any{"worker_name": "wb", "worker_agent_id": "w-b", "instruction": "do b"}},
		v1LogEntry{tWA, "llm.stream", map[string]any{"content": "thinking ", "attempt": 1}},
		v1LogEntry{tWA, "llm.retry", map[string]any{"attempt": 2}},
		v1LogEntry{tWA, "llm.tool_call", map[string]any{"tool_name": "calc"}},
		v1LogEntry{tSub, "llm.stream", map[string]any{"content": "sub says"}},
		v1LogEntry{tWA, "llm.tool_result", map[string]any{"tool_name": "calc", "is_error": false, "result": "4"}},
		v1LogEntry{tWA, "llm.reasoning", map[string]any{"content": "hmm"}},
		v1LogEntry{tWA, "llm.stream", map[string]any{"content": "the answer", "attempt": 2}},
		v1LogEntry{tWB, "llm.stream", map[string]any{"content": "partial b", "attempt": 1}},
		// In parallel mode, a dispatch does not end the other teams' turns.
		v1LogEntry{tGS, "dispatch.team", map[string]any{"team_name": "c", "reason": "ready"}},
		v1LogEntry{tSystem, "system.error", map[string]any{"message": "team b failed", "team_name": "b"}},
		v1LogEntry{tTSA, "llm.stream", map[string]any{"content": "{finish}"}},
		v1LogEntry{tSystem, "system.warning", map[string]any{"message": "x"}},
		v1LogEntry{tGS, "lifecycle.failed", map[string]any{"error": "team b failed", "error_code": "EXECUTION_FAILED"}},
	)
	tr := testTranslator(map[string]string{"a": "team-a", "b": "team-b", "c": "team-c"})
	types, evs := translateAll(tr, log)
	want := []string{
		ExecutionStarted, SupervisorRouting, TeamTransition,
		SupervisorRouting, AgentStarted, SupervisorRouting, AgentStarted,
		AgentProgress, AgentProgress, AgentProgress, AgentProgress, AgentProgress, AgentProgress,
		TeamTransition, AgentCompleted, AgentCompleted, ExecutionCompleted,
	}
	if !slices.Equal(types, want) {
		t.Fatalf("types\n got %q\nwant %q", types, want)
	}
	byType := func(typ string, n int) map[string]any {
		for _, ev := range evs {
			if ev.Type == typ {
				if n == 0 {
					return ev.Data
				}
				n--
			}
		}
		t.Fatalf("no %s #%d", typ, n)
		return nil
	}
	if d := byType(SupervisorRouting, 0); d["selected_team"] != "team-a" || d["team_id"] != "h1" || d["supervisor_id"] != "gs" || d["source_type"] != SourceSupervisor {
		t.Errorf("top routing %v", d)
	}
	if d := byType(SupervisorRouting, 1); d["selected_agent"] != "w-a" || d["team_id"] != "team-a" || d["content"] != "fits" {
		t.Errorf("team routing %v", d)
	}
	if d := byType(AgentStarted, 0); d["content"] != "do a" || d["status"] != "running" || d["source_type"] != SourceAgent {
		t.Errorf("agent_started %v", d)
	}
	if d := byType(TeamTransition, 0); d["from_team"] != "team-a" || d["to_team"] != "team-b" {
		t.Errorf("team_transition %v", d)
	}
	if d := byType(AgentProgress, 2); d["agent_id"] != "sub" || d["parent_agent_id"] != "w-a" || d["content"] != "sub says" {
		t.Errorf("sub-agent progress %v", d)
	}
	// Team b's failure ends its worker; team a's supervisor's next step
	// ends its worker, with what it wrote after its tool result.
	if d := byType(AgentCompleted, 0); d["agent_id"] != "w-b" || d["status"] != models.TeamFailed || d["result"] != "partial b" {
		t.Errorf("failed worker %v", d)
	}
	if d := byType(AgentCompleted, 1); d["agent_id"] != "w-a" || d["status"] != models.TeamCompleted || d["result"] != "the answer" {
		t.Errorf("worker a %v", d)
	}
	if d := byType(ExecutionCompleted, 0); d["status"] != "failed" || d["error_code"] != "EXECUTION_FAILED" || d["result_url"] != "/api/v1/executions/r1/results" || d["source_type"] != SourceSystem {
		t.Errorf("execution_completed %v", d)
	}
	for _, ev := range evs {
		if ev.Data["execution_id"] != "r1" || ev.Data["timestamp"] == nil || ev.Data["sequence"] == nil {
			t.Errorf("%s without execution_id, timestamp or sequence: %v", ev.Type, ev.Data)
		}
	}
}

// TestV1TranslatorRoutedCancel: routed, the global supervisor's next step
// ends a team's last worker; a cancelled run ends the open ones, and a
// lifecycle event spec 001 does not name passes as execution_<action>.
func TestV1TranslatorRoutedCancel(t *testing.T) {
	log := v1Log(
		v1LogEntry{tGS, "lifecycle.started", map[string]any{}},
		v1LogEntry{tSystem, "system.topology", map[string]any{"execution_mode": "sequential"}},
		v1LogEntry{tGS, "dispatch.team", map[string]any{"team_name": "a"}},
		v1LogEntry{tTSA, "dispatch.worker", map[string]any{"worker_name": "wa", "worker_agent_id": "w-a"}},
		v1LogEntry{tWA, "llm.stream", map[string]any{"content": "done a"}},
		v1LogEntry{tGS, "dispatch.team", map[string]any{"team_name": "b"}},
		v1LogEntry{tTSB, "dispatch.worker", map[string]any{"worker_name": "wb", "worker_agent_id": "w-b"}},
		v1LogEntry{tGS, "lifecycle.paused", map[string]any{}},
		v1LogEntry{tGS, "lifecycle.cancelled", map[string]any{"reason": "cancelled"}},
	)
	types, evs := translateAll(testTranslator(nil), log)
	want := []string{ExecutionStarted, SupervisorRouting, SupervisorRouting, AgentStarted, AgentProgress,
		AgentCompleted, TeamTransition, SupervisorRouting, AgentStarted, "execution_paused", AgentCompleted, ExecutionCompleted}
	if !slices.Equal(types, want) {
		t.Fatalf("types\n got %q\nwant %q", types, want)
	}
	if d := evs[5].Data; d["agent_id"] != "w-a" || d["result"] != "done a" || d["sequence"] != int64(6) {
		t.Errorf("worker a completed at %v", d)
	}
	// Unknown team ids fall back to the names.
	if d := evs[6].Data; d["from_team"] != "a" || d["to_team"] != "b" {
		t.Errorf("team_transition %v", d)
	}
	if d := evs[10].Data; d["agent_id"] != "w-b" || d["status"] != "cancelled" {
		t.Errorf("open worker at cancel %v", d)
	}
	if d := evs[11].Data; d["status"] != "cancelled" || d["error"] != "cancelled" {
		t.Errorf("execution_completed %v", d)
	}
}

// TestV1TranslatorUndispatchedWorker: a worker speaking without a
// dispatch the translator saw ends its team's previous worker first.
func TestV1TranslatorUndispatchedWorker(t *testing.T) {
	other := models.Source{AgentID: "w-a2", AgentType: models.AgentTypeWorker, AgentName: "wa2", TeamName: &teamA}
	log := v1Log(
		v1LogEntry{tTSA, "dispatch.worker", map[string]any{"worker_name": "wa", "worker_agent_id": "w-a"}},
		v1LogEntry{tWA, "llm.stream", map[string]any{"content": "one"}},
		v1LogEntry{other, "llm.stream", map[string]any{"content": "two"}},
	)
	types, evs := translateAll(testTranslator(nil), log)
	want := []string{SupervisorRouting, AgentStarted, AgentProgress, AgentCompleted, AgentProgress}
	if !slices.Equal(types, want) || evs[3].Data["agent_id"] != "w-a" || evs[3].Data["result"] != "one" || evs[4].Data["agent_id"] != "w-a2" {
		t.Errorf("types %q, events %v", types, evs)
	}
}

// TestV1TranslatorRoutedTeamsTogether: routed with max_parallel_teams 2,
// the global supervisor streams its next decision while team a's worker is
// still answering; that must not end the worker's turn, which ends at its
// team supervisor's next step.
func TestV1TranslatorRoutedTeamsTogether(t *testing.T) {
	log := v1Log(
		v1LogEntry{tGS, "lifecycle.started", map[string]any{}},
		v1LogEntry{tSystem, "system.topology", map[string]any{"execution_mode": "sequential", "max_parallel_teams": 2}},
		v1LogEntry{tGS, "dispatch.team", map[string]any{"team_name": "a"}},
		v1LogEntry{tTSA, "dispatch.worker", map[string]any{"worker_name": "wa", "worker_agent_id": "w-a"}},
		v1LogEntry{tWA, "llm.stream", map[string]any{"content": "part 1 "}},
		v1LogEntry{tGS, "llm.stream", map[string]any{"content": `{"action":"dispatch"`}},
		v1LogEntry{tGS, "dispatch.team", map[string]any{"team_name": "b"}},
		v1LogEntry{tWA, "llm.stream", map[string]any{"content": "part 2"}},
		v1LogEntry{tTSA, "llm.stream", map[string]any{"content": `{"action":"finish"}`}},
	)
	types, evs := translateAll(testTranslator(nil), log)
	var completed []map[string]any
	for i, ty := range types {
		if ty == AgentCompleted {
			completed = append(completed, evs[i].Data)
		}
	}
	if len(completed) != 1 || completed[0]["agent_id"] != "w-a" || completed[0]["result"] != "part 1 part 2" {
		t.Fatalf("agent_completed events %v (types %q), want one for w-a with its whole answer", completed, types)
	}
}

// TestV1TranslatorSkipsUsage: llm.usage events (any agent's) have no spec
// 001 counterpart and neither open nor close workers or teams.
func TestV1TranslatorSkipsUsage(t *testing.T) {
	usage := map[string]any{"total_tokens": 10, "cost_usd": 0.001}
	log := v1Log(
		v1LogEntry{tGS, "llm.usage", usage},
		v1LogEntry{tTSA, "dispatch.worker", map[string]any{"worker_name": "wa", "worker_agent_id": "w-a"}},
		v1LogEntry{tWA, "llm.stream", map[string]any{"content": "one"}},
		v1LogEntry{tWA, "llm.usage", usage},
		v1LogEntry{tSub, "llm.usage", usage},
		v1LogEntry{tWB, "llm.usage", usage},
		v1LogEntry{tTSA, "llm.usage", usage},
	)
	types, _ := translateAll(testTranslator(nil), log)
	want := []string{SupervisorRouting, AgentStarted, AgentProgress}
	if !slices.Equal(types, want) {
		t.Errorf("types %q, want %q", types, want)
	}
}

// TestV1TranslatorSkipsArtifacts: llm.artifact events (a stored file,
// announced after its agent's answer or tool result) have no spec 001
// counterpart: the file is listed on the results. They neither open nor
// close workers or teams, whichever agent stored the file.
func TestV1TranslatorSkipsArtifacts(t *testing.T) {
	art := map[string]any{"artifact_id": "art_1", "name": "report.md", "url": "/api/v1/artifacts/art_1"}
	log := v1Log(
		v1LogEntry{tTSA, "dispatch.worker", map[string]any{"worker_name": "wa", "worker_agent_id": "w-a"}},
		v1LogEntry{tWA, "llm.stream", map[string]any{"content": "one"}},
		v1LogEntry{tWA, "llm.artifact", art},
		v1LogEntry{tSub, "llm.artifact", art},
		v1LogEntry{tWB, "llm.artifact", art},
		v1LogEntry{tGS, "llm.artifact", art},
	)
	types, _ := translateAll(testTranslator(nil), log)
	want := []string{SupervisorRouting, AgentStarted, AgentProgress}
	if !slices.Equal(types, want) {
		t.Errorf("types %q, want %q", types, want)
	}
}

// TestV1TranslatorBudget: system.budget becomes execution_budget with its
// fields and the team's id; it neither opens nor closes a worker, which
// completes at its team supervisor's next step as usual.
func TestV1TranslatorBudget(t *testing.T) {
	spent := map[string]any{"total_tokens": 230, "cost_usd": 0.002, "cost_unknown": false}
	limit := models.BudgetLimit{MaxTokens: 200}
	log := v1Log(
		v1LogEntry{tTSA, "dispatch.worker", map[string]any{"worker_name": "wa", "worker_agent_id": "w-a"}},
		v1LogEntry{tWA, "llm.stream", map[string]any{"content": "one"}},
		v1LogEntry{tSystem, "system.budget", map[string]any{"scope": "team", "team_name": "a", "on_exceeded": "skip_team", "spent": spent, "limit": limit}},
		v1LogEntry{tSystem, "system.budget", map[string]any{"scope": "run", "on_exceeded": "finish", "spent": spent, "limit": limit}},
		v1LogEntry{tTSA, "llm.stream", map[string]any{"content": "{}"}},
	)
	types, evs := translateAll(testTranslator(map[string]string{"a": "team_a1"}), log)
	want := []string{SupervisorRouting, AgentStarted, AgentProgress, ExecutionBudget, ExecutionBudget, AgentCompleted}
	if !slices.Equal(types, want) {
		t.Fatalf("types %q, want %q", types, want)
	}
	team := evs[3].Data
	if team["source_type"] != SourceSystem || team["scope"] != "team" || team["team_id"] != "team_a1" || team["team_name"] != "a" ||
		team["on_exceeded"] != "skip_team" || team["limit"] != limit || team["execution_id"] != "r1" || team["sequence"] != int64(3) {
		t.Errorf("team budget event = %v", team)
	}
	if sp, _ := team["spent"].(map[string]any); sp["total_tokens"] != 230 {
		t.Errorf("spent = %v", team["spent"])
	}
	if run := evs[4].Data; run["scope"] != "run" || run["on_exceeded"] != "finish" || run["team_id"] != nil {
		t.Errorf("run budget event = %v", run)
	}
	if evs[5].Data["result"] != "one" {
		t.Errorf("agent_completed = %v", evs[5].Data)
	}
}

// TestV1TranslatorSupervisorReassigned: system.supervisor_reassigned
// becomes supervisor_reassigned, naming the team supervisor, its stand-in
// and both models; like the team supervisor's other steps it ends the
// team's open worker first.
func TestV1TranslatorSupervisorReassigned(t *testing.T) {
	log := v1Log(
		v1LogEntry{tTSA, "dispatch.worker", map[string]any{"worker_name": "wa", "worker_agent_id": "w-a"}},
		v1LogEntry{tWA, "llm.stream", map[string]any{"content": "one"}},
		v1LogEntry{tTSA, "system.supervisor_reassigned", map[string]any{"agent_id": "ts-a", "stand_in_agent_id": "gs",
			"team_name": "a", "from_model": "m-ts", "to_model": "m-gs", "error": "500", "message": "its routing passes"}},
	)
	types, evs := translateAll(testTranslator(map[string]string{"a": "team_a1"}), log)
	want := []string{SupervisorRouting, AgentStarted, AgentProgress, AgentCompleted, SupervisorReassigned}
	if !slices.Equal(types, want) {
		t.Fatalf("types %q, want %q", types, want)
	}
	d := evs[4].Data
	if d["source_type"] != SourceSupervisor || d["team_id"] != "team_a1" || d["stand_in_agent_id"] != "gs" ||
		d["from_model"] != "m-ts" || d["to_model"] != "m-gs" || d["error"] != "500" || d["content"] != "its routing passes" ||
		d["action"] != "supervisor_reassigned" || d["sequence"] != int64(3) {
		t.Errorf("supervisor_reassigned = %v", d)
	}
}

// TestV1TranslatorTimedOut (issue 23 item 18): a run that overran its
// max_execution_time ends with lifecycle.failed and error_code
// EXECUTION_TIMEOUT, and its status is timed_out; spec 001's stream must
// end it with that status too, and its open worker with it.
func TestV1TranslatorTimedOut(t *testing.T) {
	log := v1Log(
		v1LogEntry{tGS, "lifecycle.started", map[string]any{"task": "t"}},
		v1LogEntry{tGS, "dispatch.team", map[string]any{"team_name": "a"}},
		v1LogEntry{tTSA, "dispatch.worker", map[string]any{"worker_name": "wa", "worker_agent_id": "w-a"}},
		v1LogEntry{tWA, "llm.stream", map[string]any{"content": "half"}},
		v1LogEntry{tSystem, "system.error", map[string]any{"message": "the run exceeded its max_execution_time of 1s", "error_code": "EXECUTION_TIMEOUT"}},
		v1LogEntry{tGS, "lifecycle.failed", map[string]any{"error": "the run exceeded its max_execution_time of 1s", "error_code": "EXECUTION_TIMEOUT"}},
	)
	types, evs := translateAll(testTranslator(nil), log)
	n := len(evs)
	if n < 2 || types[n-1] != ExecutionCompleted || types[n-2] != AgentCompleted {
		t.Fatalf("types %q", types)
	}
	if d := evs[n-1].Data; d["status"] != models.RunTimedOut || d["error_code"] != "EXECUTION_TIMEOUT" || d["result_url"] == nil {
		t.Errorf("execution_completed = %v, want status %q", d, models.RunTimedOut)
	}
	if d := evs[n-2].Data; d["status"] != models.RunTimedOut || d["result"] != "half" {
		t.Errorf("agent_completed = %v, want status %q", d, models.RunTimedOut)
	}
	// Other failures stay failed.
	_, evs = translateAll(testTranslator(nil), v1Log(
		v1LogEntry{tGS, "lifecycle.failed", map[string]any{"error": "boom", "error_code": "EXECUTION_FAILED"}},
	))
	if d := evs[0].Data; d["status"] != models.TeamFailed {
		t.Errorf("a failed run ends %v", d)
	}
}

// TestV1TranslatorProgress (issue 23 item 14): agent_progress.progress is
// the team turn's workers done ÷ the team's workers, execution_progress
// (and the progress of the global supervisor's events and of
// execution_completed) the teams completed ÷ the teams in the plan.
func TestV1TranslatorProgress(t *testing.T) {
	wa2 := models.Source{AgentID: "w-a2", AgentType: models.AgentTypeWorker, AgentName: "wa2", TeamName: &teamA}
	topology := map[string]any{"execution_mode": "sequential", "teams": []any{
		map[string]any{"name": "a", "workers": []any{map[string]any{"agent_id": "w-a"}, map[string]any{"agent_id": "w-a2"}}},
		map[string]any{"name": "b", "workers": []any{map[string]any{"agent_id": "w-b"}}},
	}}
	log := v1Log(
		v1LogEntry{tGS, "lifecycle.started", map[string]any{"task": "t"}},
		v1LogEntry{tSystem, "system.topology", topology},
		v1LogEntry{tGS, "dispatch.team", map[string]any{"team_name": "a", "completed_teams": []any{}}},
		v1LogEntry{tTSA, "dispatch.worker", map[string]any{"worker_name": "wa", "worker_agent_id": "w-a"}},
		v1LogEntry{tWA, "llm.stream", map[string]any{"content": "one"}},
		v1LogEntry{tTSA, "dispatch.worker", map[string]any{"worker_name": "wa2", "worker_agent_id": "w-a2"}},
		v1LogEntry{wa2, "llm.stream", map[string]any{"content": "two"}},
		v1LogEntry{tSub, "llm.stream", map[string]any{"content": "sub"}},
		// wa again: it counts once.
		v1LogEntry{tTSA, "dispatch.worker", map[string]any{"worker_name": "wa", "worker_agent_id": "w-a"}},
		v1LogEntry{tWA, "llm.stream", map[string]any{"content": "three"}},
		v1LogEntry{tTSA, "llm.stream", map[string]any{"content": `{"action":"finish"}`}},
		v1LogEntry{tGS, "dispatch.team", map[string]any{"team_name": "b", "completed_teams": []any{"a"}}},
		v1LogEntry{tTSB, "dispatch.worker", map[string]any{"worker_name": "wb", "worker_agent_id": "w-b"}},
		v1LogEntry{tWB, "llm.stream", map[string]any{"content": "b says"}},
		v1LogEntry{tGS, "lifecycle.completed", map[string]any{"final_answer": "x"}},
	)
	_, evs := translateAll(testTranslator(nil), log)
	type got struct {
		typ, content  string
		progress, run any
	}
	var seen []got
	for _, ev := range evs {
		switch ev.Type {
		case AgentProgress:
			seen = append(seen, got{ev.Type, str(ev.Data, "content"), ev.Data["progress"], ev.Data["execution_progress"]})
		case SupervisorRouting, TeamTransition, ExecutionCompleted:
			if ev.Data["selected_agent"] == nil {
				seen = append(seen, got{ev.Type, str(ev.Data, "to_team") + str(ev.Data, "selected_team"), ev.Data["progress"], nil})
			}
		}
	}
	want := []got{
		{SupervisorRouting, "a", 0, nil},
		{AgentProgress, "one", 0, 0},
		{AgentProgress, "two", 50, 0},
		{AgentProgress, "sub", 50, 0},
		{AgentProgress, "three", 50, 0},
		{TeamTransition, "b", 50, nil},
		{AgentProgress, "b says", 0, 50},
		{ExecutionCompleted, "", 100, nil},
	}
	if len(seen) != len(want) {
		t.Fatalf("events %+v, want %+v", seen, want)
	}
	for i := range want {
		if seen[i] != want[i] {
			t.Errorf("event %d = %+v, want %+v", i, seen[i], want[i])
		}
	}

	// Teams at work together: a team's end comes from the workflow's
	// completed_teams; a failed team does not count.
	par := map[string]any{"execution_mode": "parallel", "teams": []any{
		map[string]any{"name": "a", "workers": []any{map[string]any{}}},
		map[string]any{"name": "b", "workers": []any{map[string]any{}}},
		map[string]any{"name": "c", "workers": []any{map[string]any{}}},
	}}
	_, evs = translateAll(testTranslator(nil), v1Log(
		v1LogEntry{tSystem, "system.topology", par},
		v1LogEntry{tGS, "dispatch.team", map[string]any{"team_name": "a"}},
		v1LogEntry{tGS, "dispatch.team", map[string]any{"team_name": "b"}},
		v1LogEntry{tTSB, "dispatch.worker", map[string]any{"worker_name": "wb", "worker_agent_id": "w-b"}},
		v1LogEntry{tGS, "dispatch.team", map[string]any{"team_name": "c", "completed_teams": []any{"a"}}},
		v1LogEntry{tWB, "llm.stream", map[string]any{"content": "b"}},
		v1LogEntry{tSystem, "system.error", map[string]any{"message": "b failed", "team_name": "b"}},
		v1LogEntry{tGS, "lifecycle.failed", map[string]any{"error": "b failed", "error_code": "EXECUTION_FAILED"}},
	))
	var last, worker map[string]any
	for _, ev := range evs {
		if ev.Type == AgentProgress {
			worker = ev.Data
		}
		last = ev.Data
	}
	if worker == nil || worker["execution_progress"] != 33 || worker["progress"] != 0 {
		t.Errorf("parallel worker progress = %v", worker)
	}
	if last["status"] != models.TeamFailed || last["progress"] != 33 {
		t.Errorf("failed execution_completed = %v", last)
	}

	// Without a topology (a log cut short), progress is unknown: null.
	_, evs = translateAll(testTranslator(nil), v1Log(
		v1LogEntry{tTSA, "dispatch.worker", map[string]any{"worker_name": "wa", "worker_agent_id": "w-a"}},
		v1LogEntry{tWA, "llm.stream", map[string]any{"content": "one"}},
	))
	if d := evs[len(evs)-1].Data; d["progress"] != nil || d["execution_progress"] != nil {
		t.Errorf("progress without a plan = %v", d)
	}
}
