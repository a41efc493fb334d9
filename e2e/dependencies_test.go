package e2e

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/op-stack/executor/llm/llmfake"
	"github.com/op-stack/executor/models"
)

// diamondHierarchy: research first, then analysis and design (which need
// research) in parallel, then report (which needs both).
func diamondHierarchy(mode string) map[string]any {
	var teams []any
	for _, n := range []string{"report", "analysis", "design", "research"} {
		teams = append(teams, map[string]any{
			"name":                  n,
			"team_supervisor_agent": map[string]any{"agent_id": "ts-" + n, "system_prompt": "TS-" + strings.ToUpper(n)},
			"workers":               []any{map[string]any{"agent_id": "w-" + n, "name": n + "-worker", "system_prompt": "W-" + strings.ToUpper(n)}},
		})
	}
	return map[string]any{
		"name":                    "diamond",
		"execution_mode":          mode,
		"global_supervisor_agent": map[string]any{"agent_id": "gs-d", "system_prompt": "GS-DIAMOND"},
		"teams":                   teams,
		"dependencies":            map[string]any{"analysis": []string{"research"}, "design": []string{"research"}, "report": []string{"analysis", "design"}},
	}
}

func diamondRules() []llmfake.Rule {
	rules := []llmfake.Rule{{SystemContains: "GS-DIAMOND", Responses: contentResponses("the diamond's final answer")}}
	for _, n := range []string{"report", "analysis", "design", "research"} {
		rules = append(rules,
			llmfake.Rule{SystemContains: "TS-" + strings.ToUpper(n), Responses: contentResponses(decision("dispatch", n+"-worker", "work"), decision("finish", "", ""))},
			// Slow enough that two parallel teams visibly overlap.
			llmfake.Rule{SystemContains: "W-" + strings.ToUpper(n), Responses: []llmfake.Response{{Content: "output of " + n + " " + strings.Repeat(".", 40), TokenDelay: 10 * time.Millisecond}}},
		)
	}
	return rules
}

func TestDependenciesDiamondInParallel(t *testing.T) {
	e := newEnv(t, diamondRules())
	var created struct {
		ID    string   `json:"hierarchy_id"`
		Order []string `json:"execution_order"`
	}
	e.mustPost("/hierarchies/create", diamondHierarchy("parallel"), &created)
	if got := strings.Join(created.Order, ","); got != "research,analysis,design,report" {
		t.Errorf("execution_order = %s", got)
	}
	var id struct {
		ID string `json:"id"`
	}
	e.mustPost("/runs/start", map[string]any{"hierarchy_id": created.ID, "task": "diamond", "execution_config": map[string]any{"max_parallel_teams": 2}}, &id)
	msgs := e.streamAll(id.ID)
	checkLog(t, id.ID, msgs)
	v := e.waitRun(id.ID, 30*time.Second) // the status is written just after the last event
	if v.Status != models.RunCompleted {
		t.Fatalf("run ended %s: %s", v.Status, v.Error)
	}
	byName := map[string]models.TeamOutput{}
	for _, tm := range v.Result.Teams {
		byName[tm.TeamName] = tm
	}
	r, a, d, rep := byName["research"], byName["analysis"], byName["design"], byName["report"]
	for _, tm := range []models.TeamOutput{r, a, d, rep} {
		if tm.Status != models.TeamCompleted || tm.StartedAt == nil || tm.CompletedAt == nil {
			t.Fatalf("team = %+v", tm)
		}
	}
	// A valid order: research before the middle teams, which overlap, and
	// both before report.
	if a.StartedAt.Before(*r.CompletedAt) || d.StartedAt.Before(*r.CompletedAt) {
		t.Error("a middle team started before research completed")
	}
	if !a.StartedAt.Before(*d.CompletedAt) || !d.StartedAt.Before(*a.CompletedAt) {
		t.Errorf("analysis (%v–%v) and design (%v–%v) did not run in parallel", a.StartedAt, a.CompletedAt, d.StartedAt, d.CompletedAt)
	}
	if rep.StartedAt.Before(*a.CompletedAt) || rep.StartedAt.Before(*d.CompletedAt) {
		t.Error("report started before its dependencies completed")
	}
	// report's worker received its upstream teams' outputs.
	if w := callsMatching(e.fake.Calls(), "W-REPORT"); len(w) != 1 || !strings.Contains(lastUser(w[0]), "output of analysis") || !strings.Contains(lastUser(w[0]), "output of design") {
		t.Error("report's worker did not receive the upstream outputs")
	}
}

