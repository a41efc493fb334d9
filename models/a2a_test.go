package models

import (
	"strings"
	"testing"
)

func a2aHierarchy(worker Agent) *Hierarchy {
	h := &Hierarchy{Name: "h", Teams: []Team{{Name: "t", Workers: []Agent{worker}}}}
	h.Normalize()
	return h
}

// TestValidateA2A: a worker's a2a settings are checked, and errors name
// the field; supervisors cannot be remote agents.
func TestValidateA2A(t *testing.T) {
	ok := a2aHierarchy(Agent{Name: "remote", A2A: &A2AAgent{CardURL: " https://agents.example.com/.well-known/agent-card.json ", HeadersEnv: map[string]string{"Authorization": "A2A_HEADER_AGENT_TOKEN"}}})
	if err := ok.Validate(); err != nil {
		t.Fatal(err)
	}
	if got := ok.Teams[0].Workers[0].A2A.CardURL; got != "https://agents.example.com/.well-known/agent-card.json" {
		t.Fatalf("card_url kept as %q", got)
	}
	for _, tc := range []struct {
		a2a   A2AAgent
		field string
		says  string
	}{
		{A2AAgent{}, "teams[0].workers[0].a2a.card_url", "is required"},
		{A2AAgent{CardURL: "ftp://x/card"}, "teams[0].workers[0].a2a.card_url", "absolute http or https URL"},
		{A2AAgent{CardURL: "/.well-known/agent-card.json"}, "teams[0].workers[0].a2a.card_url", "absolute http or https URL"},
		{A2AAgent{CardURL: "https://u:p@x/card"}, "teams[0].workers[0].a2a.card_url", "credentials"},
		{A2AAgent{CardURL: "https://x/card", HeadersEnv: map[string]string{"Bad Header": "X"}}, "teams[0].workers[0].a2a.headers_env", "not a header name"},
		{A2AAgent{CardURL: "https://x/card", HeadersEnv: map[string]string{"X-Key": "1BAD"}}, "teams[0].workers[0].a2a.headers_env", "not an environment variable name"},
		// Any other variable of the worker could be sent to a host the
		// tenant chose: a provider's key, the database's password.
		{A2AAgent{CardURL: "https://x/card", HeadersEnv: map[string]string{"Authorization": "OPENAI_API_KEY"}}, "teams[0].workers[0].a2a.headers_env", "only variables named A2A_HEADER_<NAME>"},
		{A2AAgent{CardURL: "https://x/card", HeadersEnv: map[string]string{"Authorization": "A2A_HEADER_"}}, "teams[0].workers[0].a2a.headers_env", "only variables named A2A_HEADER_<NAME>"},
	} {
		a := tc.a2a
		err := a2aHierarchy(Agent{Name: "remote", A2A: &a}).Validate()
		e, isErr := err.(*Error)
		if !isErr || e.Field != tc.field || !strings.Contains(e.Message, tc.says) {
			t.Errorf("%+v: error %v, want field %s saying %q", tc.a2a, err, tc.field, tc.says)
		}
	}
	h := a2aHierarchy(Agent{Name: "w"})
	h.Teams[0].Supervisor.A2A = &A2AAgent{CardURL: "https://x/card"}
	if e, isErr := h.Validate().(*Error); !isErr || e.Field != "teams[0].team_supervisor_agent.a2a" {
		t.Errorf("a team supervisor with a2a: %v", h.Validate())
	}
	h = a2aHierarchy(Agent{Name: "w"})
	h.GlobalSupervisor.A2A = &A2AAgent{CardURL: "https://x/card"}
	if e, isErr := h.Validate().(*Error); !isErr || e.Field != "global_supervisor_agent.a2a" {
		t.Errorf("a global supervisor with a2a: %v", h.Validate())
	}
}

func TestA2AContextIDIsPerRunAndWorker(t *testing.T) {
	a, b, c := A2AContextID("r1", "w1"), A2AContextID("r1", "w2"), A2AContextID("r2", "w1")
	if a != A2AContextID("r1", "w1") || a == b || a == c {
		t.Fatalf("context ids %q %q %q", a, b, c)
	}
}
