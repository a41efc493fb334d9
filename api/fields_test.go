package api_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/op-stack/executor/store"
	"github.com/op-stack/executor/store/storetest"
)

// TestAgentIDsAndSubAgentIDsDiffer: a hierarchy may not use a sub-agent's
// id as an agent_id, nor a sub-agent an agent_id of a hierarchy, in the
// same tenant (spec 003: the stream and the cycle check name agents by id).
func TestAgentIDsAndSubAgentIDsDiffer(t *testing.T) {
	storetest.ForEachDialect(t, func(t *testing.T, st *store.Store) {
		a := newTestAPI(t, st, withFakeTools)
		sa := subAgentBody("checker")
		sa["id"] = "sa-checker"
		createSubAgent(a, sa)

		body := specBody()
		worker(body, 0, 1)["agent_id"] = "sa-checker"
		env := a.expectError(pathCreate, body, http.StatusBadRequest, 40001)
		if env.Field != "teams[0].workers[1].agent_id" || !strings.Contains(env.Message, `"sa-checker"`) {
			t.Errorf("create: field %q message %q", env.Field, env.Message)
		}
		body = specBody()
		team(body, 1)["team_supervisor_agent"].(map[string]any)["agent_id"] = "sa-checker"
		env = a.expectError(pathCreate, body, http.StatusBadRequest, 40001)
		if env.Field != "teams[1].team_supervisor_agent.agent_id" {
			t.Errorf("create: field %q message %q", env.Field, env.Message)
		}

		id := create(a, specBody())
		update := specBody()
		update["hierarchy_id"] = id
		update["global_supervisor_agent"].(map[string]any)["agent_id"] = "sa-checker"
		env = a.expectError("/api/executor/v1/hierarchies/update", update, http.StatusBadRequest, 40001)
		if env.Field != "global_supervisor_agent.agent_id" {
			t.Errorf("update: field %q message %q", env.Field, env.Message)
		}

		clash := subAgentBody("lab")
		clash["id"] = "w-lab-001" // the hierarchy's worker
		env = a.expectError(pathSACreate, clash, http.StatusBadRequest, 40001)
		if env.Field != "id" || !strings.Contains(env.Message, id) {
			t.Errorf("sub-agent create: field %q message %q", env.Field, env.Message)
		}
		clash["id"] = "sa-lab"
		createSubAgent(a, clash)
	})
}

// TestSubAgentLLMConfig: a sub-agent takes an agent's llm_config (provider,
// model, temperature, max_tokens, base_url, region, timeout), stores it and
// answers it flat and as llm_config; an unknown provider is refused.
func TestSubAgentLLMConfig(t *testing.T) {
	storetest.ForEachDialect(t, func(t *testing.T, st *store.Store) {
		a := newTestAPI(t, st, withFakeTools)
		body := subAgentBody("configured")
		body["llm_config"] = map[string]any{"provider": "openrouter", "model": "anthropic/claude-3.5-sonnet", "temperature": 0.2,
			"max_tokens": 900, "base_url": "https://openrouter.ai/api/v1", "timeout": 45}
		type view struct {
			ID        string `json:"id"`
			Provider  string `json:"provider"`
			Model     string `json:"model"`
			BaseURL   string `json:"base_url"`
			Timeout   int    `json:"timeout"`
			LLMConfig struct {
				Provider    string   `json:"provider"`
				Model       string   `json:"model"`
				Temperature *float64 `json:"temperature"`
				MaxTokens   *int     `json:"max_tokens"`
				BaseURL     string   `json:"base_url"`
				Timeout     int      `json:"timeout"`
			} `json:"llm_config"`
		}
		var created, got view
		a.mustPost(pathSACreate, body, &created)
		a.mustPost(pathSAGet, map[string]any{"id": created.ID}, &got)
		for _, v := range []view{created, got} {
			c := v.LLMConfig
			if v.Provider != "openrouter" || v.Model != "anthropic/claude-3.5-sonnet" || v.BaseURL != "https://openrouter.ai/api/v1" || v.Timeout != 45 ||
				c.Provider != "openrouter" || c.Model != v.Model || c.Temperature == nil || *c.Temperature != 0.2 || c.MaxTokens == nil || *c.MaxTokens != 900 || c.BaseURL != v.BaseURL || c.Timeout != 45 {
				t.Errorf("sub-agent = %+v", v)
			}
		}
		stored, err := st.GetSubAgent(t.Context(), "", "", created.ID)
		if err != nil || stored.Agent().Provider != "openrouter" || stored.Agent().BaseURL != "https://openrouter.ai/api/v1" || stored.Agent().Timeout != 45 {
			t.Errorf("stored = %+v, %v", stored, err)
		}

		bad := subAgentBody("bad")
		bad["llm_config"] = map[string]any{"provider": "acme"}
		if env := a.expectError(pathSACreate, bad, http.StatusBadRequest, 40001); env.Field != "llm_config.provider" {
			t.Errorf("unknown provider: field %q", env.Field)
		}
		bad["llm_config"] = map[string]any{"base_url": "ftp://x"}
		if env := a.expectError(pathSACreate, bad, http.StatusBadRequest, 40001); env.Field != "llm_config.base_url" {
			t.Errorf("bad base_url: field %q", env.Field)
		}
	})
}
