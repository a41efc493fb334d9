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
// it back, the earlier attempt stores nothing more, and each claimant
// learns what its predecessors stored.
func TestEventLeaseFencing(t *testing.T) {
	storetest.ForEachDialect(t, func(t *testing.T, st *store.Store) {
		ctx := context.Background()
		run := "run-lease"
		carried := leaseEvents(run, 1, 2)
		prior, err := st.ClaimEventLease(ctx, run, "a/1", 3, carried)
		if err != nil || len(prior) != 0 {
			t.Fatalf("first claim: %d prior, %v", len(prior), err)
		}
		if ok, err := st.InsertLeasedEvents(ctx, run, "a/1", leaseEvents(run, 3, 4)); !ok || err != nil {
			t.Fatalf("holder's insert: %v %v", ok, err)
		}
		prior, err = st.ClaimEventLease(ctx, run, "a/2", 3, carried)
		if err != nil || len(prior) != 2 || prior[0].Sequence != 3 || prior[1].Sequence != 4 {
			t.Fatalf("second claim: %v, %v", prior, err)
		}
		if ok, err := st.InsertLeasedEvents(ctx, run, "a/1", leaseEvents(run, 5, 5)); ok || err != nil {
			t.Fatalf("fenced attempt's insert: stored %v, %v", ok, err)
		}
		if ok, err := st.InsertLeasedEvents(ctx, run, "a/2", leaseEvents(run, 5, 6)); !ok || err != nil {
			t.Fatalf("new holder's insert: %v %v", ok, err)
		}
		stored, err := st.ReleaseEventLease(ctx, run, 3, carried)
		if err != nil || len(stored) != 4 || stored[3].Sequence != 6 {
			t.Fatalf("release: %v, %v", stored, err)
		}
		if ok, _ := st.InsertLeasedEvents(ctx, run, "a/2", leaseEvents(run, 7, 7)); ok {
			t.Fatal("an insert after the release was stored")
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
