package models

import (
	"encoding/json"
	"strconv"
	"strings"
)

// Query page limits: a query result stays well under 1 MB.
const (
	DefaultPageBytes = 512 << 10
	MaxPageBytes     = 900 << 10
	DefaultPageLimit = 1000
)

// EventLog is a run's ordered event log as the workflow keeps it. The
// workflow assigns every sequence number, so the log has no gaps. Events
// holds the tail of the log, contiguous and ending at LastSequence (older
// events live in the database only).
type EventLog struct {
	Events       []Event `json:"events"`
	LastSequence int64   `json:"last_sequence"`
	// Persisted is the highest sequence stored in the database; every
	// event up to it is.
	Persisted int64 `json:"persisted"`
	// Producers maps an activity attempt to the last batch applied from it.
	Producers map[string]int `json:"producers"`
	// Attempts maps an LLM activity whose attempts were repeated to the
	// latest attempt applied (ApplyAttemptBatch); first attempts are not
	// in it.
	Attempts map[string]int32 `json:"attempts,omitempty"`
	// Held keeps batches that arrived before an earlier batch of their
	// producer (Gap), until that one is applied (NextHeld): applied at
	// once, they would make the earlier batch look like a repeat, and its
	// events would be dropped.
	Held []HeldBatch `json:"held,omitempty"`
	// LeaseFrom, when not 0, is the first sequence of an outstanding
	// EventLease: an activity numbers the events from it on, and Append
	// keeps what the workflow adds meanwhile in Deferred, to be numbered
	// after the lease's events (EndLease).
	LeaseFrom int64   `json:"lease_from,omitempty"`
	Deferred  []Event `json:"deferred,omitempty"`
}

// HeldBatch is a batch waiting for an earlier one of its producer; At
// marks when it arrived (the workflow's history length then).
type HeldBatch struct {
	Batch EventBatch `json:"batch"`
	At    int64      `json:"at"`
}

// Gap says whether an earlier batch of b's producer has not been applied
// yet. A run's workflow receives each producer's batches in order, but
// may apply them out of it: a batch handed to one coroutine's selector is
// applied only when that coroutine runs, and another coroutine (an event
// update's handler, a parallel team turn) can apply the next batch first.
func (l *EventLog) Gap(b EventBatch) bool {
	return b.Seq > l.Producers[b.Producer]+1
}

// Hold keeps b until the batches before it are applied (NextHeld).
func (l *EventLog) Hold(b EventBatch, at int64) {
	for _, h := range l.Held {
		if h.Batch.Producer == b.Producer && h.Batch.Seq == b.Seq {
			return // held already
		}
	}
	l.Held = append(l.Held, HeldBatch{Batch: b, At: at})
}

// NextHeld removes and returns the held batch to apply next: one whose
// earlier batches have all been applied, or else the lowest held batch of
// a producer whose oldest held batch is stale (stale(At) true), its gap
// then taken as lost. Batches applied already meanwhile are dropped.
func (l *EventLog) NextHeld(stale func(at int64) bool) (EventBatch, bool) {
	var kept []HeldBatch
	for _, h := range l.Held {
		if h.Batch.Seq > l.Producers[h.Batch.Producer] {
			kept = append(kept, h)
		}
	}
	l.Held = kept
	pick := -1
	for i, h := range l.Held {
		if h.Batch.Seq == l.Producers[h.Batch.Producer]+1 {
			pick = i
			break
		}
	}
	if pick < 0 {
		for i, h := range l.Held {
			if !stale(h.At) {
				continue
			}
			pick = i
			for j, o := range l.Held {
				if o.Batch.Producer == h.Batch.Producer && o.Batch.Seq < l.Held[pick].Batch.Seq {
					pick = j
				}
			}
			break
		}
	}
	if pick < 0 {
		return EventBatch{}, false
	}
	b := l.Held[pick].Batch
	l.Held = append(l.Held[:pick:pick], l.Held[pick+1:]...)
	if len(l.Held) == 0 {
		l.Held = nil
	}
	return b, true
}

// Append assigns e the next sequence number and appends it. While a lease
// is out it keeps e for EndLease and returns it unnumbered (Sequence 0).
func (l *EventLog) Append(e Event) Event {
	if l.LeaseFrom > 0 {
		if e.Data == nil {
			e.Data = map[string]any{}
		}
		l.Deferred = append(l.Deferred, e)
		return e
	}
	l.LastSequence++
	e.Sequence = l.LastSequence
	if e.Data == nil {
		e.Data = map[string]any{}
	}
	l.Events = append(l.Events, e)
	return e
}

