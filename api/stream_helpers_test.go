package api_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	sse "github.com/tmaxmax/go-sse"

	"github.com/op-stack/executor/api"
	"github.com/op-stack/executor/models"
	"github.com/op-stack/executor/notify"
	"github.com/op-stack/executor/store"
)

const (
	pathStream = "/api/executor/v1/runs/stream"
	pathEvents = "/api/executor/v1/runs/events"
)

func pathStreamGET(id string) string { return "/api/executor/v1/runs/" + id + "/stream" }

// fakeWorkflows stands in for the runs' workflows behind the events query:
// each run's event log with the workflow's page semantics (a held tail,
// FirstAvailable, More, Terminal), and a count of the queries it answers.
type fakeWorkflows struct {
	mu      sync.Mutex
	runs    map[string]*fakeRun // by workflow ID
	failing int                 // the next this many queries fail

	delay       atomic.Int64 // each query takes this long (a time.Duration)
	queries     atomic.Int64
	inFlight    atomic.Int64
	maxInFlight atomic.Int64
}

type fakeRun struct {
	held     []models.Event // the tail the workflow still holds
	last     int64
	terminal bool
}

func newFakeWorkflows() *fakeWorkflows { return &fakeWorkflows{runs: map[string]*fakeRun{}} }

// QueryEvents answers like the run workflow's events query, after a JSON
// round trip as through Temporal.
func (f *fakeWorkflows) QueryEvents(ctx context.Context, workflowID string, q models.EventQuery) (models.EventPage, error) {
	f.queries.Add(1)
	n := f.inFlight.Add(1)
	defer f.inFlight.Add(-1)
	if d := time.Duration(f.delay.Load()); d > 0 {
		time.Sleep(d)
	}
	for {
		m := f.maxInFlight.Load()
		if n <= m || f.maxInFlight.CompareAndSwap(m, n) {
			break
		}
	}
	f.mu.Lock()
	if f.failing > 0 {
		f.failing--
		f.mu.Unlock()
		return models.EventPage{}, errors.New("fake: workflow task not yet run")
	}
	r := f.runs[workflowID]
	if r == nil {
		f.mu.Unlock()
		return models.EventPage{}, fmt.Errorf("fake: workflow %s not found", workflowID)
	}
	page := r.page(q)
	raw, err := json.Marshal(page)
	f.mu.Unlock()
	if err != nil {
		return models.EventPage{}, err
	}
	var out models.EventPage
	return out, json.Unmarshal(raw, &out)
}

// page mirrors workflows.EventLog.Page.
func (r *fakeRun) page(q models.EventQuery) models.EventPage {
	first := r.last + 1
	if len(r.held) > 0 {
		first = r.held[0].Sequence
	}
	page := models.EventPage{LastSequence: r.last, FirstAvailable: first, Events: []models.Event{}}
	limit, maxBytes := q.Limit, q.MaxBytes
	if limit <= 0 {
		limit = 1000
	}
	if maxBytes <= 0 || maxBytes > 900<<10 {
		maxBytes = 512 << 10
	}
	start := q.After + 1
	if start < first {
		page.More = true
		return page
	}
	size := 0
	for i := int(start - first); i >= 0 && i < len(r.held); i++ {
		raw, _ := json.Marshal(r.held[i])
		if len(page.Events) >= limit || (len(page.Events) > 0 && size+len(raw) > maxBytes) {
			page.More = true
			break
		}
		size += len(raw)
		page.Events = append(page.Events, r.held[i])
	}
	page.Terminal = r.terminal && !page.More
	return page
}

func (f *fakeWorkflows) run(runID string) *fakeRun {
	wf := models.RunWorkflowID(runID)
	r := f.runs[wf]
	if r == nil {
		r = &fakeRun{}
		f.runs[wf] = r
	}
	return r
}

// emit appends events of the given kinds ("category.action") to the run's
// log, as the workflow would, and returns them. Each event's data pads to
// at least size bytes when size > 0.
func (f *fakeWorkflows) emit(runID string, size int, kinds ...string) []models.Event {
	f.mu.Lock()
	defer f.mu.Unlock()
	r := f.run(runID)
	out := make([]models.Event, 0, len(kinds))
	for _, k := range kinds {
		r.last++
		e := newEvent(runID, r.last, k, "agent-"+strconv.FormatInt(r.last%3, 10))
		if size > 0 {
			e.Data["content"] = strings.Repeat("x", size)
		}
		r.held = append(r.held, e)
		out = append(out, e)
	}
	return out
}

