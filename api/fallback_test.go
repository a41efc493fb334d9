package api_test

import (
	"net/http"
	"slices"
	"testing"

	"github.com/op-stack/executor/api"
	"github.com/op-stack/executor/store"
	"github.com/op-stack/executor/store/storetest"
)

// TestFallbackModelsRoundTrip: fallback_models are stored with the agent's
// settings and read back on both surfaces, and refused when malformed.
func TestFallbackModelsRoundTrip(t *testing.T) {
	storetest.ForEachDialect(t, func(t *testing.T, st *store.Store) {
		a := newTestAPI(t, st)
		body := contractBody()
		body["global_supervisor_agent"].(map[string]any)["fallback_models"] = []any{"m-2"}
		worker(body, 0, 0)["llm_config"] = map[string]any{"model": "m-1", "fallback_models": []any{" m-2 ", "m-3"}}
		h := get(a, create(a, body))
		if !slices.Equal(h.GlobalSupervisor.FallbackModels, []string{"m-2"}) || !slices.Equal(h.Teams[0].Workers[0].FallbackModels, []string{"m-2", "m-3"}) {
			t.Errorf("stored: %v, %v", h.GlobalSupervisor.FallbackModels, h.Teams[0].Workers[0].FallbackModels)
		}
		for _, bad := range [][]any{{"m", "m"}, {""}, {"a b"}, {"1", "2", "3", "4", "5", "6"}} {
			body := contractBody()
			worker(body, 0, 0)["fallback_models"] = bad
			a.expectError(pathCreate, body, http.StatusBadRequest, 40001)
		}

		// Spec 001: in llm_config.
		req := specRequest(t)
		ac := req["sub_teams"].([]any)[0].(map[string]any)["agent_configs"].([]any)[0].(map[string]any)
		lc, _ := ac["llm_config"].(map[string]any)
		if lc == nil {
			lc = map[string]any{}
			ac["llm_config"] = lc
		}
		lc["fallback_models"] = []any{"m-9"}
		var created struct {
			TeamID string `json:"team_id"`
		}
		a.mustDo(http.MethodPost, pathTeams, req, api.CodeTeamCreated, &created)
		var got struct {
			SubTeams []struct {
				AgentConfigs []struct {
					LLMConfig struct {
						FallbackModels []string `json:"fallback_models"`
					} `json:"llm_config"`
				} `json:"agent_configs"`
			} `json:"sub_teams"`
		}
		a.mustDo(http.MethodGet, pathTeams+"/"+created.TeamID, nil, api.CodeTeamInfoRetrieved, &got)
		if !slices.Equal(got.SubTeams[0].AgentConfigs[0].LLMConfig.FallbackModels, []string{"m-9"}) {
			t.Errorf("spec 001 read back: %+v", got.SubTeams[0].AgentConfigs[0])
		}
	})
}

// TestSubAgentFallbackModels: a sub-agent's llm_config takes
// fallback_models too, stored with its settings.
func TestSubAgentFallbackModels(t *testing.T) {
	st := storetest.SQLite(t)
	a := newTestAPI(t, st, withFakeTools)
	body := subAgentBody("fallbacks")
	body["llm_config"] = map[string]any{"model": "m-1", "fallback_models": []any{"m-2"}}
	var created struct {
		ID        string `json:"id"`
		LLMConfig struct {
			FallbackModels []string `json:"fallback_models"`
		} `json:"llm_config"`
	}
	a.mustPost(pathSACreate, body, &created)
	if !slices.Equal(created.LLMConfig.FallbackModels, []string{"m-2"}) {
		t.Errorf("answered %+v", created)
	}
	stored, err := st.GetSubAgent(t.Context(), "", "", created.ID)
	if err != nil || !slices.Equal(stored.Agent().FallbackModels, []string{"m-2"}) {
		t.Errorf("stored = %+v, %v", stored, err)
	}
	body["name"] = "bad-fallbacks"
	body["llm_config"] = map[string]any{"fallback_models": []any{"x", "x"}}
	a.expectError(pathSACreate, body, http.StatusBadRequest, 40001)
}