func TestDependenciesRejected(t *testing.T) {
	e := newEnv(t, nil)
	cases := map[string]map[string]any{
		"cycle":        {"research": []string{"report"}},
		"unknown team": {"report": []string{"marketing"}},
		"self":         {"design": []string{"design"}},
	}
	for name, deps := range cases {
		body := diamondHierarchy("sequential")
		for k, v := range deps {
			body["dependencies"].(map[string]any)[k] = v
		}
		status, env := e.post("/hierarchies/create", body)
		if status != http.StatusBadRequest || env.Code != 40001 || env.ErrorCode != "INVALID_DEPENDENCIES" {
			t.Errorf("%s: %d %+v", name, status, env)
		}
		for _, want := range map[string][]string{"cycle": {"research", "report"}, "unknown team": {"marketing"}, "self": {"design"}}[name] {
			if !strings.Contains(env.Message, want) {
				t.Errorf("%s: message %q does not name %s", name, env.Message, want)
			}
		}
	}
	// Dependencies may name teams by id as well as by name.
	body := diamondHierarchy("sequential")
	for i, tm := range body["teams"].([]any) {
		tm.(map[string]any)["id"] = fmt.Sprintf("team_%d", i)
	}
	body["dependencies"] = map[string]any{"team_0": []string{"analysis", "team_2"}, "analysis": []string{"team_3"}, "design": []string{"research"}}
	var created struct {
		Order []string `json:"execution_order"`
	}
	e.mustPost("/hierarchies/create", body, &created)
	if got := strings.Join(created.Order, ","); got != "research,analysis,design,report" {
		t.Errorf("execution_order by ids = %s", got)
	}
}

// TestRoutedParallelTeams runs the diamond in the default routed mode
// through spec 001's execute with execution_config.max_parallel_teams 2:
// the global supervisor dispatches analysis and design in one decision
// (its schema offers a "targets" list), they run at the same time, and
// report, which needs both, is offered and dispatched once both are done.
func TestRoutedParallelTeams(t *testing.T) {
	targets := func(names ...string) string {
		var items []string
		for _, n := range names {
			items = append(items, fmt.Sprintf(`{"target":%q,"instruction":"work on %s"}`, n, n))
		}
		return `{"action":"dispatch","targets":[` + strings.Join(items, ",") + `],"reason":"ready"}`
	}
	rules := append([]llmfake.Rule{{Name: "global decisions", SystemContains: "GS-DIAMOND", HasJSONSchema: true, Responses: contentResponses(
		targets("research"),
		targets("analysis", "design"),
		`{"action":"finish","targets":[],"reason":"wait for the other"}`,
		targets("report"),
		`{"action":"finish","targets":[],"reason":"done"}`,
	)}}, diamondRules()...)
	e := newEnv(t, rules)
	hid := e.createHierarchy(diamondHierarchy("sequential"))
	var started struct {
		ExecutionID string `json:"execution_id"`
	}
	e.mustV1("POST", "/hierarchical-teams/"+hid+"/execute", map[string]any{"task": "diamond", "execution_config": map[string]any{"max_parallel_teams": 2}}, "EXECUTION_STARTED", &started)
	v := e.waitRun(started.ExecutionID, time.Minute)
	if v.Status != models.RunCompleted {
		t.Fatalf("run ended %s: %s", v.Status, v.Error)
	}
	byName := map[string]models.TeamOutput{}
	for _, tm := range v.Result.Teams {
		byName[tm.TeamName] = tm
	}
	r, a, d, rep := byName["research"], byName["analysis"], byName["design"], byName["report"]
	for _, tm := range []models.TeamOutput{r, a, d, rep} {
		if tm.Status != models.TeamCompleted || tm.StartedAt == nil || tm.CompletedAt == nil {
			t.Fatalf("team = %+v (teams %+v)", tm, v.Result.Teams)
		}
	}
	if a.StartedAt.Before(*r.CompletedAt) || d.StartedAt.Before(*r.CompletedAt) {
		t.Error("a middle team started before research completed")
	}
	if !a.StartedAt.Before(*d.CompletedAt) || !d.StartedAt.Before(*a.CompletedAt) {
		t.Errorf("analysis (%v–%v) and design (%v–%v) did not run at the same time", a.StartedAt, a.CompletedAt, d.StartedAt, d.CompletedAt)
	}
	if rep.StartedAt.Before(*a.CompletedAt) || rep.StartedAt.Before(*d.CompletedAt) {
		t.Error("report started before its dependencies completed")
	}
	decisions := callsMatching(e.fake.Calls(), "GS-DIAMOND")
	// Each decision may dispatch as many teams as there are free places:
	// two (a "targets" list), except the third, with one team at work.
	var lists []bool
	for _, c := range decisions {
		if c.JSONSchemaName != "" {
			lists = append(lists, strings.Contains(string(c.JSONSchema), `"targets"`))
		}
	}
	if fmt.Sprint(lists) != "[true true false true true]" {
		t.Errorf("decisions offering a list of teams: %v", lists)
	}
	// The third decision, with one middle team still at work, is told so
	// and is not offered report.
	if len(decisions) > 2 {
		u := lastUser(decisions[2])
		if !strings.Contains(u, "At work now") || strings.Contains(u, "- report:") {
			t.Errorf("third decision's prompt: %s", u)
		}
	}
}
