package e2e

import (
	"context"
	"net/http"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.temporal.io/sdk/client"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/op-stack/executor/llm/llmfake"
	"github.com/op-stack/executor/models"
)

// referenceHierarchy is the README's example shape: two teams, three
// workers. Each prompt carries a marker the fake's rules match on.
func referenceHierarchy() map[string]any {
	return map[string]any{
		"name":                    "reference",
		"global_supervisor_agent": map[string]any{"agent_id": "gs-1", "system_prompt": "GS-PROMPT You lead the research."},
		"enable_context_sharing":  true,
		"teams": []any{
			map[string]any{
				"name":                  "research",
				"team_supervisor_agent": map[string]any{"agent_id": "ts-research", "system_prompt": "TS-RESEARCH You lead research."},
				"prevent_duplicate":     true,
				"share_context":         true,
				"workers": []any{
					map[string]any{"agent_id": "w-searcher", "name": "searcher", "role": "search", "system_prompt": "W-SEARCHER You search."},
					map[string]any{"agent_id": "w-analyst", "name": "analyst", "role": "analysis", "system_prompt": "W-ANALYST You analyse."},
				},
			},
			map[string]any{
				"name":                  "writing",
				"team_supervisor_agent": map[string]any{"agent_id": "ts-writing", "system_prompt": "TS-WRITING You lead writing."},
				"workers": []any{
					map[string]any{"agent_id": "w-writer", "name": "writer", "role": "writing", "system_prompt": "W-WRITER You write."},
				},
			},
		},
	}
}

// referenceRules script the reference hierarchy's run: research (searcher,
// analyst), then writing (writer), then the final answer. Worker rules come
// from workers, so a test can replace one worker's behaviour.
func referenceRules(workers map[string][]llmfake.Response) []llmfake.Rule {
	rules := []llmfake.Rule{
		{Name: "global decisions", SystemContains: "GS-PROMPT", HasJSONSchema: true, Responses: contentResponses(
			decision("dispatch", "research", "collect sources"), decision("dispatch", "writing", "write the report"), decision("finish", "", ""))},
		{Name: "final answer", SystemContains: "GS-PROMPT", Responses: contentResponses("FINAL ANSWER: tunnelling explained.")},
		{Name: "research decisions", SystemContains: "TS-RESEARCH", Responses: contentResponses(
			decision("dispatch", "searcher", "find papers"), decision("dispatch", "analyst", "analyse them"), decision("finish", "", ""))},
		{Name: "writing decisions", SystemContains: "TS-WRITING", Responses: contentResponses(
			decision("dispatch", "writer", "write it"), decision("finish", "", ""))},
	}
	for _, marker := range []string{"W-SEARCHER", "W-ANALYST", "W-WRITER"} {
		responses := workers[marker]
		if responses == nil {
			responses = contentResponses("output of " + marker)
		}
		rules = append(rules, llmfake.Rule{Name: marker, SystemContains: marker, Responses: responses})
	}
	return rules
}

