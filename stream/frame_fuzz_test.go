package stream

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	sse "github.com/tmaxmax/go-sse"

	"github.com/op-stack/executor/models"
)

// FuzzEncodeFrame: any event, whatever its strings hold (line breaks, NUL,
// U+2028, invalid UTF-8), encodes to one well-formed SSE message: exactly
// the id, event and data lines and the blank line ending it, no carriage
// return, and a data line that decodes back to the same event (invalid
// UTF-8 reads back as U+FFFD, as JSON has it), read by an SSE client.
func FuzzEncodeFrame(f *testing.F) {
	f.Add("run-1", "2026-01-01T00:00:00.000Z", int64(7), "llm", "stream", "agent-1", "worker", "Writer", "team", "hello", "text", 1.5)
	f.Add("r", "", int64(0), "lifecycle", "completed", "", "", "", "", "", "", 0.0)
	f.Add("r\n", "t\r\n", int64(-1), "llm\nx", "stream\r", "a\x00", "w\u2028", "n\u2029", "\xff", "line1\nline2\r\ndata: fake\n\nid: 99", "key\n", -3.25)
	f.Fuzz(func(t *testing.T, runID, ts string, seq int64, category, action, agentID, agentType, agentName, teamName, text, key string, num float64) {
		team := teamName
		e := models.Event{
			RunID: runID, Timestamp: ts, Sequence: seq,
			Source: models.Source{AgentID: agentID, AgentType: agentType, AgentName: agentName, TeamName: &team, Depth: 2, Path: []string{agentID, teamName}},
			Event:  models.EventKind{Category: category, Action: action},
			Data:   map[string]any{"text": text, key: num, "nested": map[string]any{key: []any{text, true}}},
		}
		fr, err := encodeFrame(e, runID)
		if err != nil {
			// Only a number JSON cannot hold may fail to encode.
			t.Skipf("not encodable: %v", err)
		}
		msg := string(fr.SSE)
		if strings.Contains(msg, "\r") {
			t.Fatalf("carriage return in the frame %q", msg)
		}
		lines := strings.Split(msg, "\n")
		if len(lines) != 5 || lines[3] != "" || lines[4] != "" ||
			!strings.HasPrefix(lines[0], "id: ") || !strings.HasPrefix(lines[1], "event: ") || !strings.HasPrefix(lines[2], "data: ") {
			t.Fatalf("not one SSE message of id, event and data lines: %q", msg)
		}
		if fr.Seq != seq || fr.Terminal != isTerminalEvent(e.Event) {
			t.Fatalf("frame seq %d terminal %v for event %d %s", fr.Seq, fr.Terminal, seq, e.Event)
		}

		var got []sse.Event
		for ev, err := range sse.Read(bytes.NewReader(fr.SSE), &sse.ReadConfig{MaxEventSize: 1 << 20}) {
			if err != nil {
				t.Fatalf("SSE client cannot read %q: %v", msg, err)
			}
			got = append(got, ev)
		}
		if len(got) != 1 {
			t.Fatalf("SSE client read %d messages from %q", len(got), msg)
		}
		ev := got[0]
		if ev.LastEventID != strconv.FormatInt(seq, 10) {
			t.Errorf("id %q, want %d", ev.LastEventID, seq)
		}
		if want := lineBreaks.Replace(e.Event.String()); ev.Type != want && !(want == "" && ev.Type == "message") {
			t.Errorf("event %q, want %q", ev.Type, want)
		}
		var back models.Event
		if err := json.Unmarshal([]byte(ev.Data), &back); err != nil {
			t.Fatalf("data %q is not an event: %v", ev.Data, err)
		}
		if want := asJSONReadsIt(e); !reflect.DeepEqual(back, want) {
			t.Fatalf("event changed through the frame:\nsent %#v\ngot  %#v", want, back)
		}
	})
}

// asJSONReadsIt is e as a JSON round trip returns it: invalid UTF-8 as
// U+FFFD, numbers as float64.
func asJSONReadsIt(e models.Event) models.Event {
	valid := func(s string) string {
		if utf8.ValidString(s) {
			return s
		}
		var b strings.Builder
		for _, r := range s {
			b.WriteRune(r) // ranging yields U+FFFD for each invalid byte
		}
		return b.String()
	}
	raw, _ := json.Marshal(e)
	var out models.Event
	json.Unmarshal(raw, &out)
	// The round trip above is the reference for Data's shapes; the strings
	// outside Data are checked independently of encoding/json.
	out.RunID, out.Timestamp = valid(e.RunID), valid(e.Timestamp)
	out.Event = models.EventKind{Category: valid(e.Event.Category), Action: valid(e.Event.Action)}
	out.Source.AgentID, out.Source.AgentType, out.Source.AgentName = valid(e.Source.AgentID), valid(e.Source.AgentType), valid(e.Source.AgentName)
	if e.Source.TeamName != nil {
		tn := valid(*e.Source.TeamName)
		out.Source.TeamName = &tn
	}
	return out
}
