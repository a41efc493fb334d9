package agui

import (
	"bytes"

	"github.com/op-stack/executor/models"
)

// Stream is one client's AG-UI event stream of a run: a Translator and
// its SSE encoding. Feed it the run's log from sequence 1 (what the
// client already has included: the translator needs it); it returns the
// bytes to write for each event, nothing up to the resume point.
type Stream struct {
	tr  *Translator
	buf bytes.Buffer
}

// NewStream returns the stream of the run opts names, for a client that
// resumes after opts.After (0: from the start).
func NewStream(opts Options) *Stream { return &Stream{tr: New(opts)} }

// Frame returns the SSE messages made from e (nil: none), each event a
// "data:" line, the last with "id: <e.Sequence>". The bytes are valid until
// the next call.
func (s *Stream) Frame(e models.Event) ([]byte, error) {
	evs := s.tr.Next(e)
	if len(evs) == 0 {
		return nil, nil
	}
	s.buf.Reset()
	if err := Encode(&s.buf, e.Sequence, evs); err != nil {
		return nil, err
	}
	return s.buf.Bytes(), nil
}

// Ended says the run's terminal event has been sent: the stream is over.
func (s *Stream) Ended() bool { return s.tr.Ended() }
