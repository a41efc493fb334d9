package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"math"
	"net/http"
	"os"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/op-stack/executor/activities"
	"github.com/op-stack/executor/config"
	"github.com/op-stack/executor/llm/bedrockfake"
	"github.com/op-stack/executor/llm/llmfake"
	"github.com/op-stack/executor/models"
	"github.com/op-stack/executor/templating"
)

// withUsage gives every response of rule i the usage usageOf(i), so the
// tokens the fake reported can be summed from its recorded calls.
func withUsage(rules []llmfake.Rule) []llmfake.Rule {
	for i := range rules {
		for j := range rules[i].Responses {
			rules[i].Responses[j].Usage = usageOf(i)
		}
	}
	return rules
}

func usageOf(rule int) llmfake.Usage {
	return llmfake.Usage{PromptTokens: 10 * (rule + 1), CompletionTokens: rule + 1, TotalTokens: 11 * (rule + 1)}
}

// specFormat is spec 001's results/format example: the request (template
// and extraction rules) and the filled template of its response.
func specFormat(t *testing.T) (request map[string]any, filled json.RawMessage) {
	t.Helper()
	raw, err := os.ReadFile("../api/testdata/spec001_format_request.json")
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(raw, &request); err != nil {
		t.Fatal(err)
	}
	raw, err = os.ReadFile("../api/testdata/spec001_format_response.json")
	if err != nil {
		t.Fatal(err)
	}
	var resp struct {
		Data json.RawMessage `json:"data"`
	}
	if err := json.Unmarshal(raw, &resp); err != nil {
		t.Fatal(err)
	}
	return request, resp.Data
}

// results is the JSON of runs/results, as a client decodes it.
type results struct {
	ExecutionID      string `json:"execution_id"`
	TeamID           string `json:"team_id"`
	ExecutionSummary struct {
		Status         string     `json:"status"`
		StartedAt      *time.Time `json:"started_at"`
		CompletedAt    *time.Time `json:"completed_at"`
		TotalDuration  *float64   `json:"total_duration"`
		TeamsExecuted  int        `json:"teams_executed"`
		AgentsInvolved int        `json:"agents_involved"`
	} `json:"execution_summary"`
	TeamResults map[string]struct {
		TeamName string   `json:"team_name"`
		Status   string   `json:"status"`
		Duration *float64 `json:"duration"`
		Agents   map[string]struct {
			AgentName string   `json:"agent_name"`
			Status    string   `json:"status"`
			Output    string   `json:"output"`
			ToolsUsed []string `json:"tools_used"`
		} `json:"agents"`
	} `json:"team_results"`
	FinalOutput *struct {
		Content string `json:"content"`
	} `json:"final_output"`
	Errors  []models.ErrorInfo `json:"errors"`
	Metrics struct {
		TotalTokensUsed     int     `json:"total_tokens_used"`
		APICallsMade        int     `json:"api_calls_made"`
		SuccessRate         float64 `json:"success_rate"`
		AverageResponseTime float64 `json:"average_response_time"`
	} `json:"metrics"`
}

