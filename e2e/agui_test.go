package e2e

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/op-stack/executor/agui/aguitest"
	"github.com/op-stack/executor/auth"
	"github.com/op-stack/executor/config"
	"github.com/op-stack/executor/internal/interop"
	"github.com/op-stack/executor/llm/llmfake"
	"github.com/op-stack/executor/models"
)

// TestAGUIStreamEndToEnd drives a live run through the real AG-UI route
// (POST runs/{id}/stream?format=ag-ui) with @ag-ui/client's HttpAgent
// (e2e/interop/agui-httpagent.mjs, docs/ag-ui.md's example), with access
// control on. A proxy between them cuts the first connection in the
// middle of the searcher's streamed answer, as a network would; the
// client reconnects with ?after= and answers the run's two approvals
// (interrupts) with runs/approve. Every agent's answer reaches the client
// whole and attributed. The finished run's stream, read whole and resumed
// after each of its events through the route, then passes
// e2e/interop/agui-validate.mjs: @ag-ui/core's schemas and @ag-ui/client's
// own pipeline, with no gap and no duplicate.
func TestAGUIStreamEndToEnd(t *testing.T) {
	dir := interop.Dir(t, "@ag-ui/client/package.json", "@ag-ui/core/package.json")
	e := newEnv(t, referenceRules(map[string][]llmfake.Response{
		"W-SEARCHER": {{Content: strings.Repeat("paper ", 60), TokenDelay: 15 * time.Millisecond}},
	}), withAuth,
		// The finished run is read once per event below: more requests
		// than one key may send in a burst.
		withConfig(func(c *config.Config) { c.RateLimitRPS = 0 }))
	key := e.issueKey("tenant-agui", auth.ScopeHierarchiesWrite, auth.ScopeRunsRead, auth.ScopeRunsWrite)
	var h struct {
		ID string `json:"hierarchy_id"`
	}
	e.mustCall("POST", "/api/executor/v1/hierarchies/create", key, approvalHierarchy(), &h)
	var run struct {
		ID string `json:"id"`
	}
	e.mustCall("POST", "/api/executor/v1/runs/start", key, map[string]any{"hierarchy_id": h.ID, "task": "Explain quantum tunnelling", "id": "agui-run-1"}, &run)

	// The proxy: the first AG-UI connection ends after the searcher's
	// answer has begun; every other request passes through.
	target, _ := url.Parse(e.rootURL())
	rp := httputil.NewSingleHostReverseProxy(target)
	rp.FlushInterval = -1
	var mu sync.Mutex
	var streams []string // each AG-UI connection's resume point
	cut := false
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !strings.HasSuffix(r.URL.Path, "/stream") || r.URL.Query().Get("format") != "ag-ui" {
			rp.ServeHTTP(w, r)
			return
		}
		mu.Lock()
		streams = append(streams, r.URL.Query().Get("after"))
		first := !cut
		cut = true
		mu.Unlock()
		if !first {
			rp.ServeHTTP(w, r)
			return
		}
		// The first connection: relayed until the searcher has streamed
		// some of its answer, then ended mid-message.
		req, _ := http.NewRequestWithContext(r.Context(), r.Method, e.rootURL()+r.URL.RequestURI(), r.Body)
		req.Header = r.Header.Clone()
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		defer resp.Body.Close()
		for k, v := range resp.Header {
			w.Header()[k] = v
		}
		w.WriteHeader(resp.StatusCode)
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		contents := 0
		for sc.Scan() {
			line := sc.Text()
			_, _ = io.WriteString(w, line+"\n")
			w.(http.Flusher).Flush()
			if strings.Contains(line, `"TEXT_MESSAGE_CONTENT"`) && strings.Contains(line, `"w-searcher"`) {
				if contents++; contents == 5 {
					return
				}
			}
		}
	}))
	defer proxy.Close()

	cmd := exec.Command("node", filepath.Join(dir, "agui-httpagent.mjs"), proxy.URL+"/api/executor/v1", run.ID)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "AGUI_API_KEY="+key)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("agui-httpagent.mjs: %v\n%s", err, stderr.String())
	}
	var res struct {
		Messages    []map[string]any `json:"messages"`
		Approved    []string         `json:"approved"`
		Connections int              `json:"connections"`
		Last        int64            `json:"last"`
	}
	if err := json.Unmarshal(out, &res); err != nil {
		t.Fatalf("agui-httpagent.mjs printed %s: %v", out, err)
	}
	var v runView
	waitFor(t, time.Minute, "the run to end", func() bool {
		e.mustCall("POST", "/api/executor/v1/runs/get", key, map[string]any{"id": run.ID}, &v)
		return models.IsTerminal(v.Status)
	})
	if v.Status != models.RunCompleted {
		t.Fatalf("the run ended %s: %s", v.Status, v.Error)
	}
	log := e.storedEvents(run.ID)
	mu.Lock()
	resumedAt := append([]string(nil), streams...)
	mu.Unlock()
	if res.Connections < 2 || len(resumedAt) < 2 || resumedAt[0] != "" || resumedAt[1] == "" || res.Last != log[len(log)-1].Sequence {
		t.Errorf("connections %d resumed at %q, last sequence %d (the log's %d): want a cut first connection and a resumed one to the end",
			res.Connections, resumedAt, res.Last, log[len(log)-1].Sequence)
	}
	var approvals []string
	for _, ev := range log {
		if ev.Event.String() == "approval.requested" {
			approvals = append(approvals, ev.Data["approval_id"].(string))
		}
	}
	if len(approvals) != 2 || strings.Join(res.Approved, ",") != strings.Join(approvals, ",") {
		t.Errorf("the client approved %v, the run asked %v", res.Approved, approvals)
	}
	aguitest.CheckAnswers(t, log, res.Messages)

	// The finished run through the route: whole, and resumed after each
	// event, as agui-validate.mjs reads them.
	var lines bytes.Buffer
	read := func(name string, after int64) {
		path := "/api/executor/v1/runs/" + run.ID + "/stream?format=ag-ui"
		if after > 0 {
			path += "&after=" + strconv.FormatInt(after, 10)
		}
		req, _ := http.NewRequest(http.MethodGet, e.rootURL()+path, nil)
		req.Header.Set("Authorization", "Bearer "+key)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		raw, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/event-stream" {
			t.Fatalf("GET %s: %d %s", path, resp.StatusCode, resp.Header.Get("Content-Type"))
		}
		for _, g := range sseGroups(string(raw)) {
			line, _ := json.Marshal(map[string]any{"stream": name, "seq": g.seq, "sse": g.sse})
			lines.Write(append(line, '\n'))
		}
	}
	read("full", 0)
	for _, ev := range log[:len(log)-1] {
		read("resume@"+strconv.FormatInt(ev.Sequence, 10), ev.Sequence)
	}
	file := filepath.Join(t.TempDir(), "route.jsonl")
	if err := os.WriteFile(file, lines.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	check := exec.Command("node", filepath.Join(dir, "agui-validate.mjs"), file)
	check.Dir = dir
	stderr.Reset()
	check.Stderr = &stderr
	out, err = check.Output()
	if err != nil {
		t.Fatalf("agui-validate.mjs on the route's streams: %v\n%s", err, stderr.String())
	}
	var valid struct {
		Messages []map[string]any `json:"messages"`
		Streams  int              `json:"streams"`
	}
	if err := json.Unmarshal(out, &valid); err != nil {
		t.Fatalf("agui-validate.mjs printed %s: %v", out, err)
	}
	if valid.Streams != len(log) {
		t.Errorf("%d streams validated, want %d", valid.Streams, len(log))
	}
	aguitest.CheckAnswers(t, log, valid.Messages)

	// Not on the WebSocket route, and no other format.
	if status, raw := e.call("GET", "/api/executor/v1/runs/"+run.ID+"/stream?format=yaml", key, nil); status != http.StatusBadRequest {
		t.Errorf("?format=yaml: %d %s", status, raw)
	}
	if status, raw := e.call("POST", "/api/executor/v1/runs/"+run.ID+"/stream", key, map[string]any{}); status != http.StatusBadRequest {
		t.Errorf("POST runs/{id}/stream without format=ag-ui: %d %s", status, raw)
	}
}

// sseGroup is what the AG-UI route wrote for one event of the run's log:
// its SSE messages up to and including the one with that event's id.
type sseGroup struct {
	seq int64
	sse string
}

// sseGroups splits an AG-UI stream into its log events' groups (the
// prelude of a resumed stream goes with the first).
func sseGroups(raw string) []sseGroup {
	var out []sseGroup
	var cur strings.Builder
	for _, msg := range strings.SplitAfter(raw, "\n\n") {
		if strings.TrimSpace(msg) == "" || strings.HasPrefix(msg, ":") {
			continue
		}
		cur.WriteString(msg)
		for _, line := range strings.Split(msg, "\n") {
			if id, ok := strings.CutPrefix(line, "id: "); ok {
				n, _ := strconv.ParseInt(strings.TrimSpace(id), 10, 64)
				out = append(out, sseGroup{seq: n, sse: cur.String()})
				cur.Reset()
			}
		}
	}
	return out
}