// ApplyBatch appends a batch's events unless that batch was applied
// already, and returns what it appended.
func (l *EventLog) ApplyBatch(b EventBatch) []Event {
	if l.Producers == nil {
		l.Producers = map[string]int{}
	}
	if b.Seq <= l.Producers[b.Producer] {
		return nil
	}
	l.Producers[b.Producer] = b.Seq
	out := make([]Event, 0, len(b.Events))
	for _, e := range b.Events {
		out = append(out, l.Append(e))
	}
	return out
}

// StartLease hands the sequences after LastSequence to one activity
// (EventLease) and returns the first.
func (l *EventLog) StartLease() int64 {
	l.LeaseFrom = l.LastSequence + 1
	return l.LeaseFrom
}

// ApplyLeased appends the events an activity numbered under the
// outstanding lease, as they are: those the log has already are skipped.
// It returns those it appended, and stops at the first that would leave a
// gap, reporting false then.
// The caller marks them stored (MarkPersisted): the activity stored them,
// with the unstored events the lease carried.
func (l *EventLog) ApplyLeased(events []Event) (applied []Event, ok bool) {
	for _, e := range events {
		if e.Sequence <= l.LastSequence {
			continue
		}
		if e.Sequence != l.LastSequence+1 {
			return applied, false
		}
		if e.Data == nil {
			e.Data = map[string]any{}
		}
		l.Events = append(l.Events, e)
		l.LastSequence = e.Sequence
		applied = append(applied, e)
	}
	return applied, true
}

// EndLease ends the outstanding lease and numbers the events deferred
// during it, after the lease's.
func (l *EventLog) EndLease() {
	l.LeaseFrom = 0
	deferred := l.Deferred
	l.Deferred = nil
	for _, e := range deferred {
		l.Append(e)
	}
}

// FirstSequence is the sequence of the oldest event still held, or
// LastSequence+1 when none is.
func (l *EventLog) FirstSequence() int64 {
	if len(l.Events) == 0 {
		return l.LastSequence + 1
	}
	return l.Events[0].Sequence
}

// Page returns the held events after q.After, bounded by q.Limit and
// q.MaxBytes. It only reads the log: it is safe in a query handler.
func (l *EventLog) Page(q EventQuery, terminal bool) EventPage {
	page := EventPage{LastSequence: l.LastSequence, FirstAvailable: l.FirstSequence(), Events: []Event{}, LeaseFrom: l.LeaseFrom}
	limit, maxBytes := q.Limit, q.MaxBytes
	if limit <= 0 {
		limit = DefaultPageLimit
	}
	if maxBytes <= 0 || maxBytes > MaxPageBytes {
		maxBytes = DefaultPageBytes
	}
	start := q.After + 1
	if start < page.FirstAvailable {
		// The caller must read [start, FirstAvailable) from the database.
		page.More = true
		return page
	}
	size := 0
	for i := int(start - page.FirstAvailable); i >= 0 && i < len(l.Events); i++ {
		raw, _ := json.Marshal(l.Events[i])
		if len(page.Events) >= limit || (len(page.Events) > 0 && size+len(raw) > maxBytes) {
			page.More = true
			break
		}
		size += len(raw)
		page.Events = append(page.Events, l.Events[i])
	}
	page.Terminal = terminal && !page.More
	return page
}

// Unpersisted returns the held events not yet stored in the database.
func (l *EventLog) Unpersisted() []Event {
	first := l.FirstSequence()
	from := l.Persisted + 1 - first
	if from < 0 {
		from = 0
	}
	if int(from) >= len(l.Events) {
		return nil
	}
	return append([]Event(nil), l.Events[from:]...)
}

// MarkPersisted records that every event up to seq is stored, and drops
// stored events beyond the newest keep ones: the held tail stays bounded,
// and older events are read from the database.
func (l *EventLog) MarkPersisted(seq int64, keep int) {
	if seq > l.Persisted {
		l.Persisted = seq
	}
	drop := len(l.Events) - keep
	if maxDrop := int(l.Persisted - l.FirstSequence() + 1); drop > maxDrop {
		drop = maxDrop
	}
	if drop > 0 {
		l.Events = append([]Event(nil), l.Events[drop:]...)
	}
}

