package e2e

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/op-stack/executor/auth"
	"github.com/op-stack/executor/llm/llmfake"
	"github.com/op-stack/executor/models"
)

// cliResult is one run of the executor binary.
type cliResult struct {
	stdout, stderr string
	code           int
}

// runCLI runs the built executor binary with args against the env's API,
// with the address and key in EXECUTOR_URL and EXECUTOR_API_KEY as a
// user would set them.
func (e *testEnv) runCLI(key string, args ...string) cliResult {
	e.t.Helper()
	return e.runCLIInput(key, "", args...)
}

// runCLIInput is runCLI with stdin piped to the binary's standard input,
// as a person typing at the terminal would send it, a line at a time.
func (e *testEnv) runCLIInput(key, stdin string, args ...string) cliResult {
	e.t.Helper()
	cmd := exec.Command(executorBin, args...)
	cmd.Env = append(os.Environ(), "EXECUTOR_URL="+e.rootURL(), "EXECUTOR_API_KEY="+key, "NO_COLOR=")
	cmd.Stdin = strings.NewReader(stdin)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	done := make(chan error, 1)
	if err := cmd.Start(); err != nil {
		e.t.Fatal(err)
	}
	go func() { done <- cmd.Wait() }()
	var err error
	select {
	case err = <-done:
	case <-time.After(2 * time.Minute):
		cmd.Process.Kill()
		e.t.Fatalf("executor %q still running after 2 minutes:\n%s\n%s", args, stdout.String(), stderr.String())
	}
	r := cliResult{stdout: stdout.String(), stderr: stderr.String()}
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		r.code = exit.ExitCode()
	} else if err != nil {
		e.t.Fatal(err)
	}
	return r
}

// mustCLI is runCLI that fails the test unless the binary exits 0.
func (e *testEnv) mustCLI(key string, args ...string) string {
	e.t.Helper()
	r := e.runCLI(key, args...)
	if r.code != 0 {
		e.t.Fatalf("executor %q: exit %d\nstdout:\n%s\nstderr:\n%s", args, r.code, r.stdout, r.stderr)
	}
	return r.stdout
}