// TestResults runs the reference hierarchy and checks runs/results against
// what the fake LLM server saw, then fills spec 001's template with
// runs/results/format, the fake answering invalid JSON first.
func TestResults(t *testing.T) {
	formatRequest, filled := specFormat(t)
	rules := withUsage(referenceRules(map[string][]llmfake.Response{
		"W-SEARCHER": {{ToolCalls: []llmfake.ToolCall{toolCall("calculator", `{"expression":"6*7"}`)}}, {Content: "searcher found 42 papers"}},
	}))
	formatRule := llmfake.Rule{Name: "format", UserContains: templating.PromptMarker, Responses: []llmfake.Response{
		{Content: "Here is your report: it covers AI in medicine."},
		{Content: "```json\n" + string(filled) + "\n```"},
	}}
	e := newEnv(t, append([]llmfake.Rule{formatRule}, rules...))
	body := referenceHierarchy()
	searcher := body["teams"].([]any)[0].(map[string]any)["workers"].([]any)[0].(map[string]any)
	searcher["tools"] = []string{"calculator"}
	hid := e.createHierarchy(body)
	var h models.Hierarchy
	e.mustPost("/hierarchies/get", map[string]any{"hierarchy_id": hid}, &h)
	id := e.startRun(hid, "Explain quantum tunnelling")
	v := e.waitRun(id, time.Minute)
	if v.Status != models.RunCompleted {
		t.Fatalf("run ended %s: %s", v.Status, v.Error)
	}

	var r results
	e.mustPost("/runs/results", map[string]any{"id": id}, &r)
	calls := e.fake.Calls()
	if r.ExecutionID != id || r.TeamID != hid || r.ExecutionSummary.Status != "completed" || r.ExecutionSummary.TotalDuration == nil ||
		r.ExecutionSummary.TeamsExecuted != 2 || r.ExecutionSummary.AgentsInvolved != 3 || len(r.Errors) != 0 ||
		r.FinalOutput == nil || r.FinalOutput.Content != "FINAL ANSWER: tunnelling explained." {
		t.Errorf("results = %+v", r)
	}
	// The metrics add up against the fake's record: one API call per
	// request it received, the tokens it reported for each.
	tokens := 0
	for _, c := range calls {
		tokens += usageOf(c.Rule - 1).TotalTokens // rule 0 is the format rule
	}
	if r.Metrics.APICallsMade != len(calls) || r.Metrics.TotalTokensUsed != tokens || r.Metrics.SuccessRate != 1 {
		t.Errorf("metrics = %+v; the fake saw %d calls with %d tokens", r.Metrics, len(calls), tokens)
	}
	recorded, err := e.store.LLMCalls(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	var latency int64
	for _, c := range recorded {
		latency += c.LatencyMs
	}
	if want := float64(latency) / float64(len(recorded)) / 1000; len(recorded) != len(calls) || r.Metrics.AverageResponseTime < want-0.001 || r.Metrics.AverageResponseTime > want+0.001 {
		t.Errorf("average response time %v, recorded calls %d (mean %v)", r.Metrics.AverageResponseTime, len(recorded), want)
	}

	// Per team (by id) and agent.
	want := map[string]map[string]string{
		h.Teams[0].ID: {"w-searcher": "searcher found 42 papers", "w-analyst": "output of W-ANALYST"},
		h.Teams[1].ID: {"w-writer": "output of W-WRITER"},
	}
	if len(r.TeamResults) != 2 {
		t.Fatalf("team_results = %+v", r.TeamResults)
	}
	for teamID, agents := range want {
		tr, ok := r.TeamResults[teamID]
		if !ok || tr.Status != "completed" || tr.Duration == nil || len(tr.Agents) != len(agents) {
			t.Errorf("team %s = %+v", teamID, tr)
			continue
		}
		for agentID, output := range agents {
			if a := tr.Agents[agentID]; a.Output != output || a.Status != "completed" || a.AgentName == "" || a.ToolsUsed == nil {
				t.Errorf("agent %s = %+v", agentID, a)
			}
		}
	}
	if tools := r.TeamResults[h.Teams[0].ID].Agents["w-searcher"].ToolsUsed; strings.Join(tools, ",") != "calculator" {
		t.Errorf("searcher tools_used = %v", tools)
	}

	var md struct {
		Format  string `json:"format"`
		Content string `json:"content"`
	}
	e.mustPost("/runs/results", map[string]any{"id": id, "format": "markdown"}, &md)
	for _, s := range []string{"# Execution results: reference", "searcher found 42 papers", "output of W-ANALYST", "output of W-WRITER", "FINAL ANSWER: tunnelling explained.", "### research", "#### searcher"} {
		if md.Format != "markdown" || !strings.Contains(md.Content, s) {
			t.Errorf("markdown lacks %q", s)
		}
	}

	// Formatting: spec 001's template, answered invalid first, then right.
	formatRequest["id"] = id
	var out map[string]any
	e.mustPost("/runs/results/format", formatRequest, &out)
	var tmpl map[string]any
	raw, _ := json.Marshal(formatRequest["output_template"])
	json.Unmarshal(raw, &tmpl)
	if got, want := sortedKeys(out), sortedKeys(tmpl); !slices.Equal(got, want) {
		t.Errorf("formatted keys %v, template keys %v", got, want)
	}
	for _, k := range []string{"research_findings", "appendix"} {
		if got, want := sortedKeys(out[k].(map[string]any)), sortedKeys(tmpl[k].(map[string]any)); !slices.Equal(got, want) {
			t.Errorf("%s keys %v, template keys %v", k, got, want)
		}
	}
	var wantOut map[string]any
	json.Unmarshal(filled, &wantOut)
	if !reflect.DeepEqual(out, wantOut) || out["report_title"] != "AI医疗应用分析报告" {
		t.Errorf("formatted = %v", out)
	}
	formatCalls := callsByRule(e.fake.Calls(), "format")
	if len(formatCalls) != 2 {
		t.Fatalf("%d format calls, want 2", len(formatCalls))
	}
	first, repair := formatCalls[0], formatCalls[1]
	if !first.HasJSONSchema() || first.Model != "test-model" || !strings.Contains(lastUser(first), "output of W-ANALYST") || !strings.Contains(lastUser(first), "总结所有团队的核心发现") {
		t.Errorf("first format call: schema %v model %q", first.HasJSONSchema(), first.Model)
	}
	if !strings.Contains(lastUser(repair), "contains no JSON object") {
		t.Errorf("the repair request does not name the problem: %q", lastUser(repair))
	}
	// Formatting is not part of the run: its metrics are unchanged.
	var again results
	e.mustPost("/runs/results", map[string]any{"id": id}, &again)
	if again.Metrics != r.Metrics {
		t.Errorf("metrics changed by formatting: %+v → %+v", r.Metrics, again.Metrics)
	}

	// The same through spec 001's surface.
	var v1 results
	e.mustV1(http.MethodGet, "/executions/"+id+"/results", nil, "EXECUTION_COMPLETED", &v1)
	if v1.ExecutionID != id || v1.Metrics != r.Metrics || len(v1.TeamResults) != 2 {
		t.Errorf("v1 results = %+v", v1)
	}
	e.fake.SetRules(append([]llmfake.Rule{formatRule}, rules...)...) // restart the format script
	delete(formatRequest, "id")
	e.mustV1(http.MethodPost, "/executions/"+id+"/results/format", formatRequest, "FORMATTED_RESULTS_GENERATED", &out)
	if !reflect.DeepEqual(out, wantOut) {
		t.Errorf("v1 formatted = %v", out)
	}

	// A model that never matches the template fails after three repairs.
	e.fake.SetRules(append([]llmfake.Rule{{Name: "format", UserContains: templating.PromptMarker, Responses: contentResponses(`{"report_title": "AI医疗应用分析报告"}`)}}, rules...)...)
	before := len(callsByRule(e.fake.Calls(), "format"))
	formatRequest["id"] = id
	status, env := e.post("/runs/results/format", formatRequest)
	if status != http.StatusInternalServerError || env.ErrorCode != "EXECUTION_FAILED" || !strings.Contains(env.Message, "after 3 repairs") || !strings.Contains(env.Message, "missing keys") {
		t.Errorf("mismatch: status %d %s %q", status, env.ErrorCode, env.Message)
	}
	if n := len(callsByRule(e.fake.Calls(), "format")) - before; n != activities.MaxFormatRepairs+1 {
		t.Errorf("%d format calls, want %d", n, activities.MaxFormatRepairs+1)
	}
	if status, env := e.post("/runs/results/format", map[string]any{"id": id, "output_template": []string{"x"}}); status != http.StatusBadRequest || env.ErrorCode != "INVALID_PARAMETERS" {
		t.Errorf("array template: %d %s", status, env.ErrorCode)
	}
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func callsByRule(calls []llmfake.Call, name string) []llmfake.Call {
	var out []llmfake.Call
	for _, c := range calls {
		if c.RuleName == name {
			out = append(out, c)
		}
	}
	return out
}

// v1URL is the root of spec 001's surface on the env's API server.
func (e *testEnv) v1URL() string {
	return strings.TrimSuffix(e.apiURL, "/api/executor/v1") + "/api/v1"
}

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

// doV1 calls spec 001's surface.
func (e *testEnv) doV1(method, path string, body any) (int, v1Envelope) {
	e.t.Helper()
	var r io.Reader
	if body != nil {
		raw, _ := json.Marshal(body)
		r = bytes.NewReader(raw)
	}
	req, _ := http.NewRequest(method, e.v1URL()+path, r)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	var env v1Envelope
	if err := json.NewDecoder(resp.Body).Decode(&env); err != nil {
		e.t.Fatalf("%s %s: %v", method, path, err)
	}
	return resp.StatusCode, env
}

func (e *testEnv) mustV1(method, path string, body any, code string, out any) {
	e.t.Helper()
	status, env := e.doV1(method, path, body)
	if status != http.StatusOK || !env.Success || env.Code != code {
		e.t.Fatalf("%s %s: status %d code %s (want %s): %+v", method, path, status, env.Code, code, env.Error)
	}
	if out != nil {
		if err := json.Unmarshal(env.Data, out); err != nil {
			e.t.Fatal(err)
		}
	}
}

// spec001Rules script spec 001's example team: the research team (search,
// then analysis), then the writing team, then the final answer. They match
// on the example's own system prompts.
func spec001Rules() []llmfake.Rule {
	return []llmfake.Rule{
		{Name: "top decisions", SystemContains: "你是一个顶级监督者", HasJSONSchema: true, Responses: contentResponses(
			decision("dispatch", "研究团队", "收集并分析资料"), decision("dispatch", "写作团队", "撰写报告"), decision("finish", "", ""))},
		{Name: "top final", SystemContains: "你是一个顶级监督者", Responses: contentResponses("最终报告：AI 在医疗领域的应用")},
		{Name: "research decisions", SystemContains: "你是研究团队的监督者", Responses: contentResponses(
			decision("dispatch", "医疗文献搜索专家", "搜索"), decision("dispatch", "趋势分析师", "分析"), decision("finish", "", ""))},
		{Name: "writing decisions", SystemContains: "你是写作团队的监督者", Responses: contentResponses(
			decision("dispatch", "技术报告撰写专家", "撰写"), decision("finish", "", ""))},
		{Name: "search", SystemContains: "你是一个专业的信息搜索专家", Responses: contentResponses("SEARCH: 15 篇论文")},
		{Name: "analyze", SystemContains: "你是一个数据分析专家", Responses: contentResponses("ANALYSIS: 数据隐私、可解释性")},
		{Name: "write", SystemContains: "你是一个专业的技术写作专家", Responses: contentResponses("REPORT: 技术背景、应用案例、挑战分析、未来展望")},
	}
}

// TestV1EndToEnd drives spec 001's surface: create with the spec's
// example, execute with its execution_config, stream to the end, read the
// status and the results, and cancel a second execution. The example's
// openrouter agent reaches the fake through OPENROUTER_BASE_URL; its
// aws_bedrock agent is switched to openai here, as this test has no
// Bedrock fake.
func TestV1EndToEnd(t *testing.T) {
	// The spec's example unchanged: its openai and openrouter agents reach
	// the fake OpenAI-compatible server (each provider with its own key),
	// its aws_bedrock agent the fake Bedrock server.
	bedrock := bedrockfake.New(t, bedrockfake.Rule{ModelID: "anthropic.claude-3-sonnet-20240229-v1:0",
		Responses: []bedrockfake.Response{{Content: "趋势分析: 数据隐私、可解释性、监管合规"}}})
	t.Setenv("AWS_ACCESS_KEY_ID", "AKIAFAKEE2E000000000")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "fake-e2e-secret")
	t.Setenv("AWS_REGION", "us-east-1")
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
	t.Setenv("AWS_CONFIG_FILE", t.TempDir()+"/none")
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", t.TempDir()+"/none")
	e := newEnv(t, spec001Rules(), withConfig(func(c *config.Config) {
		c.OpenRouterAPIKey = "sk-or-test-e2e-secret"
		c.OpenRouterBaseURL = c.OpenAIBaseURL
		c.AWSBedrockEnabled, c.AWSBedrockEndpoint = "true", bedrock.URL()
	}))

	raw, err := os.ReadFile("../api/testdata/spec001_request.json")
	if err != nil {
		t.Fatal(err)
	}
	var body map[string]any
	if err := json.Unmarshal(raw, &body); err != nil {
		t.Fatal(err)
	}

	var created struct {
		TeamID         string   `json:"team_id"`
		ExecutionOrder []string `json:"execution_order"`
		Warnings       []string `json:"warnings"`
	}
	e.mustV1(http.MethodPost, "/hierarchical-teams", body, "TEAM_CREATED", &created)
	if strings.Join(created.ExecutionOrder, ",") != "team_a7b9c2d4e5f6,team_x8y9z1a2b3c4" || len(created.Warnings) != 5 {
		t.Errorf("created = %+v", created)
	}

	executeBody := map[string]any{"execution_config": map[string]any{"stream_events": true, "save_intermediate_results": true, "max_parallel_teams": 2}}
	var started struct {
		ExecutionID string `json:"execution_id"`
		TeamID      string `json:"team_id"`
		Status      string `json:"status"`
		StreamURL   string `json:"stream_url"`
		Task        string `json:"task"`
		// Whole seconds, null until the team has completed an execution.
		EstimatedDuration *int64 `json:"estimated_duration"`
	}
	e.mustV1(http.MethodPost, "/hierarchical-teams/"+created.TeamID+"/execute", executeBody, "EXECUTION_STARTED", &started)
	if started.TeamID != created.TeamID || started.Status != "started" || started.StreamURL != "/api/v1/executions/"+started.ExecutionID+"/stream" ||
		!strings.HasPrefix(started.Task, "请协调整个分层团队执行研究分析任务") {
		t.Errorf("started = %+v", started)
	}
	if started.EstimatedDuration != nil {
		t.Errorf("estimated_duration of a team's first execution = %d, want null", *started.EstimatedDuration)
	}
	firstID := started.ExecutionID

	// Spec 001's stream, live, event for event as the spec's example.
	req, _ := http.NewRequest(http.MethodGet, strings.TrimSuffix(e.v1URL(), "/api/v1")+started.StreamURL, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("stream: %v %v", err, resp)
	}
	msgs := e.readV1Stream(resp)
	checkV1Shape(t, started.ExecutionID, msgs)
	const research, writing = "team_a7b9c2d4e5f6", "team_x8y9z1a2b3c4"
	wantOutline := []string{
		"execution_started:started",
		"supervisor_routing:" + research,
		"supervisor_routing:agent_search_001", "agent_started:agent_search_001", "agent_completed:agent_search_001",
		"supervisor_routing:agent_analyze_001", "agent_started:agent_analyze_001", "agent_completed:agent_analyze_001",
		"team_transition:" + research + ">" + writing,
		"supervisor_routing:agent_write_001", "agent_started:agent_write_001", "agent_completed:agent_write_001",
		"execution_completed:completed",
	}
	if got := v1Outline(msgs); !slices.Equal(got, wantOutline) {
		t.Errorf("spec 001 stream:\n got %q\nwant %q", got, wantOutline)
	}
	progress, outputs := map[string]string{}, map[string]string{}
	for _, m := range msgs {
		switch m.Type {
		case "agent_progress":
			progress[m.Data["agent_id"].(string)] += m.Data["content"].(string)
		case "agent_completed":
			outputs[m.Data["agent_id"].(string)] = m.Data["result"].(string)
		case "supervisor_routing":
			if m.Data["selected_team"] != nil && (m.Data["team_id"] != created.TeamID || m.Data["supervisor_id"] == "") {
				t.Errorf("top routing = %v", m.Data)
			}
			if m.Data["selected_agent"] != nil && m.Data["team_id"] != research && m.Data["team_id"] != writing {
				t.Errorf("team routing = %v", m.Data)
			}
		}
	}
	wantResults := map[string]string{"agent_search_001": "SEARCH: 15 篇论文", "agent_analyze_001": "趋势分析: 数据隐私、可解释性、监管合规", "agent_write_001": "REPORT: 技术背景、应用案例、挑战分析、未来展望"}
	if !reflect.DeepEqual(outputs, wantResults) || progress["agent_search_001"] != wantResults["agent_search_001"] {
		t.Errorf("agent results %q, progress %q", outputs, progress)
	}
	last := msgs[len(msgs)-1].Data
	if last["result_url"] != "/api/v1/executions/"+started.ExecutionID+"/results" || last["status"] != "completed" {
		t.Errorf("execution_completed = %v", last)
	}
	// The same log as contract 002's stream, with the same sequences.
	log := e.streamAll(started.ExecutionID)
	checkLog(t, started.ExecutionID, log)
	if msgs[0].seq() != 1 || msgs[len(msgs)-1].seq() != log[len(log)-1].Event.Sequence {
		t.Errorf("spec 001 stream spans %d..%d, the log 1..%d", msgs[0].seq(), msgs[len(msgs)-1].seq(), len(log))
	}
	// Resume from the middle (after the searcher's completion).
	for k, m := range msgs {
		if m.Type == "agent_completed" {
			checkV1Resume(t, e, started.ExecutionID, msgs, k)
			break
		}
	}

	var ex struct {
		Status   string `json:"status"`
		Progress struct {
			CompletedTeams       []string `json:"completed_teams"`
			CompletionPercentage int      `json:"completion_percentage"`
		} `json:"progress"`
		EstimatedRemaining *int64 `json:"estimated_remaining_time"`
	}
	e.waitRun(started.ExecutionID, 30*time.Second) // the status is written just after the last event
	e.mustV1(http.MethodGet, "/executions/"+started.ExecutionID, nil, "EXECUTION_INFO_RETRIEVED", &ex)
	if ex.EstimatedRemaining == nil || *ex.EstimatedRemaining != 0 {
		t.Errorf("estimated_remaining_time of a completed execution = %v, want 0", ex.EstimatedRemaining)
	}
	if ex.Status != "completed" || ex.Progress.CompletionPercentage != 100 || strings.Join(ex.Progress.CompletedTeams, ",") != "team_a7b9c2d4e5f6,team_x8y9z1a2b3c4" {
		t.Errorf("execution = %+v", ex)
	}

	var r results
	e.mustV1(http.MethodGet, "/executions/"+started.ExecutionID+"/results", nil, "EXECUTION_COMPLETED", &r)
	agents := map[string]string{
		"team_a7b9c2d4e5f6/agent_search_001":  "SEARCH: 15 篇论文",
		"team_a7b9c2d4e5f6/agent_analyze_001": "趋势分析: 数据隐私、可解释性、监管合规", // from the Bedrock fake
		"team_x8y9z1a2b3c4/agent_write_001":   "REPORT: 技术背景、应用案例、挑战分析、未来展望",
	}
	for key, output := range agents {
		team, agent, _ := strings.Cut(key, "/")
		if a := r.TeamResults[team].Agents[agent]; a.Output != output {
			t.Errorf("%s output = %q", key, a.Output)
		}
	}
	if r.FinalOutput == nil || r.FinalOutput.Content != "最终报告：AI 在医疗领域的应用" || r.Metrics.APICallsMade != len(e.fake.Calls())+len(bedrock.Calls()) {
		t.Errorf("results = %+v", r)
	}
	if calls := bedrock.Calls(); len(calls) != 1 || calls[0].Region != "us-east-1" {
		t.Errorf("bedrock calls = %+v", calls)
	}
	// The openrouter agent went to the openrouter provider, the others to
	// openai (and the analyst to Bedrock).
	for _, c := range e.fake.Calls() {
		wantKey := "sk-test-e2e-secret"
		if c.RuleName == "search" {
			wantKey = "sk-or-test-e2e-secret"
		}
		if c.APIKey != wantKey {
			t.Errorf("call %d (%s) used key %q, want %q", c.Index, c.RuleName, c.APIKey, wantKey)
		}
	}

	// A second execution, cancelled while the searcher's call hangs.
	rules := spec001Rules()
	for i := range rules {
		if rules[i].Name == "search" {
			rules[i].Responses = []llmfake.Response{{Hang: true}}
		}
	}
	e.fake.SetRules(rules...)
	e.mustV1(http.MethodPost, "/hierarchical-teams/"+created.TeamID+"/execute", map[string]any{"task": "另一个任务"}, "EXECUTION_STARTED", &started)
	waitFor(t, 30*time.Second, "the searcher's call", func() bool { return len(callsByRule(e.fake.Calls(), "search")) >= 2 })
	// The estimate is the first execution's duration, the only one
	// completed; the remaining time, with no team complete yet, what is
	// left of it (or null once this one has run longer).
	first := e.getRun(firstID)
	if took := first.CompletedAt.Sub(*first.StartedAt).Seconds(); started.EstimatedDuration == nil || math.Abs(float64(*started.EstimatedDuration)-took) > 1 {
		t.Errorf("estimated_duration = %v, the first execution took %.1fs", started.EstimatedDuration, took)
	}
	e.mustV1(http.MethodGet, "/executions/"+started.ExecutionID, nil, "EXECUTION_INFO_RETRIEVED", &ex)
	if r := ex.EstimatedRemaining; ex.Status != models.RunRunning || (r != nil && (*r < 0 || started.EstimatedDuration == nil || *r > *started.EstimatedDuration)) {
		t.Errorf("running execution: status %s, estimated_remaining_time %v", ex.Status, r)
	}
	var cancelled struct {
		ExecutionID string `json:"execution_id"`
		Status      string `json:"status"`
	}
	e.mustV1(http.MethodPost, "/executions/"+started.ExecutionID+"/cancel", nil, "EXECUTION_CANCELLED", &cancelled)
	if cancelled.ExecutionID != started.ExecutionID || cancelled.Status != "cancelling" {
		t.Errorf("cancelled = %+v", cancelled)
	}
	waitFor(t, 30*time.Second, "the execution to be cancelled", func() bool {
		e.mustV1(http.MethodGet, "/executions/"+started.ExecutionID, nil, "EXECUTION_INFO_RETRIEVED", &ex)
		return ex.Status == models.RunCancelled
	})
	var partial results
	e.mustV1(http.MethodGet, "/executions/"+started.ExecutionID+"/results", nil, "RESULTS_RETRIEVED", &partial)
	if partial.ExecutionSummary.Status != models.RunCancelled || partial.FinalOutput != nil {
		t.Errorf("cancelled results = %+v", partial)
	}
	status, env := e.doV1(http.MethodPost, "/executions/"+started.ExecutionID+"/cancel", nil)
	if status != http.StatusOK || env.Code != "EXECUTION_CANCELLED" {
		t.Errorf("cancelling again: %d %s", status, env.Code)
	}
}