func TestRunCompletes(t *testing.T) {
	e := newEnv(t, referenceRules(map[string][]llmfake.Response{
		// Slow enough that the hierarchy edit below lands mid-run.
		"W-SEARCHER": {{Content: strings.Repeat("paper ", 20), TokenDelay: 20 * time.Millisecond}},
	}))
	hid := e.createHierarchy(referenceHierarchy())
	id := e.startRun(hid, "Explain quantum tunnelling")

	// Edit the hierarchy while the run is in flight: the run keeps its
	// snapshot (it still routes to "writing", which the edit renames).
	edited := referenceHierarchy()
	edited["hierarchy_id"] = hid
	edited["teams"].([]any)[1].(map[string]any)["name"] = "docs"
	e.mustPost("/hierarchies/update", edited, nil)

	v := e.waitRun(id, time.Minute)
	if v.Status != models.RunCompleted {
		t.Fatalf("run ended %s: %s", v.Status, v.Error)
	}
	if v.FinalAnswer != "FINAL ANSWER: tunnelling explained." || v.Result == nil || v.Result.FinalAnswer != v.FinalAnswer {
		t.Errorf("final answer = %q", v.FinalAnswer)
	}
	if v.StartedAt == nil || v.CompletedAt == nil || v.Task != "Explain quantum tunnelling" || v.HierarchyID != hid {
		t.Errorf("run = %+v", v)
	}
	if len(v.Result.Teams) != 2 || v.Result.Teams[0].TeamName != "research" || v.Result.Teams[1].TeamName != "writing" {
		t.Fatalf("teams = %+v", v.Result.Teams)
	}
	if ws := v.Result.Teams[0].Workers; len(ws) != 2 || ws[0].AgentID != "w-searcher" || ws[1].Output != "output of W-ANALYST" || ws[1].Instruction != "analyse them" {
		t.Errorf("research workers = %+v", ws)
	}
	if v.Progress.TotalTeams != 2 || len(v.Progress.CompletedTeams) != 2 {
		t.Errorf("progress = %+v", v.Progress)
	}

	// 3 global decisions + the final answer; 2 research decisions (with
	// prevent_duplicate the turn ends without asking once both workers have
	// worked) + 2 writing decisions; 3 workers.
	calls := e.fake.Calls()
	if len(calls) != 11 {
		t.Errorf("fake saw %d calls, want 11", len(calls))
	}
	for _, c := range calls {
		if c.APIKey != "sk-test-e2e-secret" || c.Model != "test-model" || !c.Stream {
			t.Errorf("call %d: key %q model %q stream %v", c.Index, c.APIKey, c.Model, c.Stream)
		}
	}
	// enable_context_sharing: the writer sees the research team's outputs;
	// share_context: the analyst sees the searcher's.
	if w := callsMatching(calls, "W-WRITER"); len(w) != 1 || !strings.Contains(lastUser(w[0]), "output of W-ANALYST") {
		t.Errorf("writer prompt lacks the research outputs")
	}
	if w := callsMatching(calls, "W-ANALYST"); len(w) != 1 || !strings.Contains(lastUser(w[0]), "paper paper") {
		t.Errorf("analyst prompt lacks the searcher's output")
	}

	// Token usage is recorded per call.
	recorded, err := e.store.LLMCalls(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	total := 0
	for _, c := range recorded {
		if c.Status != "ok" || c.TotalTokens <= 0 || c.AgentID == "" || c.Model != "test-model" || c.Provider != "openai" {
			t.Errorf("recorded call = %+v", c)
		}
		total += c.TotalTokens
	}
	if len(recorded) != 11 || total != v.Result.Usage.TotalTokens {
		t.Errorf("recorded %d calls with %d tokens; the result says %d tokens", len(recorded), total, v.Result.Usage.TotalTokens)
	}

	// The run is one workflow (its team turns run inside it), and the API
	// key is nowhere in its history.
	for _, wid := range []string{models.RunWorkflowID(id)} {
		history := historyJSON(t, e.temporal, wid)
		if history == "" {
			t.Errorf("no history for %s", wid)
		}
		if strings.Contains(history, "sk-test-e2e-secret") {
			t.Errorf("the API key is in the history of %s", wid)
		}
	}
}

func lastUser(c llmfake.Call) string {
	for i := len(c.Messages) - 1; i >= 0; i-- {
		if c.Messages[i].Role == "user" {
			return c.Messages[i].Content
		}
	}
	return ""
}

func historyJSON(t *testing.T, c client.Client, workflowID string) string {
	t.Helper()
	it := c.GetWorkflowHistory(context.Background(), workflowID, "", false, 0)
	var b strings.Builder
	for it.HasNext() {
		ev, err := it.Next()
		if err != nil {
			t.Fatalf("history of %s: %v", workflowID, err)
		}
		raw, _ := protojson.Marshal(ev)
		b.Write(raw)
	}
	return b.String()
}

// TestWorkerKilledMidRun kills the only worker process while a worker's LLM
// call streams; a replacement worker picks the run up after the heartbeat
// timeout and the run completes.
func TestWorkerKilledMidRun(t *testing.T) {
	e := newEnv(t, referenceRules(map[string][]llmfake.Response{
		"W-SEARCHER": {{Content: strings.Repeat("slow ", 100), ChunkSize: 5, TokenDelay: 50 * time.Millisecond}, {Content: "searcher done after the crash"}},
	}), withoutWorker)
	first := e.workerProcess()
	id := e.startRun(e.createHierarchy(referenceHierarchy()), "survive a crash")

	waitFor(t, 30*time.Second, "the searcher's call to start streaming", func() bool {
		for _, c := range callsMatching(e.fake.Calls(), "W-SEARCHER") {
			if len(c.ChunkTimes) > 0 {
				return true
			}
		}
		return false
	})
	if err := first.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	first.Wait()
	e.workerProcess()

	v := e.waitRun(id, 2*time.Minute)
	if v.Status != models.RunCompleted {
		t.Fatalf("run ended %s: %s", v.Status, v.Error)
	}
	if got := len(callsMatching(e.fake.Calls(), "W-SEARCHER")); got != 2 {
		t.Errorf("searcher called %d times, want 2 (killed, then retried)", got)
	}
	if out := v.Result.Teams[0].Workers[0].Output; out != "searcher done after the crash" {
		t.Errorf("searcher output = %q", out)
	}
}

func TestServerErrorIsRetried(t *testing.T) {
	e := newEnv(t, referenceRules(map[string][]llmfake.Response{
		"W-WRITER": {{Status: 500}, {Status: 429, RetryAfter: "1"}, {Content: "written after two failures"}},
	}))
	id := e.startRun(e.createHierarchy(referenceHierarchy()), "retry")
	v := e.waitRun(id, time.Minute)
	if v.Status != models.RunCompleted {
		t.Fatalf("run ended %s: %s", v.Status, v.Error)
	}
	writer := callsMatching(e.fake.Calls(), "W-WRITER")
	if len(writer) != 3 {
		t.Fatalf("writer called %d times, want 3", len(writer))
	}
	// The 429's Retry-After (1 s) sets the next delay, over the 200 ms the
	// policy would have chosen.
	if gap := writer[2].ReceivedAt.Sub(writer[1].ReceivedAt); gap < 900*time.Millisecond {
		t.Errorf("retry after the 429 came %v later; Retry-After asked for 1s", gap)
	}
	if out := v.Result.Teams[1].Workers[0].Output; out != "written after two failures" {
		t.Errorf("writer output = %q", out)
	}
}

func TestUnauthorizedFailsTheRun(t *testing.T) {
	e := newEnv(t, referenceRules(map[string][]llmfake.Response{
		"W-WRITER": {{Status: 401, ErrorMessage: "Incorrect API key provided"}},
	}))
	id := e.startRun(e.createHierarchy(referenceHierarchy()), "fail")
	v := e.waitRun(id, time.Minute)
	if v.Status != models.RunFailed {
		t.Fatalf("run ended %s", v.Status)
	}
	for _, want := range []string{`"writer"`, "w-writer", `"test-model"`, "401", "Incorrect API key"} {
		if !strings.Contains(v.Error, want) {
			t.Errorf("error %q does not mention %s", v.Error, want)
		}
	}
	if strings.Contains(v.Error, "sk-test-e2e-secret") {
		t.Error("the error leaks the API key")
	}
	if n := len(callsMatching(e.fake.Calls(), "W-WRITER")); n != 1 {
		t.Errorf("a 401 was retried: %d calls", n)
	}
	// Work done before the failure is kept; the failed turn says why.
	if r := v.Result; r == nil || len(r.Teams) != 2 || r.Teams[0].TeamName != "research" || r.Teams[0].Status != models.TeamCompleted ||
		r.Teams[1].Status != models.TeamFailed || !strings.Contains(r.Teams[1].Error, "401") || len(r.Errors) != 1 {
		t.Errorf("partial result = %+v", v.Result)
	}
}

// maxAbandonDelay bounds the time from a cancel request to the in-flight
// LLM request being abandoned (README: "within about a second").
const maxAbandonDelay = 2500 * time.Millisecond

// TestCancel cancels a run whose worker's LLM call hangs, through the API
// and through the temporal CLI: the call is abandoned within
// maxAbandonDelay and the run ends cancelled.
func TestCancel(t *testing.T) {
	for _, via := range []string{"api", "cli"} {
		t.Run(via, func(t *testing.T) {
			e := newEnv(t, referenceRules(map[string][]llmfake.Response{"W-SEARCHER": {{Hang: true}}}))
			id := e.startRun(e.createHierarchy(referenceHierarchy()), "never finishes")
			waitFor(t, 30*time.Second, "the searcher's call", func() bool { return len(callsMatching(e.fake.Calls(), "W-SEARCHER")) > 0 })
			if p := e.getRun(id).Progress; p.CurrentTeam != "research" || p.CurrentWorker != "searcher" {
				t.Errorf("progress while the searcher works = %+v", p)
			}
			start := time.Now()
			if via == "api" {
				var out struct {
					Status string `json:"status"`
				}
				e.mustPost("/runs/cancel", map[string]any{"id": id}, &out)
				if out.Status != "cancelling" {
					t.Errorf("cancel answered %q", out.Status)
				}
			} else {
				out, err := exec.Command(temporalCLI, "workflow", "cancel", "--workflow-id", models.RunWorkflowID(id), "--address", e.cfg.TemporalAddress).CombinedOutput()
				if err != nil {
					t.Fatalf("temporal workflow cancel: %v\n%s", err, out)
				}
			}
			v := e.waitRun(id, 30*time.Second)
			if v.Status != models.RunCancelled {
				t.Fatalf("run ended %s: %s", v.Status, v.Error)
			}
			var call llmfake.Call
			waitFor(t, 10*time.Second, "the hanging LLM request to be abandoned", func() bool {
				call = callsMatching(e.fake.Calls(), "W-SEARCHER")[0]
				return call.Aborted
			})
			// The README says "within about a second": the call's heartbeat
			// (every second) brings the cancellation to it. Measured where
			// the fake saw the client go, not when this test polled; the
			// bound leaves room for a loaded 2-core machine.
			abandoned := call.FinishedAt.Sub(start)
			t.Logf("cancel via %s: LLM call abandoned %v after the request", via, abandoned.Round(time.Millisecond))
			if abandoned > maxAbandonDelay {
				t.Errorf("cancel via %s: the LLM call was abandoned %v after the request, more than %v", via, abandoned.Round(time.Millisecond), maxAbandonDelay)
			}
			// Cancelling again is fine; the run stays cancelled.
			e.mustPost("/runs/cancel", map[string]any{"id": id}, nil)
		})
	}
}

func TestRunsAPI(t *testing.T) {
	e := newEnv(t, referenceRules(nil))
	hid := e.createHierarchy(referenceHierarchy())
	other := e.createHierarchy(referenceHierarchy())

	if status, env := e.post("/runs/start", map[string]any{"hierarchy_id": "missing", "task": "x"}); status != http.StatusNotFound || env.Code != 40401 {
		t.Errorf("unknown hierarchy: %d %+v", status, env)
	}
	for _, body := range []map[string]any{{"hierarchy_id": hid, "task": "  "}, {"hierarchy_id": hid}, {"task": "x"}} {
		if status, env := e.post("/runs/start", body); status != http.StatusBadRequest || env.Code != 40001 {
			t.Errorf("start %v: %d %+v", body, status, env)
		}
	}
	if status, env := e.post("/runs/get", map[string]any{"id": "missing"}); status != http.StatusNotFound || env.Code != 40402 || env.ErrorCode != "EXECUTION_NOT_FOUND" {
		t.Errorf("unknown run: %d %+v", status, env)
	}
	if status, env := e.post("/runs/cancel", map[string]any{"id": "missing"}); status != http.StatusNotFound || env.Code != 40402 {
		t.Errorf("cancel unknown run: %d %+v", status, env)
	}

	first := e.startRun(hid, "first")
	e.waitRun(first, time.Minute)
	e.fake.SetRules(referenceRules(nil)...)
	second := e.startRun(other, "second")
	e.waitRun(second, time.Minute)

	var page struct {
		Items []runView `json:"items"`
		Total int       `json:"total"`
	}
	e.mustPost("/runs/list", map[string]any{"hierarchy_id": hid}, &page)
	if page.Total != 1 || page.Items[0].ID != first {
		t.Errorf("list by hierarchy = %+v", page)
	}
	e.mustPost("/runs/list", map[string]any{"status": "completed", "page_size": 1}, &page)
	if page.Total != 2 || len(page.Items) != 1 || page.Items[0].ID != second {
		t.Errorf("list by status, newest first = %+v", page)
	}
	if status, _ := e.post("/runs/list", map[string]any{"status": "weird"}); status != http.StatusBadRequest {
		t.Errorf("bad status filter answered %d", status)
	}
	// A finished run cannot be cancelled: its own business code, the
	// numeric code contract 002 clients already knew.
	if status, env := e.post("/runs/cancel", map[string]any{"id": first}); status != http.StatusConflict || env.Code != 40901 || env.ErrorCode != "EXECUTION_ALREADY_FINISHED" {
		t.Errorf("cancel a completed run: %d %+v", status, env)
	}
}
