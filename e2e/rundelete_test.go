package e2e

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"

	"github.com/op-stack/executor/app"
	"github.com/op-stack/executor/config"
	"github.com/op-stack/executor/llm/llmfake"
	"github.com/op-stack/executor/models"
)

// deleteRules are followRules with a slow worker for the hierarchy whose
// worker says W-SLOW, so a run of it stays live for seconds.
func deleteRules() []llmfake.Rule {
	slow := llmfake.Rule{Name: "slow worker", SystemContains: "W-SLOW", Responses: []llmfake.Response{
		{Content: strings.Repeat("slow ", 8), ChunkSize: 2, TokenDelay: 300 * time.Millisecond}}}
	return append([]llmfake.Rule{slow}, followRules()...)
}

// slowHierarchy is followHierarchy whose worker answers slowly.
func slowHierarchy() map[string]any {
	h := followHierarchy("slow")
	team := h["teams"].([]any)[0].(map[string]any)
	team["workers"] = []any{map[string]any{"agent_id": "w-slow", "name": "writer", "system_prompt": "W-FOLLOW W-SLOW You write."}}
	return h
}

// storedRows counts what the store holds of run key: the run, its
// events (its last sequence), LLM calls and messages.
func (e *testEnv) storedRows(key string) map[string]int64 {
	e.t.Helper()
	ctx := context.Background()
	out := map[string]int64{}
	if _, err := e.store.GetRun(ctx, key); err == nil {
		out["execution"] = 1
	} else if models.ErrorCode(err) != models.CodeExecutionNotFound {
		e.t.Fatal(err)
	}
	last, err := e.store.LastEventSequence(ctx, key)
	if err != nil {
		e.t.Fatal(err)
	}
	calls, err := e.store.LLMCalls(ctx, key)
	if err != nil {
		e.t.Fatal(err)
	}
	msgs, err := e.store.MessageTree(ctx, key)
	if err != nil {
		e.t.Fatal(err)
	}
	out["execution_event"], out["llm_call"], out["message"] = last, int64(len(calls)), int64(len(msgs))
	return out
}

// runWorkflows lists the workflow ids of run id's workflow and children
// that Temporal's visibility knows.
func (e *testEnv) runWorkflows(id string) []string {
	e.t.Helper()
	resp, err := e.temporal.ListWorkflow(context.Background(), &workflowservice.ListWorkflowExecutionsRequest{
		Namespace: e.cfg.TemporalNamespace, Query: fmt.Sprintf("WorkflowId STARTS_WITH %q", models.RunWorkflowID(id)),
	})
	if err != nil {
		e.t.Fatal(err)
	}
	var out []string
	for _, x := range resp.GetExecutions() {
		out = append(out, x.GetExecution().GetWorkflowId())
	}
	return out
}

// workflowsGone tells whether Temporal no longer knows any of ids.
func (e *testEnv) workflowsGone(ids []string) bool {
	for _, id := range ids {
		_, err := e.temporal.DescribeWorkflowExecution(context.Background(), id, "")
		var notFound *serviceerror.NotFound
		if !errors.As(err, &notFound) {
			return false
		}
	}
	return true
}

