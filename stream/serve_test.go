package stream_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/op-stack/executor/models"
	"github.com/op-stack/executor/store"
	"github.com/op-stack/executor/store/storetest"
	"github.com/op-stack/executor/stream"
)

// heldEvents is a named fake of the runs' workflows behind the events
// query: each workflow holds its whole log and answers with what follows
// the query's sequence.
type heldEvents struct {
	mu   sync.Mutex
	logs map[string][]models.Event // by workflow ID
}

func (h *heldEvents) QueryEvents(_ context.Context, workflowID string, q models.EventQuery) (models.EventPage, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	log := h.logs[workflowID]
	page := models.EventPage{FirstAvailable: 1, LastSequence: int64(len(log))}
	for _, e := range log {
		if e.Sequence > q.After {
			page.Events = append(page.Events, e)
		}
	}
	page.Terminal = len(log) > 0 && log[len(log)-1].Event.Action == models.ActionCompleted
	return page, nil
}

// recorder is a Replayer that records which events it was given how, and
// sends one message per event.
type recorder struct{ replayed, encoded []int64 }

func (r *recorder) Replay(f stream.Frame) error {
	r.replayed = append(r.replayed, f.Seq)
	return nil
}

func (r *recorder) Encode(f stream.Frame) ([]stream.Message, error) {
	r.encoded = append(r.encoded, f.Seq)
	return []stream.Message{{ID: f.Seq, Name: "seen", Data: []byte(`{"n":` + fmt.Sprint(f.Seq) + `}`)}}, nil
}

// runLog is a run's five events, under its key, the last one terminal.
func runLog(key string) []models.Event {
	var log models.EventLog
	var out []models.Event
	for i, kind := range []string{"lifecycle.started", "llm.stream", "llm.stream", "llm.stream", "lifecycle.completed"} {
		cat, act, _ := strings.Cut(kind, ".")
		out = append(out, log.Append(models.Event{RunID: key, Timestamp: "2026-01-01T00:00:00.000Z", Event: models.EventKind{Category: cat, Action: act},
			Source: models.Source{AgentID: "a", AgentType: models.AgentTypeWorker, AgentName: "w"}, Data: map[string]any{"content": fmt.Sprint(i)}}))
	}
	return out
}

// TestServe: Serve sends what follows the resume point, from the store for
// a finished run and from the workflow for a live one; contract 002's
// frames carry the run's public id, byte for byte as encoded once; a
// Replayer gets the events up to the resume point through Replay and the
// rest through Encode, and only the latter reach the client.
func TestServe(t *testing.T) {
	for _, live := range []bool{false, true} {
		t.Run(map[bool]string{false: "finished", true: "live"}[live], func(t *testing.T) {
			ctx := context.Background()
			st := storetest.SQLite(t)
			key := models.NewID()
			run := &store.Run{ID: key, PublicID: "mine-" + key[:6], HierarchyID: "h", HierarchyName: "h", WorkflowID: models.RunWorkflowID(key), Task: "t"}
			if err := st.CreateRun(ctx, run); err != nil {
				t.Fatal(err)
			}
			evs := runLog(key)
			held := &heldEvents{logs: map[string][]models.Event{}}
			status := models.RunRunning
			if live {
				held.logs[run.WorkflowID] = evs
			} else {
				if err := st.InsertEvents(ctx, evs); err != nil {
					t.Fatal(err)
				}
				status = models.RunCompleted
			}
			if err := st.SetRunStatus(ctx, models.RunStatusUpdate{RunID: key, Status: status}); err != nil {
				t.Fatal(err)
			}
			run, err := st.GetRun(ctx, key)
			if err != nil {
				t.Fatal(err)
			}
			h := stream.New(stream.Config{Store: st, Querier: held, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
			t.Cleanup(h.Close)

			// Contract 002 from after event 3.
			w := httptest.NewRecorder()
			h.Serve(ctx, h.OpenSSE(w), run, stream.Contract002(), 3)
			var want strings.Builder
			for _, e := range evs[3:] {
				e.RunID = run.PublicID
				data, _ := json.Marshal(e)
				fmt.Fprintf(&want, "id: %d\nevent: %s\ndata: %s\n\n", e.Sequence, e.Event, data)
			}
			if got := w.Body.String(); got != want.String() {
				t.Errorf("contract 002 after 3:\n%s\nwant:\n%s", got, want.String())
			}
			if ct := w.Header().Get("Content-Type"); ct != "text/event-stream" {
				t.Errorf("Content-Type %q", ct)
			}

			// A Replayer from after event 3.
			w = httptest.NewRecorder()
			rec := &recorder{}
			h.Serve(ctx, h.OpenSSE(w), run, rec, 3)
			if fmt.Sprint(rec.replayed, rec.encoded) != "[1 2 3] [4 5]" {
				t.Errorf("replayed %v, encoded %v; want [1 2 3], [4 5]", rec.replayed, rec.encoded)
			}
			if got, want := w.Body.String(), "id: 4\nevent: seen\ndata: {\"n\":4}\n\nid: 5\nevent: seen\ndata: {\"n\":5}\n\n"; got != want {
				t.Errorf("replayer's stream:\n%q\nwant:\n%q", got, want)
			}
			if s := h.Stats(); s.Subscribers != 0 {
				t.Errorf("%d subscribers after the streams ended", s.Subscribers)
			}
		})
	}
}
