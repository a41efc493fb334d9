package models

import (
	"fmt"
	"strings"
	"testing"
)

func TestAttemptOf(t *testing.T) {
	for _, tc := range []struct {
		producer, activity string
		attempt            int32
		ok                 bool
	}{
		{"run-r1/0192-abc/12/3", "run-r1/0192-abc/12", 3, true},
		{"run-r1-team-2/run/5/1", "run-r1-team-2/run/5", 1, true},
		{"run-r1-sub-exec_1", "", 0, false}, // a child workflow
		{"local", "", 0, false},
		{"a/b/0", "", 0, false},
		{"a/b/c/x", "", 0, false},
	} {
		activity, attempt, ok := AttemptOf(tc.producer)
		if activity != tc.activity || attempt != tc.attempt || ok != tc.ok {
			t.Errorf("AttemptOf(%q) = %q %d %v", tc.producer, activity, attempt, ok)
		}
	}
}

func llmEvent(action string, attempt int32, data map[string]any) Event {
	if data == nil {
		data = map[string]any{}
	}
	data["agent_id"], data["attempt"] = "w-writer", attempt
	return Event{Source: Source{AgentID: "w-writer", AgentType: AgentTypeWorker}, Event: EventKind{Category: CategoryLLM, Action: action}, Data: data}
}

func stream(attempt int32, text string) Event {
	return llmEvent(ActionStream, attempt, map[string]any{"content": text})
}

// describe renders a log as "action(attempt:content)" items.
func describe(events []Event) string {
	var out []string
	for _, e := range events {
		s := fmt.Sprintf("%s(%v", e.Event.Action, e.Data["attempt"])
		if c, _ := e.Data["content"].(string); c != "" {
			s += ":" + c
		}
		out = append(out, s+")")
	}
	return strings.Join(out, " ")
}

// Whatever ended an attempt, the log announces the next one before its
// first delta, and text of the replaced attempt never follows that
// announcement.
func TestApplyAttemptBatchKeepsAttemptsApart(t *testing.T) {
	const act = "run-r1/tr/7"
	p := func(n int) string { return fmt.Sprintf("%s/%d", act, n) }
	var l EventLog
	l.ApplyAttemptBatch(EventBatch{Producer: p(1), Seq: 1, Events: []Event{stream(1, "The rep")}})
	// Attempt 2's own llm.retry was lost (its batch failed to deliver):
	// its next batch comes first, and the log announces it.
	l.ApplyAttemptBatch(EventBatch{Producer: p(2), Seq: 2, Events: []Event{stream(2, "The report")}})
	// Attempt 1 kept streaming (it never learnt it was replaced): dropped.
	if got := l.ApplyAttemptBatch(EventBatch{Producer: p(1), Seq: 2, Events: []Event{stream(1, "ort is late")}}); got != nil {
		t.Errorf("a replaced attempt's batch was applied: %+v", got)
	}
	// The lost batch arrives after all: applied once already in effect.
	l.ApplyAttemptBatch(EventBatch{Producer: p(2), Seq: 1, Events: []Event{llmEvent(ActionRetry, 2, map[string]any{"previous_attempt": int32(1)})}})
	// Attempt 3 announces itself: no second announcement.
	l.ApplyAttemptBatch(EventBatch{Producer: p(3), Seq: 1, Events: []Event{llmEvent(ActionRetry, 3, map[string]any{"previous_attempt": int32(2)}), stream(3, "Done")}})
	want := "stream(1:The rep) retry(2) stream(2:The report) retry(3) stream(3:Done)"
	if got := describe(l.Events); got != want {
		t.Errorf("log = %s\nwant  %s", got, want)
	}
	if r := l.Events[1]; r.Data["previous_attempt"] != int32(1) || r.Source.AgentID != "w-writer" || r.Sequence != 2 {
		t.Errorf("made llm.retry = %+v", r)
	}
}

// A kept answer's llm.usage is in the log once; other usage, and tool
// activities' attempts, are applied as they come.
func TestApplyAttemptBatchReportsAKeptCallOnce(t *testing.T) {
	const act = "run-r1/tr/9"
	usage := func(attempt int32, id string, kept bool) Event {
		d := map[string]any{"llm_call_id": id, "total_tokens": 5}
		if kept {
			d["kept"] = true
		}
		return llmEvent(ActionUsage, attempt, d)
	}
	var l EventLog
	l.ApplyAttemptBatch(EventBatch{Producer: act + "/1", Seq: 1, Events: []Event{stream(1, "answer"), usage(1, "c1", false)}})
	l.ApplyAttemptBatch(EventBatch{Producer: act + "/2", Seq: 1, Events: []Event{llmEvent(ActionRetry, 2, nil), stream(2, "answer"), usage(2, "c1", true)}})
	// Another call's kept usage, not in the log yet, is applied.
	l.ApplyAttemptBatch(EventBatch{Producer: "run-r1/tr/10/2", Seq: 1, Events: []Event{llmEvent(ActionRetry, 2, nil), usage(2, "c2", true)}})
	// A tool activity's second attempt: no announcement, nothing dropped.
	tool := Event{Source: Source{AgentID: "w-writer"}, Event: EventKind{Category: CategoryLLM, Action: ActionToolResult}, Data: map[string]any{}}
	l.ApplyAttemptBatch(EventBatch{Producer: "run-r1/tr/11/2", Seq: 1, Events: []Event{tool}})
	want := "stream(1:answer) usage(1) retry(2) stream(2:answer) retry(2) usage(2) tool_result(<nil>)"
	if got := describe(l.Events); got != want {
		t.Errorf("log = %s\nwant  %s", got, want)
	}
}

// TestHeldBatchesKeepTheirOrder: a batch held because an earlier one of its
// producer is missing (Gap, Hold) is released once that one is applied,
// repeats are dropped, and a stale gap releases the rest in order.
func TestHeldBatchesKeepTheirOrder(t *testing.T) {
	batch := func(p string, seq int) EventBatch {
		return EventBatch{Producer: p, Seq: seq, Events: []Event{{Data: map[string]any{"content": fmt.Sprintf("%s%d", p, seq)}}}}
	}
	var l EventLog
	never := func(int64) bool { return false }
	apply := func(b EventBatch) {
		if l.Gap(b) {
			l.Hold(b, 1)
			return
		}
		l.ApplyBatch(b)
		for {
			h, ok := l.NextHeld(never)
			if !ok {
				return
			}
			l.ApplyBatch(h)
		}
	}
	apply(batch("p", 3))
	apply(batch("p", 2))
	apply(batch("p", 3)) // held already
	apply(batch("q", 2))
	if len(l.Held) != 3 || l.LastSequence != 0 {
		t.Fatalf("held %d, applied %d; want 3 held, none applied", len(l.Held), l.LastSequence)
	}
	apply(batch("p", 1))
	var got []string
	for _, e := range l.Events {
		got = append(got, e.Data["content"].(string))
	}
	if strings.Join(got, " ") != "p1 p2 p3" || len(l.Held) != 1 {
		t.Fatalf("log %v, %d held; want p1 p2 p3 and q2 held", got, len(l.Held))
	}
	// q1 never comes: once stale, q2 is applied all the same.
	b, ok := l.NextHeld(func(at int64) bool { return at < 2 })
	if !ok || b.Producer != "q" || b.Seq != 2 {
		t.Fatalf("stale release = %+v %v, want q#2", b, ok)
	}
	if len(l.Held) != 0 {
		t.Fatalf("held after release: %+v", l.Held)
	}
}
