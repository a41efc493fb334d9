//go:build cluster

package clustertest

import (
	"bytes"
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib"
	sse "github.com/tmaxmax/go-sse"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	temporallog "go.temporal.io/sdk/log"

	"github.com/op-stack/executor/llm/llmfake"
	"github.com/op-stack/executor/models"
)

const (
	defaultTemporal = "127.0.0.1:7333"
	defaultAdminURL = "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable"
	apiKey          = "sk-test-cluster-secret"
)

func env(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

// logf prints progress as it happens (go test -v shows t.Log only at the end
// of a subtest on some versions; this layer is long enough to want it live).
func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "%s clustertest: %s\n", time.Now().UTC().Format("15:04:05.000"), fmt.Sprintf(format, args...))
}

// proc is one `executor serve` process.
type proc struct {
	name    string
	cmd     *exec.Cmd
	logs    *bytes.Buffer
	mu      *sync.Mutex
	url     string // API base URL (api role)
	readyz  string // readiness URL
	exited  chan struct{}
	killed  bool
	waitErr error
}

// lockedBuffer is an io.Writer safe for the process's two output pipes.
type lockedBuffer struct {
	mu  *sync.Mutex
	buf *bytes.Buffer
}

func (b lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (p *proc) output() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.logs.String()
}

// kill sends SIGKILL and waits for the process to be gone.
func (p *proc) kill(t testing.TB) {
	t.Helper()
	p.killed = true
	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatalf("kill %s: %v", p.name, err)
	}
	<-p.exited
}

// cluster is the deployment under test.
type cluster struct {
	t        *testing.T
	bin      string
	dbURL    string
	temporal string
	queue    string
	fake     *llmfake.Server
	tc       client.Client
	apis     []*proc
	workers  []*proc
}

func freePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

func randomSuffix() string {
	b := make([]byte, 4)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// createDatabase creates a fresh database on the admin URL's server, dropped
// when t ends, and returns its URL.
func createDatabase(t *testing.T, adminURL string) string {
	t.Helper()
	admin, err := sql.Open("pgx", adminURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { admin.Close() })
	name := "executor_cluster_" + randomSuffix()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := admin.ExecContext(ctx, "CREATE DATABASE "+name); err != nil {
		t.Fatalf("create database %s on %s: %v", name, adminURL, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if _, err := admin.ExecContext(ctx, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)"); err != nil {
			t.Logf("drop database %s: %v", name, err)
		}
	})
	u, err := url.Parse(adminURL)
	if err != nil {
		t.Fatal(err)
	}
	u.Path = "/" + name
	return u.String()
}

