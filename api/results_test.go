package api

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/op-stack/executor/models"
	"github.com/op-stack/executor/store"
)

var t0 = time.Date(2025, 1, 15, 10, 35, 0, 0, time.UTC)

func at(sec float64) *time.Time {
	t := t0.Add(time.Duration(sec * float64(time.Second)))
	return &t
}

// handMadeRun is a finished run of three teams: research worked twice
// (turns 1 and 3), writing failed, review was skipped.
func handMadeRun() ResultsInput {
	run := &store.Run{
		ID: "key-1", PublicID: "exec-1", HierarchyID: "ht-1", HierarchyName: "research_analysis_team", Task: "AI in medicine",
		Status: models.RunFailed, Error: "team writing failed: worker \"writer\" (agent_id w-writer) calling model \"gpt-4o\": HTTP 401",
		CreatedAt: t0, StartedAt: at(0), CompletedAt: at(90.5), UpdatedAt: *at(90.5),
	}
	res := &models.RunResult{
		FinalAnswer: "",
		Teams: []models.TeamOutput{
			{Turn: 1, TeamID: "team_a", TeamName: "research", Status: models.TeamCompleted, StartedAt: at(1), CompletedAt: at(31), Workers: []models.WorkerOutput{
				{AgentID: "w-searcher", Name: "searcher", Output: "15 papers", Model: "gpt-4o", ToolsUsed: []string{"http_get", "calculator"}},
				{AgentID: "w-analyst", Name: "analyst", Output: "trends"},
			}},
			{Turn: 2, TeamID: "team_b", TeamName: "writing", Status: models.TeamFailed, Error: "worker \"writer\" failed: HTTP 401", StartedAt: at(32), CompletedAt: at(35.25), Workers: []models.WorkerOutput{
				{AgentID: "w-outliner", Name: "outliner", Output: "an outline"},
			}},
			{Turn: 3, TeamID: "team_a", TeamName: "research", Status: models.TeamCompleted, StartedAt: at(40), CompletedAt: at(50), Workers: []models.WorkerOutput{
				{AgentID: "w-searcher", Name: "searcher", Output: "3 more papers", ToolsUsed: []string{"http_get", "current_time"}},
			}},
			{Turn: 4, TeamID: "team_c", TeamName: "review", Status: models.TeamSkipped, Error: "depends on writing, which failed"},
		},
		Warnings: []string{"supervisor corrected"},
		// The engine's own record of the team failure: not listed twice.
		Errors: []models.ErrorInfo{{ErrorCode: "EXECUTION_FAILED", Message: "worker \"writer\" failed: HTTP 401", Timestamp: "2025-01-15T10:35:35.250Z"}},
		Usage:  models.Usage{TotalTokens: 999},
	}
	calls := []store.LLMCall{
		{AgentID: "gs-1", Status: "ok", TotalTokens: 100, LatencyMs: 1000, CostUSD: usd(0.001)},
		{AgentID: "ts-research", Status: "ok", TotalTokens: 50, LatencyMs: 500, CostUSD: usd(0.0005)},
		{AgentID: "w-searcher", Status: "error", TotalTokens: 0, LatencyMs: 300},
		{AgentID: "w-searcher", Status: "ok", TotalTokens: 200, LatencyMs: 2000, CostUSD: usd(0.002)},
		{AgentID: "w-analyst", Status: "ok", TotalTokens: 150, LatencyMs: 1500, CostUSD: usd(0.0015)},
		// A model without a price: the cost is unknown.
		{AgentID: "w-outliner", Status: "ok", TotalTokens: 80, LatencyMs: 800},
		{AgentID: "w-writer", Status: "error", TotalTokens: 0, LatencyMs: 100},
		{AgentID: "w-searcher", Status: "ok", TotalTokens: 70, LatencyMs: 700, CostUSD: usd(0.0007)},
		{AgentID: "gs-1", Status: "cancelled", TotalTokens: 0, LatencyMs: 50},
	}
	return ResultsInput{Run: run, Result: res, Calls: calls, Now: *at(100), Supervisors: map[string]string{"team_a": "ts-research", "writing": "ts-writing"}}
}

