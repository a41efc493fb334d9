package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/op-stack/executor/auth"
	"github.com/op-stack/executor/llm/llmfake"
	"github.com/op-stack/executor/models"
)

// TestCLISteering runs the executor binary's steering, fork, delete and
// threads commands against the real API and Temporal, with access control
// on (issue 27 item 2):
//   - runs start --follow --interactive with the answers piped to its
//     standard input: an unknown answer is asked again, the analyst's gate
//     is approved with an edited instruction (the analyst's model call gets
//     it), the writer's is rejected with a comment, and the run completes
//     (exit 0) with both decisions in its log;
//   - runs approvals (none left), fork-points, fork --follow --interactive
//     (the fork's writer gate approved at the prompt), the fork's
//     forked_from, and fork's refusals (no --after: exit 1; a sequence that
//     is no fork point: exit 1 with SEQUENCE_NOT_FORKABLE);
//   - threads continue (a follow-up of the thread's newest run) and
//     threads list (text and -o json);
//   - on a running run: redirect, pause, resume, cancel-team (a team not
//     running: exit 1 with TEAM_NOT_RUNNING), delete while running (exit 1,
//     EXECUTION_IN_PROGRESS), delete once ended, and get of the deleted run
//     (exit 1, EXECUTION_NOT_FOUND);
//   - argument mistakes of approve and reject exit 1 saying what is wrong.
func TestCLISteering(t *testing.T) {
	text := func(c string) llmfake.Response { return llmfake.Response{Content: c} }
	e := newEnv(t, referenceRulesByState(text, nil), withAuth)
	key := e.issueKey("cli", auth.ScopeHierarchiesRead, auth.ScopeHierarchiesWrite, auth.ScopeRunsRead, auth.ScopeRunsWrite)
	dir := t.TempDir()
	write := func(name string, body map[string]any) string {
		raw, _ := json.Marshal(body)
		path := filepath.Join(dir, name+".json")
		if err := os.WriteFile(path, raw, 0o644); err != nil {
			t.Fatal(err)
		}
		return path
	}
	hid := strings.TrimSpace(e.mustCLI(key, "hierarchies", "create", "-f", write("gated", approvalHierarchy())))

	// The analyst's gate: a wrong answer, then an edit; the writer's: a
	// rejection with its comment.
	r := e.runCLIInput(key, "x\ne\nANALYSE IN ONE LINE\nr\nnot today\n",
		"runs", "start", "--hierarchy", hid, "--task", "Explain quantum tunnelling", "--follow", "--interactive")
	if r.code != 0 {
		t.Fatalf("runs start --follow --interactive: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	t.Logf("stdout:\n%s\nstderr:\n%s", r.stdout, r.stderr)
	run := strings.Fields(strings.TrimPrefix(r.stderr, "started run "))[0]
	if n := strings.Count(r.stdout, "⏸ approval requested"); n != 2 {
		t.Errorf("%d approval requests in the stream, want 2", n)
	}
	for _, want := range []string{"answer a, e, r or s", "new instruction: ", " approved\n", "comment (the supervisor is told why): ", " rejected\n"} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("the prompts lack %q", want)
		}
	}
	if !strings.Contains(r.stdout, "✔ completed") || !strings.Contains(r.stdout, "rejected by") {
		t.Errorf("the stream lacks the end or the rejection:\n%s", r.stdout)
	}
	decisions := map[string]string{}
	for _, ev := range e.storedEvents(run) {
		if ev.Event.String() == "approval.resolved" {
			decisions[ev.Source.AgentID] = ev.Data["decision"].(string)
		}
	}
	if decisions["w-analyst"] != models.ApprovalApproved || decisions["w-writer"] != models.ApprovalRejected {
		t.Errorf("decisions = %v", decisions)
	}
	analyst := callsMatching(e.fake.Calls(), "W-ANALYST")
	if len(analyst) != 1 {
		t.Fatalf("the analyst was called %d times", len(analyst))
	}
	if raw, _ := json.Marshal(analyst[0].Messages); !strings.Contains(string(raw), "ANALYSE IN ONE LINE") {
		t.Errorf("the analyst did not get the edited instruction: %s", raw)
	}
	if n := len(callsMatching(e.fake.Calls(), "W-WRITER")); n != 0 {
		t.Errorf("the rejected writer was called %d times", n)
	}

	// Approval mistakes.
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"runs", "approve", run}, "the run id and the approval_id, are required"},
		{[]string{"runs", "reject", run, "apr_x"}, "--comment is required"},
		{[]string{"runs", "approve", run, "apr_x", "--arguments", "{nope"}, "not valid JSON"},
		{[]string{"runs", "approve", run, "apr_x"}, "HTTP 409 EXECUTION_ALREADY_FINISHED"},
	} {
		if r := e.runCLI(key, c.args...); r.code != 1 || !strings.Contains(r.stderr, c.want) {
			t.Errorf("executor %q: exit %d, stderr %q; want exit 1 saying %q", c.args, r.code, r.stderr, c.want)
		}
	}
	var approvals struct {
		Status    string `json:"status"`
		Approvals []any  `json:"approvals"`
	}
	if err := json.Unmarshal([]byte(e.mustCLI(key, "runs", "approvals", run, "-o", "json")), &approvals); err != nil ||
		approvals.Status != models.RunCompleted || approvals.Approvals == nil || len(approvals.Approvals) != 0 {
		t.Errorf("runs approvals -o json of the completed run: %v %+v", err, approvals)
	}

	// Fork after research's turn, forcing the writing team with a new
	// instruction; the writer's gate is approved at the prompt.
	var points struct {
		Points []models.ForkPoint `json:"points"`
	}
	if err := json.Unmarshal([]byte(e.mustCLI(key, "runs", "fork-points", run, "-o", "json")), &points); err != nil || len(points.Points) == 0 {
		t.Fatalf("runs fork-points -o json: %v %+v", err, points)
	}
	var after int64
	for _, p := range points.Points {
		if p.Kind == models.ForkAtTeamFinished && p.TeamName == "research" {
			after = p.Sequence
		}
	}
	if after == 0 {
		t.Fatalf("no team.finished point of research in %+v", points.Points)
	}
	if out := e.mustCLI(key, "runs", "fork-points", run); !strings.Contains(out, "team.finished") || !strings.Contains(out, "SEQUENCE") {
		t.Errorf("runs fork-points:\n%s", out)
	}
	if r := e.runCLI(key, "runs", "fork", run); r.code != 1 || !strings.Contains(r.stderr, "--after SEQUENCE is required") {
		t.Errorf("fork without --after: exit %d %q", r.code, r.stderr)
	}
	if r := e.runCLI(key, "runs", "fork", run, "--after", "1"); r.code != 1 || !strings.Contains(r.stderr, "SEQUENCE_NOT_FORKABLE") {
		t.Errorf("fork after event 1: exit %d %q", r.code, r.stderr)
	}
	fr := e.runCLIInput(key, "a\n", "runs", "fork", run, "--after", strconv.FormatInt(after, 10), "--next-team", "writing",
		"--team-instruction", "writing=WRITE FOR CHILDREN", "--follow", "--interactive")
	if fr.code != 0 || !strings.Contains(fr.stderr, " approved\n") || !strings.Contains(fr.stdout, "✔ completed") {
		t.Fatalf("runs fork --follow --interactive: exit %d\n%s\n%s", fr.code, fr.stdout, fr.stderr)
	}
	fork := strings.Fields(fr.stderr[strings.Index(fr.stderr, "into run ")+len("into run "):])[0]
	var forkView struct {
		ForkedFrom *models.ForkedFrom `json:"forked_from"`
		ThreadID   string             `json:"thread_id"`
	}
	if err := json.Unmarshal([]byte(e.mustCLI(key, "runs", "get", fork, "-o", "json")), &forkView); err != nil ||
		forkView.ForkedFrom == nil || forkView.ForkedFrom.RunID != run || forkView.ThreadID != run {
		t.Errorf("the fork's runs get: %v %+v", err, forkView)
	}
	if out := e.mustCLI(key, "runs", "get", fork); !strings.Contains(out, "forked from") || !strings.Contains(out, run+" after event "+strconv.FormatInt(after, 10)) ||
		!strings.Contains(out, run+" (executor threads list "+fork+")") {
		t.Errorf("runs get of the fork:\n%s", out)
	}
	writer := callsMatching(e.fake.Calls(), "W-WRITER")
	if len(writer) != 1 {
		t.Errorf("the fork's writer was called %d times", len(writer))
	}
	if raw, _ := json.Marshal(e.fake.Calls()); !strings.Contains(string(raw), "WRITE FOR CHILDREN") {
		t.Error("no model call got the fork's team instruction")
	}

	// A follow-up of the thread's newest run (the fork), both gates
	// approved at the prompt.
	fu := e.runCLIInput(key, "a\na\n", "threads", "continue", run, "--task", "Now shorter", "--follow", "--interactive")
	if fu.code != 0 || !strings.Contains(fu.stderr, "a follow-up of run "+fork+" in thread "+run) {
		t.Fatalf("threads continue: exit %d\n%s\n%s", fu.code, fu.stdout, fu.stderr)
	}
	followUp := strings.Fields(strings.TrimPrefix(fu.stderr, "started run "))[0]
	var thread struct {
		Total int `json:"total"`
		Items []struct {
			ID            string `json:"id"`
			PreviousRunID string `json:"previous_run_id"`
		} `json:"items"`
	}
	if err := json.Unmarshal([]byte(e.mustCLI(key, "threads", "list", followUp, "-o", "json")), &thread); err != nil || thread.Total != 3 ||
		thread.Items[0].ID != followUp || thread.Items[0].PreviousRunID != fork {
		t.Errorf("threads list -o json: %v %+v", err, thread)
	}
	if out := e.mustCLI(key, "threads", "list", run); !strings.Contains(out, followUp) || !strings.Contains(out, fork) || !strings.Contains(out, "FOLLOWS") {
		t.Errorf("threads list:\n%s", out)
	}
	if r := e.runCLI(key, "threads", "continue", run); r.code != 1 || !strings.Contains(r.stderr, "--task") {
		t.Errorf("threads continue without --task: exit %d %q", r.code, r.stderr)
	}

	// Steering a running run: the analyst streams for about 10 s.
	e.fake.SetRules(referenceRulesByState(text, map[string]llmfake.Response{
		"W-ANALYST": {Content: strings.Repeat("analysis ", 400), TokenDelay: 25 * time.Millisecond},
	})...)
	plain := strings.TrimSpace(e.mustCLI(key, "hierarchies", "create", "-f", write("plain", referenceHierarchy())))
	live := strings.TrimSpace(e.mustCLI(key, "runs", "start", "--hierarchy", plain, "--task", "Explain quantum tunnelling"))
	calls := len(callsMatching(e.fake.Calls(), "W-ANALYST"))
	waitFor(t, 30*time.Second, "the analyst's call", func() bool { return len(callsMatching(e.fake.Calls(), "W-ANALYST")) > calls })
	if out := e.mustCLI(key, "runs", "redirect", live, "--agent", "gs-1", "--message", "Be brief"); out != live+" gs-1 queued\n" {
		t.Errorf("runs redirect: %q", out)
	}
	if out := e.mustCLI(key, "runs", "pause", live); out != live+" paused\n" {
		t.Errorf("runs pause: %q", out)
	}
	var resumed struct{ ID, Status string }
	if err := json.Unmarshal([]byte(e.mustCLI(key, "runs", "resume", live, "-o", "json")), &resumed); err != nil || resumed.ID != live || resumed.Status != models.RunRunning {
		t.Errorf("runs resume -o json: %v %+v", err, resumed)
	}
	if r := e.runCLI(key, "runs", "cancel-team", live, "writing"); r.code != 1 || !strings.Contains(r.stderr, "TEAM_NOT_RUNNING") {
		t.Errorf("cancel-team of a team not running: exit %d %q", r.code, r.stderr)
	}
	if out := e.mustCLI(key, "runs", "cancel-team", live, "research", "--reason", "enough sources"); out != live+" team research cancelling\n" {
		t.Errorf("runs cancel-team: %q", out)
	}
	if r := e.runCLI(key, "runs", "delete", live); r.code != 1 || !strings.Contains(r.stderr, "EXECUTION_IN_PROGRESS") {
		t.Errorf("delete of a running run: exit %d %q", r.code, r.stderr)
	}
	if r := e.runCLI(key, "runs", "follow", live); r.code != 0 {
		t.Fatalf("runs follow: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	} else if !strings.Contains(r.stdout, "» redirect gs-1: Be brief") || !strings.Contains(r.stdout, "✗ cancelled team research: enough sources") ||
		!strings.Contains(r.stdout, "⏸ paused") {
		t.Errorf("the followed run does not show the steering:\n%s", r.stdout)
	}
	if out := e.mustCLI(key, "runs", "delete", live); out != live+" deleted\n" {
		t.Errorf("runs delete: %q", out)
	}
	if r := e.runCLI(key, "runs", "get", live); r.code != 1 || !strings.Contains(r.stderr, "EXECUTION_NOT_FOUND") {
		t.Errorf("get of a deleted run: exit %d %q", r.code, r.stderr)
	}
}
