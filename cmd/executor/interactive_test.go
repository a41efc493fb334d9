package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/spf13/cobra"

	"github.com/op-stack/executor/client"
	"github.com/op-stack/executor/models"
)

// fakeGates is a stand-in for the API's approval routes: one open gate
// until a decision is posted, and every decision's body kept. (The real
// routes with a real run are TestCLISteering's, in e2e.)
type fakeGates struct {
	mu        sync.Mutex
	gate      models.Approval
	open      bool
	refuse    int // answer this many approve calls with a 400 first
	decisions []map[string]any
}

func (f *fakeGates) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var body map[string]any
	json.NewDecoder(r.Body).Decode(&body)
	w.Header().Set("Content-Type", "application/json")
	switch strings.TrimPrefix(r.URL.Path, client.Prefix) {
	case "/runs/approvals":
		gates := []models.Approval{}
		if f.open {
			gates = append(gates, f.gate)
		}
		json.NewEncoder(w).Encode(map[string]any{"code": 0, "data": map[string]any{"id": "r1", "status": "waiting_approval", "approvals": gates}})
	case "/runs/approve", "/runs/reject":
		if f.refuse > 0 && strings.HasSuffix(r.URL.Path, "approve") {
			f.refuse--
			w.WriteHeader(http.StatusBadRequest)
			json.NewEncoder(w).Encode(map[string]any{"code": 40001, "error_code": "INVALID_PARAMETERS", "message": "arguments must be a JSON object", "field": "arguments"})
			return
		}
		f.decisions = append(f.decisions, body)
		f.open = false
		decision := "approved"
		if strings.HasSuffix(r.URL.Path, "reject") {
			decision = "rejected"
		}
		json.NewEncoder(w).Encode(map[string]any{"code": 0, "data": map[string]any{"id": "r1", "approval": map[string]any{"approval_id": body["approval_id"], "decision": decision}}})
	default:
		http.NotFound(w, r)
	}
}

