package api_test

import (
	"context"
	"encoding/json"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/op-stack/executor/api"
	"github.com/op-stack/executor/models"
	"github.com/op-stack/executor/store/storetest"
)

// TestWebSocketKeepAliveAndShutdown: an idle socket is pinged every
// KeepAlive, a stream that falls behind the feed's memory reads the
// database, and CloseStreams closes the socket with 1001 (going away) and
// leaves no subscriber or poller.
func TestWebSocketKeepAliveAndShutdown(t *testing.T) {
	e := newStreamEnv(t, storetest.SQLite(t), api.StreamOptions{KeepAlive: 20 * time.Millisecond, BufferEvents: 10})
	id := e.newRun(models.RunRunning)
	// 1..20 are stored only, 21..30 held by the workflow.
	e.persist(e.fake.emit(id, 0, append([]string{"lifecycle.started"}, kinds(19)...)...))
	e.fake.forget(id, 20)
	e.fake.emit(id, 0, kinds(10)...)

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var pings atomic.Int64
	url := "ws" + strings.TrimPrefix(e.base, "http") + "/api/executor/v1/runs/" + id + "/ws"
	c, _, err := websocket.Dial(ctx, url, &websocket.DialOptions{OnPingReceived: func(context.Context, []byte) bool {
		pings.Add(1)
		return true
	}})
	if err != nil {
		t.Fatal(err)
	}
	type result struct {
		seqs []int64
		code websocket.StatusCode
	}
	done := make(chan result, 1)
	go func() {
		var r result
		for {
			_, raw, err := c.Read(ctx)
			if err != nil {
				r.code = websocket.CloseStatus(err)
				done <- r
				return
			}
			var ev models.Event
			if err := json.Unmarshal(raw, &ev); err != nil {
				t.Error(err)
			}
			r.seqs = append(r.seqs, ev.Sequence)
		}
	}()
	waitFor(t, "three pings on the idle socket", func() bool { return pings.Load() >= 3 })
	e.srv.CloseStreams()
	r := <-done
	if r.code != websocket.StatusGoingAway {
		t.Errorf("closed with %v, want 1001", r.code)
	}
	for i, seq := range r.seqs {
		if seq != int64(i+1) {
			t.Fatalf("sequences %v, want 1..30", r.seqs)
		}
	}
	if len(r.seqs) != 30 {
		t.Errorf("%d events, want 30", len(r.seqs))
	}
	waitFor(t, "no streams or pollers", func() bool { return e.stats().Subscribers == 0 && e.stats().Pollers == 0 })
}

// TestWebSocketStreamFailure: a subscriber whose events are neither stored
// nor held by the workflow gets its socket closed with 1011, not 1000, so
// it does not take the stream for complete.
func TestWebSocketStreamFailure(t *testing.T) {
	e := newStreamEnv(t, storetest.SQLite(t), api.StreamOptions{})
	id := e.newRun(models.RunRunning)
	e.fake.emit(id, 0, append([]string{"lifecycle.started"}, kinds(29)...)...)
	e.fake.forget(id, 20) // 1..20 lost: not stored either
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	url := "ws" + strings.TrimPrefix(e.base, "http") + "/api/executor/v1/runs/" + id + "/ws"
	// The first subscriber, after 21, starts the run's poller there.
	first, _, err := websocket.Dial(ctx, url+"?after=21", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer first.CloseNow()
	if _, raw, err := first.Read(ctx); err != nil || !strings.Contains(string(raw), `"sequence":22`) {
		t.Fatalf("first subscriber: %s %v", raw, err)
	}
	c, _, err := websocket.Dial(ctx, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, _, err = c.Read(ctx)
	if code := websocket.CloseStatus(err); code != websocket.StatusInternalError {
		t.Errorf("closed with %v (%v), want 1011", code, err)
	}
}
