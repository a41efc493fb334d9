package api_test

import (
	"bytes"
	"context"
	"encoding/json"
	"encoding/xml"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/mocks"

	"github.com/op-stack/executor/api"
	"github.com/op-stack/executor/models"
	"github.com/op-stack/executor/store"
	"github.com/op-stack/executor/store/storetest"
)

// v1Envelope is spec 001's response: success, business code, data or
// error, message.
type v1Envelope struct {
	Success bool            `json:"success"`
	Code    string          `json:"code"`
	Data    json.RawMessage `json:"data"`
	Error   *struct {
		Message string         `json:"message"`
		Details map[string]any `json:"details"`
	} `json:"error"`
	Message string `json:"message"`
}

// do sends a request with any method to the spec 001 surface and decodes
// the envelope. body may be nil, []byte (sent as is) or a value to marshal.
func (a *testAPI) do(method, path string, body any) (int, v1Envelope) {
	a.t.Helper()
	var r io.Reader
	switch b := body.(type) {
	case nil:
	case []byte:
		r = bytes.NewReader(b)
	default:
		raw, err := json.Marshal(b)
		if err != nil {
			a.t.Fatal(err)
		}
		r = bytes.NewReader(raw)
	}
	req, err := http.NewRequest(method, a.url+path, r)
	if err != nil {
		a.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := a.client.Do(req)
	if err != nil {
		a.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var env v1Envelope
	if err := json.Unmarshal(raw, &env); err != nil {
		a.t.Fatalf("%s %s: status %d, body is not JSON: %q", method, path, resp.StatusCode, raw)
	}
	return resp.StatusCode, env
}

// mustDo sends a request that must succeed with code, and decodes data.
func (a *testAPI) mustDo(method, path string, body any, code string, out any) {
	a.t.Helper()
	status, env := a.do(method, path, body)
	if status != http.StatusOK || !env.Success || env.Code != code || env.Error != nil || env.Message == "" {
		a.t.Fatalf("%s %s: status %d success %v code %s (want %s), error %+v, message %q", method, path, status, env.Success, env.Code, code, env.Error, env.Message)
	}
	if out != nil {
		if err := json.Unmarshal(env.Data, out); err != nil {
			a.t.Fatalf("decode %s data: %v", path, err)
		}
	}
}

// expectV1Error checks spec 001's error envelope: status, code, a message
// and error.message, details with a timestamp, and no data.
func (a *testAPI) expectV1Error(method, path string, body any, status int, code string) v1Envelope {
	a.t.Helper()
	got, env := a.do(method, path, body)
	if got != status || env.Success || env.Code != code {
		a.t.Fatalf("%s %s: want status %d code %s, got status %d success %v code %s (%+v)", method, path, status, code, got, env.Success, env.Code, env.Error)
	}
	if env.Error == nil || env.Error.Message == "" || env.Message == "" || env.Error.Details["timestamp"] == nil || env.Data != nil {
		a.t.Fatalf("%s %s: malformed error envelope %+v", method, path, env)
	}
	return env
}

// specRequest is spec 001's create request, verbatim from the spec.
func specRequest(t *testing.T) map[string]any {
	t.Helper()
	raw, err := os.ReadFile("testdata/spec001_request.json")
	if err != nil {
		t.Fatal(err)
	}
	var body map[string]any
	if err := json.Unmarshal(raw, &body); err != nil {
		t.Fatal(err)
	}
	return body
}

const pathTeams = "/api/v1/hierarchical-teams"

// teamSummary is the data of a spec 001 create or update.
type teamSummary struct {
	TeamID         string    `json:"team_id"`
	TeamName       string    `json:"team_name"`
	Status         string    `json:"status"`
	CreatedAt      time.Time `json:"created_at"`
	SubTeamsCount  int       `json:"sub_teams_count"`
	TotalAgents    int       `json:"total_agents"`
	ExecutionOrder []string  `json:"execution_order"`
	Warnings       []string  `json:"warnings"`
}

// v1Team is the data of GET /hierarchical-teams/{id}.
type v1Team struct {
	TeamID              string `json:"team_id"`
	TeamName            string `json:"team_name"`
	Description         string `json:"description"`
	TopSupervisorConfig struct {
		AgentID       string         `json:"agent_id"`
		LLMConfig     map[string]any `json:"llm_config"`
		SystemPrompt  string         `json:"system_prompt"`
		UserPrompt    string         `json:"user_prompt"`
		MaxIterations int            `json:"max_iterations"`
	} `json:"top_supervisor_config"`
	SubTeams []struct {
		ID               string `json:"id"`
		Name             string `json:"name"`
		Description      string `json:"description"`
		SupervisorConfig struct {
			AgentID       string         `json:"agent_id"`
			LLMConfig     map[string]any `json:"llm_config"`
			UserPrompt    string         `json:"user_prompt"`
			MaxIterations int            `json:"max_iterations"`
		} `json:"supervisor_config"`
		AgentConfigs []struct {
			AgentID       string         `json:"agent_id"`
			AgentName     string         `json:"agent_name"`
			LLMConfig     map[string]any `json:"llm_config"`
			SystemPrompt  string         `json:"system_prompt"`
			UserPrompt    string         `json:"user_prompt"`
			Tools         []string       `json:"tools"`
			MaxIterations int            `json:"max_iterations"`
		} `json:"agent_configs"`
	} `json:"sub_teams"`
	Dependencies   map[string][]string `json:"dependencies"`
	GlobalConfig   map[string]any      `json:"global_config"`
	ExecutionOrder []string            `json:"execution_order"`
}

// TestV1SpecExample drives spec 001's example request, unchanged, through
// create, get, update and delete.
func TestV1SpecExample(t *testing.T) {
	storetest.ForEachDialect(t, func(t *testing.T, st *store.Store) {
		a := newTestAPI(t, st, withFakeTools)

		var created teamSummary
		a.mustDo(http.MethodPost, pathTeams, specRequest(t), api.CodeTeamCreated, &created)
		if created.TeamID == "" || created.TeamName != "research_analysis_team" || created.Status != "created" || created.CreatedAt.IsZero() ||
			created.SubTeamsCount != 2 || created.TotalAgents != 3 {
			t.Errorf("created = %+v", created)
		}
		if got := strings.Join(created.ExecutionOrder, ","); got != "team_a7b9c2d4e5f6,team_x8y9z1a2b3c4" {
			t.Errorf("execution_order = %s", got)
		}
		// None of the example's tools is in this service's registry.
		wantWarnings := []string{
			`tool "tavily_search" of agent agent_search_001 is not available; the agent runs without it`,
			`tool "web_scraper" of agent agent_search_001 is not available; the agent runs without it`,
			`tool "data_processor" of agent agent_analyze_001 is not available; the agent runs without it`,
			`tool "document_writer" of agent agent_write_001 is not available; the agent runs without it`,
			`tool "editor" of agent agent_write_001 is not available; the agent runs without it`,
		}
		if strings.Join(created.Warnings, "\n") != strings.Join(wantWarnings, "\n") {
			t.Errorf("warnings =\n%s", strings.Join(created.Warnings, "\n"))
		}

		var got v1Team
		a.mustDo(http.MethodGet, pathTeams+"/"+created.TeamID, nil, api.CodeTeamInfoRetrieved, &got)
		if got.TeamID != created.TeamID || got.TeamName != "research_analysis_team" || got.Description != "研究分析团队" || len(got.SubTeams) != 2 {
			t.Fatalf("team = %+v", got)
		}
		top := got.TopSupervisorConfig
		if top.AgentID == "" || top.MaxIterations != 10 || !strings.HasPrefix(top.UserPrompt, "请协调整个分层团队") || top.LLMConfig["provider"] != "openai" || top.LLMConfig["model"] != "gpt-4o" || top.LLMConfig["temperature"] != 0.3 || top.LLMConfig["max_tokens"] != 1000.0 {
			t.Errorf("top supervisor = %+v", top)
		}
		research := got.SubTeams[0]
		if research.ID != "team_a7b9c2d4e5f6" || research.Name != "研究团队" || research.Description != "负责信息收集和研究" || research.SupervisorConfig.MaxIterations != 8 || research.SupervisorConfig.UserPrompt == "" {
			t.Errorf("research team = %+v", research)
		}
		if len(research.AgentConfigs) != 2 {
			t.Fatalf("research agents = %+v", research.AgentConfigs)
		}
		search, analyze := research.AgentConfigs[0], research.AgentConfigs[1]
		if search.AgentID != "agent_search_001" || search.AgentName != "医疗文献搜索专家" || search.MaxIterations != 5 || len(search.Tools) != 0 ||
			search.LLMConfig["provider"] != "openrouter" || search.LLMConfig["model"] != "anthropic/claude-3-sonnet" || search.LLMConfig["base_url"] != "https://openrouter.ai/api/v1" ||
			!strings.HasPrefix(search.UserPrompt, "请搜索人工智能") || !strings.HasPrefix(search.SystemPrompt, "你是一个专业的信息搜索专家") {
			t.Errorf("search agent = %+v", search)
		}
		if analyze.AgentID != "agent_analyze_001" || analyze.LLMConfig["provider"] != "aws_bedrock" || analyze.LLMConfig["region"] != "us-east-1" || analyze.MaxIterations != 3 {
			t.Errorf("analyze agent = %+v", analyze)
		}
		if deps := got.Dependencies; len(deps) != 1 || strings.Join(deps["team_x8y9z1a2b3c4"], ",") != "team_a7b9c2d4e5f6" {
			t.Errorf("dependencies = %v", deps)
		}
		if got.GlobalConfig["max_execution_time"] != 3600.0 || strings.Join(got.ExecutionOrder, ",") != "team_a7b9c2d4e5f6,team_x8y9z1a2b3c4" {
			t.Errorf("global_config %v, execution_order %v", got.GlobalConfig, got.ExecutionOrder)
		}

		// The same hierarchy through the executor API: one store, one engine.
		var h models.Hierarchy
		a.mustPost(pathGet, map[string]any{"hierarchy_id": created.TeamID}, &h)
		if h.MaxExecutionTime != 3600 || !h.EnableContextSharing || h.GlobalSupervisor.Provider != "openai" || h.Teams[1].Workers[0].AgentID != "agent_write_001" ||
			h.Teams[0].Workers[1].Region != "us-east-1" || !h.Teams[0].ShareContext || strings.Join(h.Dependencies["写作团队"], ",") != "研究团队" {
			t.Errorf("executor view = %+v", h)
		}

		// PUT replaces: a known tool stays, the dependency is reversed, a
		// sub-team is renamed; agent_ids and team ids are kept.
		body := specRequest(t)
		subTeams := body["sub_teams"].([]any)
		subTeams[1].(map[string]any)["name"] = "文档团队"
		writer := subTeams[1].(map[string]any)["agent_configs"].([]any)[0].(map[string]any)
		writer["tools"] = []any{"calculator", "editor", "calculator"}
		body["dependencies"] = map[string]any{"team_a7b9c2d4e5f6": []any{"文档团队"}}
		// global_config is stored and echoed as sent, not replaced by
		// spec 001's defaults.
		body["global_config"] = map[string]any{"max_execution_time": 60, "enable_streaming": false, "output_format": "summary"}
		var updated teamSummary
		a.mustDo(http.MethodPut, pathTeams+"/"+created.TeamID, body, api.CodeTeamUpdated, &updated)
		if updated.TeamID != created.TeamID || updated.Status != "updated" || strings.Join(updated.ExecutionOrder, ",") != "team_x8y9z1a2b3c4,team_a7b9c2d4e5f6" || len(updated.Warnings) != 4 {
			t.Errorf("updated = %+v", updated)
		}
		// (A fresh value each time: decoding into a used one merges maps.)
		got = v1Team{}
		a.mustDo(http.MethodGet, pathTeams+"/"+created.TeamID, nil, api.CodeTeamInfoRetrieved, &got)
		if w := got.SubTeams[1].AgentConfigs[0]; strings.Join(w.Tools, ",") != "calculator" || got.SubTeams[1].Name != "文档团队" || got.GlobalConfig["max_execution_time"] != 60.0 {
			t.Errorf("after update: %+v", got.SubTeams[1])
		}
		if got.GlobalConfig["enable_streaming"] != false || got.GlobalConfig["output_format"] != "summary" {
			t.Errorf("global_config after update = %v, want what was sent", got.GlobalConfig)
		}
		var hv models.Hierarchy
		a.mustPost(pathGet, map[string]any{"hierarchy_id": created.TeamID}, &hv)
		if gc := hv.GlobalConfig; gc == nil || gc.EnableStreaming == nil || *gc.EnableStreaming || gc.OutputFormat != "summary" {
			t.Errorf("executor view of global_config = %+v", gc)
		}
		if deps := got.Dependencies; len(deps) != 1 || strings.Join(deps["team_a7b9c2d4e5f6"], ",") != "team_x8y9z1a2b3c4" {
			t.Errorf("dependencies after update = %v", deps)
		}

		// GET's answer is a valid PUT body.
		_, env := a.do(http.MethodGet, pathTeams+"/"+created.TeamID, nil)
		var again teamSummary
		a.mustDo(http.MethodPut, pathTeams+"/"+created.TeamID, []byte(env.Data), api.CodeTeamUpdated, &again)
		if again.Warnings != nil || strings.Join(again.ExecutionOrder, ",") != "team_x8y9z1a2b3c4,team_a7b9c2d4e5f6" {
			t.Errorf("round trip = %+v", again)
		}
		var after v1Team
		a.mustDo(http.MethodGet, pathTeams+"/"+created.TeamID, nil, api.CodeTeamInfoRetrieved, &after)
		if a, b := mustJSON(t, after), mustJSON(t, got); a != b {
			t.Errorf("GET → PUT → GET changed the team:\n%s\n%s", a, b)
		}

		var deleted struct {
			TeamID  string `json:"team_id"`
			Deleted bool   `json:"deleted"`
		}
		a.mustDo(http.MethodDelete, pathTeams+"/"+created.TeamID, nil, api.CodeTeamDeleted, &deleted)
		if deleted.TeamID != created.TeamID || !deleted.Deleted {
			t.Errorf("deleted = %+v", deleted)
		}
		env = a.expectV1Error(http.MethodGet, pathTeams+"/"+created.TeamID, nil, http.StatusNotFound, "TEAM_NOT_FOUND")
		if env.Error.Details["team_id"] != created.TeamID {
			t.Errorf("details = %v", env.Error.Details)
		}
		a.expectV1Error(http.MethodDelete, pathTeams+"/"+created.TeamID, nil, http.StatusNotFound, "TEAM_NOT_FOUND")
		a.expectV1Error(http.MethodPut, pathTeams+"/"+created.TeamID, specRequest(t), http.StatusNotFound, "TEAM_NOT_FOUND")
	})
}

// TestV1Errors checks spec 001's error envelope for invalid input, unknown
// resources and routes, and that the executor API keeps its own.
func TestV1Errors(t *testing.T) {
	storetest.ForEachDialect(t, func(t *testing.T, st *store.Store) {
		a := newTestAPI(t, st)

		env := a.expectV1Error(http.MethodGet, pathTeams+"/ht_123456789", nil, http.StatusNotFound, "TEAM_NOT_FOUND")
		if env.Error.Details["team_id"] != "ht_123456789" || !strings.Contains(env.Error.Message, "ht_123456789") || env.Message != "team not found" {
			t.Errorf("not found = %+v", env)
		}
		a.expectV1Error(http.MethodPost, pathTeams, []byte(`{"team_name": `), http.StatusBadRequest, "INVALID_PARAMETERS")
		a.expectV1Error(http.MethodPost, pathTeams, []byte(``), http.StatusBadRequest, "INVALID_PARAMETERS")

		mutate := func(f func(body map[string]any)) map[string]any {
			body := specRequest(t)
			f(body)
			return body
		}
		subTeam := func(body map[string]any, i int) map[string]any { return body["sub_teams"].([]any)[i].(map[string]any) }
		agent := func(body map[string]any, i, j int) map[string]any {
			return subTeam(body, i)["agent_configs"].([]any)[j].(map[string]any)
		}
		cases := []struct {
			name  string
			body  map[string]any
			code  string
			field string
			text  string
		}{
			{"no team_name", mutate(func(b map[string]any) { delete(b, "team_name") }), "INVALID_PARAMETERS", "team_name", "must not be empty"},
			{"no sub_teams", mutate(func(b map[string]any) { b["sub_teams"] = []any{}; delete(b, "dependencies") }), "INVALID_PARAMETERS", "sub_teams", "at least one team"},
			{"duplicate agent_id", mutate(func(b map[string]any) { agent(b, 1, 0)["agent_id"] = "agent_search_001" }), "INVALID_PARAMETERS", "sub_teams[1].agent_configs[0].agent_id", "agent_search_001"},
			{"bad temperature", mutate(func(b map[string]any) { agent(b, 0, 1)["llm_config"].(map[string]any)["temperature"] = 5 }), "INVALID_PARAMETERS", "sub_teams[0].agent_configs[1].llm_config.temperature", "between 0 and 2"},
			{"unknown provider", mutate(func(b map[string]any) { agent(b, 0, 0)["llm_config"].(map[string]any)["provider"] = "acme" }), "PROVIDER_NOT_SUPPORTED", "sub_teams[0].agent_configs[0].llm_config.provider", "acme"},
			{"unknown dependency", mutate(func(b map[string]any) { b["dependencies"] = map[string]any{"team_x8y9z1a2b3c4": []any{"team_nope"}} }), "INVALID_DEPENDENCIES", "dependencies", "team_nope"},
			{"dependency cycle", mutate(func(b map[string]any) {
				b["dependencies"] = map[string]any{"team_x8y9z1a2b3c4": []any{"team_a7b9c2d4e5f6"}, "team_a7b9c2d4e5f6": []any{"写作团队"}}
			}), "INVALID_DEPENDENCIES", "dependencies", "cycle"},
			{"empty agent_id", mutate(func(b map[string]any) { agent(b, 0, 0)["agent_id"] = " " }), "INVALID_PARAMETERS", "sub_teams[0].agent_configs[0].agent_id", "non-empty"},
			{"zero max_iterations", mutate(func(b map[string]any) { agent(b, 0, 0)["max_iterations"] = 0 }), "INVALID_PARAMETERS", "sub_teams[0].agent_configs[0].max_iterations", "at least 1"},
			{"zero supervisor max_iterations", mutate(func(b map[string]any) { subTeam(b, 1)["supervisor_config"].(map[string]any)["max_iterations"] = 0 }), "INVALID_PARAMETERS", "sub_teams[1].supervisor_config.max_iterations", "at least 1"},
			{"duplicate team name", mutate(func(b map[string]any) { subTeam(b, 1)["name"] = subTeam(b, 0)["name"] }), "INVALID_PARAMETERS", "sub_teams[1].name", "duplicate team name"},
			{"wrong type", mutate(func(b map[string]any) { b["sub_teams"] = "two" }), "INVALID_PARAMETERS", "sub_teams", "array"},
		}
		for _, c := range cases {
			env := a.expectV1Error(http.MethodPost, pathTeams, c.body, http.StatusBadRequest, c.code)
			if env.Error.Details["field"] != c.field || !strings.Contains(env.Error.Message, c.text) {
				t.Errorf("%s: field %v, message %q; want field %s and %q", c.name, env.Error.Details["field"], env.Error.Message, c.field, c.text)
			}
		}

		// Unknown routes and methods under /api/v1 get spec 001's envelope...
		a.expectV1Error(http.MethodGet, "/api/v1/nope", nil, http.StatusNotFound, "NOT_FOUND")
		a.expectV1Error(http.MethodPatch, pathTeams+"/x", nil, http.StatusMethodNotAllowed, "METHOD_NOT_ALLOWED")
		// ...executions too, with the execution's id in the details...
		env = a.expectV1Error(http.MethodGet, "/api/v1/executions/exec_987654321", nil, http.StatusNotFound, "EXECUTION_NOT_FOUND")
		if env.Error.Details["execution_id"] != "exec_987654321" {
			t.Errorf("details = %v", env.Error.Details)
		}
		a.expectV1Error(http.MethodGet, "/api/v1/executions/exec_987654321/results", nil, http.StatusNotFound, "EXECUTION_NOT_FOUND")
		// ...and a server without Temporal cannot execute.
		a.expectV1Error(http.MethodPost, pathTeams+"/x/execute", nil, http.StatusServiceUnavailable, "SERVICE_UNAVAILABLE")
		a.expectV1Error(http.MethodPost, "/api/v1/executions/x/cancel", nil, http.StatusServiceUnavailable, "SERVICE_UNAVAILABLE")

		// The executor API keeps contract 002's envelope.
		a.expectError("/api/executor/v1/nope", map[string]any{}, http.StatusNotFound, 40404)
		a.expectError(pathGet, map[string]any{"hierarchy_id": "nope"}, http.StatusNotFound, 40401)
		req, _ := http.NewRequest(http.MethodGet, a.url+pathGet, nil)
		resp, err := a.client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var e envelope
		json.NewDecoder(resp.Body).Decode(&e)
		resp.Body.Close()
		if resp.StatusCode != http.StatusMethodNotAllowed || e.Code != 40501 || e.ErrorCode != "METHOD_NOT_ALLOWED" {
			t.Errorf("executor 405 = %d %+v", resp.StatusCode, e)
		}
	})
}

// TestV1Results reads a stored run's results, status and progress through
// both dialects.
func TestV1Results(t *testing.T) {
	storetest.ForEachDialect(t, func(t *testing.T, st *store.Store) {
		// Runs without a Temporal client: stored runs are read, formatting
		// is refused before it would need Temporal.
		a := newTestAPI(t, st, withFakeTools, func(o *api.Options) { o.Runs = &api.Runs{Store: st} })
		var created teamSummary
		a.mustDo(http.MethodPost, pathTeams, specRequest(t), api.CodeTeamCreated, &created)

		ctx := context.Background()
		id := models.NewID()
		if err := st.CreateRun(ctx, &store.Run{ID: id, HierarchyID: created.TeamID, HierarchyName: "research_analysis_team", TotalTeams: 2, WorkflowID: models.RunWorkflowID(id), Task: "AI in medicine"}); err != nil {
			t.Fatal(err)
		}
		now := time.Now().UTC()
		result := &models.RunResult{
			FinalAnswer: "FINAL REPORT",
			Teams: []models.TeamOutput{
				{Turn: 1, TeamID: "team_a7b9c2d4e5f6", TeamName: "研究团队", Status: models.TeamCompleted, StartedAt: &now, CompletedAt: &now, Workers: []models.WorkerOutput{
					{AgentID: "agent_search_001", Name: "医疗文献搜索专家", Output: "SEARCH OUTPUT"},
					{AgentID: "agent_analyze_001", Name: "趋势分析师", Output: "ANALYSIS OUTPUT"},
				}},
				{Turn: 2, TeamID: "team_x8y9z1a2b3c4", TeamName: "写作团队", Status: models.TeamCompleted, StartedAt: &now, CompletedAt: &now, Workers: []models.WorkerOutput{
					{AgentID: "agent_write_001", Name: "技术报告撰写专家", Output: "WRITER OUTPUT"},
				}},
			},
		}
		for _, s := range []models.RunStatusUpdate{{RunID: id, Status: models.RunRunning}, {RunID: id, Status: models.RunCompleted, Result: result}} {
			if err := st.SetRunStatus(ctx, s); err != nil {
				t.Fatal(err)
			}
		}
		for i, c := range []store.LLMCall{
			{AgentID: "gs", Status: "ok", TotalTokens: 10, LatencyMs: 100},
			{AgentID: "agent_search_001", Status: "error", LatencyMs: 50},
			{AgentID: "agent_search_001", Status: "ok", TotalTokens: 20, LatencyMs: 300},
			{AgentID: "agent_write_001", Status: "ok", TotalTokens: 30, LatencyMs: 200},
		} {
			c.ID, c.RunID = id+"/"+string(rune('a'+i)), id
			if err := st.RecordLLMCall(ctx, &c); err != nil {
				t.Fatal(err)
			}
		}

		var res struct {
			ExecutionID      string `json:"execution_id"`
			TeamID           string `json:"team_id"`
			ExecutionSummary struct {
				Status         string   `json:"status"`
				TotalDuration  *float64 `json:"total_duration"`
				TeamsExecuted  int      `json:"teams_executed"`
				AgentsInvolved int      `json:"agents_involved"`
			} `json:"execution_summary"`
			TeamResults map[string]struct {
				TeamName string `json:"team_name"`
				Agents   map[string]struct {
					AgentName string   `json:"agent_name"`
					Output    string   `json:"output"`
					ToolsUsed []string `json:"tools_used"`
				} `json:"agents"`
			} `json:"team_results"`
			FinalOutput struct {
				Content string `json:"content"`
			} `json:"final_output"`
			Errors  []any `json:"errors"`
			Metrics struct {
				TotalTokensUsed     int     `json:"total_tokens_used"`
				APICallsMade        int     `json:"api_calls_made"`
				SuccessRate         float64 `json:"success_rate"`
				AverageResponseTime float64 `json:"average_response_time"`
			} `json:"metrics"`
		}
		a.mustDo(http.MethodGet, "/api/v1/executions/"+id+"/results", nil, api.CodeExecutionCompleted, &res)
		if res.ExecutionID != id || res.TeamID != created.TeamID || res.ExecutionSummary.Status != "completed" || res.ExecutionSummary.TotalDuration == nil ||
			res.ExecutionSummary.TeamsExecuted != 2 || res.ExecutionSummary.AgentsInvolved != 3 || res.FinalOutput.Content != "FINAL REPORT" || res.Errors == nil || len(res.Errors) != 0 {
			t.Errorf("results = %+v", res)
		}
		if a := res.TeamResults["team_a7b9c2d4e5f6"].Agents["agent_analyze_001"]; a.Output != "ANALYSIS OUTPUT" || a.AgentName != "趋势分析师" || a.ToolsUsed == nil {
			t.Errorf("analyst = %+v", a)
		}
		if m := res.Metrics; m.TotalTokensUsed != 60 || m.APICallsMade != 4 || m.SuccessRate != 0.75 || m.AverageResponseTime != 0.2 {
			t.Errorf("metrics = %+v", m)
		}

		var md struct {
			Format  string `json:"format"`
			Content string `json:"content"`
		}
		a.mustDo(http.MethodGet, "/api/v1/executions/"+id+"/results?format=markdown", nil, api.CodeExecutionCompleted, &md)
		for _, want := range []string{"# Execution results: research_analysis_team", "SEARCH OUTPUT", "ANALYSIS OUTPUT", "WRITER OUTPUT", "FINAL REPORT", "| API calls made | 4 |"} {
			if md.Format != "markdown" || !strings.Contains(md.Content, want) {
				t.Errorf("markdown lacks %q", want)
			}
		}
		// XML (issue 23 item 17): format=xml, or Accept: application/xml,
		// answers an XML document (spec 001's envelope, the results in
		// <data>), not XML text inside the JSON envelope.
		type xmlDoc struct {
			XMLName xml.Name `xml:"response"`
			Success bool     `xml:"success"`
			Code    string   `xml:"code"`
			Data    struct {
				ExecutionID string `xml:"execution_id"`
				Summary     struct {
					Status        string `xml:"status"`
					TeamsExecuted int    `xml:"teams_executed"`
				} `xml:"execution_summary"`
				Teams []struct {
					XMLName xml.Name
					Agents  []struct {
						XMLName xml.Name
						Output  string `xml:"output"`
					} `xml:"agents>agent_analyze_001"`
				} `xml:"team_results>team_a7b9c2d4e5f6"`
				APICalls int `xml:"metrics>api_calls_made"`
			} `xml:"data"`
			Error struct {
				Message string `xml:"message"`
			} `xml:"error"`
		}
		getXML := func(path, accept string) (int, xmlDoc, string) {
			t.Helper()
			req, _ := http.NewRequest(http.MethodGet, a.url+path, nil)
			if accept != "" {
				req.Header.Set("Accept", accept)
			}
			resp, err := a.client.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			raw, _ := io.ReadAll(resp.Body)
			if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/xml") {
				t.Errorf("GET %s (Accept %q): Content-Type %q, want application/xml; body %s", path, accept, ct, raw)
			}
			var doc xmlDoc
			if err := xml.Unmarshal(raw, &doc); err != nil {
				t.Errorf("GET %s: not an XML document: %v\n%s", path, err, raw)
			}
			return resp.StatusCode, doc, string(raw)
		}
		for _, c := range []struct{ query, accept string }{
			{"?format=xml", ""},
			{"", "application/xml"},
			{"", "text/html, application/xml;q=0.9, application/json;q=0.5, */*;q=0.1"},
		} {
			status, doc, raw := getXML("/api/v1/executions/"+id+"/results"+c.query, c.accept)
			if status != http.StatusOK || !doc.Success || doc.Code != api.CodeExecutionCompleted || doc.Data.ExecutionID != id ||
				doc.Data.Summary.Status != "completed" || doc.Data.Summary.TeamsExecuted != 2 || doc.Data.APICalls != 4 ||
				len(doc.Data.Teams) != 1 || len(doc.Data.Teams[0].Agents) != 1 || doc.Data.Teams[0].Agents[0].Output != "ANALYSIS OUTPUT" {
				t.Errorf("xml results (%q, Accept %q) = %d %+v\n%s", c.query, c.accept, status, doc, raw)
			}
		}
		// An error of a request for XML is XML too.
		if status, doc, _ := getXML("/api/v1/executions/nope/results", "application/xml"); status != http.StatusNotFound || doc.Success || doc.Code != "EXECUTION_NOT_FOUND" || doc.Error.Message == "" {
			t.Errorf("xml 404 = %d %+v", status, doc)
		}
		// JSON stays the default, and an explicit format wins over Accept.
		var plain struct {
			ExecutionID string `json:"execution_id"`
		}
		a.mustDo(http.MethodGet, "/api/v1/executions/"+id+"/results", nil, api.CodeExecutionCompleted, &plain)
		if plain.ExecutionID != id {
			t.Errorf("json results = %+v", plain)
		}
		req, _ := http.NewRequest(http.MethodGet, a.url+"/api/v1/executions/"+id+"/results?format=json", nil)
		req.Header.Set("Accept", "application/xml")
		if resp, err := a.client.Do(req); err != nil || !strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") {
			t.Errorf("format=json with Accept xml: %v %v", resp.Header.Get("Content-Type"), err)
		} else {
			resp.Body.Close()
		}
		// runs/results with "format":"xml": contract 002's envelope as XML.
		raw, _ := json.Marshal(map[string]any{"id": id, "format": "xml"})
		req, _ = http.NewRequest(http.MethodPost, a.url+"/api/executor/v1/runs/results", bytes.NewReader(raw))
		req.Header.Set("Content-Type", "application/json")
		resp, err := a.client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		var doc002 struct {
			XMLName xml.Name `xml:"response"`
			Code    int      `xml:"code"`
			ExecID  string   `xml:"data>execution_id"`
		}
		if err := xml.Unmarshal(body, &doc002); err != nil || resp.StatusCode != http.StatusOK || doc002.Code != 0 || doc002.ExecID != id ||
			!strings.HasPrefix(resp.Header.Get("Content-Type"), "application/xml") {
			t.Errorf("runs/results xml = %d %v %+v\n%s", resp.StatusCode, err, doc002, body)
		}
		env := a.expectV1Error(http.MethodGet, "/api/v1/executions/"+id+"/results?format=yaml", nil, http.StatusBadRequest, "INVALID_PARAMETERS")
		if env.Error.Details["field"] != "format" {
			t.Errorf("details = %v", env.Error.Details)
		}

		// The executor API's runs/results: the same data in contract 002's envelope.
		var same struct {
			ExecutionID string `json:"execution_id"`
			Metrics     struct {
				APICallsMade int `json:"api_calls_made"`
			} `json:"metrics"`
		}
		a.mustPost("/api/executor/v1/runs/results", map[string]any{"id": id}, &same)
		if same.ExecutionID != id || same.Metrics.APICallsMade != 4 {
			t.Errorf("runs/results = %+v", same)
		}
		a.mustPost("/api/executor/v1/runs/results", map[string]any{"id": id, "format": "markdown"}, &md)
		if !strings.Contains(md.Content, "WRITER OUTPUT") {
			t.Errorf("runs/results markdown = %q", md.Content)
		}
		a.expectError("/api/executor/v1/runs/results", map[string]any{"id": id, "format": "pdf"}, http.StatusBadRequest, 40001)
		a.expectError("/api/executor/v1/runs/results", map[string]any{"id": "nope"}, http.StatusNotFound, 40402)
		a.expectError("/api/executor/v1/runs/results", map[string]any{}, http.StatusBadRequest, 40001)

		// Status with progress by team id.
		var ex struct {
			ExecutionID string `json:"execution_id"`
			TeamID      string `json:"team_id"`
			Status      string `json:"status"`
			StartedAt   *time.Time
			Progress    struct {
				CompletedTeams       []string `json:"completed_teams"`
				TotalTeams           int      `json:"total_teams"`
				CompletionPercentage int      `json:"completion_percentage"`
			} `json:"progress"`
			Usage *struct {
				TotalTokens int     `json:"total_tokens"`
				CostUSD     float64 `json:"cost_usd"`
				CostUnknown bool    `json:"cost_unknown"`
			} `json:"usage"`
		}
		a.mustDo(http.MethodGet, "/api/v1/executions/"+id, nil, api.CodeExecutionInfoRetrieved, &ex)
		// The cost totals of its calls, none of them priced.
		if u := ex.Usage; u == nil || u.TotalTokens != 60 || u.CostUSD != 0 || !u.CostUnknown {
			t.Errorf("execution usage = %+v", u)
		}
		if ex.ExecutionID != id || ex.TeamID != created.TeamID || ex.Status != "completed" || ex.Progress.TotalTeams != 2 || ex.Progress.CompletionPercentage != 100 ||
			strings.Join(ex.Progress.CompletedTeams, ",") != "team_a7b9c2d4e5f6,team_x8y9z1a2b3c4" {
			t.Errorf("execution = %+v", ex)
		}

		// Formatting checks its input before it needs Temporal.
		pathFormat := "/api/v1/executions/" + id + "/results/format"
		for body, field := range map[string]string{
			`{}`:                                    "output_template",
			`{"output_template": null}`:             "output_template",
			`{"output_template": ["a"]}`:            "output_template",
			`{"output_template": "text"}`:           "output_template",
			`{"output_template": {}}`:               "output_template",
			`{"output_template": {"a": 1, "a": 2}}`: "output_template",
			`{"output_template": {"a": "{x}"}, "extraction_rules": ["x"]}`: "extraction_rules",
		} {
			env := a.expectV1Error(http.MethodPost, pathFormat, []byte(body), http.StatusBadRequest, "INVALID_PARAMETERS")
			if env.Error.Details["field"] != field {
				t.Errorf("%s: field %v, want %s", body, env.Error.Details["field"], field)
			}
		}
		a.expectV1Error(http.MethodPost, "/api/v1/executions/nope/results/format", []byte(`{"output_template": {"a": "{x}"}}`), http.StatusNotFound, "EXECUTION_NOT_FOUND")
		a.expectError("/api/executor/v1/runs/results/format", map[string]any{"id": id, "output_template": []any{}}, http.StatusBadRequest, 40001)

		// A run with no output yet has nothing to format.
		pending := models.NewID()
		if err := st.CreateRun(ctx, &store.Run{ID: pending, HierarchyID: created.TeamID, WorkflowID: models.RunWorkflowID(pending), Task: "t"}); err != nil {
			t.Fatal(err)
		}
		if err := st.SetRunStatus(ctx, models.RunStatusUpdate{RunID: pending, Status: models.RunFailed, Error: "boom"}); err != nil {
			t.Fatal(err)
		}
		a.expectV1Error(http.MethodPost, "/api/v1/executions/"+pending+"/results/format", []byte(`{"output_template": {"a": "{x}"}}`), http.StatusConflict, "EXECUTION_IN_PROGRESS")
		// A failed run's results list its error and answer RESULTS_RETRIEVED.
		var failed struct {
			Errors []models.ErrorInfo `json:"errors"`
		}
		a.mustDo(http.MethodGet, "/api/v1/executions/"+pending+"/results", nil, api.CodeResultsRetrieved, &failed)
		if len(failed.Errors) != 1 || failed.Errors[0].ErrorCode != "EXECUTION_FAILED" || failed.Errors[0].Message != "boom" {
			t.Errorf("failed run errors = %+v", failed.Errors)
		}
		// Valid input, but this process has no Temporal to run the formatting.
		a.expectV1Error(http.MethodPost, pathFormat, []byte(`{"output_template": {"a": "{x}"}, "extraction_rules": {"a": "briefly"}}`), http.StatusServiceUnavailable, "SERVICE_UNAVAILABLE")
		// Cancelling a finished run is a conflict.
		a.expectV1Error(http.MethodPost, "/api/v1/executions/"+id+"/cancel", nil, http.StatusConflict, "EXECUTION_ALREADY_FINISHED")
	})
}