func usd(v float64) *float64 { return &v }

func TestBuildResults(t *testing.T) {
	in := handMadeRun()
	r := BuildResults(in)

	if r.ExecutionID != "exec-1" || r.TeamID != "ht-1" {
		t.Errorf("ids = %q %q", r.ExecutionID, r.TeamID)
	}
	s := r.ExecutionSummary
	if s.Status != models.RunFailed || s.TotalDuration == nil || *s.TotalDuration != 90.5 || !s.StartedAt.Equal(t0) || !s.CompletedAt.Equal(*at(90.5)) {
		t.Errorf("summary = %+v", s)
	}
	// research and writing worked; review was skipped.
	if s.TeamsExecuted != 2 || s.AgentsInvolved != 3 {
		t.Errorf("teams executed %d, agents involved %d; want 2 and 3", s.TeamsExecuted, s.AgentsInvolved)
	}

	if got := strings.Join(r.TeamResults.Keys(), ","); got != "team_a,team_b,team_c" {
		t.Fatalf("team order = %s", got)
	}
	research, _ := r.TeamResults.Get("team_a")
	if research.TeamName != "research" || research.Status != models.TeamCompleted || research.Turns != 2 || research.Duration == nil || *research.Duration != 40 {
		t.Errorf("research = %+v (duration %v)", research, research.Duration)
	}
	searcher, _ := research.Agents.Get("w-searcher")
	if searcher.Output != "15 papers\n\n3 more papers" || strings.Join(searcher.ToolsUsed, ",") != "http_get,calculator,current_time" || searcher.Status != "completed" || searcher.Model != "gpt-4o" {
		t.Errorf("searcher = %+v", searcher)
	}
	if searcher.Metrics != (AgentMetrics{TokensUsed: 270, APICallsMade: 3, ProcessingTime: 3, CostUSD: 0.0027}) {
		t.Errorf("searcher metrics = %+v", searcher.Metrics)
	}
	// The team's metrics: its workers' and its supervisor's calls.
	if research.Metrics != (AgentMetrics{TokensUsed: 470, APICallsMade: 5, ProcessingTime: 5, CostUSD: 0.0047}) {
		t.Errorf("research metrics = %+v", research.Metrics)
	}
	if r.Metrics.TotalCostUSD != 0.0057 || !r.Metrics.CostUnknown {
		t.Errorf("run cost = %v unknown %v", r.Metrics.TotalCostUSD, r.Metrics.CostUnknown)
	}
	if gs, ok := r.UsageByAgent.Get("gs-1"); !ok || *gs != (AgentMetrics{TokensUsed: 100, APICallsMade: 2, ProcessingTime: 1.05, CostUSD: 0.001}) || r.UsageByAgent.Len() != 6 {
		t.Errorf("usage by agent: gs-1 %+v, %d agents", gs, r.UsageByAgent.Len())
	}
	if analyst, _ := research.Agents.Get("w-analyst"); analyst.ToolsUsed == nil || len(analyst.ToolsUsed) != 0 {
		t.Errorf("analyst tools_used = %#v, want []", analyst.ToolsUsed)
	}
	writing, _ := r.TeamResults.Get("team_b")
	if writing.Status != models.TeamFailed || writing.Error == "" || *writing.Duration != 3.25 {
		t.Errorf("writing = %+v", writing)
	}
	if review, _ := r.TeamResults.Get("team_c"); review.Status != models.TeamSkipped || review.Agents.Len() != 0 || review.Duration != nil {
		t.Errorf("review = %+v", review)
	}
	if r.FinalOutput != nil {
		t.Errorf("final output = %+v, want none", r.FinalOutput)
	}

	// The engine's team error once, plus the run's failure.
	if len(r.Errors) != 2 || r.Errors[0].Message != `worker "writer" failed: HTTP 401` || r.Errors[1].ErrorCode != "EXECUTION_FAILED" || r.Errors[1].Message != in.Run.Error {
		t.Errorf("errors = %+v", r.Errors)
	}
	if len(r.Warnings) != 1 {
		t.Errorf("warnings = %v", r.Warnings)
	}

	// The numbers add up: totals are the sums over the calls, and the
	// agents' figures plus the supervisors' calls make the totals.
	m := r.Metrics
	if m.APICallsMade != 9 || m.TotalTokensUsed != 650 {
		t.Errorf("metrics = %+v", m)
	}
	if m.SuccessRate != 0.6667 { // 6 ok of 9
		t.Errorf("success rate = %v", m.SuccessRate)
	}
	if m.AverageResponseTime != 1.083 { // (1000+500+2000+1500+800+700)/6 ms
		t.Errorf("average response time = %v", m.AverageResponseTime)
	}
	agentTokens, agentCalls := 0, 0
	for _, k := range r.TeamResults.Keys() {
		tr, _ := r.TeamResults.Get(k)
		for _, id := range tr.Agents.Keys() {
			a, _ := tr.Agents.Get(id)
			agentTokens += a.Metrics.TokensUsed
			agentCalls += a.Metrics.APICallsMade
		}
	}
	supervisorTokens, supervisorCalls := 150, 3 // gs-1 twice, ts-research once
	writerCalls := 1                            // w-writer failed and left no output
	if agentTokens+supervisorTokens != m.TotalTokensUsed || agentCalls+supervisorCalls+writerCalls != m.APICallsMade {
		t.Errorf("agents %d tokens in %d calls + supervisors don't add up to %+v", agentTokens, agentCalls, m)
	}

	// JSON: ordered team_results, an empty errors list is [], no final output is null.
	raw, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	js := string(raw)
	if a, b := strings.Index(js, `"team_a"`), strings.Index(js, `"team_b"`); a < 0 || b < a {
		t.Errorf("team_results not in order: %s", js)
	}
	for _, want := range []string{`"final_output":null`, `"total_duration":90.5`, `"api_calls_made":9`, `"tools_used":[]`} {
		if !strings.Contains(js, want) {
			t.Errorf("JSON lacks %s: %s", want, js)
		}
	}
	var generic map[string]any
	if err := json.Unmarshal(raw, &generic); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"execution_id", "team_id", "execution_summary", "team_results", "final_output", "errors", "metrics"} {
		if _, ok := generic[k]; !ok {
			t.Errorf("JSON lacks %q", k)
		}
	}
}

