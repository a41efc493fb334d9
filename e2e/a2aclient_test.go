package e2e

import (
	"bufio"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/op-stack/executor/config"
	"github.com/op-stack/executor/internal/interop"
	"github.com/op-stack/executor/models"
)

// a2aAgent is e2e/interop/a2a-agent.mjs running: a small agent on the real
// @a2a-js/sdk server (JSON-RPC), at the version e2e/interop's
// package-lock.json pins. lines are what it printed (EXECUTE, CANCEL,
// UNAVAILABLE).
type a2aAgent struct {
	cardURL string
	port    int
	env     []string
	dir     string
	t       *testing.T
	mu      sync.Mutex
	lines   []string
	cmd     *exec.Cmd
}

// startA2AAgent runs the JS agent with env (NAME=value) and waits until it
// listens. Without node and npm the test is skipped loudly, except in CI
// (interop.Dir).
func startA2AAgent(t *testing.T, env ...string) *a2aAgent {
	t.Helper()
	dir := interop.Dir(t, "@a2a-js/sdk/package.json", "express/package.json")
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	a := &a2aAgent{cardURL: fmt.Sprintf("http://127.0.0.1:%d/.well-known/agent-card.json", port), port: port, env: env, dir: dir, t: t}
	a.start()
	t.Cleanup(a.kill)
	return a
}

// start runs the agent's process and waits until it listens.
func (a *a2aAgent) start() {
	a.t.Helper()
	cmd := exec.Command("node", "a2a-agent.mjs")
	cmd.Dir = a.dir
	cmd.Env = append(append(os.Environ(), fmt.Sprintf("PORT=%d", a.port)), a.env...)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		a.t.Fatal(err)
	}
	listening := len(a.saw("LISTENING"))
	if err := cmd.Start(); err != nil {
		a.t.Fatal(err)
	}
	a.mu.Lock()
	a.cmd = cmd
	a.mu.Unlock()
	go func() {
		s := bufio.NewScanner(out)
		for s.Scan() {
			a.mu.Lock()
			a.lines = append(a.lines, s.Text())
			a.mu.Unlock()
		}
	}()
	waitFor(a.t, 30*time.Second, "the A2A agent to listen", func() bool { return len(a.saw("LISTENING")) > listening })
}

// kill stops the agent at once (SIGKILL, as a crash would).
func (a *a2aAgent) kill() {
	a.mu.Lock()
	cmd := a.cmd
	a.cmd = nil
	a.mu.Unlock()
	if cmd != nil {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	}
}

// saw is the agent's printed lines that start with prefix, without it.
func (a *a2aAgent) saw(prefix string) []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	var out []string
	for _, l := range a.lines {
		if rest, ok := strings.CutPrefix(l, prefix); ok {
			out = append(out, strings.TrimSpace(rest))
		}
	}
	return out
}

// remoteSearcher is the reference hierarchy with its searcher (agent_id
// w-searcher) the remote agent at cardURL.
func remoteSearcher(cardURL string) map[string]any {
	body := referenceHierarchy()
	searcher := body["teams"].([]any)[0].(map[string]any)["workers"].([]any)[0].(map[string]any)
	searcher["a2a"] = map[string]any{"card_url": cardURL}
	return body
}

func allowA2APrivate(c *config.Config) { c.A2AAllowPrivate = true }

// agentText is the llm.<action> text an agent streamed.
func agentText(msgs []sseMessage, agentID, action string) string {
	var b strings.Builder
	for _, m := range msgs {
		if m.Event.Event.Category == models.CategoryLLM && m.Event.Event.Action == action && m.Event.Source.AgentID == agentID {
			s, _ := m.Event.Data["content"].(string)
			b.WriteString(s)
		}
	}
	return b.String()
}