// TestV1TeamNameTaken (issue 23 item 11): spec 001's TEAM_ALREADY_EXISTS
// for a team_name the tenant already has, on create and on a rename, with
// nothing written; a name taken by another tenant is free; concurrent
// creates of one name give exactly one team.
func TestV1TeamNameTaken(t *testing.T) {
	storetest.ForEachDialect(t, func(t *testing.T, st *store.Store) {
		a := newTestAPI(t, st, withFakeTools)
		var first teamSummary
		a.mustDo(http.MethodPost, pathTeams, specRequest(t), api.CodeTeamCreated, &first)
		env := a.expectV1Error(http.MethodPost, pathTeams, specRequest(t), http.StatusConflict, "TEAM_ALREADY_EXISTS")
		if env.Error.Details["field"] != "team_name" || !strings.Contains(env.Error.Message, "research_analysis_team") {
			t.Errorf("duplicate create: %+v", env.Error)
		}
		if hs, _, err := st.ListHierarchies(context.Background(), store.ListFilter{Page: 1, PageSize: 100}); err != nil || len(hs) != 1 {
			t.Fatalf("after the refused create: %d hierarchies (%v), want 1", len(hs), err)
		}

		// A rename onto a taken name is refused and changes nothing; keeping
		// one's own name is fine.
		other := specRequest(t)
		other["team_name"] = "writers"
		var second teamSummary
		a.mustDo(http.MethodPost, pathTeams, other, api.CodeTeamCreated, &second)
		renamed := specRequest(t)
		renamed["description"] = "changed"
		a.expectV1Error(http.MethodPut, pathTeams+"/"+second.TeamID, renamed, http.StatusConflict, "TEAM_ALREADY_EXISTS")
		var got v1Team
		a.mustDo(http.MethodGet, pathTeams+"/"+second.TeamID, nil, api.CodeTeamInfoRetrieved, &got)
		if got.TeamName != "writers" || got.Description == "changed" {
			t.Errorf("the refused rename changed the team: %+v", got)
		}
		a.mustDo(http.MethodPut, pathTeams+"/"+first.TeamID, renamed, api.CodeTeamUpdated, nil)

		// Another tenant's name is not taken for this one.
		h, err := st.GetHierarchy(context.Background(), first.TeamID)
		if err != nil {
			t.Fatal(err)
		}
		h.ID, h.TenantID = models.NewID(), "tenant-other"
		if err := st.CreateNamedHierarchy(context.Background(), h); err != nil {
			t.Errorf("same name in another tenant: %v", err)
		}

		// Concurrent creates of a new name: one team.
		const n = 6
		codes := make(chan int, n)
		for i := 0; i < n; i++ {
			go func() {
				body := specRequest(t)
				body["team_name"] = "raced"
				status, _ := a.do(http.MethodPost, pathTeams, body)
				codes <- status
			}()
		}
		ok := 0
		for i := 0; i < n; i++ {
			switch c := <-codes; c {
			case http.StatusOK:
				ok++
			case http.StatusConflict:
			default:
				t.Errorf("concurrent create answered %d", c)
			}
		}
		if ok != 1 {
			t.Errorf("%d concurrent creates of one name succeeded, want 1", ok)
		}
	})
}

