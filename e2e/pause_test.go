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

// TestPauseAndResume pauses a run over the real API while the searcher's
// slow LLM call streams: the call finishes, no LLM call starts during the
// pause, the run shows paused on both surfaces and in runs/list, its log
// has lifecycle.paused and lifecycle.resumed, and once resumed (through
// spec 001, then the CLI for a second pause) it completes. Pausing it
// after the end is a conflict.
func TestPauseAndResume(t *testing.T) {
	e := newEnv(t, referenceRules(map[string][]llmfake.Response{
		// About 1.5 s of streaming: the pause lands while it is in flight.
		"W-SEARCHER": {{Content: strings.Repeat("paper ", 40), TokenDelay: 25 * time.Millisecond}},
		"W-WRITER":   {{Content: strings.Repeat("word ", 30), TokenDelay: 25 * time.Millisecond}},
	}))
	id := e.startRun(e.createHierarchy(referenceHierarchy()), "Explain quantum tunnelling")
	waitFor(t, 30*time.Second, "the searcher's call", func() bool { return len(callsMatching(e.fake.Calls(), "W-SEARCHER")) > 0 })

	var out struct {
		ID     string `json:"id"`
		Status string `json:"status"`
	}
	e.mustPost("/runs/pause", map[string]any{"id": id}, &out)
	if out.Status != models.RunPaused {
		t.Fatalf("pause answered %q", out.Status)
	}
	paused := len(e.fake.Calls())
	// Pausing again changes nothing.
	e.mustPost("/runs/pause", map[string]any{"id": id}, &out)
	if out.Status != models.RunPaused {
		t.Errorf("second pause answered %q", out.Status)
	}
	if v := e.getRun(id); v.Status != models.RunPaused {
		t.Errorf("runs/get while paused: %s", v.Status)
	}
	var ex struct {
		Status string `json:"status"`
	}
	e.mustV1("GET", "/executions/"+id, nil, "EXECUTION_INFO_RETRIEVED", &ex)
	if ex.Status != models.RunPaused {
		t.Errorf("spec 001 execution while paused: %s", ex.Status)
	}
	var list struct {
		Items []runView `json:"items"`
	}
	e.mustPost("/runs/list", map[string]any{"status": models.RunPaused}, &list)
	if len(list.Items) != 1 || list.Items[0].ID != id {
		t.Errorf("runs/list status=paused: %+v", list.Items)
	}
	// The RunStatus search attribute follows (visibility is eventually
	// consistent).
	waitFor(t, 10*time.Second, "RunStatus=\"paused\" in visibility", func() bool {
		return len(e.executions(`WorkflowId = '`+models.RunWorkflowID(id)+`' AND RunStatus = "paused"`)) == 1
	})
	// The searcher's call finishes (about 1.5 s); nothing starts after it.
	time.Sleep(3 * time.Second)
	if calls := e.fake.Calls(); len(calls) != paused {
		t.Fatalf("%d LLM calls started during the pause (had %d): last %s", len(calls)-paused, paused, calls[len(calls)-1].RuleName)
	}
	if v := e.getRun(id); v.Status != models.RunPaused {
		t.Errorf("runs/get after the in-flight call ended: %s", v.Status)
	}

	var resumed struct {
		ExecutionID string `json:"execution_id"`
		Status      string `json:"status"`
	}
	e.mustV1("POST", "/executions/"+id+"/resume", nil, "EXECUTION_RESUMED", &resumed)
	if resumed.Status != models.RunRunning || resumed.ExecutionID != id {
		t.Errorf("resume answered %+v", resumed)
	}

	// A second pause through the CLI, as a signal, while the writer works.
	waitFor(t, 30*time.Second, "the writer's call", func() bool { return len(callsMatching(e.fake.Calls(), "W-WRITER")) > 0 })
	signal := func(name string) {
		cmd := exec.Command(temporalCLI, "workflow", "signal", "--workflow-id", models.RunWorkflowID(id), "--name", name, "--address", e.cfg.TemporalAddress)
		if b, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("temporal workflow signal --name %s: %v\n%s", name, err, b)
		}
	}
	signal("pause")
	waitFor(t, 10*time.Second, "the signalled pause", func() bool { return e.getRun(id).Status == models.RunPaused })
	paused = len(e.fake.Calls())
	time.Sleep(2 * time.Second)
	if calls := e.fake.Calls(); len(calls) != paused {
		t.Fatalf("%d LLM calls started during the signalled pause", len(calls)-paused)
	}
	signal("resume")

	v := e.waitRun(id, time.Minute)
	if v.Status != models.RunCompleted || v.FinalAnswer != "FINAL ANSWER: tunnelling explained." {
		t.Fatalf("run ended %s (%s): %q", v.Status, v.Error, v.FinalAnswer)
	}
	if n := len(e.fake.Calls()); n != 11 {
		t.Errorf("fake saw %d calls, want 11", n)
	}
	var lifecycle []string
	for _, ev := range e.storedEvents(id) {
		if ev.Event.Category == models.CategoryLifecycle {
			lifecycle = append(lifecycle, ev.Event.Action)
		}
	}
	if got := strings.Join(lifecycle, ","); got != "started,paused,resumed,paused,resumed,completed" {
		t.Errorf("lifecycle events = %s", got)
	}

	status, env := e.post("/runs/pause", map[string]any{"id": id})
	if status != http.StatusConflict || env.ErrorCode != models.CodeExecutionFinished.Name {
		t.Errorf("pausing a completed run: %d %+v", status, env)
	}
	if status, env := e.doV1("POST", "/executions/"+id+"/pause", nil); status != http.StatusConflict || env.Success {
		t.Errorf("spec 001 pause of a completed run: %d %+v", status, env)
	}
}