func TestBuildResultsLiveAndEmpty(t *testing.T) {
	// A live run: the running turn has no status and no end yet.
	run := &store.Run{ID: "exec-2", HierarchyID: "ht-1", Status: models.RunRunning, StartedAt: at(0), UpdatedAt: *at(5)}
	res := &models.RunResult{Teams: []models.TeamOutput{
		{Turn: 1, TeamName: "legacy team without id", Status: models.TeamCompleted, StartedAt: at(1), CompletedAt: at(2), Workers: []models.WorkerOutput{{AgentID: "w1", Name: "one", Output: "done"}}},
		{Turn: 2, TeamID: "team_b", TeamName: "writing", StartedAt: at(3)},
	}}
	r := BuildResults(ResultsInput{Run: run, Result: res, Now: *at(10)})
	if r.ExecutionSummary.TotalDuration != nil || r.ExecutionSummary.CompletedAt != nil {
		t.Errorf("live run has a total duration: %+v", r.ExecutionSummary)
	}
	if got := strings.Join(r.TeamResults.Keys(), ","); got != "legacy team without id,team_b" {
		t.Errorf("keys = %s", got)
	}
	if w, _ := r.TeamResults.Get("team_b"); w.Status != models.RunRunning || w.Duration == nil || *w.Duration != 7 {
		t.Errorf("running team = %+v", w)
	}
	// No call records (a run from before they were kept): tokens from the
	// result's usage, no rates.
	res.Usage.TotalTokens = 42
	r = BuildResults(ResultsInput{Run: run, Result: res, Now: *at(10)})
	if r.Metrics != (ExecutionMetrics{TotalTokensUsed: 42}) {
		t.Errorf("metrics without calls = %+v", r.Metrics)
	}

	// A pending run has nothing at all.
	r = BuildResults(ResultsInput{Run: &store.Run{ID: "exec-3", Status: models.RunPending}})
	raw, _ := json.Marshal(r)
	for _, want := range []string{`"team_results":{}`, `"errors":[]`, `"warnings":[]`, `"total_duration":null`, `"started_at":null`} {
		if !strings.Contains(string(raw), want) {
			t.Errorf("pending run JSON lacks %s: %s", want, raw)
		}
	}

	// A timed-out run reports EXECUTION_TIMEOUT; a cancelled one no error.
	run = &store.Run{ID: "exec-4", Status: models.RunTimedOut, Error: "max_execution_time of 60s exceeded", StartedAt: at(0), CompletedAt: at(60)}
	if r = BuildResults(ResultsInput{Run: run}); len(r.Errors) != 1 || r.Errors[0].ErrorCode != "EXECUTION_TIMEOUT" || r.Errors[0].Timestamp != "2025-01-15T10:36:00.000Z" {
		t.Errorf("timed out errors = %+v", r.Errors)
	}
	run = &store.Run{ID: "exec-5", Status: models.RunCancelled, Error: "cancelled"}
	if r = BuildResults(ResultsInput{Run: run}); len(r.Errors) != 0 {
		t.Errorf("cancelled errors = %+v", r.Errors)
	}

	// A final answer becomes final_output.
	run = &store.Run{ID: "exec-6", HierarchyName: "team", Status: models.RunCompleted}
	r = BuildResults(ResultsInput{Run: run, Result: &models.RunResult{FinalAnswer: "The answer.\nSecond line."}})
	if f := r.FinalOutput; f == nil || f.Type != "text" || f.Title != "team" || f.Content != "The answer.\nSecond line." || f.Summary != "The answer. Second line." {
		t.Errorf("final output = %+v", r.FinalOutput)
	}
}

