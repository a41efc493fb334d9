package api_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/op-stack/executor/api"
	"github.com/op-stack/executor/models"
	"github.com/op-stack/executor/store"
	"github.com/op-stack/executor/store/storetest"
)

// TestStreamFormat checks the wire format byte for byte: id, event and
// data lines, a blank line, the SSE headers, and the end of the response
// right after the terminal event.
func TestStreamFormat(t *testing.T) {
	storetest.ForEachDialect(t, func(t *testing.T, st *store.Store) {
		e := newStreamEnv(t, st, api.StreamOptions{})
		id := e.newRun(models.RunRunning)
		evs := e.fake.emit(id, 0, "lifecycle.started", "llm.stream", "dispatch.team", "lifecycle.completed")

		for _, r := range []streamRequest{{path: pathStreamGET(id)}, {path: pathStream, body: map[string]any{"id": id}}} {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			resp := e.open(ctx, r)
			for k, want := range map[string]string{"Content-Type": "text/event-stream", "Cache-Control": "no-cache", "Connection": "keep-alive", "X-Accel-Buffering": "no"} {
				if got := resp.Header.Get(k); got != want {
					t.Errorf("%s: header %s = %q, want %q", r.path, k, got, want)
				}
			}
			raw, err := io.ReadAll(resp.Body) // returns only because the stream ends
			resp.Body.Close()
			cancel()
			if err != nil {
				t.Fatal(err)
			}
			var want strings.Builder
			for _, ev := range evs {
				data, _ := json.Marshal(ev)
				fmt.Fprintf(&want, "id: %d\nevent: %s\ndata: %s\n\n", ev.Sequence, ev.Event, data)
			}
			if string(raw) != want.String() {
				t.Fatalf("%s: stream\n%s\nwant\n%s", r.path, raw, want.String())
			}
			msgs, err := readAll(strings.NewReader(string(raw)))
			if err != nil {
				t.Fatal(err)
			}
			checkSeqs(t, msgs, 1, 4)
			if m := msgs[1]; m.Type != "llm.stream" || m.Event.RunID != id || m.Event.Source.AgentID != evs[1].Source.AgentID || m.Event.Data["content"] != "line one\nline two" {
				t.Fatalf("message 2: %+v", m)
			}
		}
	})
}

// TestStreamResume resumes by Last-Event-ID (which wins) and by after,
// over both endpoints, on a live and a finished run.
func TestStreamResume(t *testing.T) {
	storetest.ForEachDialect(t, func(t *testing.T, st *store.Store) {
		e := newStreamEnv(t, st, api.StreamOptions{})
		live := e.newRun(models.RunRunning)
		e.fake.emit(live, 0, append(append([]string{"lifecycle.started"}, kinds(8)...), "lifecycle.completed")...)
		stored, _ := e.storedRun(10)

		for name, id := range map[string]string{"live": live, "stored": stored} {
			cases := []struct {
				name string
				r    streamRequest
				from int64
			}{
				{"POST after", streamRequest{path: pathStream, body: map[string]any{"id": id, "after": 4}}, 5},
				{"GET after", streamRequest{path: pathStreamGET(id) + "?after=4"}, 5},
				{"GET Last-Event-ID", streamRequest{path: pathStreamGET(id) + "?after=2", lastEventID: "7"}, 8},
				{"POST Last-Event-ID", streamRequest{path: pathStream, body: map[string]any{"id": id, "after": 2}, lastEventID: "7"}, 8},
				{"POST run_id", streamRequest{path: pathStream, body: map[string]any{"run_id": id}}, 1},
				{"after the end", streamRequest{path: pathStreamGET(id), lastEventID: "10"}, 11},
				{"past the end", streamRequest{path: pathStreamGET(id) + "?after=99"}, 11},
			}
			for _, c := range cases {
				t.Run(name+" "+c.name, func(t *testing.T) {
					checkSeqs(t, e.stream(c.r), c.from, 10)
				})
			}
		}

		// A client that drops mid-stream and resumes with the last id it got
		// sees every event exactly once.
		id := e.newRun(models.RunRunning)
		e.fake.emit(id, 0, "lifecycle.started", "llm.stream", "llm.stream")
		ctx, cancel := context.WithCancel(context.Background())
		resp := e.open(ctx, streamRequest{path: pathStreamGET(id)})
		ch := make(chan sseMsg, 100)
		go readInto(resp.Body, ch)
		var got []sseMsg
		for len(got) < 3 {
			got = append(got, next(t, ch))
		}
		cancel()
		resp.Body.Close()
		e.fake.emit(id, 0, kinds(5)...)
		e.fake.emit(id, 0, "lifecycle.failed")
		got = append(got, e.stream(streamRequest{path: pathStreamGET(id), lastEventID: got[len(got)-1].ID})...)
		checkSeqs(t, got, 1, 9)

		for _, c := range []struct {
			r     streamRequest
			field string
		}{
			{streamRequest{path: pathStreamGET(id), lastEventID: "abc"}, "Last-Event-ID"},
			{streamRequest{path: pathStreamGET(id) + "?after=x"}, "after"},
			{streamRequest{path: pathStream, body: map[string]any{"id": id, "after": -1}}, "after"},
		} {
			req, _ := http.NewRequest(http.MethodGet, e.base+c.r.path, nil)
			if c.r.body != nil {
				raw, _ := json.Marshal(c.r.body)
				req, _ = http.NewRequest(http.MethodPost, e.base+c.r.path, strings.NewReader(string(raw)))
				req.Header.Set("Content-Type", "application/json")
			}
			if c.r.lastEventID != "" {
				req.Header.Set("Last-Event-ID", c.r.lastEventID)
			}
			status, env := do(t, req)
			if status != http.StatusBadRequest || env.Code != 40001 || env.Field != c.field {
				t.Fatalf("%s %s: status %d code %d field %q, want 400 40001 %q", req.Method, c.r.path, status, env.Code, env.Field, c.field)
			}
		}
	})
}

