package e2e

import (
	"strings"
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