func newCluster(t *testing.T) *cluster {
	c := &cluster{
		t:        t,
		temporal: env("CLUSTER_TEMPORAL_ADDRESS", defaultTemporal),
		queue:    "cluster-" + models.NewID(),
	}
	// The server.
	var err error
	c.tc, err = client.Dial(client.Options{HostPort: c.temporal, Logger: temporallog.NewStructuredLogger(slog.New(slog.NewTextHandler(io.Discard, nil)))})
	if err != nil {
		t.Fatalf("no Temporal server at %s (run `make cluster`): %v", c.temporal, err)
	}
	t.Cleanup(c.tc.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := c.tc.CheckHealth(ctx, &client.CheckHealthRequest{}); err != nil {
		t.Fatalf("Temporal server at %s does not answer (run `make cluster`): %v", c.temporal, err)
	}

	// The binary.
	start := time.Now()
	c.bin = filepath.Join(t.TempDir(), "executor")
	if out, err := exec.Command("go", "build", "-o", c.bin, "../cmd/executor").CombinedOutput(); err != nil {
		t.Fatalf("build executor: %v\n%s", err, out)
	}
	logf("built executor in %v", time.Since(start).Round(time.Millisecond))

	// The database, migrated by `executor migrate`.
	c.dbURL = createDatabase(t, env("CLUSTER_DATABASE_URL", defaultAdminURL))
	migrate := exec.Command(c.bin, "migrate")
	migrate.Env = c.environ(nil)
	if out, err := migrate.CombinedOutput(); err != nil {
		t.Fatalf("executor migrate: %v\n%s", err, out)
	}
	logf("database %s migrated", c.dbURL)

	// A key for the API replicas, which require one (`executor serve`'s
	// default), made as an operator would.
	mk := exec.Command(c.bin, "apikeys", "create", "--tenant", "cluster-test", "--scopes", "hierarchies:read,hierarchies:write,runs:read,runs:write")
	mk.Env = c.environ(nil)
	var keyOut, keyErr bytes.Buffer
	mk.Stdout, mk.Stderr = &keyOut, &keyErr
	if err := mk.Run(); err != nil {
		t.Fatalf("executor apikeys create: %v\n%s", err, keyErr.String())
	}
	bearer = strings.TrimSpace(keyOut.String())

	// The model.
	c.fake = llmfake.New(t)

	// Two workers, two API replicas.
	start = time.Now()
	for i := 1; i <= 2; i++ {
		c.workers = append(c.workers, c.startProc(fmt.Sprintf("worker-%d", i), "worker"))
	}
	for i := 1; i <= 2; i++ {
		c.apis = append(c.apis, c.startProc(fmt.Sprintf("api-%d", i), "api"))
	}
	for _, p := range append(append([]*proc{}, c.workers...), c.apis...) {
		c.waitReady(p)
	}
	logf("2 workers and 2 API replicas ready in %v", time.Since(start).Round(time.Millisecond))
	return c
}

// environ is the processes' configuration (config.Vars), plus extra.
func (c *cluster) environ(extra []string) []string {
	e := append(os.Environ(),
		"DATABASE_URL="+c.dbURL,
		"TEMPORAL_ADDRESS="+c.temporal,
		"TEMPORAL_NAMESPACE=default",
		"TEMPORAL_TASK_QUEUE="+c.queue,
		"LLM_DEFAULT_MODEL=test-model",
		"LLM_HEARTBEAT_TIMEOUT=3s",
		"LLM_RETRY_INITIAL=100ms",
		"LLM_RETRY_MAX=1s",
		"LLM_MAX_ATTEMPTS=4",
		"LLM_CALL_TIMEOUT=1m",
		"SHUTDOWN_TIMEOUT=5s",
		"LOG_LEVEL=warn",
		"SSE_NOTIFY=auto",
		// One key drives 20 concurrent runs and their polling here: far
		// more than one client's default rate (RATE_LIMIT_RPS), which
		// e2e's TestIdempotencyLimitsAndBrowserSafety tests.
		"RATE_LIMIT_RPS=2000", "RATE_LIMIT_BURST=4000",
		// Nothing of the machine's own provider settings.
		"OPENROUTER_API_KEY=", "COMPATIBLE_BASE_URL=", "LLM_MODELS=", "LLM_DEFAULT_PROVIDER=", "AWS_BEDROCK_ENABLED=false",
		"OTEL_EXPORTER_OTLP_ENDPOINT=", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT=", "OTEL_TRACES_EXPORTER=",
	)
	if c.fake != nil {
		e = append(e, "OPENAI_API_KEY="+apiKey, "OPENAI_BASE_URL="+c.fake.URL())
	}
	return append(e, extra...)
}

func (c *cluster) startProc(name, role string) *proc {
	t := c.t
	httpPort, metricsPort := freePort(t), freePort(t)
	p := &proc{name: name, logs: &bytes.Buffer{}, mu: &sync.Mutex{}, exited: make(chan struct{})}
	extra := []string{"DATA_DIR=" + t.TempDir(), fmt.Sprintf("METRICS_ADDR=127.0.0.1:%d", metricsPort)}
	if role == "api" {
		extra = append(extra, fmt.Sprintf("HTTP_ADDR=127.0.0.1:%d", httpPort))
		p.url = fmt.Sprintf("http://127.0.0.1:%d/api/executor/v1", httpPort)
	}
	p.readyz = fmt.Sprintf("http://127.0.0.1:%d/readyz", metricsPort)
	p.cmd = exec.Command(c.bin, "serve", "-role", role)
	p.cmd.Env = c.environ(extra)
	w := lockedBuffer{mu: p.mu, buf: p.logs}
	p.cmd.Stdout, p.cmd.Stderr = w, w
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		p.waitErr = p.cmd.Wait()
		close(p.exited)
	}()
	t.Cleanup(func() {
		select {
		case <-p.exited:
			if !p.killed {
				t.Errorf("%s exited by itself: %v\n%s", p.name, p.waitErr, p.output())
			}
		default:
			p.cmd.Process.Signal(syscall.SIGTERM)
			select {
			case <-p.exited:
			case <-time.After(10 * time.Second):
				p.cmd.Process.Kill()
				<-p.exited
			}
		}
		if t.Failed() {
			t.Logf("%s (pid %d) output:\n%s", p.name, p.cmd.Process.Pid, p.output())
		}
	})
	logf("started %s (pid %d, %s)", name, p.cmd.Process.Pid, strings.Join(extra[1:], " "))
	return p
}

