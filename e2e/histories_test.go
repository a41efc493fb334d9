package e2e

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/op-stack/executor/config"
	"github.com/op-stack/executor/llm/llmfake"
	"github.com/op-stack/executor/models"
)

// TestRecordReplayHistories records the histories that workflows/replay_test
// replays, from representative runs against the dev server, exported the
// way an operator exports them (`temporal workflow show -o json`). It only
// runs when asked:
//
//	RECORD_HISTORIES=1 go test ./e2e/ -run TestRecordReplayHistories
//
// After a deliberate, versioned workflow change, record a new set beside
// the old ones with a suffix (RECORD_HISTORIES=<suffix>, e.g. "inline"
// writes testdata/sequential-inline/...): the old set keeps proving that
// runs started before the change still replay. RECORD_HISTORIES=1
// re-records the unsuffixed set. Never re-record to make a failing replay
// pass.
func TestRecordReplayHistories(t *testing.T) {
	tag := os.Getenv("RECORD_HISTORIES")
	if tag == "" {
		t.Skip("set RECORD_HISTORIES=1 (or a suffix) to record workflows/testdata histories")
	}
	suffix := ""
	if tag != "1" {
		suffix = "-" + tag
	}
	testdata := filepath.Join("..", "workflows", "testdata")
	dir := func(kind string) string { return filepath.Join(testdata, kind+suffix) }

	t.Run("sequential", func(t *testing.T) {
		e := newEnv(t, referenceRules(nil))
		id := e.startRun(e.createHierarchy(referenceHierarchy()), "record sequential")
		e.waitRun(id, time.Minute)
		e.exportRun(t, id, dir("sequential"))
	})
	t.Run("failed", func(t *testing.T) {
		e := newEnv(t, referenceRules(map[string][]llmfake.Response{"W-WRITER": {{Status: 401}}}))
		id := e.startRun(e.createHierarchy(referenceHierarchy()), "record failure")
		e.waitRun(id, time.Minute)
		e.exportRun(t, id, dir("failed"))
	})
	t.Run("cancelled", func(t *testing.T) {
		e := newEnv(t, referenceRules(map[string][]llmfake.Response{"W-SEARCHER": {{Hang: true}}}))
		id := e.startRun(e.createHierarchy(referenceHierarchy()), "record cancel")
		waitFor(t, 30*time.Second, "the searcher's call", func() bool { return len(callsMatching(e.fake.Calls(), "W-SEARCHER")) > 0 })
		e.mustPost("/runs/cancel", map[string]any{"id": id}, nil)
		e.waitRun(id, time.Minute)
		e.exportRun(t, id, dir("cancelled"))
	})
	t.Run("parallel", func(t *testing.T) {
		e := newEnv(t, diamondRules())
		id := e.startRun(e.createHierarchy(diamondHierarchy("parallel")), "record parallel")
		e.waitRun(id, time.Minute)
		e.exportRun(t, id, dir("parallel"))
	})
	t.Run("tools", func(t *testing.T) {
		e, id := startToolsRun(t)
		e.waitRun(id, time.Minute)
		e.exportRun(t, id, dir("tools"))
	})
	t.Run("paused", func(t *testing.T) {
		e := newEnv(t, referenceRules(map[string][]llmfake.Response{"W-SEARCHER": {{Content: strings.Repeat("paper ", 20), TokenDelay: 20 * time.Millisecond}}}))
		id := e.startRun(e.createHierarchy(referenceHierarchy()), "record pause")
		waitFor(t, 30*time.Second, "the searcher's call", func() bool { return len(callsMatching(e.fake.Calls(), "W-SEARCHER")) > 0 })
		e.mustPost("/runs/pause", map[string]any{"id": id}, nil)
		time.Sleep(time.Second)
		e.mustPost("/runs/resume", map[string]any{"id": id}, nil)
		e.waitRun(id, time.Minute)
		e.exportRun(t, id, dir("paused"))
	})
	t.Run("reassigned", func(t *testing.T) {
		// The research supervisor's model failing for good: its stand-in,
		// the global supervisor's model, routes the turn (change
		// supervisor-stand-in).
		e := newEnv(t, standInRules(), withConfig(standInConfig))
		id := e.startRun(e.createHierarchy(standInHierarchy()), "record reassigned")
		e.waitRun(id, time.Minute)
		e.exportRun(t, id, dir("reassigned"))
	})
	t.Run("routed", func(t *testing.T) {
		rules := append([]llmfake.Rule{{SystemContains: "GS-DIAMOND", HasJSONSchema: true, Responses: contentResponses(
			`{"action":"dispatch","targets":[{"target":"research","instruction":"r"}],"reason":"first"}`,
			`{"action":"dispatch","targets":[{"target":"analysis","instruction":"a"},{"target":"design","instruction":"d"}],"reason":"both"}`,
			`{"action":"finish","targets":[],"reason":"wait"}`,
			`{"action":"dispatch","targets":[{"target":"report","instruction":"rep"}],"reason":"last"}`,
			`{"action":"finish","targets":[],"reason":"done"}`)}}, diamondRules()...)
		e := newEnv(t, rules)
		var out struct {
			ID string `json:"id"`
		}
		e.mustPost("/runs/start", map[string]any{"hierarchy_id": e.createHierarchy(diamondHierarchy("sequential")), "task": "record routed", "execution_config": map[string]any{"max_parallel_teams": 2}}, &out)
		e.waitRun(out.ID, time.Minute)
		e.exportRun(t, out.ID, dir("routed"))
	})
	t.Run("continued", func(t *testing.T) {
		// Continue-as-new inside the research turn.
		e := newEnv(t, referenceRules(nil), withConfig(func(c *config.Config) { c.ContinueAsNewAfter = 40 }))
		id := e.startRun(e.createHierarchy(referenceHierarchy()), "record continue-as-new")
		e.waitRun(id, time.Minute)
		e.exportRun(t, id, dir("continued"))
	})
	t.Run("teamcancelled", func(t *testing.T) {
		// Steering: the writer redirected and the research team cancelled
		// while its analyst streams; the run completes without it.
		e := newEnv(t, referenceRules(map[string][]llmfake.Response{"W-ANALYST": {{Content: strings.Repeat("analysis ", 400), TokenDelay: 25 * time.Millisecond}}}))
		id := e.startRun(e.createHierarchy(referenceHierarchy()), "record team cancel")
		waitFor(t, 30*time.Second, "the analyst's call", func() bool { return len(callsMatching(e.fake.Calls(), "W-ANALYST")) > 0 })
		e.mustPost("/runs/redirect", map[string]any{"id": id, "agent_id": "w-writer", "message": "be brief"}, nil)
		e.mustPost("/runs/teams/cancel", map[string]any{"id": id, "team_name": "research", "reason": "enough"}, nil)
		e.waitRun(id, time.Minute)
		e.exportRun(t, id, dir("teamcancelled"))
	})
	t.Run("followup", func(t *testing.T) {
		// A follow-up run (previous_run_id): its input carries the
		// previous run's context.
		e := newEnv(t, followRules())
		hid := e.createHierarchy(followHierarchy("followup"))
		first := e.startRun(hid, "record the first run")
		e.waitRun(first, time.Minute)
		var out struct {
			ID string `json:"id"`
		}
		e.mustPost("/runs/start", map[string]any{"hierarchy_id": hid, "task": "SECOND TASK: record a follow-up", "previous_run_id": first}, &out)
		e.waitRun(out.ID, time.Minute)
		e.exportRun(t, out.ID, dir("followup"))
	})
	t.Run("queued", func(t *testing.T) {
		// A follow-up queued behind its thread's run at work (issue 26,
		// changeAdmissionQueue): lifecycle.queued, the admission check
		// (its previous run's context read then) and the admit signal.
		e := newEnv(t, followRules())
		hid := e.createHierarchy(followHierarchy("queued"))
		first := e.startRun(hid, "record the first run")
		var out struct {
			ID     string `json:"id"`
			Status string `json:"status"`
		}
		e.mustPost("/runs/start", map[string]any{"hierarchy_id": hid, "task": "SECOND TASK: record a queued follow-up", "previous_run_id": first}, &out)
		if out.Status != models.RunQueued {
			t.Fatalf("follow-up answered %s, want queued", out.Status)
		}
		e.waitRun(first, time.Minute)
		e.waitRun(out.ID, time.Minute)
		e.exportRun(t, out.ID, dir("queued"))
	})
	t.Run("scheduled", func(t *testing.T) {
		// A schedule's action (issue 26): the scheduled start, whose
		// child is the run.
		e := newEnv(t, accessRules())
		sc := e.createSchedule(map[string]any{"hierarchy_id": e.createHierarchy(accessHierarchy("scheduled")), "task": "record a scheduled run", "cron": []string{"0 0 1 1 *"}, "paused": true})
		t.Cleanup(func() { e.post("/schedules/delete", map[string]any{"id": sc.ID}) })
		e.mustPost("/schedules/trigger", map[string]any{"id": sc.ID}, nil)
		waitFor(t, time.Minute, "the scheduled run", func() bool { return countStatus(e.scheduleRuns(sc.ID), models.RunCompleted) == 1 })
		run := e.scheduleRuns(sc.ID)[0]
		e.exportRun(t, run.ID, dir("scheduled"))
		var parent string
		waitFor(t, 30*time.Second, "the scheduled start to close", func() bool {
			desc, err := e.temporal.DescribeWorkflowExecution(context.Background(), run.WorkflowID, "")
			if err != nil {
				t.Fatal(err)
			}
			parent = desc.GetWorkflowExecutionInfo().GetParentExecution().GetWorkflowId()
			p, err := e.temporal.DescribeWorkflowExecution(context.Background(), parent, "")
			return err == nil && p.GetWorkflowExecutionInfo().GetCloseTime() != nil
		})
		out, err := exec.Command(temporalCLI, "workflow", "show", "--workflow-id", parent, "--address", e.cfg.TemporalAddress, "--output", "json").Output()
		if err != nil {
			t.Fatalf("temporal workflow show %s: %v", parent, err)
		}
		if err := os.WriteFile(filepath.Join(dir("scheduled"), "scheduled-start.json"), out, 0o644); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("approvals", func(t *testing.T) {
		// The analyst's turn approved with an edited instruction, the
		// writer's rejected.
		e := newEnv(t, referenceRules(nil))
		id := e.startRun(e.createHierarchy(approvalHierarchy()), "record approvals")
		analyst := e.waitApproval(id, "w-analyst")
		e.mustPost("/runs/approve", map[string]any{"id": id, "approval_id": analyst.ApprovalID, "instruction": "analyse them briefly"}, nil)
		writer := e.waitApproval(id, "w-writer")
		e.mustPost("/runs/reject", map[string]any{"id": id, "approval_id": writer.ApprovalID, "comment": "not needed"}, nil)
		e.waitRun(id, time.Minute)
		e.exportRun(t, id, dir("approvals"))
	})
	t.Run("budgeted", func(t *testing.T) {
		// A token budget spent by the research turn, counting two failed
		// sub-agents (changes budgets and failed-sub-agent-usage); record
		// it alone with -run 'TestRecordReplayHistories/budgeted'.
		e, id := startBudgetedRun(t)
		e.waitRun(id, time.Minute)
		e.exportRun(t, id, dir("budgeted"))
	})
	t.Run("agentbudgetfail", func(t *testing.T) {
		// An agent's budget spent under on_exceeded "fail" fails the run
		// (change scoped-budget-fail); record it alone with
		// -run 'TestRecordReplayHistories/agentbudgetfail'.
		e, id := startAgentFailRun(t)
		e.waitRun(id, time.Minute)
		e.exportRun(t, id, dir("agentbudgetfail"))
	})
	t.Run("forked", func(t *testing.T) {
		// A fork (runs/fork) after the first research turn, forced to
		// writing: its input carries the seed (RunInput.Fork).
		e := newEnv(t, forkRules())
		orig := e.startRun(e.createHierarchy(referenceHierarchy()), "record a fork's original")
		e.waitRun(orig, time.Minute)
		var after int64
		for _, p := range e.forkPointsOf(orig) {
			if p.Kind == models.ForkAtTeamFinished && p.Turn == 1 {
				after = p.Sequence
			}
		}
		var fork forkAnswer
		e.mustPost("/runs/fork", map[string]any{"id": orig, "after_sequence": after, "changes": map[string]any{"next_team": "writing"}}, &fork)
		e.waitRun(fork.ID, time.Minute)
		e.exportRun(t, fork.ID, dir("forked"))
	})
	t.Run("streamed", func(t *testing.T) {
		// Workers streaming for a second each, with a stream reader: their
		// batches come as event updates (models.UpdateEvents); record it
		// alone with -run 'TestRecordReplayHistories/streamed'.
		e := newEnv(t, streamingRules())
		id := e.startRun(e.createHierarchy(referenceHierarchy()), "record streamed")
		e.readStream(e.openStream(id, 0, false), nil)
		e.waitRun(id, time.Minute)
		e.exportRun(t, id, dir("streamed"))
	})
	t.Run("mcp", func(t *testing.T) {
		// A worker calls two tools of an MCP server (a Go SDK server of
		// the test); record it alone with -run 'TestRecordReplayHistories/mcp$'.
		g := startGatedServer(t)
		e := newEnv(t, mcpToolRules(toolCall("mcp_gated__peek", `{}`), toolCall("mcp_gated__wipe", `{"path":"/tmp/a"}`)),
			withConfig(func(c *config.Config) { c.MCPAllowPrivate = true }))
		e.mustPost("/mcp-servers/create", map[string]any{"name": "gated", "url": g.url}, nil)
		id := e.startRun(e.createHierarchy(searcherWith([]string{"mcp:gated/*"}, nil)), "record mcp")
		if v := e.waitRun(id, time.Minute); v.Status != models.RunCompleted || g.peeks.Load() != 1 || g.wipes.Load() != 1 {
			t.Fatalf("run %s, peeks %d, wipes %d", v.Status, g.peeks.Load(), g.wipes.Load())
		}
		e.exportRun(t, id, dir("mcp"))
	})
	t.Run("mcpapproval", func(t *testing.T) {
		// Two calls of a destructive MCP tool on a server whose approval
		// is "destructive" (change mcp-approval-gates): the first approved
		// with edited arguments, the second rejected; record it alone with
		// -run 'TestRecordReplayHistories/mcpapproval$'.
		g := startGatedServer(t)
		e := newEnv(t, mcpToolRules(toolCall("mcp_gated__wipe", `{"path":"/tmp/a"}`), toolCall("mcp_gated__wipe", `{"path":"/tmp/b"}`)),
			withConfig(func(c *config.Config) { c.MCPAllowPrivate = true }))
		e.mustPost("/mcp-servers/create", map[string]any{"name": "gated", "url": g.url, "approval": "destructive"}, nil)
		id := e.startRun(e.createHierarchy(searcherWith([]string{"mcp:gated/*"}, nil)), "record mcp approval")
		first := e.waitApproval(id, "w-searcher")
		e.mustPost("/runs/approve", map[string]any{"id": id, "approval_id": first.ApprovalID, "arguments": map[string]any{"path": "/tmp/c"}}, nil)
		var second models.Approval
		waitFor(t, 30*time.Second, "the second gate", func() bool {
			for _, ap := range e.pendingApprovals(id) {
				if ap.ApprovalID != first.ApprovalID {
					second = ap
					return true
				}
			}
			return false
		})
		e.mustPost("/runs/reject", map[string]any{"id": id, "approval_id": second.ApprovalID, "comment": "one is enough"}, nil)
		if v := e.waitRun(id, time.Minute); v.Status != models.RunCompleted || strings.Join(g.paths(), ",") != "/tmp/c" {
			t.Fatalf("run %s, wiped %v", v.Status, g.paths())
		}
		e.exportRun(t, id, dir("mcpapproval"))
	})
	t.Run("a2a", func(t *testing.T) {
		// The searcher is a remote A2A agent on the real @a2a-js/sdk
		// server (change a2a-workers), whose first JSON-RPC request is
		// answered 503, so the CallA2A activity is retried; record it
		// alone with -run 'TestRecordReplayHistories/a2a$'.
		agent := startA2AAgent(t, "FAIL_FIRST=1")
		e := newEnv(t, referenceRules(nil), withConfig(allowA2APrivate))
		id := e.startRun(e.createHierarchy(remoteSearcher(agent.cardURL)), "record a2a")
		if v := e.waitRun(id, time.Minute); v.Status != models.RunCompleted || len(agent.saw("UNAVAILABLE ")) != 1 {
			t.Fatalf("run %s, 503s %v", v.Status, agent.saw("UNAVAILABLE "))
		}
		e.exportRun(t, id, dir("a2a"))
	})
	t.Run("webhook", func(t *testing.T) {
		// A webhook delivery workflow (issue 26): two events of a run, the
		// first refused once by the receiver, then the idle wait and the
		// end. Written as webhook<suffix>/delivery.json.
		e := newEnv(t, referenceRules(nil), withConfig(func(c *config.Config) {
			c.MCPSecretKey, c.WebhooksAllowPrivate, c.WebhookRetryMaxInterval = webhookSecretKey(t), true, time.Second
		}))
		var mu sync.Mutex
		refused := false
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			mu.Lock()
			defer mu.Unlock()
			if !refused {
				refused = true
				w.WriteHeader(http.StatusServiceUnavailable)
				return
			}
			w.WriteHeader(http.StatusNoContent)
		}))
		t.Cleanup(srv.Close)
		ep := e.createWebhook(srv.URL, models.WebhookRunStarted, models.WebhookRunCompleted)
		id := e.startRun(e.createHierarchy(referenceHierarchy()), "record webhook")
		e.waitRun(id, time.Minute)
		wid := models.WebhookWorkflowID(ep.ID, id)
		// The workflow ends after its idle wait (30 s) with nothing to send.
		if err := e.temporal.GetWorkflow(context.Background(), wid, "").Get(context.Background(), nil); err != nil {
			t.Fatal(err)
		}
		out, err := exec.Command(temporalCLI, "workflow", "show", "--workflow-id", wid, "--address", e.cfg.TemporalAddress, "--output", "json").Output()
		if err != nil {
			t.Fatalf("temporal workflow show %s: %v", wid, err)
		}
		if ds := e.webhookDeliveries(map[string]any{"run_id": id, "status": "delivered"}); len(ds) != 2 {
			t.Fatalf("deliveries = %+v", ds)
		}
		if err := os.MkdirAll(dir("webhook"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir("webhook"), "delivery.json"), out, 0o644); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("retry", func(t *testing.T) {
		full := strings.Repeat("complete ", 20)
		e := newEnv(t, referenceRules(map[string][]llmfake.Response{"W-WRITER": {{Content: full, DropAfterChunks: 6}, {Content: full}}}))
		id := e.startRun(e.createHierarchy(referenceHierarchy()), "record retry")
		e.waitRun(id, time.Minute)
		e.exportRun(t, id, dir("retry"))
	})
}

// exportRun writes the history of every workflow of a run (the run, its
// team turns, their sub-agents) into dir, one file per workflow.
func (e *testEnv) exportRun(t *testing.T, runID, dir string) {
	t.Helper()
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	resp, err := e.temporal.ListWorkflow(context.Background(), listRequest("WorkflowId STARTS_WITH 'run-"+runID+"'"))
	if err != nil {
		t.Fatal(err)
	}
	prefix := models.RunWorkflowID(runID)
	seen := map[string]bool{}
	for _, info := range resp.Executions {
		id := info.GetExecution().GetWorkflowId()
		out, err := exec.Command(temporalCLI, "workflow", "show", "--workflow-id", id, "--run-id", info.GetExecution().GetRunId(),
			"--address", e.cfg.TemporalAddress, "--output", "json").Output()
		if err != nil {
			t.Fatalf("temporal workflow show %s: %v", id, err)
		}
		name := strings.TrimPrefix(strings.TrimPrefix(id, prefix), "-")
		if name == "" {
			name = "run"
		}
		if seen[name] {
			// Another execution of a workflow that continued as new.
			name += "-" + info.GetExecution().GetRunId()[:8]
		}
		seen[name] = true
		if err := os.WriteFile(filepath.Join(dir, name+".json"), out, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("recorded %d histories in %s", len(resp.Executions), dir)
}
