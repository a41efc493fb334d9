package api_test

import (
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/op-stack/executor/api"
	"github.com/op-stack/executor/models"
	"github.com/op-stack/executor/pricing"
	"github.com/op-stack/executor/store/storetest"
)

// TestCostBudgetRefusesUnpricedModels (issue 27): a model without a price
// has an unknown cost, not $0, so a max_cost_usd budget that would count
// its calls is refused at start (400 INVALID_PARAMETERS naming the limit,
// the agent and the model) and no workflow starts. Before, such a run
// started and its budget counted the calls as $0, so it never stopped.
// A token budget, a cost limit on a team or agent that uses priced models
// only, and a model priced by LLM_PRICES_FILE (Runs.Prices) all start.
func TestCostBudgetRefusesUnpricedModels(t *testing.T) {
	st := storetest.SQLite(t)
	rec := &startRecorder{}
	runs := &api.Runs{Store: st, Temporal: rec, TaskQueue: "test", Options: models.RunOptions{DefaultModel: "gemini-2.0-flash"}}
	srv := httptest.NewServer(api.NewServer(api.Options{
		Store: st, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Tools:  fakeToolCatalog{"calculator": true, "http_get": true, "current_time": true},
		Access: api.Access{Mode: api.AuthRequired, Authenticator: tenantTokens{}},
		Runs:   runs,
	}).Handler())
	t.Cleanup(srv.Close)
	a := &tenantAPI{t: t, url: srv.URL, client: srv.Client(), temporal: rec}

	body := contractBody()
	teams := body["teams"].([]any)
	w := teams[0].(map[string]any)["workers"].([]any)[0].(map[string]any)
	w["model"] = "my-llama-70b"
	teamName := teams[0].(map[string]any)["name"].(string)
	workerID := w["agent_id"].(string)
	var h struct {
		ID string `json:"hierarchy_id"`
	}
	a.mustPost("acme", pathCreate, body, &h)

	start := func(budget map[string]any) (int, envelope) {
		t.Helper()
		status, env, _ := a.post("acme", pathRunsStart, map[string]any{"hierarchy_id": h.ID, "task": "t", "execution_config": map[string]any{"budget": budget}})
		return status, env
	}
	for _, c := range []struct {
		budget map[string]any
		field  string
	}{
		{map[string]any{"max_cost_usd": 0.5}, "execution_config.budget.max_cost_usd"},
		{map[string]any{"max_tokens": 1000, "max_cost_usd": 0.5, "on_exceeded": "fail"}, "execution_config.budget.max_cost_usd"},
		{map[string]any{"teams": map[string]any{teamName: map[string]any{"max_cost_usd": 0.1}}}, "execution_config.budget.teams." + teamName + ".max_cost_usd"},
		{map[string]any{"agents": map[string]any{workerID: map[string]any{"max_cost_usd": 0.1}}}, "execution_config.budget.agents." + workerID + ".max_cost_usd"},
	} {
		status, env := start(c.budget)
		if status != http.StatusBadRequest || env.ErrorCode != models.CodeInvalidParameters.Name || env.Field != c.field ||
			!strings.Contains(env.Message, "my-llama-70b") || !strings.Contains(env.Message, workerID) {
			t.Errorf("budget %v: %d %+v, want 400 on %s naming the model and the agent", c.budget, status, env, c.field)
		}
	}
	if n := rec.count(); n != 0 {
		t.Fatalf("%d workflows started for refused budgets", n)
	}
	for _, budget := range []map[string]any{
		{"max_tokens": 1000},
		{"agents": map[string]any{"101": map[string]any{"max_cost_usd": 0.1}}},
	} {
		if status, env := start(budget); status != http.StatusOK {
			t.Errorf("budget %v: %d %+v, want a start", budget, status, env)
		}
	}
	// Priced by LLM_PRICES_FILE: the cost is known, the budget counts it.
	// (config.LLMPrices is the built-in table with the file's over it.)
	prices := pricing.Table{"my-llama-70b": {Input: 0.59, Output: 0.79}}
	for m, p := range pricing.Defaults {
		prices[m] = p
	}
	runs.Prices = prices
	if status, env := start(map[string]any{"max_cost_usd": 0.5}); status != http.StatusOK {
		t.Errorf("priced model: %d %+v, want a start", status, env)
	}
}