// TestBuildResultsOffline: a run that any answer of the offline model
// touched says offline at run level, and an answer of the offline model
// names it as the model, also for runs that recorded the model asked for.
func TestBuildResultsOffline(t *testing.T) {
	run := &store.Run{ID: "exec-7", Status: models.RunCompleted}
	res := &models.RunResult{Teams: []models.TeamOutput{{TeamID: "t", TeamName: "t", Status: models.TeamCompleted, Workers: []models.WorkerOutput{
		{AgentID: "w-real", Name: "real", Model: "gpt-4o"},
		{AgentID: "w-stand-in", Name: "stand-in", Model: "gpt-4o", Offline: true},
	}}}}
	r := BuildResults(ResultsInput{Run: run, Result: res})
	team, _ := r.TeamResults.Get("t")
	real, _ := team.Agents.Get("w-real")
	standIn, _ := team.Agents.Get("w-stand-in")
	if !r.Offline || real.Model != "gpt-4o" || standIn.Model != "offline" {
		t.Errorf("offline %v, models %q %q", r.Offline, real.Model, standIn.Model)
	}
	if md := r.Markdown(); !strings.Contains(md, "| Offline | yes") {
		t.Errorf("markdown does not say offline:\n%s", md)
	}

	// A supervisor's decision from the offline model counts too (its
	// usage record); real answers alone do not.
	res.Teams[0].Workers = res.Teams[0].Workers[:1]
	calls := []store.LLMCall{{AgentID: "gs", Provider: "offline", Model: "offline", Status: "ok"}}
	if r := BuildResults(ResultsInput{Run: run, Result: res, Calls: calls}); !r.Offline {
		t.Error("a decision of the offline model is not offline")
	}
	calls[0].Provider, calls[0].Model = "openai", "gpt-4o"
	if r := BuildResults(ResultsInput{Run: run, Result: res, Calls: calls}); r.Offline {
		t.Error("a run of real answers says offline")
	}
}