// forget drops the held events up to seq, as the workflow does once it has
// stored them.
func (f *fakeWorkflows) forget(runID string, seq int64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	r := f.run(runID)
	for len(r.held) > 0 && r.held[0].Sequence <= seq {
		r.held = r.held[1:]
	}
}

// end marks the run's workflow as finished: its pages become Terminal.
func (f *fakeWorkflows) end(runID string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.run(runID).terminal = true
}

func (f *fakeWorkflows) failNext(n int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.failing = n
}

func newEvent(runID string, seq int64, kind, agentID string) models.Event {
	category, action, _ := strings.Cut(kind, ".")
	team := "team-a"
	return models.Event{
		RunID: runID, Timestamp: models.FormatTimestamp(time.Now()), Sequence: seq,
		Source: models.Source{AgentID: agentID, AgentType: models.AgentTypeWorker, AgentName: "w", TeamName: &team},
		Event:  models.EventKind{Category: category, Action: action},
		Data:   map[string]any{"run_id": runID, "agent_id": agentID, "n": seq, "content": "line one\nline two"},
	}
}

// kinds returns n llm.stream kinds.
func kinds(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = "llm.stream"
	}
	return out
}

// streamEnv is an API server over real HTTP whose live runs' events come
// from fakeWorkflows.
type streamEnv struct {
	t    *testing.T
	st   *store.Store
	fake *fakeWorkflows
	srv  *api.Server
	api  *testAPI
	base string
}

func newStreamEnv(t *testing.T, st *store.Store, stream api.StreamOptions) *streamEnv {
	t.Helper()
	return newListeningStreamEnv(t, st, stream, nil)
}

// newListeningStreamEnv is newStreamEnv whose pollers are woken by l (nil:
// they poll on their timer).
func newListeningStreamEnv(t *testing.T, st *store.Store, stream api.StreamOptions, l notify.Listener) *streamEnv {
	t.Helper()
	if stream.PollInterval == 0 {
		stream.PollInterval = 2 * time.Millisecond
	}
	if stream.IdlePollInterval == 0 {
		stream.IdlePollInterval = 20 * time.Millisecond
	}
	fake := newFakeWorkflows()
	srv := api.NewServer(api.Options{
		Store: st, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Runs: &api.Runs{Store: st}, EventQuerier: fake, Stream: stream, Listener: l,
	})
	hs := httptest.NewServer(srv.Handler())
	t.Cleanup(hs.Close)
	// Cleanups run last-in first-out: the streams close before the server
	// waits for its handlers.
	t.Cleanup(srv.CloseStreams)
	return &streamEnv{t: t, st: st, fake: fake, srv: srv, base: hs.URL, api: &testAPI{t: t, url: hs.URL, client: hs.Client()}}
}

// newRun stores a run in the given status.
func (e *streamEnv) newRun(status string) string {
	e.t.Helper()
	id := models.NewID()
	ctx := context.Background()
	if err := e.st.CreateRun(ctx, &store.Run{ID: id, HierarchyID: "h", HierarchyName: "h", WorkflowID: models.RunWorkflowID(id), Task: "t"}); err != nil {
		e.t.Fatal(err)
	}
	if status != models.RunPending {
		if err := e.st.SetRunStatus(ctx, models.RunStatusUpdate{RunID: id, Status: status}); err != nil {
			e.t.Fatal(err)
		}
	}
	return id
}

func (e *streamEnv) persist(evs []models.Event) {
	e.t.Helper()
	if err := e.st.InsertEvents(context.Background(), evs); err != nil {
		e.t.Fatal(err)
	}
}

// storedRun stores a finished run with n events, the last lifecycle.completed.
func (e *streamEnv) storedRun(n int) (string, []models.Event) {
	e.t.Helper()
	id := e.newRun(models.RunRunning)
	evs := make([]models.Event, 0, n)
	for i := int64(1); i <= int64(n); i++ {
		k := "llm.stream"
		switch i {
		case 1:
			k = "lifecycle.started"
		case int64(n):
			k = "lifecycle.completed"
		}
		evs = append(evs, newEvent(id, i, k, "agent-"+strconv.FormatInt(i%3, 10)))
	}
	e.persist(evs)
	if err := e.st.SetRunStatus(context.Background(), models.RunStatusUpdate{RunID: id, Status: models.RunCompleted}); err != nil {
		e.t.Fatal(err)
	}
	return id, evs
}

