package workflows_test

import (
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.temporal.io/sdk/interceptor"
	temporallog "go.temporal.io/sdk/log"
	sdkworker "go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/op-stack/executor/models"
	"github.com/op-stack/executor/telemetry"
	"github.com/op-stack/executor/worker"
	"github.com/op-stack/executor/workflows"
)

var quiet = temporallog.NewStructuredLogger(slog.New(slog.NewTextHandler(io.Discard, nil)))

func histories(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("testdata", "*", "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatal("no histories under testdata/: record them with RECORD_HISTORIES=1 go test ./e2e/ -run TestRecordReplayHistories")
	}
	return files
}

// TestReplayHistories replays every recorded history (sequential, parallel,
// failed, cancelled, retried and tool-using runs, MCP calls and MCP
// approvals (mcp-i24, mcpapproval-i24), a remote A2A worker retried once
// (a2a-i25), their team turns and
// sub-agents) against the current workflow code: a change that would break
// runs in flight fails here.
func TestReplayHistories(t *testing.T) {
	for _, f := range histories(t) {
		t.Run(strings.TrimPrefix(f, "testdata/"), func(t *testing.T) {
			r := sdkworker.NewWorkflowReplayer()
			worker.RegisterWorkflows(r)
			if err := r.ReplayWorkflowHistoryFromJSONFile(quiet, f); err != nil {
				t.Fatalf("replay: %v", err)
			}
		})
	}
}

// changedRunWorkflow is RunWorkflow with a change made without
// workflow.GetVersion: it sleeps before it starts.
func changedRunWorkflow(ctx workflow.Context, in models.RunInput) (*models.RunResult, error) {
	if err := workflow.Sleep(ctx, time.Second); err != nil {
		return nil, err
	}
	return workflows.RunWorkflow(ctx, in)
}

// TestReplayCatchesNondeterminism replays a recorded run against a changed
// workflow: the replay must fail with a nondeterminism error.
func TestReplayCatchesNondeterminism(t *testing.T) {
	r := sdkworker.NewWorkflowReplayer()
	r.RegisterWorkflowWithOptions(changedRunWorkflow, workflow.RegisterOptions{Name: models.RunWorkflowName})
	err := r.ReplayWorkflowHistoryFromJSONFile(quiet, filepath.Join("testdata", "sequential", "run.json"))
	if err == nil {
		t.Fatal("a nondeterministic change replayed cleanly")
	}
	if !strings.Contains(err.Error(), "nondeterministic") && !strings.Contains(err.Error(), "TMPRL1100") {
		t.Fatalf("want a nondeterminism error, got %v", err)
	}
}

// TestHistoriesHoldNoSecrets: the recorded histories come from runs with
// API keys configured; none may appear in them.
func TestHistoriesHoldNoSecrets(t *testing.T) {
	for _, f := range histories(t) {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, secret := range []string{"sk-test-e2e-secret", "sk-or-test-e2e-secret", "fake-e2e-secret", "whsec_"} {
			if strings.Contains(string(raw), secret) {
				t.Errorf("%s contains the key %s", f, secret)
			}
		}
	}
}

// TestReplayEmitsNoSpans replays every recorded history with the service's
// tracing interceptors (telemetry.TemporalTracing) and the GenAI workflow
// spans on a recording tracer provider, as a worker does when it picks up
// a run after another worker died: the replay exports no span (no
// RunWorkflow, StartActivity or StartChildWorkflow span, no agent turn's
// invoke_agent), since all of them were exported when the history was
// made.
func TestReplayEmitsNoSpans(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec), sdktrace.WithIDGenerator(telemetry.IDGenerator{}))
	prev := otel.GetTracerProvider()
	otel.SetTracerProvider(tp)
	t.Cleanup(func() { otel.SetTracerProvider(prev) })
	var interceptors []interceptor.WorkerInterceptor
	for _, i := range telemetry.TemporalTracing(tp) {
		interceptors = append(interceptors, i)
	}
	for _, f := range histories(t) {
		r, err := sdkworker.NewWorkflowReplayerWithOptions(sdkworker.WorkflowReplayerOptions{Interceptors: interceptors})
		if err != nil {
			t.Fatal(err)
		}
		worker.RegisterWorkflows(r)
		if err := r.ReplayWorkflowHistoryFromJSONFile(quiet, f); err != nil {
			t.Fatalf("%s: replay with tracing: %v", f, err)
		}
		for _, s := range rec.Ended() {
			t.Errorf("%s: the replay exported span %q", f, s.Name())
		}
		rec.Reset()
	}
}
