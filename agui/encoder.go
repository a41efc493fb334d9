package agui

import (
	"encoding/json"
	"fmt"

	"github.com/op-stack/executor/models"
	"github.com/op-stack/executor/stream"
)

// NewEncoder returns the stream bridge's encoder of one client's AG-UI
// stream of the run opts names (opts.After: the client's resume point). It
// is a stream.Replayer: the translation needs the log from sequence 1, and
// the bridge feeds it the events the client has to Replay, the rest to
// Encode. Each event's AG-UI events go out as one SSE message, encoded
// whole (Stream.Frame), the last "data:" line with the event's sequence as
// id.
func NewEncoder(opts Options) stream.Replayer { return &encoder{s: NewStream(opts)} }

type encoder struct{ s *Stream }

func decode(fr stream.Frame) (models.Event, error) {
	var e models.Event
	if err := json.Unmarshal(fr.Data, &e); err != nil {
		return e, fmt.Errorf("decode event %d: %w", fr.Seq, err)
	}
	return e, nil
}

// Replay takes an event the client has into the translation; the
// Translator sends nothing for it (Options.After).
func (enc *encoder) Replay(fr stream.Frame) error {
	e, err := decode(fr)
	if err != nil {
		return err
	}
	enc.s.tr.Next(e)
	return nil
}

// Encode sends the AG-UI events fr makes, as one SSE message.
func (enc *encoder) Encode(fr stream.Frame) ([]stream.Message, error) {
	e, err := decode(fr)
	if err != nil {
		return nil, err
	}
	b, err := enc.s.Frame(e)
	if err != nil || b == nil {
		return nil, err
	}
	return []stream.Message{{ID: fr.Seq, SSE: b}}, nil
}
