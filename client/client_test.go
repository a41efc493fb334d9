package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/op-stack/executor/models"
)

// fakeStream is an in-process fake of the API's GET runs/{id}/stream: it
// serves events 1..n, cutting the connection after every cut events, and
// records the Last-Event-ID of each request.
type fakeStream struct {
	n, cut int
	mu     sync.Mutex
	resume []string
	auth   []string
}

func (f *fakeStream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	f.resume = append(f.resume, r.Header.Get("Last-Event-ID"))
	f.auth = append(f.auth, r.Header.Get("Authorization"))
	f.mu.Unlock()
	after, _ := strconv.Atoi(r.Header.Get("Last-Event-ID"))
	w.Header().Set("Content-Type", "text/event-stream")
	for seq, sent := after+1, 0; seq <= f.n; seq++ {
		if sent == f.cut {
			return // the connection drops mid-run
		}
		kind := models.EventKind{Category: models.CategoryLLM, Action: models.ActionStream}
		if seq == f.n {
			kind = models.EventKind{Category: models.CategoryLifecycle, Action: models.ActionCompleted}
		}
		raw, _ := json.Marshal(models.Event{RunID: "r1", Sequence: int64(seq), Event: kind, Data: map[string]any{"content": fmt.Sprint(seq)}})
		// A keep-alive comment between events, as the API sends.
		fmt.Fprintf(w, ": keep-alive\n\nid: %d\nevent: %s\ndata: %s\n\n", seq, kind, raw)
		w.(http.Flusher).Flush()
		sent++
	}
}

// TestFollowResumes: a stream cut twice mid-run is resumed with
// Last-Event-ID, and the callback sees every event once, in order, up to
// the terminal one.
func TestFollowResumes(t *testing.T) {
	fake := &fakeStream{n: 10, cut: 4}
	srv := httptest.NewServer(fake)
	defer srv.Close()
	c, err := New(srv.URL, "osk_test", nil)
	if err != nil {
		t.Fatal(err)
	}
	var seen []int64
	var reconnects []int64
	last, err := c.Follow(context.Background(), "r1", FollowOptions{OnReconnect: func(after int64, _ error) { reconnects = append(reconnects, after) }},
		func(ev models.Event) error { seen = append(seen, ev.Sequence); return nil })
	if err != nil {
		t.Fatal(err)
	}
	if last.Sequence != 10 || !IsTerminal(last) {
		t.Errorf("terminal event %+v", last)
	}
	for i, s := range seen {
		if s != int64(i+1) {
			t.Fatalf("events %v: want 1..10 once each", seen)
		}
	}
	if len(seen) != 10 {
		t.Fatalf("events %v: want 1..10", seen)
	}
	if fmt.Sprint(fake.resume) != "[ 4 8]" || fmt.Sprint(reconnects) != "[4 8]" {
		t.Errorf("Last-Event-ID sent %q, reconnects %v; want [\"\" 4 8]", fake.resume, reconnects)
	}
	for _, a := range fake.auth {
		if a != "Bearer osk_test" {
			t.Errorf("Authorization %q", a)
		}
	}
}

// TestFollowGivesUp: a stream that keeps ending without progress is given
// up after FollowOptions.Reconnect; a 404 is returned at once.
func TestFollowGivesUp(t *testing.T) {
	fake := &fakeStream{n: 3, cut: 0}
	srv := httptest.NewServer(fake)
	defer srv.Close()
	c, _ := New(srv.URL, "", nil)
	start := time.Now()
	_, err := c.Follow(context.Background(), "r1", FollowOptions{Reconnect: 500 * time.Millisecond}, func(models.Event) error { return nil })
	if !errors.Is(err, ErrStreamEnded) || time.Since(start) > 5*time.Second {
		t.Errorf("err %v after %v", err, time.Since(start))
	}

	notFound := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusNotFound)
		fmt.Fprint(w, `{"code":40401,"message":"run \"r1\" not found","error_code":"EXECUTION_NOT_FOUND"}`)
	}))
	defer notFound.Close()
	c, _ = New(notFound.URL, "", nil)
	_, err = c.Follow(context.Background(), "r1", FollowOptions{}, func(models.Event) error { return nil })
	var apiErr *APIError
	if !errors.As(err, &apiErr) || apiErr.Status != 404 || apiErr.ErrorCode != "EXECUTION_NOT_FOUND" {
		t.Errorf("404: %v", err)
	}
}