// TestCLI runs the executor binary's client commands against the real API
// with access control on: hierarchies create/get/list, runs start --follow
// (each agent's streamed text under its [team/agent] prefix, equal to the
// stored log), get, list, events, and the exit status of runs that fail,
// are cancelled or time out.
func TestCLI(t *testing.T) {
	rules := referenceRules(map[string][]llmfake.Response{
		"W-SEARCHER": {{Content: strings.Repeat("paper ", 12), TokenDelay: 5 * time.Millisecond}},
	})
	rules = append(rules,
		llmfake.Rule{Name: "hang", SystemContains: "GS-HANG", Responses: []llmfake.Response{{Hang: true}}},
		llmfake.Rule{Name: "fail", SystemContains: "GS-FAIL", Responses: []llmfake.Response{{Status: 401}}},
	)
	e := newEnv(t, rules, withAuth)
	key := e.issueKey("cli", auth.ScopeHierarchiesRead, auth.ScopeHierarchiesWrite, auth.ScopeRunsRead, auth.ScopeRunsWrite)
	dir := t.TempDir()
	writeHierarchy := func(name string, body map[string]any) string {
		raw, _ := json.Marshal(body)
		path := filepath.Join(dir, name+".json")
		if err := os.WriteFile(path, raw, 0o644); err != nil {
			t.Fatal(err)
		}
		return path
	}
	file := writeHierarchy("reference", referenceHierarchy())

	// Without a key the API refuses, and the CLI says why.
	if r := e.runCLI("", "hierarchies", "create", "-f", file); r.code != 1 || !strings.Contains(r.stderr, "HTTP 401") {
		t.Errorf("create without a key: exit %d, stderr %q", r.code, r.stderr)
	}
	// A refused body names the field.
	bad := writeHierarchy("bad", map[string]any{"name": "bad", "teams": []any{}})
	if r := e.runCLI(key, "hierarchies", "create", "-f", bad); r.code != 1 || !strings.Contains(r.stderr, "HTTP 400") || !strings.Contains(r.stderr, "field") {
		t.Errorf("create of a bad body: exit %d, stderr %q", r.code, r.stderr)
	}

	hid := strings.TrimSpace(e.mustCLI(key, "hierarchies", "create", "-f", file))
	if !strings.Contains(e.mustCLI(key, "hierarchies", "list"), hid) {
		t.Errorf("hierarchies list does not show %s", hid)
	}
	tree := e.mustCLI(key, "hierarchies", "get", hid)
	for _, id := range []string{"gs-1", "ts-research", "w-searcher", "w-analyst", "ts-writing", "w-writer"} {
		if !strings.Contains(tree, "agent_id "+id) {
			t.Errorf("hierarchies get does not show agent_id %s:\n%s", id, tree)
		}
	}

	// A run followed to its end.
	r := e.runCLI(key, "runs", "start", "--hierarchy", hid, "--task", "Explain quantum tunnelling", "--follow")
	if r.code != 0 {
		t.Fatalf("runs start --follow: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	runID := strings.Fields(strings.TrimPrefix(r.stderr, "started run "))[0]
	t.Logf("runs start --follow printed:\n%s", r.stdout)
	var page struct {
		Events []models.Event `json:"events"`
	}
	e.mustCall("POST", "/api/executor/v1/runs/events", key, map[string]any{"id": runID, "limit": 1000}, &page)
	text := map[string]string{}
	prefix := map[string]string{}
	for _, ev := range page.Events {
		if ev.Event.String() == "llm.stream" && ev.Source.AgentType == models.AgentTypeWorker {
			text[ev.Source.AgentID] += ev.Data["content"].(string)
			prefix[ev.Source.AgentID] = "[" + *ev.Source.TeamName + "/" + ev.Source.AgentName + "] "
		}
	}
	if len(text) != 3 {
		t.Fatalf("want three workers' text in the stored log, got %v", text)
	}
	for agent, want := range text {
		if !strings.Contains(r.stdout, prefix[agent]+want+"\n") {
			t.Errorf("the output has no line %q (agent %s's stored text)", prefix[agent]+want, agent)
		}
	}
	for _, want := range []string{"[Global Supervisor] » dispatch team research", "[research/research Supervisor] » dispatch worker searcher (w-searcher)",
		"[Global Supervisor] FINAL ANSWER: tunnelling explained.\n", "✔ completed", "run " + runID + " completed"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("the output lacks %q", want)
		}
	}
	for _, line := range strings.Split(strings.TrimSuffix(r.stdout, "\n"), "\n") {
		if !strings.HasPrefix(line, "[") && !strings.HasPrefix(line, "run "+runID) {
			t.Errorf("a line without its [team/agent] prefix: %q", line)
		}
	}
	if strings.Contains(r.stdout, "\x1b[") {
		t.Error("colour written to a pipe")
	}

	// get, list and events show the same run.
	var got struct {
		Status string `json:"status"`
		Usage  struct {
			TotalTokens int `json:"total_tokens"`
		} `json:"usage"`
	}
	if err := json.Unmarshal([]byte(e.mustCLI(key, "runs", "get", runID, "-o", "json")), &got); err != nil || got.Status != models.RunCompleted || got.Usage.TotalTokens == 0 {
		t.Errorf("runs get -o json: %v %+v", err, got)
	}
	if out := e.mustCLI(key, "runs", "get", runID); !strings.Contains(out, "completed") || !strings.Contains(out, "FINAL ANSWER") {
		t.Errorf("runs get:\n%s", out)
	}
	if out := e.mustCLI(key, "runs", "list", "--hierarchy", hid); !strings.Contains(out, runID) || !strings.Contains(out, "completed") {
		t.Errorf("runs list:\n%s", out)
	}
	lines := strings.Split(strings.TrimSpace(e.mustCLI(key, "runs", "events", runID, "-o", "json")), "\n")
	if len(lines) != len(page.Events) {
		t.Errorf("runs events printed %d events, the log has %d", len(lines), len(page.Events))
	}
	if out := e.mustCLI(key, "runs", "events", runID, "--type", "dispatch.worker"); strings.Count(out, "dispatch.worker") != 3 {
		t.Errorf("runs events --type dispatch.worker:\n%s", out)
	}

	// A failed run exits 2.
	failH := strings.TrimSpace(e.mustCLI(key, "hierarchies", "create", "-f", writeHierarchy("fail", map[string]any{
		"name": "fail", "global_supervisor_agent": map[string]any{"system_prompt": "GS-FAIL"},
		"teams": []any{map[string]any{"name": "t", "workers": []any{map[string]any{"name": "w", "system_prompt": "W"}}}},
	})))
	if r := e.runCLI(key, "runs", "start", "--hierarchy", failH, "--task", "fail", "--follow"); r.code != 2 || !strings.Contains(r.stdout, "✗ failed:") {
		t.Errorf("failed run: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}

	// A cancelled run: `runs follow` exits 3 once `runs cancel` ends it.
	hangBody := map[string]any{
		"name": "hang", "global_supervisor_agent": map[string]any{"system_prompt": "GS-HANG"},
		"teams": []any{map[string]any{"name": "t", "workers": []any{map[string]any{"name": "w", "system_prompt": "W"}}}},
	}
	hangH := strings.TrimSpace(e.mustCLI(key, "hierarchies", "create", "-f", writeHierarchy("hang", hangBody)))
	hangRun := strings.TrimSpace(e.mustCLI(key, "runs", "start", "--hierarchy", hangH, "--task", "wait"))
	followed := make(chan cliResult, 1)
	go func() { followed <- e.runCLI(key, "runs", "follow", hangRun) }()
	waitFor(t, 30*time.Second, "the hanging run to start", func() bool {
		var v runView
		e.mustCall("POST", "/api/executor/v1/runs/get", key, map[string]any{"id": hangRun}, &v)
		return v.Status == models.RunRunning
	})
	if out := e.mustCLI(key, "runs", "cancel", hangRun); !strings.Contains(out, "cancelling") {
		t.Errorf("runs cancel: %q", out)
	}
	if r := <-followed; r.code != 3 || !strings.Contains(r.stdout, "✗ cancelled") {
		t.Errorf("follow of a cancelled run: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}

	// A run that overruns max_execution_time exits 4.
	hangBody["name"], hangBody["max_execution_time"] = "slow", 1
	slowH := strings.TrimSpace(e.mustCLI(key, "hierarchies", "create", "-f", writeHierarchy("slow", hangBody)))
	if r := e.runCLI(key, "runs", "start", "--hierarchy", slowH, "--task", "wait", "--follow"); r.code != 4 {
		t.Errorf("timed-out run: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
}
