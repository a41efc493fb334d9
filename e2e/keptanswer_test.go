package e2e

import (
	"bytes"
	"context"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/op-stack/executor/llm/llmfake"
	"github.com/op-stack/executor/models"
)

// devServerPID finds the process of this test binary's Temporal dev server
// (started by TestMain with --port <its frontend port>).
func devServerPID(t *testing.T) int {
	t.Helper()
	_, port, err := net.SplitHostPort(devServer.FrontendHostPort())
	if err != nil {
		t.Fatal(err)
	}
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	for _, dir := range dirs {
		raw, err := os.ReadFile(filepath.Join(dir, "cmdline"))
		if err != nil {
			continue
		}
		args := strings.Split(string(bytes.TrimRight(raw, "\x00")), "\x00")
		if len(args) == 0 || args[0] != temporalCLI {
			continue
		}
		for i := 0; i+1 < len(args); i++ {
			if args[i] == "--port" && args[i+1] == port {
				pid, _ := strconv.Atoi(filepath.Base(dir))
				return pid
			}
		}
	}
	t.Skip("the dev server's process was not found (needs /proc)")
	return 0
}

// TestLostCompletionUsesTheKeptAnswer: the searcher's answer arrives in
// full while the Temporal server is frozen (longer than the heartbeat
// timeout), so its attempt cannot report it; its worker is killed, the
// server resumes and another worker takes the retried attempt. That
// attempt uses the kept answer: the model is asked once, every request
// has one usage row, the workflow counts the call once, and the retry is
// announced before the second attempt's text.
func TestLostCompletionUsesTheKeptAnswer(t *testing.T) {
	const first = "the first answer, paid for once"
	e := newEnv(t, referenceRules(map[string][]llmfake.Response{
		"W-SEARCHER": {{Content: first, ChunkSize: 4, TokenDelay: 50 * time.Millisecond}, {Content: "a second answer, paid for again"}},
	}), withoutWorker)
	pid := devServerPID(t)
	workerA := e.workerProcess()
	id := e.startRun(e.createHierarchy(referenceHierarchy()), "survive an outage")
	ctx := context.Background()

	waitFor(t, 30*time.Second, "the searcher's call to start streaming", func() bool {
		for _, c := range callsMatching(e.fake.Calls(), "W-SEARCHER") {
			if len(c.ChunkTimes) > 0 {
				return true
			}
		}
		return false
	})
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	frozen := time.Now()
	resumed := false
	resume := func() {
		if !resumed {
			resumed = true
			syscall.Kill(pid, syscall.SIGCONT)
		}
	}
	t.Cleanup(resume)
	waitFor(t, 30*time.Second, "the searcher's answer to be kept", func() bool {
		n, err := e.store.KeptAnswers(ctx, id)
		return err == nil && n == 1
	})
	// Past the heartbeat timeout (3 s), so the server times the attempt out
	// as it resumes; the attempt's worker is gone by then.
	time.Sleep(time.Until(frozen.Add(e.cfg.LLMHeartbeatTimeout + time.Second)))
	if err := workerA.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	workerA.Wait()
	resume()
	e.workerProcess()

	v := e.waitRun(id, 2*time.Minute)
	if v.Status != models.RunCompleted {
		t.Fatalf("run ended %s: %s", v.Status, v.Error)
	}
	if n := len(callsMatching(e.fake.Calls(), "W-SEARCHER")); n != 1 {
		t.Errorf("the searcher's model was asked %d times, want 1", n)
	}
	if out := v.Result.Teams[0].Workers[0].Output; out != first {
		t.Errorf("searcher output = %q, want the kept answer", out)
	}
	calls, err := e.store.LLMCalls(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if requests := len(e.fake.Calls()); len(calls) != requests {
		t.Errorf("%d usage rows for %d provider requests", len(calls), requests)
	}
	if n, _ := e.store.KeptAnswers(ctx, id); n != 0 {
		t.Errorf("%d kept answers left after the run", n)
	}

	// The log: attempt 2 announced before its text, no text of attempt 1
	// after that, the call's usage once.
	retried, usage := false, map[string]int{}
	var text2 strings.Builder
	for _, ev := range e.storedEvents(id) {
		if ev.Source.AgentID != "w-searcher" || ev.Event.Category != models.CategoryLLM {
			continue
		}
		attempt, _ := ev.Data["attempt"].(float64)
		switch ev.Event.Action {
		case models.ActionRetry:
			if attempt == 2 {
				retried = true
			}
		case models.ActionStream:
			switch {
			case attempt >= 2 && !retried:
				t.Errorf("attempt %v streamed before its llm.retry (sequence %d)", attempt, ev.Sequence)
			case attempt == 1 && retried:
				t.Errorf("attempt 1's text after attempt 2's llm.retry (sequence %d)", ev.Sequence)
			case attempt == 2:
				text2.WriteString(ev.Data["content"].(string))
			}
		case models.ActionUsage:
			usage[ev.Data["llm_call_id"].(string)]++
		}
	}
	if !retried {
		t.Error("no llm.retry for the searcher's attempt 2")
	}
	if text2.String() != first {
		t.Errorf("attempt 2 streamed %q, want the kept answer", text2.String())
	}
	if len(usage) != 1 {
		t.Errorf("the searcher's llm.usage by call: %v, want one call once", usage)
	}
	for call, n := range usage {
		if n != 1 {
			t.Errorf("llm.usage of %s logged %d times", call, n)
		}
	}
	// The workflow's figures count the call once: the run's usage equals
	// the usage rows' sum.
	var rows int
	for _, c := range calls {
		rows += c.TotalTokens
	}
	if v.Result.Usage.TotalTokens != rows {
		t.Errorf("the workflow's run usage %+v; the usage rows total %d tokens", v.Result.Usage, rows)
	}
}
