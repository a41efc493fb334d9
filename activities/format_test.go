package activities

import (
	"context"
	"encoding/json"
	"errors"
	"github.com/op-stack/executor/templating/templatingtest"
	"strings"
	"testing"

	"go.temporal.io/sdk/temporal"

	"github.com/op-stack/executor/llm"
	"github.com/op-stack/executor/models"
	"github.com/op-stack/executor/templating"
)

// fakeFormatLLM is an in-process llm.Client (a fake, not a model) that
// answers formatting requests from a script and records them.
type fakeFormatLLM struct {
	answers  []string
	offline  bool
	err      error
	requests []llm.Request
}

func (f *fakeFormatLLM) Stream(_ context.Context, req llm.Request, _ func(llm.Delta)) (*llm.Response, error) {
	f.requests = append(f.requests, req)
	if f.err != nil {
		return nil, f.err
	}
	answer := f.answers[0]
	if len(f.answers) > 1 {
		f.answers = f.answers[1:]
	}
	return &llm.Response{Content: answer, Model: req.Model, Provider: "fake", Offline: f.offline, Usage: llm.Usage{PromptTokens: 7, CompletionTokens: 3, TotalTokens: 10}}, nil
}

func formatInput() models.FormatInput {
	return models.FormatInput{
		RunID: "run-1", HierarchyName: "research", Task: "AI in medicine", Status: models.RunCompleted,
		FinalAnswer: "FINAL: AI helps radiology.",
		Teams: []models.TeamOutput{{Turn: 1, TeamID: "team_a", TeamName: "研究团队", Status: models.TeamCompleted, Workers: []models.WorkerOutput{
			{AgentID: "agent_search_001", Name: "医疗文献搜索专家", Instruction: "search", Output: "found 15 papers " + strings.Repeat("x", 20000)},
			{AgentID: "agent_analyze_001", Name: "趋势分析师", Output: "trends: imaging grows"},
		}}},
		Supervisor:      models.Agent{AgentID: "gs-1", Name: "top", Model: "gpt-4o", Provider: "openai"},
		Template:        json.RawMessage(templatingtest.SpecTemplate),
		ExtractionRules: json.RawMessage(`{"executive_summary": "不超过200字"}`),
		Options:         models.RunOptions{DefaultModel: "default-model", ContextCharLimit: 1000},
	}
}

// TestFormatResultsRepairs: an invalid answer, then a wrong shape, then a
// valid one; the problems go back to the model and the result is the
// valid answer in template order.
func TestFormatResultsRepairs(t *testing.T) {
	wrongShape := strings.Replace(templatingtest.SpecAnswer(t), `"report_title": "AI医疗应用分析报告"`, `"report_title": "Another title"`, 1)
	fake := &fakeFormatLLM{answers: []string{"Sure! Here is the report: not json", wrongShape, "```json\n" + templatingtest.SpecAnswer(t) + "\n```"}}
	acts := &Activities{LLM: fake}
	res, err := acts.FormatResults(context.Background(), formatInput())
	if err != nil {
		t.Fatal(err)
	}
	if res.Repairs != 2 || res.Model != "gpt-4o" || res.Usage.TotalTokens != 30 || res.Offline {
		t.Errorf("result = %+v", res)
	}
	var got map[string]any
	if err := json.Unmarshal(res.Output, &got); err != nil || got["report_title"] != "AI医疗应用分析报告" {
		t.Fatalf("output = %s (%v)", res.Output, err)
	}
	if !strings.HasPrefix(string(res.Output), `{"report_title":`) {
		t.Errorf("output not in template order: %s", res.Output)
	}
	if len(fake.requests) != 3 {
		t.Fatalf("%d requests, want 3", len(fake.requests))
	}
	first := fake.requests[0]
	if first.Model != "gpt-4o" || first.Provider != "openai" || first.JSONSchema == nil || !first.JSONSchema.Strict {
		t.Errorf("request = model %q provider %q schema %+v", first.Model, first.Provider, first.JSONSchema)
	}
	prompt := first.Messages[1].Content
	for _, want := range []string{templating.PromptMarker, "AI in medicine", "FINAL: AI helps radiology.", "医疗文献搜索专家", "agent_search_001", "trends: imaging grows", `"report_title": "AI医疗应用分析报告"`, "不超过200字", "…[truncated]"} {
		if !strings.Contains(prompt, want) {
			t.Errorf("prompt lacks %q", want)
		}
	}
	if len(prompt) > 12000 {
		t.Errorf("prompt is %d bytes: the long output was not truncated", len(prompt))
	}
	// Each repair carries the previous answer and its problems.
	second := fake.requests[1].Messages
	if n := len(second); n != 4 || second[2].Role != llm.RoleAssistant || !strings.Contains(second[3].Content, "contains no JSON object") || !strings.Contains(second[3].Content, templating.PromptMarker) {
		t.Errorf("first repair = %+v", second[2:])
	}
	third := fake.requests[2].Messages
	if !strings.Contains(third[len(third)-1].Content, `report_title: must be exactly "AI医疗应用分析报告"`) {
		t.Errorf("second repair = %q", third[len(third)-1].Content)
	}
}