// AttemptOf splits the producer of an activity attempt's batches
// ("<workflow id>/<run id>/<activity id>/<attempt>") into the activity and
// the attempt; ok is false for every other producer (child workflows,
// events the workflow makes itself).
func AttemptOf(producer string) (activity string, attempt int32, ok bool) {
	i := strings.LastIndexByte(producer, '/')
	if i <= 0 || strings.Count(producer[:i], "/") < 2 {
		return "", 0, false
	}
	n, err := strconv.ParseInt(producer[i+1:], 10, 32)
	if err != nil || n < 1 {
		return "", 0, false
	}
	return producer[:i], int32(n), true
}

// llmCallBatch says whether a batch holds an LLM call's events (text,
// retries, fallbacks, usage), as opposed to a tool call's.
func llmCallBatch(events []Event) bool {
	for _, e := range events {
		if e.Event.Category != CategoryLLM {
			continue
		}
		switch e.Event.Action {
		case ActionStream, ActionReasoning, ActionRetry, ActionUsage, ActionFallback:
			return true
		}
	}
	return false
}

// ApplyAttemptBatch is ApplyBatch keeping every LLM call's attempts apart
// in the log, whatever ended the earlier ones (a worker killed, a Temporal
// outage, a heartbeat timeout):
//
//   - the first batch of a new attempt (after the first) starts with its
//     llm.retry: when the attempt's own announcement was lost, the log
//     makes one, so a client drops the earlier attempt's text before the
//     new attempt's first delta;
//   - a batch of an attempt older than one already applied is dropped: an
//     attempt that lost its activity (its heartbeats failed during an
//     outage, so it never learnt that it was replaced) may still be
//     streaming, and its late text would be glued to the new attempt's;
//   - an llm.usage of a kept answer (data kept: true) whose llm_call_id
//     the held log has reported already is dropped: that call's spend is
//     in the log once.
func (l *EventLog) ApplyAttemptBatch(b EventBatch) []Event {
	activity, attempt, ok := AttemptOf(b.Producer)
	if !ok || !llmCallBatch(b.Events) {
		return l.ApplyBatch(b)
	}
	if b.Seq <= l.Producers[b.Producer] {
		return nil // applied already
	}
	latest := l.Attempts[activity]
	if attempt < latest {
		return nil // a replaced attempt's late batch: its text is void
	}
	events := make([]Event, 0, len(b.Events)+1)
	if attempt > 1 && attempt > latest {
		if l.Attempts == nil {
			l.Attempts = map[string]int32{}
		}
		l.Attempts[activity] = attempt
		if retry, ok := announceAttempt(b.Events, attempt); ok {
			events = append(events, retry)
		}
	}
	for _, e := range b.Events {
		if l.reportedUsage(e) {
			continue
		}
		events = append(events, e)
	}
	b.Events = events
	return l.ApplyBatch(b)
}

// announceAttempt is the llm.retry the first batch of attempt lacks, ok
// false when it has its own.
func announceAttempt(events []Event, attempt int32) (Event, bool) {
	var first *Event
	for i, e := range events {
		if e.Event.Category != CategoryLLM {
			continue
		}
		if e.Event.Action == ActionRetry {
			return Event{}, false
		}
		if first == nil {
			first = &events[i]
		}
	}
	if first == nil {
		return Event{}, false
	}
	return Event{
		RunID: first.RunID, Timestamp: first.Timestamp, Source: first.Source,
		Event: EventKind{Category: CategoryLLM, Action: ActionRetry},
		Data: map[string]any{"agent_id": first.Source.AgentID, "content": "", "attempt": attempt,
			"previous_attempt": attempt - 1},
	}, true
}

// reportedUsage says whether e is a kept answer's llm.usage whose call the
// held log has reported already.
func (l *EventLog) reportedUsage(e Event) bool { return UsageReported(l.Events, e) }

// UsageReported says whether e is a kept answer's llm.usage (data kept:
// true) whose llm_call_id events report already: a call's spend is in a
// run's log once, however many attempts reused its answer.
func UsageReported(events []Event, e Event) bool {
	if e.Event.Category != CategoryLLM || e.Event.Action != ActionUsage {
		return false
	}
	if kept, _ := e.Data["kept"].(bool); !kept {
		return false
	}
	id, _ := e.Data["llm_call_id"].(string)
	if id == "" {
		return false
	}
	for i := len(events) - 1; i >= 0; i-- {
		h := events[i]
		if h.Event.Category == CategoryLLM && h.Event.Action == ActionUsage && h.Data["llm_call_id"] == id {
			return true
		}
	}
	return false
}