func TestResultsMarkdown(t *testing.T) {
	in := handMadeRun()
	in.Result.FinalAnswer = "# Report\n\nAI | medicine"
	md := BuildResults(in).Markdown()
	for _, want := range []string{
		"# Execution results: research_analysis_team",
		"| Status | failed |",
		"| Task | AI in medicine |",
		"| Total duration | 90.500 s |",
		"| Teams executed | 2 |",
		"| Agents involved | 3 |",
		"## Final output\n\n# Report\n\nAI | medicine\n",
		"### research\n\nTeam id `team_a` · status **completed** · duration 40.000 s · turns 2",
		"#### searcher\n\nAgent id `w-searcher` · status **completed** · tools used: http_get, calculator, current_time · tokens 270 · API calls 3 · processing time 3.000 s",
		"15 papers\n\n3 more papers",
		"trends", "an outline",
		"### review", "> Error: depends on writing, which failed",
		"## Errors\n\n- **EXECUTION_FAILED**",
		"## Warnings\n\n- supervisor corrected",
		"| Total tokens used | 650 |", "| API calls made | 9 |", "| Success rate | 66.7% |", "| Average response time | 1.083 s |",
		"| Cached prompt tokens | 0 |", "| Reasoning tokens | 0 |", "| Total cost | $0.0057 (some calls unpriced: unknown) |",
		"turns 2 · tokens 470 · cost $0.0047 (sub-agents included)", "processing time 3.000 s · cost $0.0027",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("markdown lacks %q:\n%s", want, md)
		}
	}
	empty := BuildResults(ResultsInput{Run: &store.Run{ID: "e", HierarchyID: "h", Status: models.RunPending}}).Markdown()
	for _, want := range []string{"_No final output yet._", "_No team has worked yet._", "## Errors\n\nNone.", "| Total duration | — |"} {
		if !strings.Contains(empty, want) {
			t.Errorf("empty markdown lacks %q:\n%s", want, empty)
		}
	}
}

func TestResultFormat(t *testing.T) {
	for in, want := range map[string]string{"": FormatJSON, "json": FormatJSON, "JSON": FormatJSON, "markdown": FormatMarkdown, " md ": FormatMarkdown, "XML": FormatXML} {
		if got, err := resultFormat(in); err != nil || got != want {
			t.Errorf("resultFormat(%q) = %q, %v", in, got, err)
		}
	}
	for _, in := range []string{"html", "yaml"} {
		if _, err := resultFormat(in); models.ErrorCode(err) != models.CodeInvalidParameters {
			t.Errorf("resultFormat(%q) = %v, want INVALID_PARAMETERS", in, err)
		}
	}
}

func TestV1Field(t *testing.T) {
	for in, want := range map[string]string{
		"name":                                 "team_name",
		"max_execution_time":                   "global_config.max_execution_time",
		"global_supervisor_agent.temperature":  "top_supervisor_config.llm_config.temperature",
		"teams[1].name":                        "sub_teams[1].name",
		"teams[0].team_supervisor_agent.model": "sub_teams[0].supervisor_config.llm_config.model",
		"teams[0].workers[2].agent_id":         "sub_teams[0].agent_configs[2].agent_id",
		"teams[0].workers[2].name":             "sub_teams[0].agent_configs[2].agent_name",
		"teams[0].workers[2].provider":         "sub_teams[0].agent_configs[2].llm_config.provider",
		"teams[0].workers[2].tools":            "sub_teams[0].agent_configs[2].tools",
		"dependencies":                         "dependencies",
	} {
		if got := v1Field(in); got != want {
			t.Errorf("v1Field(%q) = %q, want %q", in, got, want)
		}
	}
}

