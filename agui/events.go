// Package agui encodes a run's ordered event log (contract 002's events,
// models.Event) as AG-UI events: the agent-to-frontend protocol of
// ag-ui-protocol, version 1.0 of @ag-ui/core. A Translator turns the log,
// read from sequence 1, into AG-UI events; Encode writes them as
// Server-Sent Events. The package knows nothing of HTTP routing or of how
// the log is read: the API feeds it, whichever stream bridge serves the
// run (docs/ag-ui.md).
package agui

import (
	"encoding/json"
	"io"
	"strconv"
)

// ProtocolVersion is the AG-UI protocol version the events follow: the
// "agui.protocolVersion" of @ag-ui/core 1.0.0.
const ProtocolVersion = "1.0"

// MediaType is the content type of an AG-UI event stream in its JSON
// encoding: plain Server-Sent Events, which is what @ag-ui/client's
// HttpAgent asks for (Accept: text/event-stream) and parses. AG-UI's only
// media type of its own, application/vnd.ag-ui.event+proto, is the
// protobuf encoding, which this package does not write.
const MediaType = "text/event-stream"

// AG-UI event types (the "type" field), as @ag-ui/core 1.0 names them.
const (
	RunStarted              = "RUN_STARTED"
	RunFinished             = "RUN_FINISHED"
	RunError                = "RUN_ERROR"
	StepStarted             = "STEP_STARTED"
	StepFinished            = "STEP_FINISHED"
	TextMessageStart        = "TEXT_MESSAGE_START"
	TextMessageContent      = "TEXT_MESSAGE_CONTENT"
	TextMessageEnd          = "TEXT_MESSAGE_END"
	ToolCallStart           = "TOOL_CALL_START"
	ToolCallArgs            = "TOOL_CALL_ARGS"
	ToolCallEnd             = "TOOL_CALL_END"
	ToolCallResult          = "TOOL_CALL_RESULT"
	ReasoningStart          = "REASONING_START"
	ReasoningMessageStart   = "REASONING_MESSAGE_START"
	ReasoningMessageContent = "REASONING_MESSAGE_CONTENT"
	ReasoningMessageEnd     = "REASONING_MESSAGE_END"
	ReasoningEnd            = "REASONING_END"
	SubagentStarted         = "SUBAGENT_STARTED"
	SubagentFinished        = "SUBAGENT_FINISHED"
	SubagentError           = "SUBAGENT_ERROR"
	Custom                  = "CUSTOM"
)

// Event is one AG-UI event: its "type" and the fields @ag-ui/core 1.0
// gives that type, as they go on the wire. A map, because the protocol
// has thirty-odd event shapes and the encoder only ever writes them.
type Event map[string]any

// Type is the event's type, e.g. TEXT_MESSAGE_CONTENT.
func (e Event) Type() string {
	s, _ := e["type"].(string)
	return s
}

// Metadata is the event's metadata object (nil if it has none). The
// translator puts the agent's identity there: agent_id, agent_name,
// agent_type and team_name.
func (e Event) Metadata() map[string]any {
	m, _ := e["metadata"].(map[string]any)
	return m
}

// Encode writes the AG-UI events made from the log event numbered seq as
// Server-Sent Events: one "data:" line of JSON per event. Only the last
// carries "id: <seq>": a client that resumes with Last-Event-ID then
// resumes after a whole log event, never in the middle of the events it
// made (a message without an id keeps the previous one as the stream's
// last event id, which is exactly the resume point that re-sends what
// follows). seq 0 writes no id (the resume prelude, see Translator).
func Encode(w io.Writer, seq int64, events []Event) error {
	for i, e := range events {
		data, err := json.Marshal(e)
		if err != nil {
			return err
		}
		buf := make([]byte, 0, len(data)+32)
		if seq > 0 && i == len(events)-1 {
			buf = append(buf, "id: "...)
			buf = strconv.AppendInt(buf, seq, 10)
			buf = append(buf, '\n')
		}
		buf = append(buf, "data: "...)
		buf = append(buf, data...) // json.Marshal escapes line breaks
		buf = append(buf, "\n\n"...)
		if _, err := w.Write(buf); err != nil {
			return err
		}
	}
	return nil
}
