package e2e

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/op-stack/executor/llm/llmfake"
	"github.com/op-stack/executor/models"
)

// TestTerminate: `temporal workflow terminate` skips the workflow's own
// cleanup; the run still ends failed in the database, with the reason, and
// its stream ends with lifecycle.failed after the events it had. That event
// comes from "system" (the API wrote it: no agent decided the failure), and
// the API counts the run in executor_runs_finished_total once, since no
// worker wrote its end.
func TestTerminate(t *testing.T) {
	reg := prometheus.NewRegistry()
	e := newEnv(t, referenceRules(map[string][]llmfake.Response{"W-SEARCHER": {{Hang: true}}}), withAPIMetrics(reg))
	id := e.startRun(e.createHierarchy(referenceHierarchy()), "to be terminated")
	waitFor(t, 30*time.Second, "the searcher's call", func() bool { return len(callsMatching(e.fake.Calls(), "W-SEARCHER")) > 0 })
	streamed := make(chan []sseMessage, 1)
	go func() {
		msgs, _ := e.readStream(e.openStream(id, 0, false), nil)
		streamed <- msgs
	}()
	out, err := exec.Command(temporalCLI, "workflow", "terminate", "--workflow-id", models.RunWorkflowID(id),
		"--reason", "operator stop", "--address", e.cfg.TemporalAddress).CombinedOutput()
	if err != nil {
		t.Fatalf("temporal workflow terminate: %v\n%s", err, out)
	}
	v := e.waitRun(id, 30*time.Second)
	if v.Status != models.RunFailed || !strings.Contains(v.Error, "terminated: operator stop") {
		t.Fatalf("run = %s %q", v.Status, v.Error)
	}
	select {
	case msgs := <-streamed:
		checkLog(t, id, msgs)
		last := msgs[len(msgs)-1]
		if last.Type != "lifecycle.failed" || !strings.Contains(last.Event.Data["error"].(string), "operator stop") {
			t.Errorf("stream ended with %s %+v", last.Type, last.Event.Data)
		}
		if last.Event.Source.AgentType != models.AgentTypeSystem || last.Event.Source.AgentID != "system" {
			t.Errorf("lifecycle.failed of a terminated run from %+v, want system", last.Event.Source)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the stream did not end after the termination")
	}
	// A replay of the whole stream from the database shows the same end.
	again := e.streamAll(id)
	checkLog(t, id, again)

	// Counted once, however often the run is read (each read reconciles).
	e.getRun(id)
	resp, err := http.Get(e.rootURL() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	metrics, _ := io.ReadAll(resp.Body)
	if !strings.Contains(string(metrics), `executor_runs_finished_total{status="failed"} 1`+"\n") {
		t.Errorf("/metrics does not count the terminated run once:\n%s", grepLines(string(metrics), "executor_runs_finished"))
	}
}

// grepLines are the lines of s that contain sub.
func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// TestSearchAttributes: runs are found by hierarchy id and status with the
// temporal CLI, as in the Web UI.
func TestSearchAttributes(t *testing.T) {
	e := newEnv(t, referenceRules(nil))
	hid := e.createHierarchy(referenceHierarchy())
	id := e.startRun(hid, "find me")
	e.waitRun(id, time.Minute)
	var found []map[string]any
	waitFor(t, 30*time.Second, "the run in the visibility store", func() bool {
		out, err := exec.Command(temporalCLI, "workflow", "list", "--query", `HierarchyId="`+hid+`" AND RunStatus="completed"`,
			"--address", e.cfg.TemporalAddress, "--output", "json").Output()
		if err != nil {
			return false
		}
		found = nil
		return json.Unmarshal(out, &found) == nil && len(found) == 1
	})
	raw, _ := json.Marshal(found[0])
	if !strings.Contains(string(raw), models.RunWorkflowID(id)) {
		t.Errorf("listed %s", raw)
	}
}

// TestTerminatedRunIsReconciledWithoutAReader: nobody reads the run after
// its workflow is terminated; the API's background reconciliation still
// marks it failed in the database (runs/list no longer shows it running).
func TestTerminatedRunIsReconciledWithoutAReader(t *testing.T) {
	e := newEnv(t, referenceRules(map[string][]llmfake.Response{"W-SEARCHER": {{Hang: true}}}))
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go e.api.ReconcileEvery(ctx, 500*time.Millisecond)
	id := e.startRun(e.createHierarchy(referenceHierarchy()), "to be terminated, unread")
	waitFor(t, 30*time.Second, "the searcher's call", func() bool { return len(callsMatching(e.fake.Calls(), "W-SEARCHER")) > 0 })
	if err := e.temporal.TerminateWorkflow(ctx, models.RunWorkflowID(id), "", "operator stop"); err != nil {
		t.Fatal(err)
	}
	// Read the database directly: a read through the API would reconcile
	// the run itself.
	waitFor(t, 30*time.Second, "the stored run to be failed", func() bool {
		run, err := e.store.GetRun(ctx, id)
		return err == nil && run.Status == models.RunFailed && strings.Contains(run.Error, "operator stop")
	})
}
