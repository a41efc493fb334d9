package activities

import (
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/op-stack/executor/llm"
	"github.com/op-stack/executor/models"
	"github.com/op-stack/executor/store"
	"github.com/op-stack/executor/store/storetest"
	"github.com/op-stack/executor/telemetry"
)

// metricValue is the value of the series of name with exactly labels (a
// histogram's sample count), or -1 when there is none.
func metricValue(t *testing.T, reg *prometheus.Registry, name string, labels map[string]string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	series:
		for _, m := range mf.GetMetric() {
			if len(m.GetLabel()) != len(labels) {
				continue
			}
			for _, l := range m.GetLabel() {
				if labels[l.GetName()] != l.GetValue() {
					continue series
				}
			}
			switch {
			case m.GetCounter() != nil:
				return m.GetCounter().GetValue()
			case m.GetHistogram() != nil:
				return float64(m.GetHistogram().GetSampleCount())
			case m.GetGauge() != nil:
				return m.GetGauge().GetValue()
			}
		}
	}
	return -1
}

// usageLLM answers "ok" with token counts, or fails with err.
type usageLLM struct{ err error }

func (f usageLLM) Stream(_ context.Context, req llm.Request, onDelta func(llm.Delta)) (*llm.Response, error) {
	if f.err != nil {
		return nil, f.err
	}
	onDelta(llm.Delta{Content: "ok"})
	return &llm.Response{Content: "ok", Model: req.Model, Provider: "openai", Usage: llm.Usage{PromptTokens: 7, CompletionTokens: 3, TotalTokens: 10}}, nil
}

// lockedBuffer collects log lines written from several goroutines.
type lockedBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) lines() []map[string]any {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(l.b.String()), "\n") {
		var m map[string]any
		if json.Unmarshal([]byte(line), &m) == nil {
			out = append(out, m)
		}
	}
	return out
}

func TestLLMCallMetricsAndLogs(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := telemetry.NewMetrics(reg)
	var logs lockedBuffer
	log := slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	in := models.RespondInput{
		RunID: "r1", Purpose: models.PurposeWorker, Task: "t",
		Agent:  models.Agent{AgentID: "w-1", Name: "writer", Model: "gpt-x"},
		Source: models.Source{AgentID: "w-1", AgentType: models.AgentTypeWorker, AgentName: "writer"},
	}
	env := newActivityEnv(&Activities{LLM: usageLLM{}, Events: &fakeSink{}, Metrics: m, Log: log})
	if _, err := env.ExecuteActivity((&Activities{}).Respond, in); err != nil {
		t.Fatal(err)
	}
	env = newActivityEnv(&Activities{LLM: usageLLM{err: &llm.Error{Provider: "openrouter", Model: "gpt-x", StatusCode: 401, Message: "bad key"}}, Metrics: m, Log: log})
	if _, err := env.ExecuteActivity((&Activities{}).Respond, in); err == nil {
		t.Fatal("the failing call succeeded")
	}

	for _, c := range []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{"executor_llm_calls_total", map[string]string{"model": "gpt-x", "provider": "openai", "outcome": "ok"}, 1},
		{"executor_llm_calls_total", map[string]string{"model": "gpt-x", "provider": "openrouter", "outcome": "error"}, 1},
		{"executor_llm_tokens_total", map[string]string{"model": "gpt-x", "kind": "prompt"}, 7},
		{"executor_llm_tokens_total", map[string]string{"model": "gpt-x", "kind": "completion"}, 3},
		{"executor_llm_call_duration_seconds", map[string]string{"model": "gpt-x"}, 2},
		{"executor_llm_time_to_first_token_seconds", map[string]string{"model": "gpt-x"}, 1},
		{"executor_events_published_total", map[string]string{"category": "llm", "action": "stream"}, 1},
	} {
		if got := metricValue(t, reg, c.name, c.labels); got != c.want {
			t.Errorf("%s%v = %v, want %v", c.name, c.labels, got, c.want)
		}
	}

	var calls []map[string]any
	for _, l := range logs.lines() {
		if l["msg"] == "LLM call" {
			calls = append(calls, l)
		}
	}
	if len(calls) != 2 {
		t.Fatalf("LLM call log lines: %v", logs.lines())
	}
	for _, l := range calls {
		if l["run_id"] != "r1" || l["agent_id"] != "w-1" || l["model"] != "gpt-x" {
			t.Errorf("log line without run_id, agent_id or model: %v", l)
		}
	}
	if calls[1]["level"] != "WARN" || !strings.Contains(calls[1]["error"].(string), "bad key") {
		t.Errorf("failed call logged as %v", calls[1])
	}
}

// TestFinishedRunsAreCountedOnce: a run's terminal status counts once,
// however often it is written (a retried activity, a late update).
func TestFinishedRunsAreCountedOnce(t *testing.T) {
	storetest.ForEachDialect(t, func(t *testing.T, st *store.Store) {
		ctx := t.Context()
		reg := prometheus.NewRegistry()
		a := &Activities{Store: st, Metrics: telemetry.NewMetrics(reg), Log: slog.New(slog.DiscardHandler)}
		if err := st.CreateRun(ctx, &store.Run{ID: "run-1", HierarchyID: "h-1", WorkflowID: "run-run-1", Task: "t"}); err != nil {
			t.Fatal(err)
		}
		for _, status := range []string{models.RunRunning, models.RunCompleted, models.RunCompleted, models.RunFailed} {
			if err := a.SetRunStatus(ctx, models.RunStatusUpdate{RunID: "run-1", Status: status}); err != nil {
				t.Fatalf("%s: %v", status, err)
			}
		}
		if got := metricValue(t, reg, "executor_runs_finished_total", map[string]string{"status": "completed"}); got != 1 {
			t.Errorf("completed runs = %v, want 1", got)
		}
		if got := metricValue(t, reg, "executor_runs_finished_total", map[string]string{"status": "failed"}); got != -1 {
			t.Errorf("failed runs = %v, want none: the run had completed", got)
		}
		if got := metricValue(t, reg, "executor_runs_finished_total", map[string]string{"status": "running"}); got != -1 {
			t.Errorf("running is not terminal, yet counted %v", got)
		}
	})
}
