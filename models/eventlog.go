package models

import "encoding/json"

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
}

// Append assigns e the next sequence number and appends it.
func (l *EventLog) Append(e Event) Event {
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
	page := EventPage{LastSequence: l.LastSequence, FirstAvailable: l.FirstSequence(), Events: []Event{}}
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