func (c *cluster) waitReady(p *proc) {
	c.t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		select {
		case <-p.exited:
			c.t.Fatalf("%s exited during start: %v\n%s", p.name, p.waitErr, p.output())
		default:
		}
		resp, err := http.Get(p.readyz)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("%s not ready after 60s (%v)\n%s", p.name, err, p.output())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// --- the contract API ---------------------------------------------------------

type envelope struct {
	Code      int             `json:"code"`
	Message   string          `json:"message"`
	ErrorCode string          `json:"error_code"`
	Data      json.RawMessage `json:"data"`
}

// bearer is the API key the test's requests carry.
var bearer string

func post(t testing.TB, api *proc, path string, body, out any) {
	t.Helper()
	raw, _ := json.Marshal(body)
	req, _ := http.NewRequest(http.MethodPost, api.url+path, bytes.NewReader(raw))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+bearer)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s POST %s: %v", api.name, path, err)
	}
	defer resp.Body.Close()
	var env envelope
	if err := json.NewDecoder(resp.Body).Decode(&env); err != nil {
		t.Fatalf("%s POST %s: %v", api.name, path, err)
	}
	if resp.StatusCode != http.StatusOK || env.Code != 0 {
		t.Fatalf("%s POST %s: status %d code %d: %s", api.name, path, resp.StatusCode, env.Code, env.Message)
	}
	if out != nil {
		if err := json.Unmarshal(env.Data, out); err != nil {
			t.Fatal(err)
		}
	}
}

func createHierarchy(t testing.TB, api *proc, body map[string]any) string {
	t.Helper()
	var out struct {
		ID string `json:"hierarchy_id"`
	}
	post(t, api, "/hierarchies/create", body, &out)
	return out.ID
}

func startRun(t testing.TB, api *proc, hierarchyID, task string) string {
	t.Helper()
	var out struct {
		ID string `json:"id"`
	}
	post(t, api, "/runs/start", map[string]any{"hierarchy_id": hierarchyID, "task": task}, &out)
	return out.ID
}

type runView struct {
	ID          string `json:"id"`
	Status      string `json:"status"`
	FinalAnswer string `json:"final_answer"`
	Error       string `json:"error"`
	Result      *struct {
		Teams []struct {
			TeamName string `json:"team_name"`
			Workers  []struct {
				AgentID string `json:"agent_id"`
				Output  string `json:"output"`
			} `json:"workers"`
		} `json:"teams"`
	} `json:"result"`
}

func getRun(t testing.TB, api *proc, id string) runView {
	t.Helper()
	var v runView
	post(t, api, "/runs/get", map[string]any{"id": id}, &v)
	return v
}