// TestApproverPrompts drives the --interactive prompt with typed answers:
// an edit of a tool gate's arguments (invalid JSON asked again, an
// argument the API refuses asked again), a rejection (an empty comment
// asked again), a skip, a gate already decided (not asked about), and the
// end of standard input (the gate left open, no more prompts).
func TestApproverPrompts(t *testing.T) {
	team := "research"
	tool := models.Approval{ApprovalID: "apr_tool", Kind: models.ApprovalKindTool, AgentID: "w-1", AgentName: "searcher", TeamName: &team,
		Tool: "calculator", Arguments: `{"expression":"2*21"}`}
	agent := models.Approval{ApprovalID: "apr_turn", Kind: models.ApprovalKindAgent, AgentID: "w-2", AgentName: "writer", TeamName: &team, Instruction: "write it"}
	requested := func(id string) models.Event {
		return models.Event{RunID: "r1", Event: models.EventKind{Category: models.CategoryApproval, Action: models.ActionRequested}, Data: map[string]any{"approval_id": id}}
	}
	for _, tc := range []struct {
		name   string
		gate   models.Approval
		refuse int
		input  string
		want   []map[string]any // the decisions posted
		says   []string         // in the prompts' output
	}{
		{"edit a tool's arguments", tool, 1, "e\n{nope\ne\n[1]\ne\n{\"expression\":\"6*7\"}\n",
			[]map[string]any{{"id": "r1", "approval_id": "apr_tool", "arguments": map[string]any{"expression": "6*7"}}},
			[]string{`research/searcher wants to call calculator {"expression":"2*21"}`, `arguments as a JSON object (now {"expression":"2*21"})`, "not valid JSON: {nope", "refused: HTTP 400 INVALID_PARAMETERS (field arguments)", "apr_tool approved"}},
		{"edit an agent's instruction", agent, 0, "e\nShorter please\n",
			[]map[string]any{{"id": "r1", "approval_id": "apr_turn", "instruction": "Shorter please"}},
			[]string{"approval apr_turn: research/writer wants to start its turn: write it", "new instruction: ", "apr_turn approved"}},
		{"reject with a comment", agent, 0, "r\n\nr\nnot today\n",
			[]map[string]any{{"id": "r1", "approval_id": "apr_turn", "comment": "not today"}},
			[]string{"a rejection needs a comment", "apr_turn rejected"}},
		{"approve as it is", agent, 0, "maybe\na\n",
			[]map[string]any{{"id": "r1", "approval_id": "apr_turn"}},
			[]string{"answer a, e, r or s", "apr_turn approved"}},
		{"skip", agent, 0, "s\n", nil, []string{"left apr_turn open: executor runs approve|reject r1 apr_turn"}},
		{"input ends", agent, 0, "", nil, []string{"no more input: left apr_turn open"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fake := &fakeGates{gate: tc.gate, open: true, refuse: tc.refuse}
			srv := httptest.NewServer(fake)
			defer srv.Close()
			c, err := client.New(srv.URL, "", nil)
			if err != nil {
				t.Fatal(err)
			}
			var out bytes.Buffer
			a := newApprover(c, "r1", strings.NewReader(tc.input), &out)
			ctx := context.Background()
			if err := a.onEvent(ctx, requested(tc.gate.ApprovalID)); err != nil {
				t.Fatal(err)
			}
			// The same gate again (a replayed event): decided or skipped,
			// it is not asked about twice unless still open.
			before := out.Len()
			if !fake.open {
				if err := a.onEvent(ctx, requested(tc.gate.ApprovalID)); err != nil || out.Len() != before {
					t.Errorf("a decided gate was asked about again: %v %q", err, out.String()[before:])
				}
			}
			fake.mu.Lock()
			got := fake.decisions
			fake.mu.Unlock()
			if len(got) != len(tc.want) {
				t.Fatalf("decisions %v, want %v\n%s", got, tc.want, out.String())
			}
			for i := range got {
				g, _ := json.Marshal(got[i])
				w, _ := json.Marshal(tc.want[i])
				if string(g) != string(w) {
					t.Errorf("decision %s, want %s", g, w)
				}
			}
			for _, s := range tc.says {
				if !strings.Contains(out.String(), s) {
					t.Errorf("the prompts lack %q:\n%s", s, out.String())
				}
			}
			if tc.name == "input ends" {
				// No more prompts after the input ended.
				before := out.Len()
				if err := a.onEvent(ctx, requested(tc.gate.ApprovalID)); err != nil || out.Len() != before {
					t.Errorf("asked again after the input ended: %q", out.String()[before:])
				}
			}
		})
	}
}

// TestForkFlags: runs fork's flags build runs/fork's changes, amending a
// changes file; without changes the body has none.
func TestForkFlags(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "changes.json")
	os.WriteFile(file, []byte(`{"next_worker":"analyst","agents":[{"agent_id":"w-writer","model":"m1"}]}`), 0o644)
	build := func(args ...string) (client.ForkRequest, error) {
		var f forkFlags
		cmd := &cobra.Command{Use: "fork"}
		f.register(cmd)
		if err := cmd.ParseFlags(args); err != nil {
			return client.ForkRequest{}, err
		}
		cmd.SetIn(io.MultiReader())
		return f.request(cmd, "r1")
	}
	req, err := build("--after", "7")
	if err != nil || req.AfterSequence != 7 || req.RunID != "r1" || req.Changes != nil {
		t.Errorf("no changes: %+v %v", req, err)
	}
	req, err = build("--after", "9", "-f", file, "--team-instruction", "writing=For children", "--agent-prompt", "w-writer=Simple words",
		"--agent-model", "w-analyst=", "--next-team", "writing")
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := json.Marshal(req)
	want := `{"id":"r1","after_sequence":9,"changes":{"team_instructions":{"writing":"For children"},"agents":[{"agent_id":"w-writer","system_prompt":"Simple words","model":"m1"},{"agent_id":"w-analyst","model":""}],"next_team":"writing","next_worker":"analyst"}}`
	if string(raw) != want {
		t.Errorf("body\n%s\nwant\n%s", raw, want)
	}
	os.WriteFile(file, []byte(`{"next_tem":"x"}`), 0o644)
	if _, err := build("--after", "9", "-f", file); err == nil || !strings.Contains(err.Error(), "next_tem") {
		t.Errorf("a misspelt change: %v", err)
	}
}
