package e2e

import (
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	sse "github.com/tmaxmax/go-sse"

	"github.com/op-stack/executor/llm/llmfake"
	"github.com/op-stack/executor/models"
)

// TestEventsStoredDuringPause (issue 23, item 4): a run is paused while
// the searcher's call streams; the call ends during the pause. Once the
// stream has sent the searcher's llm.usage (its call is over), runs/events
// holds, within a second, exactly what the stream sent: the events that
// arrived during the pause included. Before, they waited for 100 events or
// the resume.
func TestEventsStoredDuringPause(t *testing.T) {
	e := newEnv(t, referenceRules(map[string][]llmfake.Response{
		// About 2 s of streaming: the pause lands while it is in flight.
		"W-SEARCHER": {{Content: strings.Repeat("paper ", 40), TokenDelay: 50 * time.Millisecond}},
	}))
	id := e.startRun(e.createHierarchy(referenceHierarchy()), "Explain quantum tunnelling")

	// A live stream reader, as a client would have one.
	var (
		mu       sync.Mutex
		streamed []models.Event
	)
	resp := e.openStream(id, 0, false)
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer resp.Body.Close()
		for ev, err := range sse.Read(resp.Body, &sse.ReadConfig{MaxEventSize: 4 << 20}) {
			if err != nil {
				return
			}
			var m models.Event
			if json.Unmarshal([]byte(ev.Data), &m) != nil {
				continue
			}
			mu.Lock()
			streamed = append(streamed, m)
			mu.Unlock()
		}
	}()
	sent := func() []models.Event {
		mu.Lock()
		defer mu.Unlock()
		return append([]models.Event(nil), streamed...)
	}

	waitFor(t, 30*time.Second, "the searcher's call", func() bool { return len(callsMatching(e.fake.Calls(), "W-SEARCHER")) > 0 })
	e.mustPost("/runs/pause", map[string]any{"id": id}, nil)
	// The searcher's call streams under the run's event lease, so the
	// workflow numbers lifecycle.paused after the call's events (without
	// the lease, the call's end comes after it).
	var pausedAt, usageAt int64
	waitFor(t, 30*time.Second, "the searcher's call to end and the pause", func() bool {
		for _, ev := range sent() {
			if ev.Event.Category == models.CategoryLifecycle && ev.Event.Action == models.ActionPaused {
				pausedAt = ev.Sequence
			}
			if ev.Source.AgentID == "w-searcher" && ev.Event.Action == models.ActionUsage {
				usageAt = ev.Sequence
			}
		}
		return pausedAt > 0 && usageAt > 0
	})
	time.Sleep(time.Second) // the documented bound, with room to spare
	if v := e.getRun(id); v.Status != models.RunPaused {
		t.Fatalf("run is %s, want paused", v.Status)
	}
	live := sent()
	stored := e.listEvents(id)
	if len(stored) != len(live) {
		t.Errorf("during the pause runs/events has %d events, the stream sent %d", len(stored), len(live))
	}
	for i := range min(len(stored), len(live)) {
		if stored[i].Sequence != live[i].Sequence || stored[i].Event != live[i].Event || stored[i].Source.AgentID != live[i].Source.AgentID {
			t.Fatalf("event %d: runs/events %d %s (%s), stream %d %s (%s)", i, stored[i].Sequence, stored[i].Event, stored[i].Source.AgentID,
				live[i].Sequence, live[i].Event, live[i].Source.AgentID)
		}
	}
	// The pause landed during the searcher's call: nothing of a later
	// step (the team supervisor's next decision) came before it.
	for _, ev := range live {
		if ev.Sequence > usageAt && ev.Sequence < pausedAt {
			t.Errorf("event %d %s (%s) came between the searcher's call (ending at %d) and lifecycle.paused (%d): the pause did not land during the call",
				ev.Sequence, ev.Event, ev.Source.AgentID, usageAt, pausedAt)
		}
	}

	e.mustPost("/runs/resume", map[string]any{"id": id}, nil)
	if v := e.waitRun(id, time.Minute); v.Status != models.RunCompleted {
		t.Fatalf("run ended %s: %s", v.Status, v.Error)
	}
	<-done
}

// listEvents reads a run's whole stored log through runs/events.
func (e *testEnv) listEvents(id string) []models.Event {
	e.t.Helper()
	var all []models.Event
	for after := int64(0); ; {
		var page struct {
			Events    []models.Event `json:"events"`
			NextAfter int64          `json:"next_after"`
			HasMore   bool           `json:"has_more"`
		}
		status, env := e.post("/runs/events", map[string]any{"id": id, "after": after, "limit": 1000})
		if status != http.StatusOK {
			e.t.Fatalf("runs/events answered %d: %s", status, env.Message)
		}
		if err := json.Unmarshal(env.Data, &page); err != nil {
			e.t.Fatal(err)
		}
		all = append(all, page.Events...)
		if !page.HasMore {
			return all
		}
		after = page.NextAfter
	}
}