func TestFormatResultsGivesUp(t *testing.T) {
	fake := &fakeFormatLLM{answers: []string{`{"report_title": "AI医疗应用分析报告"}`}}
	acts := &Activities{LLM: fake}
	_, err := acts.FormatResults(context.Background(), formatInput())
	var appErr *temporal.ApplicationError
	if !errors.As(err, &appErr) || appErr.Type() != models.ErrFormatMismatch || !appErr.NonRetryable() {
		t.Fatalf("err = %v", err)
	}
	if len(fake.requests) != MaxFormatRepairs+1 {
		t.Errorf("%d requests, want %d", len(fake.requests), MaxFormatRepairs+1)
	}
	if msg := appErr.Message(); !strings.Contains(msg, "after 3 repairs") || !strings.Contains(msg, `missing keys "executive_summary"`) {
		t.Errorf("message = %q", msg)
	}
}

func TestFormatResultsDefaultsAndFailures(t *testing.T) {
	in := formatInput()
	in.Supervisor = models.Agent{}
	fake := &fakeFormatLLM{answers: []string{templatingtest.SpecAnswer(t)}}
	res, err := (&Activities{LLM: fake}).FormatResults(context.Background(), in)
	if err != nil || res.Model != "default-model" || fake.requests[0].Model != "default-model" {
		t.Fatalf("default model: %+v, %v", res, err)
	}

	// The offline model fills placeholders with labelled stand-in text.
	res, err = (&Activities{LLM: &fakeFormatLLM{answers: []string{`{"action":"finish"}`}, offline: true}}).FormatResults(context.Background(), formatInput())
	if err != nil || !res.Offline || !strings.Contains(string(res.Output), "[offline model]") {
		t.Fatalf("offline: %+v, %v", res, err)
	}

	// A rejected request is non-retryable and names the model; a refused
	// key says so with its own type (PROVIDER_KEY_REJECTED at the API).
	var appErr *temporal.ApplicationError
	for status, typ := range map[int]string{400: models.ErrLLMRejected, 401: models.ErrLLMKeyRejected} {
		_, err = (&Activities{LLM: &fakeFormatLLM{err: &llm.Error{Provider: "openai", Model: "gpt-4o", StatusCode: status, Message: "refused"}}}).FormatResults(context.Background(), formatInput())
		if !errors.As(err, &appErr) || appErr.Type() != typ || !appErr.NonRetryable() || !strings.Contains(appErr.Message(), "gpt-4o") {
			t.Fatalf("rejected %d: %v", status, err)
		}
	}

	in = formatInput()
	in.Template = json.RawMessage(`[1]`)
	_, err = (&Activities{LLM: &fakeFormatLLM{answers: []string{"{}"}}}).FormatResults(context.Background(), in)
	if !errors.As(err, &appErr) || appErr.Type() != models.ErrFormatInvalidTemplate {
		t.Fatalf("invalid template: %v", err)
	}
}
