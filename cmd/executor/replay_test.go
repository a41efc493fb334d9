package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestReplayCommand: `executor replay` passes a recorded history and
// reports a history the current code cannot reproduce as nondeterministic.
func TestReplayCommand(t *testing.T) {
	good := filepath.Join("..", "..", "workflows", "testdata", "sequential", "run.json")
	var out bytes.Buffer
	if err := replay([]string{good}, &out); err != nil || !strings.HasPrefix(out.String(), "ok   ") {
		t.Fatalf("replay of a recorded history: %v\n%s", err, out.String())
	}

	// The same history, as if an older workflow version had called a
	// different activity first.
	raw, err := os.ReadFile(good)
	if err != nil {
		t.Fatal(err)
	}
	changed := strings.Replace(string(raw), `"name": "SetRunStatus"`, `"name": "SetRunStatusV0"`, 1)
	if changed == string(raw) {
		changed = strings.Replace(string(raw), `"name":"SetRunStatus"`, `"name":"SetRunStatusV0"`, 1)
	}
	if changed == string(raw) {
		t.Fatal("the recorded history has no SetRunStatus activity to change")
	}
	bad := filepath.Join(t.TempDir(), "changed.json")
	if err := os.WriteFile(bad, []byte(changed), 0o644); err != nil {
		t.Fatal(err)
	}
	out.Reset()
	err = replay([]string{good, bad}, &out)
	if err == nil || !strings.Contains(err.Error(), "1 of 2 histories failed") {
		t.Fatalf("want one failure, got %v", err)
	}
	if !strings.Contains(out.String(), "FAIL "+bad) || !strings.Contains(out.String(), "NONDETERMINISTIC") {
		t.Errorf("report does not say the history is nondeterministic:\n%s", out.String())
	}
	if err := replay(nil, &out); err == nil {
		t.Error("replay without files succeeded")
	}
}
