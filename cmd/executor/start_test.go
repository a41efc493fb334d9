package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/op-stack/executor/client"
)

// TestStartQueueFlags: runs start and threads continue send on_limit and
// multitask_strategy as given (and nothing when not given), threads
// continue follows up the thread's newest run, and a run the API answers
// queued is said to be, with its place. (The API's own handling of the
// fields is tested with the admission queue, in e2e.)
func TestStartQueueFlags(t *testing.T) {
	var mu sync.Mutex
	var starts []map[string]any
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body map[string]any
		json.NewDecoder(r.Body).Decode(&body)
		w.Header().Set("Content-Type", "application/json")
		var data any
		switch strings.TrimPrefix(r.URL.Path, client.Prefix) {
		case "/runs/start":
			mu.Lock()
			starts = append(starts, body)
			mu.Unlock()
			data = map[string]any{"id": "r9", "workflow_id": "run-r9", "status": "queued", "thread_id": "r1", "queue_position": 2}
		case "/runs/get":
			data = map[string]any{"id": body["id"], "thread_id": "r1", "status": "completed"}
		case "/runs/list":
			if body["thread_id"] != "r1" {
				t.Errorf("runs/list %v", body)
			}
			data = map[string]any{"items": []any{map[string]any{"id": "r3", "hierarchy_id": "h2", "status": "running"}}, "total": 3, "page": 1, "page_size": 1}
		default:
			http.NotFound(w, r)
			return
		}
		json.NewEncoder(w).Encode(map[string]any{"code": 0, "data": data})
	}))
	defer srv.Close()
	run := func(args ...string) (string, string, int) {
		var stdout, stderr bytes.Buffer
		code := execute(context.Background(), append(args, "--url", srv.URL), &stdout, &stderr)
		return stdout.String(), stderr.String(), code
	}
	out, errOut, code := run("runs", "start", "--hierarchy", "h1", "--task", "t", "--previous-run", "r1", "--on-limit", "reject", "--multitask-strategy", "enqueue")
	if code != 0 || out != "r9\n" || !strings.Contains(errOut, "run r9 is queued at position 2") {
		t.Errorf("runs start: exit %d %q %q", code, out, errOut)
	}
	out, errOut, code = run("threads", "continue", "r2", "--task", "more", "--multitask-strategy", "interrupt", "-o", "json")
	if code != 0 || !strings.Contains(out, `"queue_position": 2`) || !strings.Contains(errOut, "a follow-up of run r3 in thread r1") {
		t.Errorf("threads continue: exit %d %q %q", code, out, errOut)
	}
	if _, _, code = run("runs", "start", "--hierarchy", "h1", "--task", "t"); code != 0 {
		t.Errorf("runs start without queue flags: exit %d", code)
	}
	mu.Lock()
	defer mu.Unlock()
	want := []string{
		`{"hierarchy_id":"h1","multitask_strategy":"enqueue","on_limit":"reject","previous_run_id":"r1","task":"t"}`,
		`{"hierarchy_id":"h2","multitask_strategy":"interrupt","previous_run_id":"r3","task":"more"}`,
		`{"hierarchy_id":"h1","task":"t"}`,
	}
	if len(starts) != len(want) {
		t.Fatalf("starts %v", starts)
	}
	for i := range want {
		if got, _ := json.Marshal(starts[i]); string(got) != want[i] {
			t.Errorf("start %d: %s, want %s", i, got, want[i])
		}
	}
}