// TestV1ExecutionSettings (issue 23 item 16): spec 001's output_format
// (detailed|summary|minimal) shapes an execution's results,
// enable_streaming and stream_events turn its spec 001 stream off, and
// save_intermediate_results false keeps only the final output in its
// results.
func TestV1ExecutionSettings(t *testing.T) {
	storetest.ForEachDialect(t, func(t *testing.T, st *store.Store) {
		a := newTestAPI(t, st, withFakeTools, func(o *api.Options) { o.Runs = &api.Runs{Store: st} })
		body := specRequest(t)
		body["global_config"] = map[string]any{"output_format": "fancy"}
		env := a.expectV1Error(http.MethodPost, pathTeams, body, http.StatusBadRequest, "INVALID_PARAMETERS")
		if env.Error.Details["field"] != "global_config.output_format" {
			t.Errorf("bad output_format: %+v", env.Error)
		}
		body["global_config"] = map[string]any{"output_format": "minimal", "enable_streaming": false}
		var created teamSummary
		a.mustDo(http.MethodPost, pathTeams, body, api.CodeTeamCreated, &created)
		ctx := context.Background()
		h, err := st.GetHierarchy(ctx, created.TeamID)
		if err != nil {
			t.Fatal(err)
		}
		no, yes := false, true
		newRun := func(ec *store.ExecutionConfig) string {
			id := models.NewID()
			if err := st.CreateRun(ctx, &store.Run{ID: id, HierarchyID: h.ID, HierarchyName: h.Name, TotalTeams: 2, WorkflowID: models.RunWorkflowID(id), Task: "t", Hierarchy: h, ExecutionConfig: ec}); err != nil {
				t.Fatal(err)
			}
			now := time.Now().UTC()
			result := &models.RunResult{FinalAnswer: "FINAL REPORT", Teams: []models.TeamOutput{
				{Turn: 1, TeamID: "team_a7b9c2d4e5f6", TeamName: "研究团队", Status: models.TeamCompleted, StartedAt: &now, CompletedAt: &now, Workers: []models.WorkerOutput{
					{AgentID: "agent_search_001", Name: "医疗文献搜索专家", Output: "SEARCH OUTPUT"},
				}},
			}}
			for _, s := range []models.RunStatusUpdate{{RunID: id, Status: models.RunRunning}, {RunID: id, Status: models.RunCompleted, Result: result}} {
				if err := st.SetRunStatus(ctx, s); err != nil {
					t.Fatal(err)
				}
			}
			return id
		}
		results := func(path string) map[string]any {
			t.Helper()
			var m map[string]any
			a.mustDo(http.MethodGet, path, nil, api.CodeExecutionCompleted, &m)
			return m
		}
		agent := func(m map[string]any) map[string]any {
			tr, _ := m["team_results"].(map[string]any)
			team, _ := tr["team_a7b9c2d4e5f6"].(map[string]any)
			agents, _ := team["agents"].(map[string]any)
			ag, _ := agents["agent_search_001"].(map[string]any)
			return ag
		}

		// The team's output_format, minimal: no team results or metrics.
		plain := newRun(nil)
		m := results("/api/v1/executions/" + plain + "/results")
		if _, has := m["team_results"]; has || m["output_format"] != "minimal" || m["metrics"] != nil || m["final_output"].(map[string]any)["content"] != "FINAL REPORT" {
			t.Errorf("minimal results = %v", m)
		}
		// summary, asked for: agents' summaries, no outputs or per-agent metrics.
		m = results("/api/v1/executions/" + plain + "/results?output_format=summary")
		if ag := agent(m); ag["summary"] != "SEARCH OUTPUT" || ag["output"] != nil || ag["metrics"] != nil || m["metrics"] == nil || m["usage_by_agent"] != nil {
			t.Errorf("summary results = %v", m)
		}
		// detailed: everything.
		m = results("/api/v1/executions/" + plain + "/results?output_format=detailed")
		if ag := agent(m); ag["output"] != "SEARCH OUTPUT" || ag["metrics"] == nil || m["usage_by_agent"] == nil {
			t.Errorf("detailed results = %v", m)
		}
		a.expectV1Error(http.MethodGet, "/api/v1/executions/"+plain+"/results?output_format=huge", nil, http.StatusBadRequest, "INVALID_PARAMETERS")
		var same map[string]any
		a.mustPost("/api/executor/v1/runs/results", map[string]any{"id": plain, "output_format": "summary"}, &same)
		if agent(same)["summary"] != "SEARCH OUTPUT" {
			t.Errorf("runs/results summary = %v", same)
		}

		// The team's enable_streaming false: no spec 001 stream.
		env = a.expectV1Error(http.MethodGet, "/api/v1/executions/"+plain+"/stream", nil, http.StatusConflict, "STREAMING_DISABLED")
		if !strings.Contains(env.Error.Message, "poll") {
			t.Errorf("streaming off: %+v", env.Error)
		}
		// stream_events true overrides it; save_intermediate_results false
		// keeps the final output only, in every format.
		streamed := newRun(&store.ExecutionConfig{StreamEvents: &yes, SaveIntermediateResults: &no})
		req, _ := http.NewRequest(http.MethodGet, a.url+"/api/v1/executions/"+streamed+"/stream", nil)
		resp, err := a.client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
			t.Errorf("stream_events true: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
		}
		m = results("/api/v1/executions/" + streamed + "/results?output_format=detailed")
		if ag := agent(m); ag == nil || ag["output"] != "" || m["final_output"].(map[string]any)["content"] != "FINAL REPORT" {
			t.Errorf("without intermediate results: %v", m)
		}
		var md struct {
			Content string `json:"content"`
		}
		a.mustDo(http.MethodGet, "/api/v1/executions/"+streamed+"/results?format=markdown", nil, api.CodeExecutionCompleted, &md)
		if strings.Contains(md.Content, "SEARCH OUTPUT") || !strings.Contains(md.Content, "FINAL REPORT") {
			t.Errorf("markdown without intermediate results:\n%s", md.Content)
		}
		// stream_events false turns off a team's default streaming too.
		off := newRun(&store.ExecutionConfig{StreamEvents: &no})
		a.expectV1Error(http.MethodGet, "/api/v1/executions/"+off+"/stream", nil, http.StatusConflict, "STREAMING_DISABLED")
	})
}