// TestRunDeleteEndToEnd: a finished run deleted with runs/delete is gone:
// runs/get and runs/events answer 404, its rows are gone from the
// database and its workflow histories from Temporal; a live run is refused with 409 and runs on to completion.
func TestRunDeleteEndToEnd(t *testing.T) {
	e := newEnv(t, deleteRules())
	h := e.createHierarchy(followHierarchy("delete"))
	id := e.startRun(h, "FIRST TASK")
	if v := e.waitRun(id, time.Minute); v.Status != models.RunCompleted {
		t.Fatalf("run %s: %s %s", id, v.Status, v.Error)
	}
	before := e.storedRows(id)
	if before["execution_event"] == 0 || before["llm_call"] == 0 || before["message"] == 0 {
		t.Fatalf("the finished run stored %v", before)
	}
	// The run's workflow (and any children: team turns run as children
	// only in some modes) is in visibility.
	var workflows []string
	waitFor(t, 20*time.Second, "the run's workflow in visibility", func() bool {
		workflows = e.runWorkflows(id)
		return slices.Contains(workflows, models.RunWorkflowID(id))
	})

	live := e.startRun(e.createHierarchy(slowHierarchy()), "SLOW TASK")
	if status, env := e.post("/runs/delete", map[string]any{"id": live}); status != http.StatusConflict || env.ErrorCode != models.CodeExecutionInProgress.Name {
		t.Errorf("live run: %d %+v", status, env)
	}

	var got struct {
		ID      string `json:"id"`
		Deleted bool   `json:"deleted"`
	}
	e.mustPost("/runs/delete", map[string]any{"id": id}, &got)
	if got.ID != id || !got.Deleted {
		t.Errorf("answer %+v", got)
	}
	for _, path := range []string{"/runs/get", "/runs/events", "/runs/delete"} {
		if status, env := e.post(path, map[string]any{"id": id}); status != http.StatusNotFound || env.ErrorCode != models.CodeExecutionNotFound.Name {
			t.Errorf("%s after delete: %d %+v", path, status, env)
		}
	}
	for table, n := range e.storedRows(id) {
		if n != 0 {
			t.Errorf("%s: %d rows left", table, n)
		}
	}
	// Temporal deletes a closed execution's history some seconds later.
	waitFor(t, 90*time.Second, "the run's workflows deleted from Temporal", func() bool { return e.workflowsGone(workflows) })
	if v := e.waitRun(live, time.Minute); v.Status != models.RunCompleted {
		t.Errorf("live run ended %s %s", v.Status, v.Error)
	}
}

// TestRetentionEndToEnd: with RUN_RETENTION a millisecond, the workers'
// sweep (app.SweepRetention, as `executor serve` runs it) deletes a
// finished run, its rows and its workflow history, while a live run is untouched
// and completes.
func TestRetentionEndToEnd(t *testing.T) {
	e := newEnv(t, deleteRules(), withConfig(func(c *config.Config) {
		c.RunRetention = time.Millisecond
		c.RunRetentionInterval = 200 * time.Millisecond
	}))
	done := e.startRun(e.createHierarchy(followHierarchy("retention")), "FIRST TASK")
	if v := e.waitRun(done, time.Minute); v.Status != models.RunCompleted {
		t.Fatalf("run %s: %s %s", done, v.Status, v.Error)
	}
	live := e.startRun(e.createHierarchy(slowHierarchy()), "SLOW TASK")
	waitFor(t, 20*time.Second, "the slow run running", func() bool { return e.getRun(live).Status == models.RunRunning })

	ctx, stop := context.WithCancel(context.Background())
	swept := make(chan struct{})
	go func() { defer close(swept); app.SweepRetention(ctx, e.cfg, e.log, e.store, e.temporal) }()
	waitFor(t, 20*time.Second, "the finished run swept", func() bool {
		status, _ := e.post("/runs/get", map[string]any{"id": done})
		return status == http.StatusNotFound
	})
	if v := e.getRun(live); models.IsTerminal(v.Status) {
		t.Fatalf("the live run ended before the check: %s", v.Status)
	}
	stop()
	<-swept
	for table, n := range e.storedRows(done) {
		if n != 0 {
			t.Errorf("%s: %d rows of the swept run left", table, n)
		}
	}
	waitFor(t, 90*time.Second, "the swept run's workflow deleted from Temporal", func() bool {
		return e.workflowsGone([]string{models.RunWorkflowID(done)})
	})
	v := e.waitRun(live, time.Minute)
	if v.Status != models.RunCompleted {
		t.Errorf("live run ended %s %s", v.Status, v.Error)
	}
	if rows := e.storedRows(live); rows["execution_event"] == 0 || rows["llm_call"] == 0 {
		t.Errorf("the live run lost rows: %v", rows)
	}
}
