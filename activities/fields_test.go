package activities

import (
	"strings"
	"testing"

	"github.com/op-stack/executor/models"
)

// TestCallerContextInThePrompt: a sub-agent sees its caller's context.
func TestCallerContextInThePrompt(t *testing.T) {
	msgs := respondMessages(models.RespondInput{Task: "check", Instruction: "check", CallerContext: `{"urls":["https://example.org"]}`}, 1000)
	if got := msgs[1].Content; !strings.Contains(got, "Context from your caller (JSON):\n{\"urls\":[\"https://example.org\"]}") {
		t.Errorf("prompt = %q", got)
	}
	defs := (&Activities{}).toolDefinitions(models.Agent{SubAgents: []string{"h1"}})
	if len(defs) != 1 || !strings.Contains(string(defs[0].Parameters), `"context"`) {
		t.Errorf("delegate definition = %+v", defs)
	}
}
