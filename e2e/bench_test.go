package e2e

import (
	"context"
	"io"
	"os"
	"sort"
	"sync"
	"testing"
	"time"

	"go.temporal.io/sdk/client"
	temporallog "go.temporal.io/sdk/log"
	"go.temporal.io/sdk/testsuite"

	"github.com/op-stack/executor/config"
	"github.com/op-stack/executor/models"
)

var (
	defaultDevServerOnce sync.Once
	defaultDevServer     *testsuite.DevServer
	defaultDevServerErr  error
)

// untunedDevServer starts, once per process, a dev server with its default
// settings, to measure what the tuning in `executor dev` buys.
func untunedDevServer(b *testing.B) string {
	defaultDevServerOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		defaultDevServer, defaultDevServerErr = testsuite.StartDevServer(ctx, testsuite.DevServerOptions{
			ExistingPath:  temporalCLI,
			ClientOptions: &client.Options{Logger: temporallog.NewStructuredLogger(quietLog)},
			LogLevel:      "error",
			Stdout:        io.Discard,
			Stderr:        io.Discard,
		})
	})
	if defaultDevServerErr != nil {
		b.Fatal(defaultDevServerErr)
	}
	return defaultDevServer.FrontendHostPort()
}

// BenchmarkOrchestrationOverhead runs the reference hierarchy (11 LLM calls:
// 3 global decisions, 4 team decisions, 3 workers, the final answer)
// against a zero-latency fake model and reports the orchestration overhead
// per LLM call: (run wall time − the fake model's own time) / LLM calls,
// median over the runs (one per iteration). "devserver=default" runs on a
// dev server with its default settings, "devserver=tuned" on one started as
// `executor dev` starts it, and "server=external" on BENCH_TEMPORAL_ADDRESS
// when it is set. Each "…/stream=sse" variant also reads every run's SSE
// stream from its start, as the upstream service does, so the stream's
// queries share the worker with the run (the measurement setup);
// its wall time ends when the run's workflow completes.
//
//	make bench-go   (go test -run '^$' -bench OrchestrationOverhead -benchtime 12x ./e2e/)
func BenchmarkOrchestrationOverhead(b *testing.B) {
	type benchCase struct {
		name   string
		addr   func(*testing.B) string
		stream bool
	}
	tuned := func(*testing.B) string { return devServer.FrontendHostPort() }
	cases := []benchCase{
		{"devserver=default", untunedDevServer, false},
		{"devserver=tuned", tuned, false},
		{"devserver=tuned/stream=sse", tuned, true},
	}
	if addr := os.Getenv("BENCH_TEMPORAL_ADDRESS"); addr != "" {
		external := func(*testing.B) string { return addr }
		cases = append(cases, benchCase{"server=external", external, false}, benchCase{"server=external/stream=sse", external, true})
	}
	for _, tc := range cases {
		b.Run(tc.name, func(b *testing.B) {
			addr := tc.addr(b)
			e := newEnv(b, referenceRules(nil), withConfig(func(c *config.Config) { c.TemporalAddress = addr }))
			hid := e.createHierarchy(referenceHierarchy())
			ctx := context.Background()
			var overheads, walls []float64
			for b.Loop() {
				e.fake.SetRules(referenceRules(nil)...)
				e.fake.Reset()
				start := time.Now()
				id := e.startRun(hid, "benchmark")
				var reader sync.WaitGroup
				if tc.stream {
					reader.Add(1)
					go func() {
						defer reader.Done()
						e.readStream(e.openStream(id, 0, false), nil)
					}()
				}
				if err := e.temporal.GetWorkflow(ctx, models.RunWorkflowID(id), "").Get(ctx, nil); err != nil {
					b.Fatalf("run %s: %v", id, err)
				}
				wall := time.Since(start)
				reader.Wait()
				calls := e.fake.Calls()
				var model time.Duration
				for _, c := range calls {
					model += c.FinishedAt.Sub(c.ReceivedAt)
				}
				if len(calls) != 11 {
					b.Fatalf("run made %d LLM calls, want 11", len(calls))
				}
				overheads = append(overheads, float64(wall-model)/float64(len(calls))/float64(time.Millisecond))
				walls = append(walls, float64(wall)/float64(time.Millisecond))
			}
			b.ReportMetric(median(overheads), "ms-overhead/llm-call")
			b.ReportMetric(median(walls), "ms-wall/run")
			b.ReportMetric(0, "ns/op") // wall time per run is reported above
			b.Logf("%s: %.1f ms of orchestration per LLM call, %.0f ms per run (median of %d runs)", tc.name, median(overheads), median(walls), len(walls))
		})
	}
}

func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}