// streamRequest describes one stream request: GET when body is nil.
type streamRequest struct {
	path        string
	body        any
	lastEventID string
}

// open starts a stream and checks that it is one.
func (e *streamEnv) open(ctx context.Context, r streamRequest) *http.Response {
	e.t.Helper()
	method, body := http.MethodGet, io.Reader(nil)
	if r.body != nil {
		raw, _ := json.Marshal(r.body)
		method, body = http.MethodPost, bytes.NewReader(raw)
	}
	req, err := http.NewRequestWithContext(ctx, method, e.base+r.path, body)
	if err != nil {
		e.t.Fatal(err)
	}
	req.Header.Set("Accept", "text/event-stream")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if r.lastEventID != "" {
		req.Header.Set("Last-Event-ID", r.lastEventID)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatalf("%s %s: %v", method, r.path, err)
	}
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/event-stream" {
		raw, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		e.t.Fatalf("%s %s: status %d, content type %q: %s", method, r.path, resp.StatusCode, resp.Header.Get("Content-Type"), raw)
	}
	return resp
}

// stream reads a whole stream: it must end (after the terminal event)
// within the timeout.
func (e *streamEnv) stream(r streamRequest) []sseMsg {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp := e.open(ctx, r)
	defer resp.Body.Close()
	msgs, err := readAll(resp.Body)
	if err != nil {
		e.t.Fatalf("read stream %s: %v (after %d messages)", r.path, err, len(msgs))
	}
	return msgs
}

func (e *streamEnv) stats() api.StreamStats { return e.srv.StreamStats() }

// sseMsg is one SSE message as go-sse parsed it, with its data decoded.
type sseMsg struct {
	ID    string
	Type  string
	Data  string
	Event models.Event
}

var readConfig = &sse.ReadConfig{MaxEventSize: 4 << 20}

func readAll(r io.Reader) ([]sseMsg, error) {
	var out []sseMsg
	for ev, err := range sse.Read(r, readConfig) {
		if err != nil {
			return out, err
		}
		m, err := decodeMsg(ev)
		if err != nil {
			return out, err
		}
		out = append(out, m)
	}
	return out, nil
}

// readInto sends each message of a stream on ch and closes ch at the end.
func readInto(r io.Reader, ch chan<- sseMsg) {
	defer close(ch)
	for ev, err := range sse.Read(r, readConfig) {
		if err != nil {
			return
		}
		if m, err := decodeMsg(ev); err == nil {
			ch <- m
		}
	}
}

func decodeMsg(ev sse.Event) (sseMsg, error) {
	m := sseMsg{ID: ev.LastEventID, Type: ev.Type, Data: ev.Data}
	if err := json.Unmarshal([]byte(ev.Data), &m.Event); err != nil {
		return m, fmt.Errorf("message %s: data is not an event: %v", ev.LastEventID, err)
	}
	if strconv.FormatInt(m.Event.Sequence, 10) != m.ID || m.Event.Event.String() != m.Type {
		return m, fmt.Errorf("message id %q event %q carries event %d %s", m.ID, m.Type, m.Event.Sequence, m.Event.Event)
	}
	return m, nil
}

// checkSeqs fails unless msgs are exactly the events from..to in order:
// no gap, no duplicate.
func checkSeqs(t *testing.T, msgs []sseMsg, from, to int64) {
	t.Helper()
	var got []string
	ok := int64(len(msgs)) == to-from+1
	for i, m := range msgs {
		got = append(got, m.ID)
		if m.Event.Sequence != from+int64(i) {
			ok = false
		}
	}
	if !ok {
		t.Fatalf("want events %d..%d, got %d: %s", from, to, len(msgs), strings.Join(got, ","))
	}
}

// waitFor polls cond until it holds.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// next receives a message or fails after a generous timeout.
func next(t *testing.T, ch <-chan sseMsg) sseMsg {
	t.Helper()
	select {
	case m, ok := <-ch:
		if !ok {
			t.Fatal("stream ended early")
		}
		return m
	case <-time.After(10 * time.Second):
		t.Fatal("timed out waiting for an event")
	}
	return sseMsg{}
}
