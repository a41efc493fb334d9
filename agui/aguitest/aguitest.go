// Package aguitest holds what tests of AG-UI streams share: the check that
// a client's messages hold every agent's answers, whole and attributed.
package aguitest

import (
	"strings"
	"testing"

	"github.com/op-stack/executor/models"
)

// CheckAnswers checks that every answer in the log (the last attempt's text under
// each message_id) is a message of the client's, whole, named after its
// agent and attributed to it.
func CheckAnswers(t testing.TB, log []models.Event, msgs []map[string]any) {
	t.Helper()
	type answer struct{ agent, name, text string }
	want := map[string]*answer{}
	var order []string
	for _, e := range log {
		id, _ := e.Data["message_id"].(string)
		switch e.Event.Action {
		case models.ActionStream:
			if id == "" {
				continue
			}
			if want[id] == nil {
				want[id] = &answer{agent: e.Source.AgentID, name: e.Source.AgentName}
				order = append(order, id)
			}
			want[id].text += e.Data["content"].(string)
		case models.ActionRetry, models.ActionFallback:
			for _, a := range want {
				if a.agent == e.Source.AgentID {
					a.text = ""
				}
			}
		}
	}
	if len(want) == 0 {
		t.Fatal("the log has no answer")
	}
	for _, id := range order {
		a := want[id]
		var found map[string]any
		for _, m := range msgs {
			mid, _ := m["id"].(string)
			if mid == id || strings.HasPrefix(mid, id+"~") {
				found = m
			}
		}
		if found == nil {
			t.Errorf("no client message for %s's answer %s", a.agent, id)
			continue
		}
		meta, _ := found["metadata"].(map[string]any)
		sub, _ := found["subagentRunId"].(string)
		// A message that tool calls opened first has no name: the client
		// keeps the message the tool calls made.
		named := found["name"] == a.name || found["name"] == nil && found["toolCalls"] != nil
		if found["content"] != a.text || found["role"] != "assistant" || !named || meta["agent_id"] != a.agent ||
			(a.agent != log[0].Source.AgentID) != strings.HasPrefix(sub, a.agent+"@") {
			t.Errorf("%s's answer %s: client has %v, want content %q", a.agent, id, found, a.text)
		}
	}
}
