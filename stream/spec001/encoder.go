// Package spec001 is the stream bridge's encoder of spec 001's stream
// events (its section "流式事件接口"): the executor's ordered event log,
// translated (see translator for the mapping), with the log's sequence
// numbers as ids, so that a client resumes as on contract 002's stream.
package spec001

import (
	"encoding/json"
	"fmt"

	"github.com/op-stack/executor/models"
	"github.com/op-stack/executor/stream"
)

// Execution is what the translation needs to know of the run.
type Execution struct {
	// ID is the run's public id, the events' execution_id.
	ID string
	// HierarchyID is the run's hierarchy: execution_started's team_id.
	HierarchyID string
	// ResultURL is where execution_completed says the results are.
	ResultURL string
	// TeamIDs maps the run's team names to team ids.
	TeamIDs map[string]string
}

// New returns the encoder of one stream of x's spec 001 events. It is a
// stream.Replayer: the translation needs the log from its start.
func New(x Execution) stream.Replayer { return &encoder{tr: newTranslator(x)} }

type encoder struct{ tr *translator }

func (e *encoder) translate(fr stream.Frame) ([]event, error) {
	var ev models.Event
	if err := json.Unmarshal(fr.Data, &ev); err != nil {
		return nil, fmt.Errorf("decode event %d: %w", fr.Seq, err)
	}
	return e.tr.translate(ev), nil
}

// Replay translates an event the client has, for what it tells of later
// ones.
func (e *encoder) Replay(fr stream.Frame) error {
	_, err := e.translate(fr)
	return err
}

// Encode sends fr's spec 001 events, each named by its type, its data
// carrying event_type too; the last one made from fr has fr's sequence as
// id, so that an EventSource resumes after the whole event.
func (e *encoder) Encode(fr stream.Frame) ([]stream.Message, error) {
	evs, err := e.translate(fr)
	if err != nil || len(evs) == 0 {
		return nil, err
	}
	out := make([]stream.Message, 0, len(evs))
	for i, ev := range evs {
		ev.Data["event_type"] = ev.Type
		data, err := json.Marshal(ev.Data)
		if err != nil {
			return nil, fmt.Errorf("encode event %d: %w", fr.Seq, err)
		}
		m := stream.Message{Name: ev.Type, Data: data}
		if i == len(evs)-1 {
			m.ID = fr.Seq
		}
		out = append(out, m)
	}
	return out, nil
}
