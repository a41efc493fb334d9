package e2e

import (
	"net/http"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/op-stack/executor/llm/llmfake"
	"github.com/op-stack/executor/models"
)

// TestSteerCancelTeam cancels the research team over the real API while
// its analyst's long LLM call streams: the call is abandoned, the turn
// ends cancelled with the reason and the searcher's output kept, the
// global supervisor is told and routes on to writing, and the run
// completes. Cancelling a team that is not running, or not in the
// hierarchy, or of a finished run, is refused.
func TestSteerCancelTeam(t *testing.T) {
	e := newEnv(t, referenceRules(map[string][]llmfake.Response{
		// About 10 s of streaming, cut short by the cancellation.
		"W-ANALYST": {{Content: strings.Repeat("analysis ", 400), TokenDelay: 25 * time.Millisecond}},
	}))
	id := e.startRun(e.createHierarchy(referenceHierarchy()), "Explain quantum tunnelling")
	waitFor(t, 30*time.Second, "the analyst's call", func() bool { return len(callsMatching(e.fake.Calls(), "W-ANALYST")) > 0 })

	if status, env := e.post("/runs/teams/cancel", map[string]any{"id": id, "team_name": "writing"}); status != http.StatusConflict ||
		env.ErrorCode != models.CodeTeamNotRunning.Name || !strings.Contains(env.Message, `team "writing" is not running`) {
		t.Errorf("cancelling a team not started: %d %+v", status, env)
	}
	if status, env := e.post("/runs/teams/cancel", map[string]any{"id": id, "team_name": "nope"}); status != http.StatusBadRequest ||
		!strings.Contains(env.Message, `team "nope" is not in the run's hierarchy`) {
		t.Errorf("cancelling an unknown team: %d %+v", status, env)
	}
	var out struct {
		ID       string `json:"id"`
		TeamName string `json:"team_name"`
		Status   string `json:"status"`
	}
	cancelled := time.Now()
	e.mustPost("/runs/teams/cancel", map[string]any{"id": id, "team_name": "research", "reason": "enough sources"}, &out)
	if out.TeamName != "research" || out.Status != "cancelling" {
		t.Errorf("cancel answered %+v", out)
	}
	waitFor(t, 30*time.Second, "the writer's call", func() bool { return len(callsMatching(e.fake.Calls(), "W-WRITER")) > 0 })
	if d := time.Since(cancelled); d > 5*time.Second {
		t.Errorf("the writing team started %s after the cancellation: the analyst's call was not abandoned", d)
	}

	v := e.waitRun(id, time.Minute)
	if v.Status != models.RunCompleted || v.FinalAnswer != "FINAL ANSWER: tunnelling explained." {
		t.Fatalf("run ended %s (%s): %q", v.Status, v.Error, v.FinalAnswer)
	}
	if len(v.Result.Teams) != 2 {
		t.Fatalf("teams = %+v", v.Result.Teams)
	}
	r, w := v.Result.Teams[0], v.Result.Teams[1]
	if r.TeamName != "research" || r.Status != models.TeamCancelled || !strings.Contains(r.Error, "enough sources") ||
		!r.Partial || len(r.Workers) != 1 || r.Workers[0].Name != "searcher" {
		t.Errorf("research = %+v", r)
	}
	if w.TeamName != "writing" || w.Status != models.TeamCompleted {
		t.Errorf("writing = %+v", w)
	}
	// The global supervisor's decision after the cancellation was told.
	var told bool
	for _, c := range callsMatching(e.fake.Calls(), "GS-PROMPT") {
		u := lastUser(c)
		if strings.Contains(u, "Guidance from the operator:") && strings.Contains(u, `Team "research" was cancelled`) {
			told = true
		}
	}
	if !told {
		t.Error("no global supervisor prompt told of the cancellation")
	}
	var ev *models.Event
	for _, x := range e.storedEvents(id) {
		if x.Event.String() == "dispatch.team_cancelled" {
			ev = &x
		}
	}
	if ev == nil || ev.Source.AgentType != models.AgentTypeOperator || ev.Data["team_name"] != "research" || ev.Data["reason"] != "enough sources" {
		t.Errorf("dispatch.team_cancelled = %+v", ev)
	}

	if status, env := e.post("/runs/teams/cancel", map[string]any{"id": id, "team_name": "writing"}); status != http.StatusConflict ||
		env.ErrorCode != models.CodeExecutionFinished.Name {
		t.Errorf("cancelling a team of a completed run: %d %+v", status, env)
	}
}

// TestSteerRedirect redirects the analyst over the API and the writer with
// the temporal CLI while the searcher works: each one's next prompt has
// the guidance, the searcher's has none; dispatch.redirect records it; an
// unknown agent_id is a 400 naming it.
func TestSteerRedirect(t *testing.T) {
	e := newEnv(t, referenceRules(map[string][]llmfake.Response{
		"W-SEARCHER": {{Content: strings.Repeat("paper ", 60), TokenDelay: 25 * time.Millisecond}},
	}))
	id := e.startRun(e.createHierarchy(referenceHierarchy()), "Explain quantum tunnelling")
	waitFor(t, 30*time.Second, "the searcher's call", func() bool { return len(callsMatching(e.fake.Calls(), "W-SEARCHER")) > 0 })

	if status, env := e.post("/runs/redirect", map[string]any{"id": id, "agent_id": "w-nobody", "message": "x"}); status != http.StatusBadRequest ||
		!strings.Contains(env.Message, `agent_id "w-nobody"`) {
		t.Errorf("redirecting an unknown agent: %d %+v", status, env)
	}
	var out struct {
		AgentID string `json:"agent_id"`
		Status  string `json:"status"`
	}
	e.mustPost("/runs/redirect", map[string]any{"id": id, "agent_id": "w-analyst", "message": "MIND THE COSTS"}, &out)
	if out.AgentID != "w-analyst" || out.Status != "queued" {
		t.Errorf("redirect answered %+v", out)
	}
	cmd := exec.Command(temporalCLI, "workflow", "update", "execute", "--workflow-id", models.RunWorkflowID(id), "--name", models.UpdateRedirect,
		"--input", `{"agent_id":"w-writer","message":"CLI GUIDANCE","by":"cli-operator"}`, "--address", e.cfg.TemporalAddress)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("temporal workflow update execute --name redirect: %v\n%s", err, b)
	}

	v := e.waitRun(id, time.Minute)
	if v.Status != models.RunCompleted {
		t.Fatalf("run ended %s: %s", v.Status, v.Error)
	}
	for marker, want := range map[string]string{"W-ANALYST": "MIND THE COSTS", "W-WRITER": "CLI GUIDANCE", "W-SEARCHER": ""} {
		calls := callsMatching(e.fake.Calls(), marker)
		if len(calls) != 1 {
			t.Fatalf("%s: %d calls", marker, len(calls))
		}
		u := lastUser(calls[0])
		if has := strings.Contains(u, "Guidance from the operator:"); has != (want != "") || !strings.Contains(u, want) {
			t.Errorf("%s's prompt: %q", marker, u)
		}
	}
	var redirects []string
	for _, x := range e.storedEvents(id) {
		if x.Event.String() == "dispatch.redirect" {
			redirects = append(redirects, x.Source.AgentType+"→"+x.Data["agent_id"].(string))
			if x.Data["agent_id"] == "w-writer" && x.Source.AgentID != "cli-operator" {
				t.Errorf("the CLI's redirect came from %q", x.Source.AgentID)
			}
		}
	}
	if got := strings.Join(redirects, ","); got != "operator→w-analyst,operator→w-writer" {
		t.Errorf("dispatch.redirect events: %s", got)
	}
}
