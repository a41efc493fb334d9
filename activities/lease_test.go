package activities

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"

	"github.com/op-stack/executor/llm"
	"github.com/op-stack/executor/models"
	"github.com/op-stack/executor/store"
	"github.com/op-stack/executor/store/storetest"
)

// recordingPusher is a named fake of the API's streams: it keeps what is
// pushed to them.
type recordingPusher struct {
	mu     sync.Mutex
	pushed [][]models.Event
}

func (r *recordingPusher) Notify(context.Context, string) {}
func (r *recordingPusher) Push(_ context.Context, _ string, payload []byte) {
	var evs []models.Event
	if err := json.Unmarshal(payload, &evs); err != nil {
		panic(err)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.pushed = append(r.pushed, evs)
}

// leasedAttempt runs one attempt of an LLM activity under lease, with its
// writes deferred, as Respond does, and returns what it returned.
func leasedAttempt(t *testing.T, acts *Activities, attempt int32, lease *models.EventLease) (*models.EventBatch, bool) {
	t.Helper()
	ctx := context.Background()
	pub := acts.newPublisher(ctx, "r1")
	pub.callKey, pub.attempt, pub.producer = keptCallKey, attempt, fmt.Sprintf("%s/%d", keptCallKey, attempt)
	pub.deferWrites = true
	if err := pub.useLease(ctx, lease); err != nil {
		t.Fatal(err)
	}
	source := models.Source{AgentID: "w-1", AgentType: models.AgentTypeWorker, AgentName: "writer"}
	req := llm.Request{Model: "m", Messages: []llm.Message{{Role: llm.RoleUser, Content: "q"}}}
	if _, err := acts.completeWithFallback(ctx, pub, source, models.PurposeWorker, req, nil, nil); err != nil {
		t.Fatalf("attempt %d: %v", attempt, err)
	}
	return pub.finishSaving(true, true, models.AnswerRecord{RunID: "r1", Calls: pub.records})
}

func sequences(evs []models.Event) []int64 {
	var out []int64
	for _, e := range evs {
		out = append(out, e.Sequence)
	}
	return out
}

// TestLeasedAttempts: an attempt under lease numbers its events from the
// lease's From, stores them with the events the lease carried (and the
// answer's usage record), pushes them, and returns them numbered; a later
// attempt continues after what the earlier one stored, which it returns
// too, with the kept answer's usage reported once.
func TestLeasedAttempts(t *testing.T) {
	storetest.ForEachDialect(t, func(t *testing.T, st *store.Store) {
		ctx := context.Background()
		pusher := &recordingPusher{}
		acts := &Activities{Store: st, LLM: &fakeLLM{answers: []string{"the answer"}}, Notifier: pusher}
		carried := models.Event{RunID: "r1", Sequence: 4, Event: models.EventKind{Category: models.CategoryDispatch, Action: models.ActionWorker}, Data: map[string]any{}}
		lease := &models.EventLease{From: 5, Events: []models.Event{carried}}

		first, saved := leasedAttempt(t, acts, 1, lease)
		if first == nil || !first.Leased || fmt.Sprint(sequences(first.Events)) != "[5 6]" || !saved {
			t.Fatalf("attempt 1 returned %+v, saved %v; want events 5 and 6, leased and saved", first, saved)
		}
		stored, err := st.ListEvents(ctx, "r1", store.EventFilter{})
		if err != nil || fmt.Sprint(sequences(stored)) != "[4 5 6]" {
			t.Fatalf("stored %v, %v; want the carried 4 and the attempt's 5, 6", sequences(stored), err)
		}
		var pushed []int64
		for _, p := range pusher.pushed {
			pushed = append(pushed, sequences(p)...)
		}
		if fmt.Sprint(pushed) != "[4 5 6]" {
			t.Errorf("pushed %v, want 4 5 6", pushed)
		}
		if calls, _ := st.LLMCalls(ctx, "r1"); len(calls) != 1 {
			t.Errorf("%d usage records stored, want 1", len(calls))
		}

		// Attempt 1's completion is lost; attempt 2 claims the lease.
		second, _ := leasedAttempt(t, acts, 2, lease)
		if second == nil || !second.Leased {
			t.Fatalf("attempt 2 returned %+v", second)
		}
		var kinds []string
		for _, e := range second.Events {
			kinds = append(kinds, fmt.Sprintf("%d:%s", e.Sequence, e.Event.Action))
		}
		if fmt.Sprint(kinds) != "[5:stream 6:usage 7:retry 8:stream]" {
			t.Errorf("attempt 2 returned %v; want attempt 1's events, then its own, its kept usage not again", kinds)
		}
		// Attempt 1, fenced out, stores nothing more.
		stale := store.LeaseWrite{RunID: "r1", CallKey: keptCallKey, Producer: keptCallKey + "/1", From: 5, Events: []models.Event{{RunID: "r1", Sequence: 9}}}
		if ok, err := st.WriteLeased(ctx, stale); ok || err != nil {
			t.Errorf("the replaced attempt's write: stored %v, %v", ok, err)
		}
	})
}
