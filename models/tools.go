package models

import (
	"encoding/json"
	"io"
	"strings"
)

// MaxToolAttempts bounds the attempts of one tool call. A transient tool
// failure is retried until then; after that, and for any other failure,
// the model gets the error as the tool's result.
const MaxToolAttempts = 3

// Tool execution statuses on llm.tool_call and llm.tool_result (spec 004's
// status): a call is running, a result completed or failed.
const (
	ToolStatusRunning   = "running"
	ToolStatusCompleted = "completed"
	ToolStatusFailed    = "failed"
)

// ToolCallData is an llm.tool_call event's data: spec 004's act event
// (execution_id, tool_name, tool_input, call_id, status "running"), plus
// the names earlier clients read (tool_execution_id, arguments,
// tool_call_id), which stay.
func ToolCallData(call ToolCall, executionID string) map[string]any {
	var args any = call.Arguments
	var parsed map[string]any
	if json.Unmarshal([]byte(call.Arguments), &parsed) == nil {
		args = parsed
	}
	return map[string]any{
		"tool_name": call.Name, "arguments": args, "tool_input": args,
		"tool_execution_id": executionID, "execution_id": executionID,
		"tool_call_id": call.ID, "call_id": call.ID, "status": ToolStatusRunning,
	}
}

// ToolResultData is an llm.tool_result event's data: spec 004's observe
// event (execution_id, tool_name, is_error, duration_ms, status
// "completed" or "failed", call_id), plus tool_execution_id, and result or
// error. A result that is a JSON object or array is sent as that value
// (spec 004's result is a dict); any other result stays the text the tool
// returned.
func ToolResultData(call ToolCall, executionID string, out ToolOutput) map[string]any {
	data := map[string]any{
		"tool_name": call.Name, "tool_execution_id": executionID, "execution_id": executionID, "call_id": call.ID,
		"is_error": out.IsError, "duration_ms": out.DurationMs, "status": ToolStatusCompleted,
	}
	if out.IsError {
		data["error"], data["status"] = out.Content, ToolStatusFailed
	} else {
		data["result"] = ToolResultValue(out.Content)
	}
	return data
}

// ToolResultValue is a tool's text as an event shows it: the decoded value
// when the text is one JSON object or array (numbers kept exactly, as
// json.Number), else the text itself. Scalars stay text: a calculator's
// "2" is not turned into a number. Deterministic, so workflow code may call
// it.
func ToolResultValue(content string) any {
	trimmed := strings.TrimSpace(content)
	if trimmed == "" || (trimmed[0] != '{' && trimmed[0] != '[') {
		return content
	}
	dec := json.NewDecoder(strings.NewReader(trimmed))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return content
	}
	if _, err := dec.Token(); err != io.EOF {
		return content // more than one value, or trailing text
	}
	return v
}
