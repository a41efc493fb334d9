package store_test

import (
	"context"
	"testing"

	"github.com/op-stack/executor/models"
	"github.com/op-stack/executor/store"
	"github.com/op-stack/executor/store/storetest"
)

func leaseEvents(run string, from, to int64) []models.Event {
	var out []models.Event
	for s := from; s <= to; s++ {
		out = append(out, models.Event{RunID: run, Sequence: s, Event: models.EventKind{Category: models.CategoryLLM, Action: models.ActionStream}, Data: map[string]any{"content": "x"}})
	}
	return out
}

// TestEventLeaseFencing: the attempt holding a run's event lease stores
// its events; once a later attempt claims the lease, or the workflow takes
// it back, the earlier attempt stores nothing more, not even with a first
// write that would claim it, and each claimant learns what its
// predecessors stored. A first write claims a lease another call held.
func TestEventLeaseFencing(t *testing.T) {
	storetest.ForEachDialect(t, func(t *testing.T, st *store.Store) {
		ctx := context.Background()
		run := "run-lease"
		carried := leaseEvents(run, 1, 2)
		// An earlier call's lease, then this call's first attempt claims
		// it with its first write, which stores the carried events too.
		if _, err := st.ClaimEventLease(ctx, run, "wf/r/1", "wf/r/1/2", 1, nil, nil); err != nil {
			t.Fatal(err)
		}
		// The earlier call's answer, kept for its retries, goes with the
		// next claim (Forget).
		if err := st.KeepAnswer(ctx, store.KeptAnswer{CallKey: "wf/r/1", Ordinal: 1, RunID: run, Response: "{}", Record: models.LLMCallRecord{ID: "call-0", RunID: run, AgentID: "a", Model: "m"}}); err != nil {
			t.Fatal(err)
		}
		first := store.LeaseWrite{RunID: run, CallKey: "wf/r/2", Producer: "wf/r/2/1", From: 3, Claim: true, Carried: carried, Events: leaseEvents(run, 3, 4), Forget: []string{"call-0"}}
		if ok, err := st.WriteLeased(ctx, first); !ok || err != nil {
			t.Fatalf("first attempt's claiming write: %v %v", ok, err)
		}
		if n, err := st.KeptAnswers(ctx, run); n != 0 || err != nil {
			t.Fatalf("%d answers kept after the claim that forgets them (%v)", n, err)
		}
		prior, err := st.ClaimEventLease(ctx, run, "wf/r/2", "wf/r/2/2", 3, carried, nil)
		if err != nil || len(prior) != 2 || prior[0].Sequence != 3 || prior[1].Sequence != 4 {
			t.Fatalf("second attempt's claim: %v, %v", prior, err)
		}
		stale := store.LeaseWrite{RunID: run, CallKey: "wf/r/2", Producer: "wf/r/2/1", From: 3, Events: leaseEvents(run, 5, 5)}
		if ok, err := st.WriteLeased(ctx, stale); ok || err != nil {
			t.Fatalf("fenced attempt's write: stored %v, %v", ok, err)
		}
		stale.Claim = true
		if ok, err := st.WriteLeased(ctx, stale); ok || err != nil {
			t.Fatalf("fenced attempt's claiming write: stored %v, %v", ok, err)
		}
		answer := &models.AnswerRecord{RunID: run, Calls: []models.LLMCallRecord{{ID: "call-1", RunID: run, AgentID: "a", Model: "m"}}}
		second := store.LeaseWrite{RunID: run, CallKey: "wf/r/2", Producer: "wf/r/2/2", From: 3, Events: leaseEvents(run, 5, 6), Answer: answer}
		if ok, err := st.WriteLeased(ctx, second); !ok || err != nil {
			t.Fatalf("new holder's write: %v %v", ok, err)
		}
		if calls, err := st.LLMCalls(ctx, run); err != nil || len(calls) != 2 { // call-0 (kept) and call-1
			t.Fatalf("the answer's usage records: %d, %v", len(calls), err)
		}
		stored, err := st.ReleaseEventLease(ctx, run, 3, carried)
		if err != nil || len(stored) != 4 || stored[3].Sequence != 6 {
			t.Fatalf("release: %v, %v", stored, err)
		}
		second.Events = leaseEvents(run, 7, 7)
		second.Answer = nil
		if ok, _ := st.WriteLeased(ctx, second); ok {
			t.Fatal("a write after the release was stored")
		}
		all, err := st.ListEvents(ctx, run, store.EventFilter{})
		if err != nil || len(all) != 6 {
			t.Fatalf("stored log: %d events, %v; want 1..6", len(all), err)
		}
		for i, e := range all {
			if e.Sequence != int64(i+1) {
				t.Fatalf("stored log has %d at %d", e.Sequence, i)
			}
		}
	})
}
