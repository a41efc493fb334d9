package e2e

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/op-stack/executor/config"
	"github.com/op-stack/executor/models"
)

// TestNoStandInWithoutConsent: with no provider configured and the offline
// fallback off (what `executor serve` resolves to), a run whose agents route
// to no provider is refused on both surfaces with MISSING_API_KEY naming the
// agent and the model, and nothing is stored; once the hierarchy chooses the
// offline model for that agent, the run starts and completes, and its
// results, runs/get and lifecycle.started say offline and name the model
// that answered ("offline"), not the one asked for.
func TestNoStandInWithoutConsent(t *testing.T) {
	e := newEnv(t, nil, withConfig(func(c *config.Config) {
		c.OpenAIAPIKey, c.OpenAIBaseURL = "", ""
		c.AWSBedrockEnabled = "false"
		c.LLMOfflineFallback = "false"
		c.OfflineTokenDelay = time.Millisecond
	}))
	offline := map[string]any{"provider": "offline"}
	worker := map[string]any{"agent_id": "w-off", "name": "writer", "role": "writer", "system_prompt": "You write.", "model": "gpt-4o"}
	body := map[string]any{
		"name":                    "no-stand-in",
		"global_supervisor_agent": map[string]any{"agent_id": "gs-off", "system_prompt": "You decide.", "llm_config": offline},
		"teams": []any{map[string]any{
			"name":                  "writers",
			"team_supervisor_agent": map[string]any{"agent_id": "ts-off", "system_prompt": "You lead.", "llm_config": offline},
			"workers":               []any{worker},
		}},
	}
	hid := e.createHierarchy(body)

	// Contract 002.
	status, env := e.post("/runs/start", map[string]any{"hierarchy_id": hid, "task": "write"})
	if status != http.StatusBadRequest || env.ErrorCode != "MISSING_API_KEY" {
		t.Fatalf("runs/start without a provider: %d %+v", status, env)
	}
	for _, want := range []string{"teams[0].workers[0]", "w-off", "gpt-4o", "OPENAI_API_KEY"} {
		if !strings.Contains(env.Message, want) {
			t.Errorf("runs/start message %q does not name %q", env.Message, want)
		}
	}

	// Spec 001, in its own field names.
	code, raw := e.call(http.MethodPost, "/api/v1/hierarchical-teams/"+hid+"/execute", "", map[string]any{"task": "write"})
	var v1 struct {
		Success bool   `json:"success"`
		Code    string `json:"code"`
		Error   struct {
			Message string `json:"message"`
			Details struct {
				Field string `json:"field"`
			} `json:"details"`
		} `json:"error"`
		Message string `json:"message"`
	}
	if err := json.Unmarshal(raw, &v1); err != nil {
		t.Fatalf("%s: %v", raw, err)
	}
	if code != http.StatusBadRequest || v1.Success || v1.Code != "MISSING_API_KEY" || v1.Error.Details.Field != "sub_teams[0].agent_configs[0]" {
		t.Fatalf("execute without a provider: %d %s", code, raw)
	}
	if !strings.Contains(string(raw), "gpt-4o") || strings.Contains(string(raw), "teams[0].workers[0]") {
		t.Errorf("execute's error should name the model in spec 001's field names: %s", raw)
	}
	var list struct {
		Total int `json:"total"`
	}
	e.mustPost("/runs/list", map[string]any{"hierarchy_id": hid}, &list)
	if list.Total != 0 {
		t.Fatalf("refused starts stored %d runs", list.Total)
	}

	// Consent: the agent chooses the offline model.
	worker["llm_config"] = offline
	body["hierarchy_id"] = hid
	e.mustPost("/hierarchies/update", body, nil)
	id := e.startRun(hid, "write")
	run := e.waitRun(id, 60*time.Second)
	if run.Status != models.RunCompleted {
		t.Fatalf("offline run: %s %s", run.Status, run.Error)
	}

	var get struct {
		Offline bool `json:"offline"`
		Result  struct {
			Offline bool `json:"offline"`
			Teams   []struct {
				Workers []struct {
					AgentID string `json:"agent_id"`
					Model   string `json:"model"`
					Offline bool   `json:"offline"`
				} `json:"workers"`
			} `json:"teams"`
		} `json:"result"`
	}
	e.mustPost("/runs/get", map[string]any{"id": id}, &get)
	if !get.Offline || !get.Result.Offline || len(get.Result.Teams) == 0 || len(get.Result.Teams[0].Workers) == 0 {
		t.Fatalf("runs/get: %+v", get)
	}
	if w := get.Result.Teams[0].Workers[0]; w.AgentID != "w-off" || w.Model != "offline" || !w.Offline {
		t.Errorf("runs/get worker: %+v, want model offline (the model that answered)", w)
	}

	var res struct {
		Offline     bool `json:"offline"`
		TeamResults map[string]struct {
			Agents map[string]struct {
				Model string `json:"model"`
			} `json:"agents"`
		} `json:"team_results"`
	}
	e.mustPost("/runs/results", map[string]any{"id": id}, &res)
	if !res.Offline {
		t.Error("results: offline is false")
	}
	var answeredBy []string
	for _, tr := range res.TeamResults {
		for _, a := range tr.Agents {
			answeredBy = append(answeredBy, a.Model)
		}
	}
	if len(answeredBy) != 1 || answeredBy[0] != "offline" {
		t.Errorf("results' agent models %v, want [offline]", answeredBy)
	}

	// spec 001's execution view says so too.
	var ex map[string]any
	e.mustCall(http.MethodGet, "/api/v1/executions/"+id, "", nil, &ex)
	if ex["offline"] != true {
		t.Errorf("GET /api/v1/executions: %v", ex)
	}

	// The stream says so from its first event, and the usage rows name
	// the model that answered.
	events := e.storedEvents(id)
	if len(events) == 0 || events[0].Event.String() != "lifecycle.started" {
		t.Fatalf("first event: %+v", events)
	}
	if data, _ := json.Marshal(events[0].Data); !strings.Contains(string(data), `"offline":true`) || !strings.Contains(string(data), "w-off") {
		t.Errorf("lifecycle.started data %s does not say offline", data)
	}
	calls, err := e.store.LLMCalls(t.Context(), id)
	if err != nil || len(calls) == 0 {
		t.Fatalf("llm calls: %v %v", calls, err)
	}
	for _, c := range calls {
		if c.Model != "offline" || c.Provider != "offline" {
			t.Errorf("llm_call of %s: model %q provider %q, want offline", c.AgentID, c.Model, c.Provider)
		}
	}
}