func waitRun(t testing.TB, api *proc, id string, timeout time.Duration) runView {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		v := getRun(t, api, id)
		if models.IsTerminal(v.Status) {
			return v
		}
		if time.Now().After(deadline) {
			t.Fatalf("run %s still %s after %v", id, v.Status, timeout)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// storedEvents pages through runs/events.
func storedEvents(t testing.TB, api *proc, id string) []models.Event {
	t.Helper()
	var all []models.Event
	var after int64
	for {
		var page struct {
			Events    []models.Event `json:"events"`
			NextAfter int64          `json:"next_after"`
			HasMore   bool           `json:"has_more"`
		}
		post(t, api, "/runs/events", map[string]any{"id": id, "after": after, "limit": 1000}, &page)
		all = append(all, page.Events...)
		if !page.HasMore {
			return all
		}
		after = page.NextAfter
	}
}

// --- SSE ------------------------------------------------------------------------

type sseMessage struct {
	ID    string
	Type  string
	Event models.Event
}

// openStream opens GET /runs/<id>/stream on api, resuming after lastEventID.
func openStream(t testing.TB, api *proc, runID string, lastEventID int64) *http.Response {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, api.url+"/runs/"+runID+"/stream", nil)
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Authorization", "Bearer "+bearer)
	if lastEventID > 0 {
		req.Header.Set("Last-Event-ID", strconv.FormatInt(lastEventID, 10))
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s: open stream: %v", api.name, err)
	}
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		t.Fatalf("%s: stream answered %d %s", api.name, resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	return resp
}

// readStream reads until the server ends the stream (ended), stop returns
// true, or the connection breaks (err).
func readStream(t testing.TB, resp *http.Response, stop func(sseMessage) bool) (msgs []sseMessage, ended bool, err error) {
	t.Helper()
	defer resp.Body.Close()
	for ev, err := range sse.Read(resp.Body, &sse.ReadConfig{MaxEventSize: 4 << 20}) {
		if err != nil {
			return msgs, false, err
		}
		m := sseMessage{ID: ev.LastEventID, Type: ev.Type}
		if err := json.Unmarshal([]byte(ev.Data), &m.Event); err != nil {
			t.Fatalf("event data is not the envelope: %v: %q", err, ev.Data)
		}
		msgs = append(msgs, m)
		if stop != nil && stop(m) {
			return msgs, false, nil
		}
	}
	return msgs, true, nil
}

// checkGapFree checks sequences 1…n with no gap and no duplicate, SSE ids
// equal to sequences, one run, and lifecycle.completed last.
func checkGapFree(t testing.TB, runID string, msgs []sseMessage) {
	t.Helper()
	if len(msgs) == 0 {
		t.Fatal("no events")
	}
	for i, m := range msgs {
		if m.Event.Sequence != int64(i+1) || (m.ID != "" && m.ID != strconv.Itoa(i+1)) {
			t.Fatalf("event %d: id %q sequence %d (gap or duplicate)", i, m.ID, m.Event.Sequence)
		}
		if m.Event.RunID != runID {
			t.Fatalf("event %d of run %q", i, m.Event.RunID)
		}
	}
	if first := msgs[0].Event.Event.String(); first != "lifecycle.started" {
		t.Errorf("first event %s", first)
	}
	if last := msgs[len(msgs)-1].Event.Event.String(); last != "lifecycle.completed" {
		t.Errorf("last event %s, want lifecycle.completed", last)
	}
}

func asMessages(evs []models.Event) []sseMessage {
	out := make([]sseMessage, len(evs))
	for i, e := range evs {
		out[i] = sseMessage{Type: e.Event.String(), Event: e}
	}
	return out
}

// sameEvents checks that the streamed events are the stored ones.
func sameEvents(t testing.TB, streamed []sseMessage, stored []models.Event) {
	t.Helper()
	if len(streamed) != len(stored) {
		t.Fatalf("streamed %d events, stored %d", len(streamed), len(stored))
	}
	for i := range stored {
		a, b := streamed[i].Event, stored[i]
		if a.Sequence != b.Sequence || a.Event != b.Event || fmt.Sprint(a.Data["content"]) != fmt.Sprint(b.Data["content"]) {
			t.Fatalf("event %d: streamed %d %s, stored %d %s", i, a.Sequence, a.Event, b.Sequence, b.Event)
		}
	}
}

// --- the reference hierarchy (e2e/runs_test.go), with per-run markers ----------

// referenceHierarchy is e2e's reference shape (two teams, three workers);
// every prompt carries tag, so concurrent runs get their own fake rules.
func referenceHierarchy(tag string) map[string]any {
	m := func(s string) string { return s + "-" + tag + "-" }
	return map[string]any{
		"name":                    "reference " + tag,
		"global_supervisor_agent": map[string]any{"agent_id": "gs-1", "system_prompt": m("GS-PROMPT") + " You lead the research."},
		"enable_context_sharing":  true,
		"teams": []any{
			map[string]any{
				"name":                  "research",
				"team_supervisor_agent": map[string]any{"agent_id": "ts-research", "system_prompt": m("TS-RESEARCH") + " You lead research."},
				"prevent_duplicate":     true,
				"share_context":         true,
				"workers": []any{
					map[string]any{"agent_id": "w-searcher", "name": "searcher", "role": "search", "system_prompt": m("W-SEARCHER") + " You search."},
					map[string]any{"agent_id": "w-analyst", "name": "analyst", "role": "analysis", "system_prompt": m("W-ANALYST") + " You analyse."},
				},
			},
			map[string]any{
				"name":                  "writing",
				"team_supervisor_agent": map[string]any{"agent_id": "ts-writing", "system_prompt": m("TS-WRITING") + " You lead writing."},
				"workers": []any{
					map[string]any{"agent_id": "w-writer", "name": "writer", "role": "writing", "system_prompt": m("W-WRITER") + " You write."},
				},
			},
		},
	}
}

func decision(action, target, instruction string) string {
	raw, _ := json.Marshal(map[string]string{"action": action, "target": target, "instruction": instruction, "reason": "scripted"})
	return string(raw)
}

func contentResponses(contents ...string) []llmfake.Response {
	out := make([]llmfake.Response, 0, len(contents))
	for _, c := range contents {
		out = append(out, llmfake.Response{Content: c})
	}
	return out
}

func finalAnswer(tag string) string { return "FINAL ANSWER " + tag + ": tunnelling explained." }

// referenceRules script tag's run: research (searcher, analyst), writing
// (writer), the final answer. workers replaces a worker's answers, by
// marker without the tag ("W-SEARCHER").
func referenceRules(tag string, workers map[string][]llmfake.Response) []llmfake.Rule {
	m := func(s string) string { return s + "-" + tag + "-" }
	rules := []llmfake.Rule{
		{Name: m("global decisions"), SystemContains: m("GS-PROMPT"), HasJSONSchema: true, Responses: contentResponses(
			decision("dispatch", "research", "collect sources"), decision("dispatch", "writing", "write the report"), decision("finish", "", ""))},
		{Name: m("final answer"), SystemContains: m("GS-PROMPT"), Responses: contentResponses(finalAnswer(tag))},
		{Name: m("research decisions"), SystemContains: m("TS-RESEARCH"), Responses: contentResponses(
			decision("dispatch", "searcher", "find papers"), decision("dispatch", "analyst", "analyse them"), decision("finish", "", ""))},
		{Name: m("writing decisions"), SystemContains: m("TS-WRITING"), Responses: contentResponses(
			decision("dispatch", "writer", "write it"), decision("finish", "", ""))},
	}
	for _, marker := range []string{"W-SEARCHER", "W-ANALYST", "W-WRITER"} {
		responses := workers[marker]
		if responses == nil {
			responses = contentResponses("output of " + marker + " " + tag)
		}
		rules = append(rules, llmfake.Rule{Name: m(marker), SystemContains: m(marker), Responses: responses})
	}
	return rules
}

func checkCompleted(t testing.TB, v runView, tag string) {
	t.Helper()
	if v.Status != models.RunCompleted {
		t.Fatalf("run %s ended %s: %s", v.ID, v.Status, v.Error)
	}
	if v.FinalAnswer != finalAnswer(tag) {
		t.Errorf("run %s: final answer %q", v.ID, v.FinalAnswer)
	}
	if v.Result == nil || len(v.Result.Teams) != 2 || v.Result.Teams[0].TeamName != "research" || v.Result.Teams[1].TeamName != "writing" {
		t.Errorf("run %s: result %+v", v.ID, v.Result)
	}
}

// slowWorkers stream the research workers' answers in small chunks, so a run
// stays live for several seconds.
func slowWorkers(n int) map[string][]llmfake.Response {
	return map[string][]llmfake.Response{
		"W-SEARCHER": {{Content: strings.Repeat("paper ", n), ChunkSize: 6, TokenDelay: 40 * time.Millisecond}},
		"W-ANALYST":  {{Content: strings.Repeat("finding ", n), ChunkSize: 8, TokenDelay: 40 * time.Millisecond}},
		"W-WRITER":   {{Content: strings.Repeat("sentence ", n), ChunkSize: 9, TokenDelay: 40 * time.Millisecond}},
	}
}

// --- the test -------------------------------------------------------------------

func TestCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("the cluster layer needs `make cluster`")
	}
	start := time.Now()
	c := newCluster(t)
	api1, api2 := c.apis[0], c.apis[1]

	t.Run("RunCompletes", func(t *testing.T) {
		begin := time.Now()
		c.fake.SetRules(referenceRules("a", nil)...)
		hid := createHierarchy(t, api1, referenceHierarchy("a"))
		id := startRun(t, api2, hid, "Explain quantum tunnelling")
		v := waitRun(t, api1, id, 2*time.Minute)
		checkCompleted(t, v, "a")
		if ws := v.Result.Teams[0].Workers; len(ws) != 2 || ws[1].Output != "output of W-ANALYST a" {
			t.Errorf("research workers = %+v", ws)
		}
		calls := c.fake.Calls()
		if len(calls) != 11 {
			t.Errorf("fake saw %d calls, want 11", len(calls))
		}
		for _, call := range calls {
			if call.APIKey != apiKey || call.Model != "test-model" {
				t.Errorf("call %d: key %q model %q", call.Index, call.APIKey, call.Model)
			}
		}
		evs := storedEvents(t, api2, id)
		checkGapFree(t, id, asMessages(evs))
		logf("RunCompletes: %d events in %v", len(evs), time.Since(begin).Round(time.Millisecond))
	})

	t.Run("StreamResumesOnOtherReplica", func(t *testing.T) {
		begin := time.Now()
		c.fake.Reset()
		c.fake.SetRules(referenceRules("b", slowWorkers(50))...)
		id := startRun(t, api1, createHierarchy(t, api1, referenceHierarchy("b")), "resume elsewhere")

		// Replica 1, from the start, until a few deltas of the searcher.
		deltas := 0
		first, ended, err := readStream(t, openStream(t, api1, id, 0), func(m sseMessage) bool {
			if m.Event.Event.String() == "llm.stream" && m.Event.Source.AgentID == "w-searcher" {
				deltas++
			}
			return deltas >= 3
		})
		if err != nil || ended {
			t.Fatalf("replica 1: ended %v, err %v after %d events", ended, err, len(first))
		}
		last := first[len(first)-1].Event.Sequence
		if v := getRun(t, api2, id); models.IsTerminal(v.Status) {
			t.Fatalf("run already %s when the stream moved: the test proves nothing", v.Status)
		}
		// Replica 2, resuming.
		rest, ended, err := readStream(t, openStream(t, api2, id, last), nil)
		if err != nil || !ended {
			t.Fatalf("replica 2: ended %v, err %v after %d events", ended, err, len(rest))
		}
		all := append(first, rest...)
		checkGapFree(t, id, all)
		checkCompleted(t, getRun(t, api2, id), "b")
		sameEvents(t, all, storedEvents(t, api1, id))
		logf("StreamResumesOnOtherReplica: %d events on replica 1, %d on replica 2 after Last-Event-ID %d, in %v",
			len(first), len(rest), last, time.Since(begin).Round(time.Millisecond))
	})

	t.Run("ConcurrentRuns", func(t *testing.T) {
		begin := time.Now()
		const n = 20
		c.fake.Reset()
		var rules []llmfake.Rule
		for i := 0; i < n; i++ {
			rules = append(rules, referenceRules(fmt.Sprintf("c%02d", i), nil)...)
		}
		c.fake.SetRules(rules...)
		ids := startReferenceRuns(t, c, n, "c%02d", "concurrent ")
		if t.Failed() {
			return
		}
		var wg sync.WaitGroup
		logf("ConcurrentRuns: %d runs started in %v", n, time.Since(begin).Round(time.Millisecond))
		for i := 0; i < n; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				api := c.apis[(i+1)%2]
				tag := fmt.Sprintf("c%02d", i)
				checkCompleted(t, waitRun(t, api, ids[i], 4*time.Minute), tag)
				checkGapFree(t, ids[i], asMessages(storedEvents(t, api, ids[i])))
			}()
		}
		wg.Wait()
		if got := len(c.fake.Calls()); got != 11*n {
			t.Errorf("fake saw %d calls, want %d", got, 11*n)
		}
		logf("ConcurrentRuns: %d runs completed in %v", n, time.Since(begin).Round(time.Millisecond))
	})

	// Last: it kills a worker and an API replica.
	t.Run("KillWorkerAndAPIReplica", func(t *testing.T) {
		begin := time.Now()
		c.fake.Reset()
		c.fake.SetRules(referenceRules("k", slowWorkers(60))...)
		id := startRun(t, api2, createHierarchy(t, api2, referenceHierarchy("k")), "survive")

		// A client on replica 1 reads until the searcher streams.
		deltas := 0
		first, ended, err := readStream(t, openStream(t, api1, id, 0), func(m sseMessage) bool {
			if m.Event.Event.String() == "llm.stream" && m.Event.Source.AgentID == "w-searcher" {
				deltas++
			}
			return deltas >= 2
		})
		if err != nil || ended {
			t.Fatalf("replica 1: ended %v, err %v", ended, err)
		}

		// SIGKILL the worker running the searcher's call (its identity is
		// the SDK's default, pid@host).
		victim := c.activityWorker(t, id)
		logf("KillWorkerAndAPIReplica: SIGKILL %s (pid %d) while it runs the searcher", victim.name, victim.cmd.Process.Pid)
		victim.kill(t)

		// Keep reading on replica 1 until the writer streams, then SIGKILL
		// replica 1 under the open stream.
		resp := openStream(t, api1, id, first[len(first)-1].Event.Sequence)
		type result struct {
			msgs  []sseMessage
			ended bool
			err   error
		}
		done := make(chan result, 1)
		writerSeen := make(chan struct{})
		var once sync.Once
		go func() {
			msgs, ended, err := readStream(t, resp, func(m sseMessage) bool {
				if m.Event.Event.String() == "llm.stream" && m.Event.Source.AgentID == "w-writer" {
					once.Do(func() { close(writerSeen) })
				}
				return false
			})
			done <- result{msgs, ended, err}
		}()
		select {
		case <-writerSeen:
		case r := <-done:
			t.Fatalf("stream on replica 1 stopped before the writer streamed: ended %v err %v", r.ended, r.err)
		case <-time.After(2 * time.Minute):
			t.Fatal("the writer never streamed after the worker was killed")
		}
		logf("KillWorkerAndAPIReplica: SIGKILL %s (pid %d) under an open stream", api1.name, api1.cmd.Process.Pid)
		api1.kill(t)
		r := <-done
		if r.ended {
			t.Fatal("the stream on the killed replica ended cleanly")
		}
		second := r.msgs
		// The client reconnects to replica 2 with the last id it saw.
		got := append(first, second...)
		rest, ended, err := readStream(t, openStream(t, api2, id, got[len(got)-1].Event.Sequence), nil)
		if err != nil || !ended {
			t.Fatalf("replica 2: ended %v, err %v", ended, err)
		}
		got = append(got, rest...)
		checkGapFree(t, id, got)
		v := getRun(t, api2, id)
		checkCompleted(t, v, "k")
		stored := storedEvents(t, api2, id)
		sameEvents(t, got, stored)
		// The searcher's call was retried on the surviving worker.
		searcher := 0
		for _, call := range c.fake.Calls() {
			if call.RuleName == "W-SEARCHER-k-" {
				searcher++
			}
		}
		if searcher != 2 {
			t.Errorf("searcher called %d times, want 2 (killed, then retried)", searcher)
		}
		logf("KillWorkerAndAPIReplica: %d events (%d before the worker died, %d on the killed replica after, %d on replica 2), in %v",
			len(got), len(first), len(second), len(rest), time.Since(begin).Round(time.Millisecond))
	})
	logf("TestCluster took %v", time.Since(start).Round(time.Millisecond))
}