// TestStreamFinishedRunFromDatabase streams a finished run from the
// database, in pages, without a single workflow query.
func TestStreamFinishedRunFromDatabase(t *testing.T) {
	storetest.ForEachDialect(t, func(t *testing.T, st *store.Store) {
		e := newStreamEnv(t, st, api.StreamOptions{})
		id, evs := e.storedRun(1203)
		msgs := e.stream(streamRequest{path: pathStream, body: map[string]any{"id": id}})
		checkSeqs(t, msgs, 1, 1203)
		if msgs[1202].Type != "lifecycle.completed" || msgs[7].Data != mustJSON(t, evs[7]) {
			t.Fatalf("last message %s, message 8 data %s", msgs[1202].Type, msgs[7].Data)
		}
		checkSeqs(t, e.stream(streamRequest{path: pathStreamGET(id), lastEventID: "600"}), 601, 1203)
		if q := e.stats().Queries; q != 0 || e.fake.queries.Load() != 0 {
			t.Fatalf("a finished run made %d workflow queries", q)
		}
		waitFor(t, "no open streams", func() bool { return e.stats().Subscribers == 0 && e.stats().Pollers == 0 })
	})
}

// TestStreamFanOut: 100 subscribers of one live run share one poller and
// receive identical streams.
func TestStreamFanOut(t *testing.T) {
	const subscribers = 100
	poll := 10 * time.Millisecond
	e := newStreamEnv(t, storetest.SQLite(t), api.StreamOptions{PollInterval: poll, IdlePollInterval: 4 * poll})
	id := e.newRun(models.RunRunning)
	e.fake.emit(id, 0, "lifecycle.started")
	start := time.Now()

	results := make([][]sseMsg, subscribers)
	var wg sync.WaitGroup
	for i := range subscribers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, e.base+pathStreamGET(id), nil)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Error(err)
				return
			}
			defer resp.Body.Close()
			if results[i], err = readAll(resp.Body); err != nil {
				t.Errorf("subscriber %d: %v", i, err)
			}
		}()
	}
	waitFor(t, "all subscribers", func() bool { return e.stats().Subscribers == subscribers })
	if p := e.stats().Pollers; p != 1 {
		t.Fatalf("%d subscribers run %d pollers, want 1", subscribers, p)
	}
	for range 10 {
		e.fake.emit(id, 0, kinds(20)...)
		time.Sleep(2 * poll)
	}
	e.fake.emit(id, 0, "lifecycle.completed")
	wg.Wait()
	elapsed := time.Since(start)

	for i, msgs := range results {
		checkSeqs(t, msgs, 1, 202)
		for j := range msgs {
			if msgs[j].Data != results[0][j].Data {
				t.Fatalf("subscriber %d event %s differs from subscriber 0's", i, msgs[j].ID)
			}
		}
	}
	// One poller waits at least a poll interval between queries; a poller
	// per subscriber would have made at least one query each.
	queries := e.stats().Queries
	if limit := int64(elapsed/poll) + 5; queries > limit {
		t.Fatalf("%d workflow queries in %v for %d subscribers; one poller makes at most %d", queries, elapsed, subscribers, limit)
	}
	if m := e.fake.maxInFlight.Load(); m != 1 {
		t.Fatalf("%d concurrent queries of one run, want 1", m)
	}
	t.Logf("%d subscribers, %d events, %d queries in %v", subscribers, 202, queries, elapsed.Round(time.Millisecond))
	waitFor(t, "the poller to stop", func() bool { return e.stats().Pollers == 0 && e.stats().Subscribers == 0 })
}