// TestV1ExecuteStreamURL (issue 23 item 16): execute answers stream_url
// null for an execution started with streaming off (the team's
// enable_streaming false), a URL when execution_config.stream_events turns
// it on, and keeps the execution's settings with its run.
func TestV1ExecuteStreamURL(t *testing.T) {
	storetest.ForEachDialect(t, func(t *testing.T, st *store.Store) {
		tc := &mocks.Client{}
		tc.On("ExecuteWorkflow", mock.Anything, mock.Anything, mock.Anything, mock.Anything).Return(&mocks.WorkflowRun{}, nil)
		tc.On("CheckHealth", mock.Anything, mock.Anything).Return(&client.CheckHealthResponse{}, nil).Maybe()
		a := newTestAPI(t, st, withFakeTools, func(o *api.Options) { o.Runs = &api.Runs{Store: st, Temporal: tc} })
		body := specRequest(t)
		body["global_config"] = map[string]any{"enable_streaming": false}
		var created teamSummary
		a.mustDo(http.MethodPost, pathTeams, body, api.CodeTeamCreated, &created)
		var off, on map[string]any
		a.mustDo(http.MethodPost, pathTeams+"/"+created.TeamID+"/execute", map[string]any{}, api.CodeExecutionStarted, &off)
		if v, present := off["stream_url"]; !present || v != nil {
			t.Errorf("streaming off: stream_url %v (present %v), want null", v, present)
		}
		a.expectV1Error(http.MethodGet, "/api/v1/executions/"+off["execution_id"].(string)+"/stream", nil, http.StatusConflict, "STREAMING_DISABLED")
		a.mustDo(http.MethodPost, pathTeams+"/"+created.TeamID+"/execute",
			map[string]any{"execution_config": map[string]any{"stream_events": true, "save_intermediate_results": false}}, api.CodeExecutionStarted, &on)
		if on["stream_url"] != "/api/v1/executions/"+on["execution_id"].(string)+"/stream" {
			t.Errorf("stream_events true: stream_url %v", on["stream_url"])
		}
		run, err := st.GetRun(context.Background(), on["execution_id"].(string))
		if err != nil {
			t.Fatal(err)
		}
		if ec := run.ExecutionConfig; ec == nil || ec.StreamEvents == nil || !*ec.StreamEvents || ec.SaveIntermediateResults == nil || *ec.SaveIntermediateResults {
			t.Errorf("stored execution_config = %+v", ec)
		}
	})
}