// Calls recorded with their team and path: a team's metrics include the
// calls of the sub-agents its workers delegated to, nested ones too; the
// worker and the run show their sub-agents' part, and usage_by_sub_agent
// lists each sub-agent with its teams and callers.
func TestBuildResultsSubAgents(t *testing.T) {
	run := &store.Run{ID: "exec-2", Status: models.RunCompleted, StartedAt: at(0), CompletedAt: at(10), UpdatedAt: *at(10)}
	res := &models.RunResult{Teams: []models.TeamOutput{
		{Turn: 1, TeamID: "team_a", TeamName: "research", Status: models.TeamCompleted, Workers: []models.WorkerOutput{
			{AgentID: "w-searcher", Name: "searcher", Output: "papers"},
		}},
		{Turn: 2, TeamID: "team_b", TeamName: "writing", Status: models.TeamCompleted, Workers: []models.WorkerOutput{
			{AgentID: "w-writer", Name: "writer", Output: "a draft"},
		}},
	}}
	gs, research, writing := []string{"gs"}, "research", "writing"
	call := func(agent, team string, cost float64, path ...string) store.LLMCall {
		return store.LLMCall{AgentID: agent, Status: "ok", TotalTokens: int(cost * 1e4), LatencyMs: 100, CostUSD: usd(cost), TeamName: team, AgentPath: path}
	}
	calls := []store.LLMCall{
		call("gs", "", 0.001, gs...),
		call("ts-r", research, 0.002, "gs", "ts-r"),
		call("w-searcher", research, 0.003, "gs", "ts-r", "w-searcher"),
		call("sa-lookup", research, 0.004, "gs", "ts-r", "w-searcher", "sa-lookup"),
		call("sa-deep", research, 0.005, "gs", "ts-r", "w-searcher", "sa-lookup", "sa-deep"),
		call("ts-w", writing, 0.006, "gs", "ts-w"),
		call("w-writer", writing, 0.007, "gs", "ts-w", "w-writer"),
		call("sa-lookup", writing, 0.008, "gs", "ts-w", "w-writer", "sa-lookup"),
	}
	r := BuildResults(ResultsInput{Run: run, Result: res, Calls: calls, Now: *at(10), Supervisors: map[string]string{"team_a": "ts-r", "team_b": "ts-w"}})

	near := func(a, b float64) bool { return a-b < 1e-12 && b-a < 1e-12 }
	ta, _ := r.TeamResults.Get("team_a")
	if !near(ta.Metrics.CostUSD, 0.002+0.003+0.004+0.005) || ta.Metrics.APICallsMade != 4 {
		t.Errorf("research metrics = %+v, want its supervisor, worker and both sub-agents", ta.Metrics)
	}
	tb, _ := r.TeamResults.Get("team_b")
	if !near(tb.Metrics.CostUSD, 0.006+0.007+0.008) || tb.Metrics.APICallsMade != 3 {
		t.Errorf("writing metrics = %+v", tb.Metrics)
	}
	searcher, _ := ta.Agents.Get("w-searcher")
	if !near(searcher.Metrics.CostUSD, 0.003) || !near(searcher.SubAgentUsage.CostUSD, 0.009) || searcher.SubAgentUsage.APICallsMade != 2 {
		t.Errorf("searcher metrics %+v, sub-agent usage %+v", searcher.Metrics, searcher.SubAgentUsage)
	}
	if m := r.Metrics.SubAgentUsage; !near(m.CostUSD, 0.004+0.005+0.008) || m.APICallsMade != 3 {
		t.Errorf("run's sub-agent usage = %+v", m)
	}
	if !near(r.Metrics.TotalCostUSD, 0.036) {
		t.Errorf("run cost = %v, want 0.036", r.Metrics.TotalCostUSD)
	}
	if got := r.UsageBySubAgent.Keys(); len(got) != 2 || got[0] != "sa-lookup" || got[1] != "sa-deep" {
		t.Fatalf("usage_by_sub_agent keys = %v", got)
	}
	lookup, _ := r.UsageBySubAgent.Get("sa-lookup")
	if !near(lookup.CostUSD, 0.012) || lookup.APICallsMade != 2 || len(lookup.Teams) != 2 || lookup.Teams[1] != "writing" ||
		len(lookup.Callers) != 2 || lookup.Callers[0] != "w-searcher" || lookup.Callers[1] != "w-writer" {
		t.Errorf("sa-lookup = %+v", lookup)
	}
	if deep, _ := r.UsageBySubAgent.Get("sa-deep"); len(deep.Callers) != 1 || deep.Callers[0] != "sa-lookup" {
		t.Errorf("sa-deep = %+v", deep)
	}
	b, err := json.Marshal(r)
	if err != nil || !strings.Contains(string(b), `"usage_by_sub_agent":{"sa-lookup":{"tokens_used"`) {
		t.Errorf("JSON = %s, %v", b, err)
	}
}
