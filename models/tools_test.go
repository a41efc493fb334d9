package models

import (
	"encoding/json"
	"testing"
)

// TestToolResultIsJSONObject (issue 23 item 19): when a tool returns JSON,
// spec 004's result in the tool_result event is that object, not a string
// holding it; numbers keep their exact digits; text that is not one JSON
// object or array stays text, and an event row stored with a string result
// reads back as before.
func TestToolResultIsJSONObject(t *testing.T) {
	call := ToolCall{ID: "c1", Name: "calculator"}
	data := ToolResultData(call, "exec_0123456789ab", ToolOutput{Content: `{"expression":"2*21","result":42,"big":12345678901234567890}`})
	raw, err := json.Marshal(data)
	if err != nil {
		t.Fatal(err)
	}
	var back struct {
		Result json.RawMessage `json:"result"`
	}
	if err := json.Unmarshal(raw, &back); err != nil {
		t.Fatal(err)
	}
	if got, want := string(back.Result), `{"big":12345678901234567890,"expression":"2*21","result":42}`; got != want {
		t.Errorf("result on the wire = %s, want %s", got, want)
	}
	if obj, ok := data["result"].(map[string]any); !ok || obj["expression"] != "2*21" {
		t.Errorf("result = %#v, want a JSON object", data["result"])
	}
	if arr, ok := ToolResultData(call, "e", ToolOutput{Content: " [1, {\"a\": true}] "})["result"].([]any); !ok || len(arr) != 2 {
		t.Errorf("an array result = %#v", arr)
	}
	for _, text := range []string{"2", "plain text", `"quoted"`, `{"a":1} and more`, `{not json`, ""} {
		if got := ToolResultData(call, "e", ToolOutput{Content: text})["result"]; got != text {
			t.Errorf("result of %q = %#v, want the text", text, got)
		}
	}
	// Errors are unchanged: the message in error.
	if bad := ToolResultData(call, "e", ToolOutput{Content: `{"x":1}`, IsError: true}); bad["error"] != `{"x":1}` || bad["result"] != nil {
		t.Errorf("failed result = %+v", bad)
	}
	// An event row written before this change (result a string) still reads.
	var old Event
	if err := json.Unmarshal([]byte(`{"run_id":"r","sequence":3,"event":{"category":"llm","action":"tool_result"},"data":{"result":"{\"result\":42}","status":"completed"}}`), &old); err != nil {
		t.Fatal(err)
	}
	if old.Data["result"] != `{"result":42}` {
		t.Errorf("old row's result = %#v", old.Data["result"])
	}
}
