package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	sse "github.com/tmaxmax/go-sse"

	"github.com/op-stack/executor/auth"
	"github.com/op-stack/executor/llm/llmfake"
	"github.com/op-stack/executor/models"
)

// v1StreamMsg is one message of spec 001's stream as its client sees it:
// the SSE id (the last one received, as EventSource keeps it), the event
// type and the data object.
type v1StreamMsg struct {
	ID   string
	Type string
	Data map[string]any
}

// seq is the sequence of the 002 event a message comes from.
func (m v1StreamMsg) seq() int64 {
	f, _ := m.Data["sequence"].(float64)
	return int64(f)
}

// openV1Stream opens GET /api/v1/executions/{id}/stream, resuming after
// lastEventID when it is positive (query: with ?after=, else with the
// Last-Event-ID header).
func (e *testEnv) openV1Stream(id string, lastEventID int64, query bool) *http.Response {
	e.t.Helper()
	url := e.v1URL() + "/executions/" + id + "/stream"
	if lastEventID > 0 && query {
		url += "?after=" + strconv.FormatInt(lastEventID, 10)
	}
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	req.Header.Set("Accept", "text/event-stream")
	if lastEventID > 0 && !query {
		req.Header.Set("Last-Event-ID", strconv.FormatInt(lastEventID, 10))
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatalf("open v1 stream: %v", err)
	}
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		e.t.Fatalf("v1 stream answered %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	return resp
}

// readV1Stream reads spec 001's stream until the server ends it.
func (e *testEnv) readV1Stream(resp *http.Response) []v1StreamMsg {
	e.t.Helper()
	defer resp.Body.Close()
	var out []v1StreamMsg
	for ev, err := range sse.Read(resp.Body, &sse.ReadConfig{MaxEventSize: 4 << 20}) {
		if err != nil {
			e.t.Fatalf("read v1 stream: %v", err)
		}
		m := v1StreamMsg{ID: ev.LastEventID, Type: ev.Type}
		if err := json.Unmarshal([]byte(ev.Data), &m.Data); err != nil {
			e.t.Fatalf("v1 event data is not an object: %v: %q", err, ev.Data)
		}
		out = append(out, m)
	}
	return out
}

// v1Required lists, per spec 001 event type, the fields of the spec's
// example event and the values some of them must have.
var v1Required = map[string]map[string]any{
	"execution_started":   {"timestamp": nil, "execution_id": nil, "status": "started", "source_type": "system"},
	"supervisor_routing":  {"timestamp": nil, "source_type": "supervisor", "supervisor_id": nil, "supervisor_name": nil, "team_id": nil, "action": "routing", "content": nil},
	"agent_started":       {"timestamp": nil, "source_type": "agent", "team_id": nil, "agent_id": nil, "agent_name": nil, "action": "started", "content": nil, "status": "running"},
	"agent_progress":      {"timestamp": nil, "source_type": "agent", "team_id": nil, "agent_id": nil, "agent_name": nil, "action": "progress", "content": nil, "progress": nil},
	"agent_completed":     {"timestamp": nil, "source_type": "agent", "team_id": nil, "agent_id": nil, "agent_name": nil, "action": "completed", "result": nil, "status": nil},
	"team_transition":     {"timestamp": nil, "source_type": "supervisor", "supervisor_id": nil, "supervisor_name": nil, "action": "team_transition", "from_team": nil, "to_team": nil, "content": nil},
	"execution_completed": {"timestamp": nil, "source_type": "system", "execution_id": nil, "status": nil, "result_url": nil},
}

// checkV1Shape checks every message against spec 001's example events, and
// that ids are the log's sequences: increasing, the SSE id of each message
// that carries one equal to its data's sequence.
func checkV1Shape(t *testing.T, runID string, msgs []v1StreamMsg) {
	t.Helper()
	var last int64
	for i, m := range msgs {
		req, known := v1Required[m.Type]
		if !known {
			t.Errorf("message %d: event type %q is not spec 001's", i, m.Type)
			continue
		}
		for k, want := range req {
			got, present := m.Data[k]
			if !present {
				t.Errorf("message %d (%s): no %s: %v", i, m.Type, k, m.Data)
			} else if want != nil && got != want {
				t.Errorf("message %d (%s): %s = %v, want %v", i, m.Type, k, got, want)
			}
		}
		if m.Data["event_type"] != m.Type || m.Data["execution_id"] != runID {
			t.Errorf("message %d: event_type %v execution_id %v", i, m.Data["event_type"], m.Data["execution_id"])
		}
		if _, err := time.Parse("2006-01-02T15:04:05.000Z", fmt.Sprint(m.Data["timestamp"])); err != nil {
			t.Errorf("message %d: timestamp %v", i, m.Data["timestamp"])
		}
		if m.Type == "supervisor_routing" && m.Data["selected_team"] == nil && m.Data["selected_agent"] == nil {
			t.Errorf("message %d: routing selects nothing: %v", i, m.Data)
		}
		if m.seq() < last {
			t.Errorf("message %d: sequence %d after %d", i, m.seq(), last)
		}
		last = m.seq()
		if i+1 == len(msgs) || msgs[i+1].seq() != m.seq() {
			// The last message made from an event carries its id.
			if m.ID != strconv.FormatInt(m.seq(), 10) {
				t.Errorf("message %d: SSE id %q, sequence %d", i, m.ID, m.seq())
			}
		}
	}
	if len(msgs) == 0 || msgs[0].Type != "execution_started" || msgs[len(msgs)-1].Type != "execution_completed" {
		t.Errorf("stream is not execution_started … execution_completed: %d messages", len(msgs))
	}
}

// v1Outline is the messages' types with their subject, agent_progress left
// out: e.g. "supervisor_routing:agent_search_001".
func v1Outline(msgs []v1StreamMsg) []string {
	var out []string
	for _, m := range msgs {
		subject := ""
		switch m.Type {
		case "agent_progress":
			continue
		case "supervisor_routing":
			subject = fmt.Sprint(m.Data["selected_team"], m.Data["selected_agent"])
			subject = strings.ReplaceAll(subject, "<nil>", "")
		case "agent_started", "agent_completed":
			subject = fmt.Sprint(m.Data["agent_id"])
		case "team_transition":
			subject = fmt.Sprint(m.Data["from_team"], ">", m.Data["to_team"])
		case "execution_started", "execution_completed":
			subject = fmt.Sprint(m.Data["status"])
		}
		out = append(out, m.Type+":"+subject)
	}
	return out
}

// dialWS opens a WebSocket to path on the env's server, with key as bearer
// when it is set. On a refused handshake it returns the HTTP status.
func (e *testEnv) dialWS(ctx context.Context, path, key string) (*websocket.Conn, int, error) {
	opts := &websocket.DialOptions{HTTPHeader: http.Header{}}
	if key != "" {
		opts.HTTPHeader.Set("Authorization", "Bearer "+key)
	}
	url := "ws" + strings.TrimPrefix(e.rootURL(), "http") + path
	c, resp, err := websocket.Dial(ctx, url, opts)
	status := 0
	if resp != nil {
		status = resp.StatusCode
	}
	if c != nil {
		c.SetReadLimit(4 << 20)
	}
	return c, status, err
}

// readWS reads every message until the server closes the socket and
// returns them with the close status.
func readWS(t *testing.T, ctx context.Context, c *websocket.Conn) ([]map[string]any, websocket.StatusCode) {
	t.Helper()
	var out []map[string]any
	for {
		typ, raw, err := c.Read(ctx)
		if err != nil {
			return out, websocket.CloseStatus(err)
		}
		if typ != websocket.MessageText {
			t.Fatalf("message of type %v", typ)
		}
		var m map[string]any
		if err := json.Unmarshal(raw, &m); err != nil {
			t.Fatalf("message is not a JSON object: %v: %q", err, raw)
		}
		out = append(out, m)
	}
}

// checkV1Resume resumes spec 001's stream of a finished run after the
// event of msgs[k] over SSE (header and query) and WebSocket: each must send
// exactly what followed it, no gap, no duplicate.
func checkV1Resume(t *testing.T, e *testEnv, id string, msgs []v1StreamMsg, k int) {
	t.Helper()
	after := msgs[k].seq()
	var want []map[string]any
	for _, m := range msgs {
		if m.seq() > after {
			want = append(want, m.Data)
		}
	}
	if len(want) == 0 || len(want) == len(msgs) {
		t.Fatalf("resume point %d is not in the middle", after)
	}
	for _, query := range []bool{false, true} {
		got := e.readV1Stream(e.openV1Stream(id, after, query))
		var data []map[string]any
		for _, m := range got {
			data = append(data, m.Data)
		}
		if !reflect.DeepEqual(data, want) {
			t.Errorf("SSE resume after %d (query %v): %d messages, want %d; first %v", after, query, len(data), len(want), data[0])
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, status, err := e.dialWS(ctx, fmt.Sprintf("/api/v1/executions/%s/ws?after=%d", id, after), "")
	if err != nil {
		t.Fatalf("dial: %d %v", status, err)
	}
	got, code := readWS(t, ctx, c)
	if code != websocket.StatusNormalClosure || !reflect.DeepEqual(got, want) {
		t.Errorf("WebSocket resume after %d: close %v, %d messages, want %d", after, code, len(got), len(want))
	}
}

// TestWebSocket pushes a live run's events over WebSocket with a real
// client: in order from 1 with no gap, equal to the stored log, one poller
// for every subscriber of the run, closed with 1000 after the terminal
// event; a resume after N sends N+1 onwards; another tenant's handshake is
// refused with 404 before the upgrade, a missing key with 401, a page of a
// foreign origin with 403, and the run's stream token opens it without a
// key.
func TestWebSocket(t *testing.T) {
	e := newEnv(t, referenceRules(map[string][]llmfake.Response{
		// Slow enough that the subscribers below join while it runs.
		"W-SEARCHER": {{Content: strings.Repeat("token ", 60), TokenDelay: 30 * time.Millisecond}},
	}), withAuth)
	scopes := []auth.Scope{auth.ScopeHierarchiesRead, auth.ScopeHierarchiesWrite, auth.ScopeRunsRead, auth.ScopeRunsWrite}
	keyA, keyB := e.issueKey("tenant-a", scopes...), e.issueKey("tenant-b", scopes...)
	var h struct {
		ID string `json:"hierarchy_id"`
	}
	e.mustCall("POST", "/api/executor/v1/hierarchies/create", keyA, referenceHierarchy(), &h)
	var run struct {
		ID string `json:"id"`
	}
	e.mustCall("POST", "/api/executor/v1/runs/start", keyA, map[string]any{"hierarchy_id": h.ID, "task": "push it"}, &run)
	path := "/api/executor/v1/runs/" + run.ID + "/ws"

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, p := range []string{path, "/api/v1/executions/" + run.ID + "/ws"} {
		if _, status, err := e.dialWS(ctx, p, keyB); err == nil || status != http.StatusNotFound {
			t.Errorf("tenant B on %s: status %d, error %v; want a refused handshake with 404", p, status, err)
		}
		if _, status, err := e.dialWS(ctx, p, ""); err == nil || status != http.StatusUnauthorized {
			t.Errorf("no key on %s: status %d, error %v; want 401", p, status, err)
		}
	}

	// A page of an origin not in CORS_ALLOWED_ORIGINS may not open it.
	opts := &websocket.DialOptions{HTTPHeader: http.Header{"Authorization": {"Bearer " + keyA}, "Origin": {"https://elsewhere.example"}}}
	if _, resp, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(e.rootURL(), "http")+path, opts); err == nil || resp == nil || resp.StatusCode != http.StatusForbidden {
		t.Errorf("foreign origin: %v %v; want 403", resp, err)
	}

	// Two live subscribers (the second by stream token) share one poller.
	first, status, err := e.dialWS(ctx, path, keyA)
	if err != nil {
		t.Fatalf("dial: %d %v", status, err)
	}
	var tok struct {
		Token string `json:"token"`
	}
	e.mustCall("POST", "/api/executor/v1/runs/stream-token", keyA, map[string]any{"id": run.ID}, &tok)
	second, status, err := e.dialWS(ctx, path+"?token="+tok.Token, "")
	if err != nil {
		t.Fatalf("dial with the stream token: %d %v", status, err)
	}
	type read struct {
		msgs []map[string]any
		code websocket.StatusCode
	}
	results := make(chan read, 2)
	var live bool
	for _, c := range []*websocket.Conn{first, second} {
		_, raw, err := c.Read(ctx)
		if err != nil {
			t.Fatalf("first message: %v", err)
		}
		var m map[string]any
		if err := json.Unmarshal(raw, &m); err != nil {
			t.Fatal(err)
		}
		go func() {
			rest, code := readWS(t, ctx, c)
			results <- read{append([]map[string]any{m}, rest...), code}
		}()
	}
	if st := e.api.StreamStats(); st.Subscribers == 2 {
		live = true
		if st.Pollers != 1 {
			t.Errorf("two subscribers of one run: %d pollers", st.Pollers)
		}
	}
	// Spec 001's events, live: cut after the third agent_progress (one
	// message per log event), resumed after its sequence.
	v1Path := "/api/v1/executions/" + run.ID + "/ws"
	v1c, status, err := e.dialWS(ctx, v1Path, keyA)
	if err != nil {
		t.Fatalf("dial: %d %v", status, err)
	}
	var v1Live []map[string]any
	for progress := 0; progress < 3; {
		_, raw, err := v1c.Read(ctx)
		if err != nil {
			t.Fatalf("spec 001 socket: %v after %d messages", err, len(v1Live))
		}
		var m map[string]any
		if err := json.Unmarshal(raw, &m); err != nil {
			t.Fatal(err)
		}
		if m["event_type"] == "agent_progress" {
			progress++
		}
		v1Live = append(v1Live, m)
	}
	v1c.CloseNow()
	v1c, status, err = e.dialWS(ctx, fmt.Sprintf("%s?after=%v", v1Path, v1Live[len(v1Live)-1]["sequence"]), keyA)
	if err != nil {
		t.Fatalf("dial: %d %v", status, err)
	}
	rest, code := readWS(t, ctx, v1c)
	if code != websocket.StatusNormalClosure {
		t.Errorf("spec 001 socket closed with %v", code)
	}
	v1Live = append(v1Live, rest...)

	waitFor(t, time.Minute, "the run to end", func() bool {
		var v runView
		e.mustCall("POST", "/api/executor/v1/runs/get", keyA, map[string]any{"id": run.ID}, &v)
		return models.IsTerminal(v.Status)
	})
	stored := e.storedEvents(run.ID)
	var want []map[string]any
	for _, ev := range stored {
		raw, _ := json.Marshal(ev)
		var m map[string]any
		_ = json.Unmarshal(raw, &m)
		want = append(want, m)
	}
	for range 2 {
		r := <-results
		if r.code != websocket.StatusNormalClosure {
			t.Errorf("closed with %v, want 1000 after the terminal event", r.code)
		}
		if !reflect.DeepEqual(r.msgs, want) {
			t.Errorf("pushed %d events, stored %d; they differ", len(r.msgs), len(want))
		}
	}
	if !live {
		t.Log("the run ended before both subscribers were counted; the poller count was not checked")
	}
	if n := len(want); n < 10 || want[n-1]["event"].(map[string]any)["action"] != "completed" {
		t.Fatalf("stored log of %d events", n)
	}

	// The spec 001 messages read live in two parts are the whole stream.
	req, _ := http.NewRequest(http.MethodGet, e.rootURL()+"/api/v1/executions/"+run.ID+"/stream", nil)
	req.Header.Set("Authorization", "Bearer "+keyA)
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("v1 stream: %v %v", err, resp)
	}
	whole := e.readV1Stream(resp)
	checkV1Shape(t, run.ID, whole)
	var wholeData []map[string]any
	for _, m := range whole {
		wholeData = append(wholeData, m.Data)
	}
	if !reflect.DeepEqual(v1Live, wholeData) {
		t.Errorf("spec 001 over WebSocket, live and resumed: %d messages; over SSE: %d", len(v1Live), len(wholeData))
	}

	// Resume after N: N+1 onwards.
	after := len(want) / 2
	c, status, err := e.dialWS(ctx, fmt.Sprintf("%s?after=%d", path, after), keyA)
	if err != nil {
		t.Fatalf("dial: %d %v", status, err)
	}
	got, code := readWS(t, ctx, c)
	if code != websocket.StatusNormalClosure || !reflect.DeepEqual(got, want[after:]) {
		t.Errorf("resume after %d: close %v, %d events, want %d", after, code, len(got), len(want)-after)
	}
}
