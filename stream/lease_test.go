package stream_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/op-stack/executor/models"
	"github.com/op-stack/executor/notify"
	"github.com/op-stack/executor/store"
	"github.com/op-stack/executor/store/storetest"
	"github.com/op-stack/executor/stream"
)

// leasedWorkflow is a named fake of a run's workflow while an activity
// holds its event lease: it holds the log up to the lease and says where
// the lease starts.
type leasedWorkflow struct {
	mu        sync.Mutex
	log       []models.Event
	leaseFrom int64
}

func (l *leasedWorkflow) QueryEvents(_ context.Context, _ string, q models.EventQuery) (models.EventPage, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	page := models.EventPage{FirstAvailable: 1, LastSequence: int64(len(l.log)), LeaseFrom: l.leaseFrom}
	for _, e := range l.log {
		if e.Sequence > q.After {
			page.Events = append(page.Events, e)
		}
	}
	page.Terminal = len(l.log) > 0 && l.log[len(l.log)-1].Event.Action == models.ActionCompleted
	return page, nil
}

// TestStreamDuringLease: a subscriber that joins while an activity holds
// the run's event lease gets the workflow's events, then the lease's from
// the database; pushed batches join up, and a pushed batch after a gap
// (a push this process missed) is joined up from the database. The stream
// is the run's one log, gap-free, and ends with the workflow's end.
func TestStreamDuringLease(t *testing.T) {
	ctx := context.Background()
	st := storetest.SQLite(t)
	key := models.NewID()
	run := &store.Run{ID: key, PublicID: "p-" + key[:6], HierarchyID: "h", HierarchyName: "h", WorkflowID: models.RunWorkflowID(key), Task: "t"}
	if err := st.CreateRun(ctx, run); err != nil {
		t.Fatal(err)
	}
	var log models.EventLog
	var all []models.Event
	for i := 0; i < 8; i++ {
		kind := models.EventKind{Category: models.CategoryLLM, Action: models.ActionStream}
		switch i {
		case 0:
			kind = models.EventKind{Category: models.CategoryLifecycle, Action: models.ActionStarted}
		case 7:
			kind = models.EventKind{Category: models.CategoryLifecycle, Action: models.ActionCompleted}
		}
		all = append(all, log.Append(models.Event{RunID: key, Timestamp: "2026-01-01T00:00:00.000Z", Event: kind, Data: map[string]any{"content": strings.Repeat("x", i)}}))
	}
	wf := &leasedWorkflow{log: all[:2], leaseFrom: 3}
	// The lease's activity stored 3 and 4 (and the carried 1 and 2).
	if err := st.InsertEvents(ctx, all[:4]); err != nil {
		t.Fatal(err)
	}
	broker := notify.NewBroker()
	h := stream.New(stream.Config{Store: st, Querier: wf, Listener: broker, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	t.Cleanup(h.Close)

	var mu sync.Mutex
	var got []int64
	seen := func(n int) bool {
		mu.Lock()
		defer mu.Unlock()
		return len(got) >= n
	}
	done := make(chan error, 1)
	go func() {
		_, err := h.Follow(ctx, run, func(e models.Event) {
			mu.Lock()
			got = append(got, e.Sequence)
			mu.Unlock()
		})
		done <- err
	}()
	wait := func(n int) {
		t.Helper()
		deadline := time.Now().Add(5 * time.Second)
		for !seen(n) {
			if time.Now().After(deadline) {
				mu.Lock()
				defer mu.Unlock()
				t.Fatalf("stream has %v, want %d events", got, n)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	wait(4)
	push := func(evs ...models.Event) {
		if err := st.InsertEvents(ctx, evs); err != nil {
			t.Fatal(err)
		}
		raw, _ := json.Marshal(evs)
		broker.Push(ctx, key, raw)
	}
	push(all[4])
	wait(5)
	// Event 6 is stored, its push lost; 7's push joins it up.
	if err := st.InsertEvents(ctx, all[5:6]); err != nil {
		t.Fatal(err)
	}
	push(all[6])
	wait(7)
	// The lease ends: the workflow has it all, and ends the run.
	wf.mu.Lock()
	wf.log, wf.leaseFrom = all, 0
	wf.mu.Unlock()
	broker.Notify(ctx, key)
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the stream did not end with the run")
	}
	mu.Lock()
	defer mu.Unlock()
	for i, s := range got {
		if s != int64(i+1) {
			t.Fatalf("stream %v, want 1..8 in order", got)
		}
	}
	if len(got) != 8 {
		t.Fatalf("stream %v, want 1..8", got)
	}
}
