package models

import "testing"

func seqs(events []Event) []int64 {
	out := make([]int64, len(events))
	for i, e := range events {
		out[i] = e.Sequence
	}
	return out
}

// TestEventLease: while a lease is out the log numbers nothing itself;
// the activity's events go in with their own sequences, and what the
// workflow appended meanwhile follows them, gap-free.
func TestEventLease(t *testing.T) {
	var l EventLog
	l.Append(Event{Event: EventKind{Category: CategoryLifecycle, Action: ActionStarted}})
	from := l.StartLease()
	if from != 2 {
		t.Fatalf("lease from %d, want 2", from)
	}
	if page := l.Page(EventQuery{}, false); page.LeaseFrom != 2 || page.LastSequence != 1 {
		t.Fatalf("page during the lease: lease_from %d last %d", page.LeaseFrom, page.LastSequence)
	}
	warn := l.Append(Event{Event: EventKind{Category: CategorySystem, Action: ActionWarning}})
	if warn.Sequence != 0 || l.LastSequence != 1 || len(l.Deferred) != 1 {
		t.Fatalf("append during the lease: seq %d, last %d, deferred %d", warn.Sequence, l.LastSequence, len(l.Deferred))
	}
	if got := l.ApplyBatch(EventBatch{Producer: "p", Seq: 1, Events: []Event{{Event: EventKind{Category: CategoryLLM, Action: ActionToolResult}}}}); len(got) != 1 || got[0].Sequence != 0 {
		t.Fatalf("a batch during the lease: %+v", got)
	}
	leased := []Event{
		{Sequence: 2, Event: EventKind{Category: CategoryLLM, Action: ActionStream}},
		{Sequence: 3, Event: EventKind{Category: CategoryLLM, Action: ActionUsage}},
	}
	if got, ok := l.ApplyLeased(leased); !ok || len(got) != 2 {
		t.Fatalf("ApplyLeased of contiguous events: %d applied, ok %v", len(got), ok)
	}
	if got, ok := l.ApplyLeased(leased); !ok || len(got) != 0 || l.LastSequence != 3 {
		t.Fatalf("applied twice: %d applied again, last %d, want 3", len(got), l.LastSequence)
	}
	l.EndLease()
	if l.LeaseFrom != 0 || l.Deferred != nil || l.LastSequence != 5 {
		t.Fatalf("after the lease: from %d, deferred %d, last %d", l.LeaseFrom, len(l.Deferred), l.LastSequence)
	}
	want := []int64{1, 2, 3, 4, 5}
	if got := seqs(l.Events); len(got) != len(want) {
		t.Fatalf("sequences %v, want %v", got, want)
	}
	for i, e := range l.Events {
		if e.Sequence != want[i] {
			t.Fatalf("sequences %v, want %v", seqs(l.Events), want)
		}
	}
	if l.Events[3].Event.Action != ActionWarning || l.Events[4].Event.Action != ActionToolResult {
		t.Fatalf("deferred events out of order: %v then %v", l.Events[3].Event, l.Events[4].Event)
	}
	if _, ok := l.ApplyLeased([]Event{{Sequence: 9}}); ok {
		t.Fatal("ApplyLeased took an event after a gap")
	}
}
