package stream

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/op-stack/executor/models"
)

// Frame is one event of a run's log, encoded once as contract 002's SSE
// message and shared by every subscriber: encoders must not modify it.
type Frame struct {
	// Seq is the event's sequence number.
	Seq int64
	// Terminal says the event ends the run (lifecycle.completed,
	// lifecycle.failed or lifecycle.cancelled).
	Terminal bool
	// SSE is the whole SSE message: id, event and data lines.
	SSE []byte
	// Name is the event's type, e.g. llm.stream.
	Name string
	// Data is the event's JSON, with the run's public id as its run_id: a
	// part of SSE.
	Data []byte
}

// encodeFrame encodes e as its run's tenant sees it: with publicID, the
// run's public id, as its run_id (the workflow and the store know the run
// by its key; see store.Run).
func encodeFrame(e models.Event, publicID string) (Frame, error) {
	e.RunID = publicID
	data, err := json.Marshal(e)
	if err != nil {
		return Frame{}, fmt.Errorf("encode event %d: %w", e.Sequence, err)
	}
	var b bytes.Buffer
	b.Grow(len(data) + 64)
	b.WriteString("id: ")
	b.WriteString(strconv.FormatInt(e.Sequence, 10))
	b.WriteString("\nevent: ")
	// A line break in the name would end the field early and corrupt the
	// stream; names come from the workflow, so this is only a guard.
	b.WriteString(lineBreaks.Replace(e.Event.String()))
	b.WriteString("\ndata: ")
	start := b.Len()
	b.Write(data) // json.Marshal output holds no raw line breaks
	end := b.Len()
	b.WriteString("\n\n")
	msg := b.Bytes()
	return Frame{Seq: e.Sequence, Terminal: isTerminalEvent(e.Event), SSE: msg, Name: e.Event.String(), Data: msg[start:end:end]}, nil
}

var lineBreaks = strings.NewReplacer("\r", "", "\n", "")

func isTerminalEvent(k models.EventKind) bool { return models.IsTerminalEvent(k) }

// PublicEvents shows a run's events as its tenant sees them: with the run's
// public id as their run_id (see encodeFrame).
func PublicEvents(evs []models.Event, publicID string) {
	for i := range evs {
		evs[i].RunID = publicID
	}
}
