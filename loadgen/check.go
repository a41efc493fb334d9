package loadgen

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/op-stack/executor/client"
	"github.com/op-stack/executor/models"
)

// maxProblems bounds the problems one check lists.
const maxProblems = 5

// CheckStream compares the events a client read from a run's stream,
// opened at its start, in the order they arrived, with the run's stored
// log (runs/events, every page): the stream must be gap-free (sequences
// 1, 2, 3 …), hold no event twice, end with the run's terminal event, and
// be equal to the stored log, event for event. It returns nil when all of
// that holds, else an error listing the first problems.
func CheckStream(stream, stored []models.Event) error {
	var problems []string
	add := func(format string, args ...any) {
		if len(problems) < maxProblems {
			problems = append(problems, fmt.Sprintf(format, args...))
		}
	}
	want := int64(1)
	seen := map[int64]bool{}
	for i, ev := range stream {
		switch {
		case seen[ev.Sequence]:
			add("duplicate: sequence %d arrived again (stream position %d)", ev.Sequence, i)
			continue
		case ev.Sequence > want:
			add("gap: sequence %d arrived where %d was expected", ev.Sequence, want)
		case ev.Sequence < want:
			add("out of order: sequence %d arrived after %d", ev.Sequence, want-1)
		}
		seen[ev.Sequence] = true
		if ev.Sequence >= want {
			want = ev.Sequence + 1
		}
	}
	if len(stream) == 0 {
		add("the stream carried no event")
	} else if last := stream[len(stream)-1]; !client.IsTerminal(last) {
		add("the stream ended with %s.%s (sequence %d), not the run's terminal event", last.Event.Category, last.Event.Action, last.Sequence)
	}
	if len(stored) != len(seen) {
		add("the stored log has %d events, the stream %d distinct", len(stored), len(seen))
	}
	byseq := map[int64]models.Event{}
	for _, ev := range stream {
		if _, ok := byseq[ev.Sequence]; !ok {
			byseq[ev.Sequence] = ev
		}
	}
	for _, st := range stored {
		got, ok := byseq[st.Sequence]
		if !ok {
			add("stored event %d (%s.%s) never arrived on the stream", st.Sequence, st.Event.Category, st.Event.Action)
			continue
		}
		if a, b := canonical(got), canonical(st); a != b {
			add("event %d differs: stream %s, stored %s", st.Sequence, clip(a), clip(b))
		}
	}
	if len(problems) == 0 {
		return nil
	}
	return fmt.Errorf("%s", strings.Join(problems, "; "))
}

// canonical is ev as JSON with its maps' keys sorted, so two decodings
// of the same event compare equal.
func canonical(ev models.Event) string {
	raw, _ := json.Marshal(ev)
	var v any
	_ = json.Unmarshal(raw, &v)
	raw, _ = json.Marshal(v)
	return string(raw)
}

func clip(s string) string {
	if len(s) > 200 {
		return s[:200] + "…"
	}
	return s
}