// activityWorker finds the worker process running the run's pending,
// started activity.
func (c *cluster) activityWorker(t *testing.T, runID string) *proc {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		desc, err := c.tc.DescribeWorkflowExecution(ctx, "run-"+runID, "")
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		for _, a := range desc.GetPendingActivities() {
			if a.GetState() != enumspb.PENDING_ACTIVITY_STATE_STARTED {
				continue
			}
			pid, _, _ := strings.Cut(a.GetLastWorkerIdentity(), "@")
			for _, w := range c.workers {
				if strconv.Itoa(w.cmd.Process.Pid) == pid {
					return w
				}
			}
			t.Fatalf("activity %s started by %q, not one of the workers", a.GetActivityType().GetName(), a.GetLastWorkerIdentity())
		}
		if time.Now().After(deadline) {
			t.Fatal(errors.New("no started activity found"))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// startReferenceRuns starts n runs of the reference hierarchy at once,
// alternating between the two API processes, each with its own hierarchy
// tagged fmt.Sprintf(tagFormat, i) (the tag the fake's rules script), and
// returns their ids in order.
func startReferenceRuns(t *testing.T, c *cluster, n int, tagFormat, taskPrefix string) []string {
	ids := make([]string, n)
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			api := c.apis[i%2]
			tag := fmt.Sprintf(tagFormat, i)
			ids[i] = startRun(t, api, createHierarchy(t, api, referenceHierarchy(tag)), taskPrefix+tag)
		}()
	}
	wg.Wait()
	return ids
}