// TestA2AWorker: a hierarchy whose searcher is a remote agent on the real
// @a2a-js/sdk server. The run completes; the agent got the searcher's
// instruction in the context of this run and worker; its streamed chunks
// are on the run's SSE stream as the searcher's llm.stream (its working
// status as llm.reasoning); its answer is the searcher's output, which
// the analyst reads as shared context.
func TestA2AWorker(t *testing.T) {
	agent := startA2AAgent(t)
	e := newEnv(t, referenceRules(nil), withConfig(allowA2APrivate))
	id := e.startRun(e.createHierarchy(remoteSearcher(agent.cardURL)), "explain tunnelling")
	if v := e.waitRun(id, time.Minute); v.Status != models.RunCompleted {
		t.Fatalf("run %s: %s", v.Status, v.Error)
	}
	executed := agent.saw("EXECUTE ")
	if len(executed) != 1 || !strings.HasSuffix(executed[0], " "+models.A2AContextID(id, "w-searcher")) {
		t.Fatalf("the agent executed %v, want one task in context %s", executed, models.A2AContextID(id, "w-searcher"))
	}
	msgs := e.streamAll(id)
	if got := agentText(msgs, "w-searcher", models.ActionStream); got != "echo: find papers" {
		t.Fatalf("the searcher's streamed text is %q", got)
	}
	if got := agentText(msgs, "w-searcher", models.ActionReasoning); got != "thinking\n" {
		t.Fatalf("the searcher's reasoning is %q", got)
	}
	for _, m := range msgs {
		if id, _ := m.Event.Data["message_id"].(string); m.Event.Source.AgentID == "w-searcher" && m.Event.Event.Action == models.ActionStream && id == "" {
			t.Fatalf("a streamed chunk without the answer's message_id: %+v", m.Event)
		}
	}
	analyst := callsMatching(e.fake.Calls(), "W-ANALYST")
	if len(analyst) == 0 || !strings.Contains(fmt.Sprint(analyst[0]), "echo: find papers") {
		t.Fatalf("the analyst did not get the remote searcher's output as context")
	}
	if n := len(callsMatching(e.fake.Calls(), "W-SEARCHER")); n != 0 {
		t.Fatalf("the model was called %d times for the remote searcher", n)
	}
}

// TestA2AWorkerCancelled: cancelling the run while the remote agent works
// cancels its task (the JS server's cancelTask runs).
func TestA2AWorkerCancelled(t *testing.T) {
	agent := startA2AAgent(t)
	e := newEnv(t, referenceRules(nil), withConfig(allowA2APrivate))
	id := e.startRun(e.createHierarchy(remoteSearcher(agent.cardURL)), "HANG until cancelled")
	waitFor(t, 30*time.Second, "the remote task", func() bool { return len(agent.saw("EXECUTE ")) > 0 })
	task := strings.Fields(agent.saw("EXECUTE ")[0])[0]
	e.mustPost("/runs/cancel", map[string]any{"id": id}, nil)
	if v := e.waitRun(id, time.Minute); v.Status != models.RunCancelled {
		t.Fatalf("run %s", v.Status)
	}
	waitFor(t, 30*time.Second, "the remote cancelTask", func() bool {
		c := agent.saw("CANCEL ")
		return len(c) == 1 && c[0] == task
	})
}

// TestA2AWorkerRetried: an agent that answers its first JSON-RPC request
// with 503 is called again (a retryable transport failure), and the run
// completes with its answer; the stream announces the retry.
func TestA2AWorkerRetried(t *testing.T) {
	agent := startA2AAgent(t, "FAIL_FIRST=1")
	e := newEnv(t, referenceRules(nil), withConfig(allowA2APrivate))
	id := e.startRun(e.createHierarchy(remoteSearcher(agent.cardURL)), "explain tunnelling")
	if v := e.waitRun(id, time.Minute); v.Status != models.RunCompleted {
		t.Fatalf("run %s: %s", v.Status, v.Error)
	}
	if u, x := agent.saw("UNAVAILABLE "), agent.saw("EXECUTE "); len(u) != 1 || len(x) != 1 {
		t.Fatalf("503s %v, tasks %v: want one of each", u, x)
	}
	msgs := e.streamAll(id)
	if got := agentText(msgs, "w-searcher", models.ActionStream); got != "echo: find papers" {
		t.Fatalf("the searcher's streamed text is %q", got)
	}
	retried := false
	for _, m := range msgs {
		retried = retried || (m.Event.Source.AgentID == "w-searcher" && m.Event.Event.Action == models.ActionRetry)
	}
	if !retried {
		t.Fatal("no llm.retry for the searcher on the stream")
	}
}

