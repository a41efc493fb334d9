package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/op-stack/executor/llm/llmfake"
	"github.com/op-stack/executor/models"
)

// TestProviderKeyRejected: a provider answering 401 (to a worker, which
// fails its team) or 403 (to the global supervisor, which fails the run
// itself) ends the run with PROVIDER_KEY_REJECTED, not EXECUTION_FAILED, on
// both surfaces: contract 002's runs/get, results and stream, and spec
// 001's execution and stream. The call is not retried and the key never
// shows.
func TestProviderKeyRejected(t *testing.T) {
	const want = "PROVIDER_KEY_REJECTED"
	for _, tc := range []struct {
		name, marker string
		status       int
	}{
		{"worker 401", "W-WRITER", 401},
		{"global supervisor 403", "GS-PROMPT", 403},
	} {
		t.Run(tc.name, func(t *testing.T) {
			refusal := []llmfake.Response{{Status: tc.status, ErrorMessage: "Incorrect API key provided: sk-test-e2e-secret"}}
			var rules []llmfake.Rule
			if tc.marker == "GS-PROMPT" {
				rules = referenceRules(nil)
				rules[0].Responses = refusal // the global supervisor's first decision
			} else {
				rules = referenceRules(map[string][]llmfake.Response{tc.marker: refusal})
			}
			e := newEnv(t, rules)
			id := e.startRun(e.createHierarchy(referenceHierarchy()), "refused key")
			v := e.waitRun(id, time.Minute)
			if v.Status != models.RunFailed {
				t.Fatalf("run ended %s", v.Status)
			}
			if n := len(callsMatching(e.fake.Calls(), tc.marker)); n != 1 {
				t.Errorf("the refused call was made %d times, want 1", n)
			}

			// Contract 002: runs/get, its result's errors, runs/results.
			var got struct {
				Error     string `json:"error"`
				ErrorCode string `json:"error_code"`
			}
			e.mustPost("/runs/get", map[string]any{"id": id}, &got)
			if got.ErrorCode != want || got.Error == "" {
				t.Errorf("runs/get error_code %q (error %q), want %s", got.ErrorCode, got.Error, want)
			}
			if strings.Contains(got.Error, "sk-test-e2e-secret") {
				t.Error("the run's error shows the key")
			}
			if v.Result == nil || len(v.Result.Errors) == 0 {
				t.Fatalf("no errors in the result: %+v", v.Result)
			}
			for _, er := range v.Result.Errors {
				if er.ErrorCode != want {
					t.Errorf("result error %q has code %s", er.Message, er.ErrorCode)
				}
			}
			var res results
			e.mustPost("/runs/results", map[string]any{"id": id}, &res)
			if len(res.Errors) == 0 {
				t.Error("runs/results lists no error")
			}
			for _, er := range res.Errors {
				if er.ErrorCode != want {
					t.Errorf("runs/results error %q has code %s", er.Message, er.ErrorCode)
				}
			}
			msgs := e.streamAll(id)
			last := msgs[len(msgs)-1].Event
			if last.Event.Category != models.CategoryLifecycle || last.Event.Action != models.ActionFailed || last.Data["error_code"] != want {
				t.Errorf("contract 002 stream ends with %s.%s %v", last.Event.Category, last.Event.Action, last.Data)
			}

			// Spec 001: the execution and its stream.
			var ex map[string]any
			e.mustV1("GET", "/executions/"+id, nil, "EXECUTION_INFO_RETRIEVED", &ex)
			if ex["error_code"] != want || ex["status"] != models.RunFailed {
				t.Errorf("spec 001 execution: status %v error_code %v, want failed %s", ex["status"], ex["error_code"], want)
			}
			v1 := e.readV1Stream(e.openV1Stream(id, 0, false))
			end := v1[len(v1)-1]
			if end.Type != "execution_completed" || end.Data["status"] != "failed" || end.Data["error_code"] != want {
				t.Errorf("spec 001 stream ends with %s %v", end.Type, end.Data)
			}
		})
	}
}

// TestProviderKeyRotationOnSIGHUP: a worker process reading its key from
// OPENAI_API_KEY_FILE (no poll) keeps sending it until SIGHUP; after the
// file is rewritten and the process gets SIGHUP, which no longer ends it,
// its next run's calls send the new key.
func TestProviderKeyRotationOnSIGHUP(t *testing.T) {
	const oldKey, newKey = "sk-e2e-rotated-away-1111", "sk-e2e-rotated-in-2222"
	e := newEnv(t, referenceRules(nil), withoutWorker)
	path := filepath.Join(t.TempDir(), "openai.key")
	if err := os.WriteFile(path, []byte(oldKey+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	worker := e.workerProcess("OPENAI_API_KEY=", "OPENAI_API_KEY_FILE="+path, "LLM_KEY_FILE_POLL=0")
	hid := e.createHierarchy(referenceHierarchy())
	keysSent := func(calls []llmfake.Call) map[string]int {
		sent := map[string]int{}
		for _, c := range calls {
			sent[c.APIKey]++
		}
		return sent
	}

	if v := e.waitRun(e.startRun(hid, "before the rotation"), time.Minute); v.Status != models.RunCompleted {
		t.Fatalf("first run ended %s: %s", v.Status, v.Error)
	}
	before := e.fake.Calls()
	if sent := keysSent(before); len(sent) != 1 || sent[oldKey] == 0 {
		t.Fatalf("first run's calls sent keys %v, want only the file's", sent)
	}

	if err := os.WriteFile(path, []byte(newKey+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	// Without the signal (no poll) the old key stays.
	if v := e.waitRun(e.startRun(hid, "file changed, no signal"), time.Minute); v.Status != models.RunCompleted {
		t.Fatalf("second run ended %s: %s", v.Status, v.Error)
	}
	middle := e.fake.Calls()
	if sent := keysSent(middle[len(before):]); len(sent) != 1 || sent[oldKey] == 0 {
		t.Fatalf("before SIGHUP the calls sent keys %v, want the old key", sent)
	}

	if err := worker.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	time.Sleep(500 * time.Millisecond) // the reread is one small file
	if v := e.waitRun(e.startRun(hid, "after SIGHUP"), time.Minute); v.Status != models.RunCompleted {
		t.Fatalf("run after SIGHUP ended %s: %s (the worker process may have died)", v.Status, v.Error)
	}
	if sent := keysSent(e.fake.Calls()[len(middle):]); len(sent) != 1 || sent[newKey] == 0 {
		t.Errorf("after SIGHUP the calls sent keys %v, want only the new key", sent)
	}
}
