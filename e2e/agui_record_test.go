package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/op-stack/executor/llm/llmfake"
	"github.com/op-stack/executor/models"
)

// TestRecordAGUILogs records the event logs that package agui's tests
// translate (agui/testdata/*.json): real runs, so the AG-UI encoder is
// tested on what the workflow emits, not on logs written by hand. It runs
// only with AGUI_RECORD=1:
//
//	AGUI_RECORD=1 go test ./e2e/ -run TestRecordAGUILogs
//
// The runs: tools and nested sub-agents (startToolsRun), a worker that
// reasons and whose stream is cut and retried, two approval gates (one
// approved, one rejected), teams at work together, and a run cancelled
// while a worker streams.
func TestRecordAGUILogs(t *testing.T) {
	if os.Getenv("AGUI_RECORD") == "" {
		t.Skip("set AGUI_RECORD=1 to record agui/testdata")
	}
	record := func(e *testEnv, id, name string) {
		t.Helper()
		if v := e.waitRun(id, 2*time.Minute); v.Status == models.RunRunning {
			t.Fatalf("%s: run still running", name)
		}
		b, err := json.MarshalIndent(e.storedEvents(id), "", " ")
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join("..", "agui", "testdata", name+".json"), append(b, '\n'), 0o644); err != nil {
			t.Fatal(err)
		}
	}

	e, id := startToolsRun(t)
	record(e, id, "tools")

	full := "The report covers tunnelling, barriers and decay. "
	e = newEnv(t, referenceRules(map[string][]llmfake.Response{"W-WRITER": {
		{Reasoning: "The sources agree; keep it short.", Content: full, DropAfterChunks: 6},
		{Reasoning: "The sources agree; keep it short.", Content: full},
	}}))
	record(e, e.startRun(e.createHierarchy(referenceHierarchy()), "Explain quantum tunnelling"), "reasoning-retry")

	e = newEnv(t, referenceRules(nil))
	id = e.startRun(e.createHierarchy(approvalHierarchy()), "Explain quantum tunnelling")
	analyst := e.waitApproval(id, "w-analyst")
	e.mustPost("/runs/approve", map[string]any{"id": id, "approval_id": analyst.ApprovalID, "comment": "fine"}, nil)
	writer := e.waitApproval(id, "w-writer")
	e.mustPost("/runs/reject", map[string]any{"id": id, "approval_id": writer.ApprovalID, "comment": "not now"}, nil)
	record(e, id, "approvals")

	// Teams at work together, their workers' answers interleaved.
	e = newEnv(t, diamondRules())
	var started struct {
		ID string `json:"id"`
	}
	e.mustPost("/runs/start", map[string]any{"hierarchy_id": e.createHierarchy(diamondHierarchy("parallel")), "task": "diamond", "execution_config": map[string]any{"max_parallel_teams": 2}}, &started)
	record(e, started.ID, "parallel")

	// Cancelled while a worker streams.
	e = newEnv(t, referenceRules(map[string][]llmfake.Response{"W-SEARCHER": {{Content: strings.Repeat("paper ", 200), TokenDelay: 20 * time.Millisecond}}}))
	id = e.startRun(e.createHierarchy(referenceHierarchy()), "Explain quantum tunnelling")
	waitFor(t, 30*time.Second, "the searcher's call", func() bool { return len(callsMatching(e.fake.Calls(), "W-SEARCHER")) > 0 })
	time.Sleep(time.Second) // its answer takes 6 s
	e.mustPost("/runs/cancel", map[string]any{"id": id}, nil)
	record(e, id, "cancelled")
}