// TestA2AWorkerFailures: a remote task that fails, or asks for input,
// fails the worker at once (not retried) with the agent's message; a
// loopback agent without A2A_ALLOW_PRIVATE is refused by the network
// guard; a bad card_url is a 400 naming the field.
func TestA2AWorkerFailures(t *testing.T) {
	agent := startA2AAgent(t)
	for task, says := range map[string]string{"FAIL now": "failed: the echo broke", "ASK me": "asked for input (input-required), which a worker cannot give: which language?"} {
		// An env per run: the fake model's scripted decisions are the
		// reference run's.
		e := newEnv(t, referenceRules(nil), withConfig(allowA2APrivate))
		before := len(agent.saw("EXECUTE "))
		id := e.startRun(e.createHierarchy(remoteSearcher(agent.cardURL)), task)
		v := e.waitRun(id, time.Minute)
		if v.Status != models.RunFailed || !strings.Contains(v.Error, says) {
			t.Fatalf("%q: run %s: %q, want failed saying %q", task, v.Status, v.Error, says)
		}
		if n := len(agent.saw("EXECUTE ")) - before; n != 1 {
			t.Fatalf("%q: the agent ran %d tasks, want 1 (no retry)", task, n)
		}
	}

	guarded := newEnv(t, referenceRules(nil))
	id := guarded.startRun(guarded.createHierarchy(remoteSearcher(agent.cardURL)), "explain tunnelling")
	if v := guarded.waitRun(id, time.Minute); v.Status != models.RunFailed || !strings.Contains(v.Error, "A2A_ALLOW_PRIVATE") {
		t.Fatalf("guarded run %s: %q", v.Status, v.Error)
	}

	status, env := guarded.post("/hierarchies/create", remoteSearcher("file:///etc/passwd"))
	if status != http.StatusBadRequest || !strings.Contains(env.Message, "teams[0].workers[0].a2a.card_url") {
		t.Fatalf("bad card_url: %d %s", status, env.Message)
	}
}

// TestA2AWorkerAgentRestarted: the agent's process is killed while it
// streams the searcher's answer and started again on the same port; the
// cut stream is a transport failure, the activity is retried against the
// new process, and the run completes with the whole answer, the retry
// announced on the stream.
func TestA2AWorkerAgentRestarted(t *testing.T) {
	agent := startA2AAgent(t, "CHUNK_DELAY_MS=700")
	e := newEnv(t, referenceRules(nil), withConfig(allowA2APrivate))
	id := e.startRun(e.createHierarchy(remoteSearcher(agent.cardURL)), "explain tunnelling")
	waitFor(t, 30*time.Second, "the remote task", func() bool { return len(agent.saw("EXECUTE ")) > 0 })
	time.Sleep(time.Second) // the first chunk has streamed
	agent.kill()
	agent.start()
	if v := e.waitRun(id, time.Minute); v.Status != models.RunCompleted {
		t.Fatalf("run %s: %s", v.Status, v.Error)
	}
	if x := agent.saw("EXECUTE "); len(x) != 2 {
		t.Fatalf("tasks %v, want the killed one and its retry", x)
	}
	msgs := e.streamAll(id)
	last := 0
	for i, m := range msgs {
		if m.Event.Source.AgentID == "w-searcher" && m.Event.Event.Action == models.ActionRetry {
			last = i
		}
	}
	if last == 0 {
		t.Fatal("no llm.retry for the searcher on the stream")
	}
	if got := agentText(msgs[last:], "w-searcher", models.ActionStream); got != "echo: find papers" {
		t.Fatalf("the searcher's text after the retry is %q", got)
	}
}

// TestA2AWorkerTeamCancelled: cancelling the remote worker's team
// (runs/teams/cancel) cancels its remote task too, and the run goes on
// without the team.
func TestA2AWorkerTeamCancelled(t *testing.T) {
	agent := startA2AAgent(t)
	e := newEnv(t, referenceRules(nil), withConfig(allowA2APrivate))
	id := e.startRun(e.createHierarchy(remoteSearcher(agent.cardURL)), "HANG until cancelled")
	waitFor(t, 30*time.Second, "the remote task", func() bool { return len(agent.saw("EXECUTE ")) > 0 })
	task := strings.Fields(agent.saw("EXECUTE ")[0])[0]
	e.mustPost("/runs/teams/cancel", map[string]any{"id": id, "team_name": "research", "reason": "enough"}, nil)
	waitFor(t, 30*time.Second, "the remote cancelTask", func() bool {
		c := agent.saw("CANCEL ")
		return len(c) == 1 && c[0] == task
	})
	if v := e.waitRun(id, time.Minute); v.Status != models.RunCompleted {
		t.Fatalf("run %s: %s", v.Status, v.Error)
	}
}