// TestStreamSlowSubscriber: a client that stops reading holds only its
// own stream; another subscriber gets the whole run, and CloseStreams
// frees the stuck handler.
func TestStreamSlowSubscriber(t *testing.T) {
	e := newStreamEnv(t, storetest.SQLite(t), api.StreamOptions{})
	id := e.newRun(models.RunRunning)
	e.fake.emit(id, 0, "lifecycle.started")

	conn, err := net.Dial("tcp", strings.TrimPrefix(e.base, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.(*net.TCPConn).SetReadBuffer(4096)
	fmt.Fprintf(conn, "GET %s HTTP/1.1\r\nHost: test\r\nAccept: text/event-stream\r\n\r\n", pathStreamGET(id))
	waitFor(t, "the stalled subscriber", func() bool { return e.stats().Subscribers == 1 })

	// 24 MB: far more than the socket buffers of the client that does not
	// read, so its handler blocks in a write.
	const n, size = 300, 80 << 10
	done := make(chan []sseMsg)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		resp := e.open(ctx, streamRequest{path: pathStream, body: map[string]any{"id": id}})
		defer resp.Body.Close()
		msgs, err := readAll(resp.Body)
		if err != nil {
			t.Error(err)
		}
		done <- msgs
	}()
	for range n / 10 {
		e.fake.emit(id, size, kinds(10)...)
	}
	e.fake.emit(id, 0, "lifecycle.completed")
	checkSeqs(t, <-done, 1, n+2)
	if s := e.stats().Subscribers; s != 1 {
		t.Fatalf("%d open streams, want the stalled one", s)
	}
	start := time.Now()
	e.srv.CloseStreams()
	waitFor(t, "the stalled stream to close", func() bool { return e.stats().Subscribers == 0 })
	t.Logf("stalled handler returned %v after CloseStreams", time.Since(start).Round(time.Millisecond))
}

// TestStreamEndsAfterTerminalEvent: each terminal lifecycle event ends the
// stream even if the workflow has not yet said so, and a workflow that
// ends without one ends it at its last event.
func TestStreamEndsAfterTerminalEvent(t *testing.T) {
	e := newStreamEnv(t, storetest.SQLite(t), api.StreamOptions{})
	for _, terminal := range []string{"lifecycle.completed", "lifecycle.failed", "lifecycle.cancelled"} {
		id := e.newRun(models.RunRunning)
		e.fake.emit(id, 0, "lifecycle.started", "llm.stream", terminal)
		msgs := e.stream(streamRequest{path: pathStreamGET(id)})
		checkSeqs(t, msgs, 1, 3)
		if msgs[2].Type != terminal {
			t.Fatalf("last event %s", msgs[2].Type)
		}
	}

	id := e.newRun(models.RunRunning)
	e.fake.emit(id, 0, "lifecycle.started")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp := e.open(ctx, streamRequest{path: pathStreamGET(id)})
	defer resp.Body.Close()
	ch := make(chan sseMsg, 10)
	go readInto(resp.Body, ch)
	next(t, ch)
	e.fake.emit(id, 0, "system.error")
	e.fake.end(id)
	if m := next(t, ch); m.Type != "system.error" {
		t.Fatalf("got %s", m.Type)
	}
	select {
	case m, open := <-ch:
		if open {
			t.Fatalf("stream went on with %s", m.ID)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("stream did not end after the run's last event")
	}
}

// TestStreamKeepAlive: an idle stream carries keep-alive comments.
func TestStreamKeepAlive(t *testing.T) {
	e := newStreamEnv(t, storetest.SQLite(t), api.StreamOptions{KeepAlive: 20 * time.Millisecond})
	id := e.newRun(models.RunRunning)
	e.fake.emit(id, 0, "lifecycle.started")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp := e.open(ctx, streamRequest{path: pathStreamGET(id)})
	defer resp.Body.Close()
	r := bufio.NewReader(resp.Body)
	keepAlives := 0
	for keepAlives < 3 {
		line, err := r.ReadString('\n')
		if err != nil {
			t.Fatalf("after %d keep-alives: %v", keepAlives, err)
		}
		if line == ": keep-alive\n" {
			keepAlives++
		}
	}
	e.fake.emit(id, 0, "lifecycle.completed")
	rest, err := io.ReadAll(r)
	if err != nil || !strings.Contains(string(rest), "event: lifecycle.completed\n") {
		t.Fatalf("rest of the stream %q: %v", rest, err)
	}
}

// TestStreamGapFill: events the workflow no longer holds come from the
// database, for the poller and for a subscriber behind the poller's
// memory; events not stored yet come from the workflow.
func TestStreamGapFill(t *testing.T) {
	storetest.ForEachDialect(t, func(t *testing.T, st *store.Store) {
		e := newStreamEnv(t, st, api.StreamOptions{BufferEvents: 10})

		// The workflow holds 21..30 only; 1..20 are stored.
		id := e.newRun(models.RunRunning)
		e.persist(e.fake.emit(id, 0, append([]string{"lifecycle.started"}, kinds(19)...)...))
		e.fake.forget(id, 20)
		e.fake.emit(id, 0, append(kinds(9), "lifecycle.completed")...)
		checkSeqs(t, e.stream(streamRequest{path: pathStreamGET(id)}), 1, 30)
		checkSeqs(t, e.stream(streamRequest{path: pathStreamGET(id) + "?after=5"}), 6, 30)
		if e.stats().Queries == 0 {
			t.Fatal("the live run was not queried")
		}

		// A subscriber joining late from 0 is behind the 10 events the
		// poller keeps: it reads the older ones from the database.
		id = e.newRun(models.RunRunning)
		e.persist(e.fake.emit(id, 0, "lifecycle.started"))
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		first := e.open(ctx, streamRequest{path: pathStreamGET(id)})
		defer first.Body.Close()
		ch := make(chan sseMsg, 100)
		go readInto(first.Body, ch)
		got := []sseMsg{next(t, ch)}
		e.persist(e.fake.emit(id, 0, kinds(49)...))
		for len(got) < 50 {
			got = append(got, next(t, ch))
		}
		late := make(chan []sseMsg)
		go func() { late <- e.stream(streamRequest{path: pathStreamGET(id)}) }()
		waitFor(t, "the late subscriber", func() bool { return e.stats().Subscribers == 2 })
		e.persist(e.fake.emit(id, 0, kinds(5)...))
		e.persist(e.fake.emit(id, 0, "lifecycle.completed"))
		for len(got) < 56 {
			got = append(got, next(t, ch))
		}
		checkSeqs(t, got, 1, 56)
		checkSeqs(t, <-late, 1, 56)

		// Events neither stored yet nor held by the poller come from the
		// workflow: the poller starts at 40 for the first subscriber, the
		// second wants 1..40, which only the workflow has.
		id = e.newRun(models.RunRunning)
		e.fake.emit(id, 0, append([]string{"lifecycle.started"}, kinds(44)...)...)
		ctx2, cancel2 := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel2()
		ahead := e.open(ctx2, streamRequest{path: pathStreamGET(id) + "?after=40"})
		defer ahead.Body.Close()
		ch = make(chan sseMsg, 100)
		go readInto(ahead.Body, ch)
		for i := 41; i <= 45; i++ {
			next(t, ch)
		}
		behind := make(chan []sseMsg)
		go func() { behind <- e.stream(streamRequest{path: pathStreamGET(id)}) }()
		waitFor(t, "the second subscriber", func() bool { return e.stats().Subscribers == 2 })
		e.fake.emit(id, 0, "lifecycle.completed")
		checkSeqs(t, <-behind, 1, 46)
	})
}

// TestStreamQueryErrorsRetried: a workflow that cannot answer yet (its
// first task has not run) delays the stream but loses nothing.
func TestStreamQueryErrorsRetried(t *testing.T) {
	e := newStreamEnv(t, storetest.SQLite(t), api.StreamOptions{})
	id := e.newRun(models.RunPending)
	e.fake.failNext(4)
	e.fake.emit(id, 0, "lifecycle.started", "llm.stream", "lifecycle.completed")
	checkSeqs(t, e.stream(streamRequest{path: pathStream, body: map[string]any{"id": id}}), 1, 3)
	if q := e.fake.queries.Load(); q < 5 {
		t.Fatalf("%d queries: the failures were not retried", q)
	}
}

// TestStreamPollerLifecycle: the poller backs off while the run is quiet,
// stops when the last subscriber leaves, and a new subscriber starts a new
// one.
func TestStreamPollerLifecycle(t *testing.T) {
	poll, idle := 2*time.Millisecond, 40*time.Millisecond
	e := newStreamEnv(t, storetest.SQLite(t), api.StreamOptions{PollInterval: poll, IdlePollInterval: idle, QuietAfter: 10 * time.Millisecond})
	id := e.newRun(models.RunRunning)
	e.fake.emit(id, 0, "lifecycle.started")
	for round := range 2 {
		ctx, cancel := context.WithCancel(context.Background())
		resp := e.open(ctx, streamRequest{path: pathStreamGET(id)})
		ch := make(chan sseMsg, 10)
		go readInto(resp.Body, ch)
		next(t, ch)
		if p := e.stats().Pollers; p != 1 {
			t.Fatalf("round %d: %d pollers", round, p)
		}
		before, start := e.stats().Queries, time.Now()
		time.Sleep(400 * time.Millisecond)
		// Without backoff: 200 queries; with it, about 15.
		if q, elapsed := e.stats().Queries-before, time.Since(start); q > int64(elapsed/poll)/4 {
			t.Fatalf("round %d: %d queries in %v of quiet", round, q, elapsed)
		}
		cancel()
		resp.Body.Close()
		waitFor(t, "the poller to stop", func() bool { return e.stats().Pollers == 0 && e.stats().Subscribers == 0 })
	}
}

// TestCloseStreams: open streams end promptly with a retry hint, and a
// stream opened afterwards gets only the hint.
func TestCloseStreams(t *testing.T) {
	e := newStreamEnv(t, storetest.SQLite(t), api.StreamOptions{})
	id := e.newRun(models.RunRunning)
	e.fake.emit(id, 0, "lifecycle.started")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp := e.open(ctx, streamRequest{path: pathStreamGET(id)})
	defer resp.Body.Close()
	r := bufio.NewReader(resp.Body)
	if line, _ := r.ReadString('\n'); line != "id: 1\n" {
		t.Fatalf("first line %q", line)
	}
	e.srv.CloseStreams()
	rest, err := io.ReadAll(r) // returns only if the handler ends
	if err != nil || !strings.HasSuffix(string(rest), "retry: 1000\n\n") {
		t.Fatalf("stream ended with %q: %v", rest, err)
	}
	after := e.open(ctx, streamRequest{path: pathStream, body: map[string]any{"id": id}})
	defer after.Body.Close()
	raw, err := io.ReadAll(after.Body)
	if err != nil || strings.Contains(string(raw), "id:") || !strings.Contains(string(raw), "retry: 1000\n") {
		t.Fatalf("stream after CloseStreams: %q: %v", raw, err)
	}
	waitFor(t, "no streams or pollers", func() bool { return e.stats().Subscribers == 0 && e.stats().Pollers == 0 })
}

// TestStreamErrors: unknown runs and bad requests get the usual JSON
// errors, before any SSE header.
func TestStreamErrors(t *testing.T) {
	storetest.ForEachDialect(t, func(t *testing.T, st *store.Store) {
		e := newStreamEnv(t, st, api.StreamOptions{})
		e.api.expectError(pathStream, map[string]any{"id": "no-such-run"}, http.StatusNotFound, 40402)
		e.api.expectError(pathStream, map[string]any{}, http.StatusBadRequest, 40001)
		e.api.expectError(pathStream, []byte(`{"id":`), http.StatusBadRequest, 40001)
		e.api.expectError(pathStream, map[string]any{"id": "x", "after": "7"}, http.StatusBadRequest, 40001)

		req, _ := http.NewRequest(http.MethodGet, e.base+pathStreamGET("no-such-run"), nil)
		req.Header.Set("Accept", "text/event-stream")
		if status, env := do(t, req); status != http.StatusNotFound || env.Code != 40402 || env.ErrorCode != "EXECUTION_NOT_FOUND" {
			t.Fatalf("GET unknown run: status %d code %d", status, env.Code)
		}
	})
}

// do sends req and decodes a JSON error or success envelope.
func do(t *testing.T, req *http.Request) (int, envelope) {
	t.Helper()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		t.Fatalf("%s %s: content type %q", req.Method, req.URL.Path, ct)
	}
	var env envelope
	if err := json.NewDecoder(resp.Body).Decode(&env); err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, env
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	raw, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(raw)
}
