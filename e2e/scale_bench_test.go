package e2e

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/op-stack/executor/config"
	"github.com/op-stack/executor/llm/llmfake"
	"github.com/op-stack/executor/models"
)

// forEachServer runs a benchmark's cases on the tests' dev server (tuned as
// `executor dev` tunes its own) and, when BENCH_TEMPORAL_ADDRESS is set
// (host:port, namespace "default"), once more on that server as the
// sub-benchmark "server=external".
func forEachServer(b *testing.B, cases func(b *testing.B, addr string)) {
	cases(b, devServer.FrontendHostPort())
	if addr := os.Getenv("BENCH_TEMPORAL_ADDRESS"); addr != "" {
		b.Run("server=external", func(b *testing.B) { cases(b, addr) })
	}
}

// onTemporal points an env at the Temporal server addr.
func onTemporal(addr string) envOption {
	return withConfig(func(c *config.Config) {
		c.TemporalAddress = addr
		// The benchmarks measure the orchestrator, not admission control:
		// 100 runs started at once would pass the per-tenant limits.
		c.MaxConcurrentRunsPerTenant = 0
		c.RateLimitRPS = 0
	})
}

// referenceRulesByState script the reference hierarchy's run like
// referenceRules, but each decision follows from what its prompt says is
// already done rather than from a sequence, so that concurrent runs on one
// fake each take the reference path (11 LLM calls). answer shapes every
// supervisor answer (decisions and the final answer); workers maps a
// worker's marker to its answer ("output of <marker>" otherwise).
func referenceRulesByState(answer func(content string) llmfake.Response, workers map[string]llmfake.Response) []llmfake.Rule {
	rule := func(name, system, user string, json bool, content string) llmfake.Rule {
		return llmfake.Rule{Name: name, SystemContains: system, UserContains: user, HasJSONSchema: json, Responses: []llmfake.Response{answer(content)}}
	}
	rules := []llmfake.Rule{
		rule("global: finish", "GS-PROMPT", "Already done: research, writing\n", true, decision("finish", "", "")),
		rule("global: writing", "GS-PROMPT", "Already done: research\n", true, decision("dispatch", "writing", "write the report")),
		rule("global: research", "GS-PROMPT", "", true, decision("dispatch", "research", "collect sources")),
		rule("final answer", "GS-PROMPT", "", false, "FINAL ANSWER: tunnelling explained."),
		rule("research: finish", "TS-RESEARCH", "Already done: searcher, analyst\n", false, decision("finish", "", "")),
		rule("research: analyst", "TS-RESEARCH", "Already done: searcher\n", false, decision("dispatch", "analyst", "analyse them")),
		rule("research: searcher", "TS-RESEARCH", "", false, decision("dispatch", "searcher", "find papers")),
		rule("writing: finish", "TS-WRITING", "Already done: writer\n", false, decision("finish", "", "")),
		rule("writing: writer", "TS-WRITING", "", false, decision("dispatch", "writer", "write it")),
	}
	for _, marker := range []string{"W-SEARCHER", "W-ANALYST", "W-WRITER"} {
		resp, ok := workers[marker]
		if !ok {
			resp = answer("output of " + marker)
		}
		rules = append(rules, llmfake.Rule{Name: marker, SystemContains: marker, Responses: []llmfake.Response{resp}})
	}
	return rules
}

// The model of BenchmarkConcurrentRuns: every answer starts after a
// time to first token and streams a fixed number of tokens.
const (
	scaleTTFT       = 300 * time.Millisecond
	scaleTokens     = 40
	scaleTokenDelay = 25 * time.Millisecond
)

// scaleAnswer is content as scaleTokens chunks (one chunk, one token):
// padded with spaces (valid after a JSON decision) to a multiple of
// scaleTokens characters.
func scaleAnswer(content string) llmfake.Response {
	if r := len(content) % scaleTokens; r != 0 {
		content += strings.Repeat(" ", scaleTokens-r)
	}
	return llmfake.Response{Content: content, ChunkSize: len(content) / scaleTokens, FirstTokenDelay: scaleTTFT, TokenDelay: scaleTokenDelay}
}

// scaleRules apply the scale model to every LLM call of the reference
// hierarchy: the global supervisor's 3 decisions and final answer, the team
// supervisors' 4 decisions and the 3 workers' answers (40 four-character
// tokens each, which measureRun times).
func scaleRules() []llmfake.Rule {
	worker := llmfake.Response{Content: strings.Repeat("tok ", scaleTokens), ChunkSize: 4, FirstTokenDelay: scaleTTFT, TokenDelay: scaleTokenDelay}
	return referenceRulesByState(scaleAnswer, map[string]llmfake.Response{"W-SEARCHER": worker, "W-ANALYST": worker, "W-WRITER": worker})
}

var (
	singleRunWallMu sync.Mutex
	singleRunWall   = map[string]float64{} // ms, by Temporal address
)

// BenchmarkConcurrentRuns starts N runs of the reference hierarchy at once
// (N = 1, 20, 50, 100), each read by one SSE client, against a model whose
// every call — the supervisors' decisions and final answer included —
// waits 300 ms for its first token and then streams 40 tokens 25 ms apart
// (about 1.35 s per call, 11 calls and about 15 s of model time per run).
// An iteration is one round of N concurrent runs (for N = 1, three runs one
// after another).
//
// ms-wall/run is the median over every run of the time from runs/start to
// the end of its stream. efficiency is the single run's wall time (the
// median of runs=1, measured first when runs=1 was not run) over that
// median: 1 when N concurrent runs each take as long as one alone. runs/s
// is N over the time from the round's first start to its last stream's end
// (median over rounds). ms-token-p50/p99 and ms-first-token-p50 are the
// workers' token latency: the fake writing a chunk → the run's SSE client
// reading it. llm-calls/run is 11 when nothing was retried.
//
//	go test -run '^$' -bench ConcurrentRuns -benchtime 1x ./e2e/
func BenchmarkConcurrentRuns(b *testing.B) {
	forEachServer(b, func(b *testing.B, addr string) {
		for _, n := range []int{1, 20, 50, 100} {
			b.Run(fmt.Sprintf("runs=%d", n), func(b *testing.B) {
				e := newEnv(b, scaleRules(), onTemporal(addr))
				hid := e.createHierarchy(referenceHierarchy())
				// round runs n concurrent runs and returns their walls (ms)
				// and the round's throughput.
				var lat latencies
				var ids []string
				failed, calls, runs := 0, 0, 0
				round := func(name string, lat *latencies) (walls []float64, perSecond float64) {
					e.fake.Reset()
					start := time.Now()
					results := make([]streamedRun, n)
					var wg sync.WaitGroup
					for r := 0; r < n; r++ {
						wg.Add(1)
						go func() {
							defer wg.Done()
							results[r] = e.measureRun(hid, fmt.Sprintf("%s run %d", name, r), lat)
						}()
					}
					wg.Wait()
					elapsed := time.Since(start)
					for _, r := range results {
						ids = append(ids, r.id)
						walls = append(walls, ms(r.wall))
						if r.last != "lifecycle.completed" {
							failed++
						}
					}
					calls += len(e.fake.Calls())
					runs += n
					return walls, float64(n) / elapsed.Seconds()
				}

				singleRunWallMu.Lock()
				single, ok := singleRunWall[addr]
				singleRunWallMu.Unlock()
				if floor := os.Getenv("BENCH_SINGLE_RUN_MS"); !ok && floor != "" {
					// The single run's wall given (e.g. the model-time floor
					// of a run, 14,300 ms: 11 calls of 300 ms + 40 × 25 ms),
					// instead of measured: on a loaded machine three single
					// runs take minutes and vary as much as the rest.
					if v, err := strconv.ParseFloat(floor, 64); err == nil {
						single, ok = v, true
					}
				}
				if !ok && n > 1 {
					var walls []float64
					for i := 0; i < 3; i++ {
						w, _ := round(fmt.Sprintf("single %d", i), &latencies{})
						walls = append(walls, w...)
					}
					single = median(walls)
					failed, calls, runs = 0, 0, 0
				}

				var walls, throughput []float64
				ids = nil // the measured rounds' runs only
				cpu := startCPUMeter()
				for i := 0; b.Loop(); i++ {
					repeat := 1
					if n == 1 {
						repeat = 3
					}
					for j := 0; j < repeat; j++ {
						w, tp := round(fmt.Sprintf("scale round %d.%d", i, j), &lat)
						walls = append(walls, w...)
						throughput = append(throughput, tp)
					}
				}
				cpuServer, cpuSelf := cpu.seconds()
				perCall := func(v float64) float64 { return v / float64(max(calls, 1)) }
				history := e.historyEvents(ids)
				wall := median(walls)
				if n == 1 {
					single = wall
					singleRunWallMu.Lock()
					singleRunWall[addr] = wall
					singleRunWallMu.Unlock()
				}
				b.ReportMetric(wall, "ms-wall/run")
				b.ReportMetric(single/wall, "efficiency")
				b.ReportMetric(median(throughput), "runs/s")
				b.ReportMetric(percentile(lat.token, 0.5), "ms-token-p50")
				b.ReportMetric(percentile(lat.token, 0.99), "ms-token-p99")
				b.ReportMetric(percentile(lat.firstToken, 0.5), "ms-first-token-p50")
				b.ReportMetric(float64(calls)/float64(runs), "llm-calls/run")
				b.ReportMetric(float64(failed), "failed-runs")
				b.ReportMetric(perCall(cpuServer*1000), "cpu-ms-temporal/call")
				b.ReportMetric(perCall(cpuSelf*1000), "cpu-ms-process/call")
				b.ReportMetric(perCall(float64(history)), "history-events/call")
				b.ReportMetric(0, "ns/op")
				b.Logf("CPU per LLM call: Temporal dev server %.1f ms, this process (API, worker, fake model, SSE clients) %.1f ms; %.1f history events per call (%d calls)",
					perCall(cpuServer*1000), perCall(cpuSelf*1000), perCall(float64(history)), calls)
				b.Logf("%d concurrent runs: %.0f ms per run (one alone: %.0f ms), efficiency %.2f, %.2f runs/s; tokens p50 %.0f ms, p99 %.0f ms, first token p50 %.0f ms; %.1f LLM calls per run, %d failed runs",
					n, wall, single, single/wall, median(throughput), percentile(lat.token, 0.5), percentile(lat.token, 0.99), percentile(lat.firstToken, 0.5), float64(calls)/float64(runs), failed)
			})
		}
	})
}

// longRunTokenDelay paces BenchmarkLongRun's model: 1,000 tokens a second,
// faster than hosted models, to keep the benchmark short while every
// answer still streams (and flushes) over time.
const longRunTokenDelay = time.Millisecond

// BenchmarkLongRun runs one run of 500 LLM calls (see longRunRules: 50 team
// turns of a team of 4 workers; 199 worker answers, 300 decisions, one final
// answer) with 200-token and with 1,000-token worker and final answers,
// streamed at longRunTokenDelay per token, on the default configuration
// (CONTINUE_AS_NEW_AFTER included). It reports the run's wall time and the
// model's time (summed over calls, which are sequential), the executions of
// the run's workflow beyond the first (continue-as-new), the history bytes
// of every execution and team turn (proto.Size of every event), the bytes
// per LLM call of the first execution and of the last that continued as new
// (the final one when fewer than two did) and their ratio, and whether the
// run completed (1) or not (0; it is not a benchmark failure).
//
//	go test -run '^$' -bench LongRun -benchtime 1x -timeout 60m ./e2e/
func BenchmarkLongRun(b *testing.B) {
	forEachServer(b, func(b *testing.B, addr string) {
		for _, tokens := range []int{200, 1000} {
			b.Run(fmt.Sprintf("answer=%d-tokens", tokens), func(b *testing.B) {
				e := newEnv(b, longRunRules(tokens, longRunTokenDelay), onTemporal(addr))
				hid := e.createHierarchy(longRunHierarchy())
				var wall, model, calls, executions, totalMB, first, last, growth, completed []float64
				for i := 0; b.Loop(); i++ {
					e.fake.SetRules(longRunRules(tokens, longRunTokenDelay)...)
					e.fake.Reset()
					r := e.runLong(hid, fmt.Sprintf("long run %d", i), 40*time.Minute, 3*time.Minute)
					b.Log(r.executionsLine())
					if r.err != nil {
						b.Log(r.summary())
					}
					_, bytes, _, _ := r.totals()
					ratio, f, l := r.growth()
					done := 0.0
					if r.err == nil {
						done = 1
					}
					wall = append(wall, r.wall.Seconds())
					model = append(model, r.model.Seconds())
					calls = append(calls, float64(len(r.calls)))
					executions = append(executions, float64(len(r.executions)))
					totalMB = append(totalMB, mb(bytes))
					first = append(first, r.bytesPerCall(f)/1000)
					last = append(last, r.bytesPerCall(l)/1000)
					growth = append(growth, ratio)
					completed = append(completed, done)
				}
				b.ReportMetric(median(wall), "s-wall")
				b.ReportMetric(median(model), "s-model")
				b.ReportMetric(median(calls), "llm-calls")
				b.ReportMetric(median(executions)-1, "continue-as-new")
				b.ReportMetric(median(totalMB), "MB-history")
				b.ReportMetric(median(first), "kB-history/call-first")
				b.ReportMetric(median(last), "kB-history/call-last")
				b.ReportMetric(median(growth), "history-growth")
				b.ReportMetric(median(completed), "completed")
				b.ReportMetric(0, "ns/op")
				b.Logf("%.0f LLM calls x %d-token answers: wall %.1f s, model %.1f s; %.0f continue-as-new; history %.1f MB, %.1f kB per call first, %.1f kB last (x%.2f); completed %v",
					median(calls), tokens, median(wall), median(model), median(executions)-1, median(totalMB), median(first), median(last), median(growth), median(completed) == 1)
			})
		}
	})
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// cpuMeter measures the CPU time (user and system) of this process and of
// the tests' Temporal dev server since it started.
type cpuMeter struct {
	server, self float64
	pid          int
}

func startCPUMeter() cpuMeter {
	m := cpuMeter{pid: benchDevServerPID()}
	m.server, m.self = procCPU(m.pid), procCPU(os.Getpid())
	return m
}

// seconds returns the CPU seconds of the dev server and of this process
// since startCPUMeter.
func (m cpuMeter) seconds() (server, self float64) {
	return procCPU(m.pid) - m.server, procCPU(os.Getpid()) - m.self
}

// procCPU is a process's user and system CPU seconds (0 when unknown),
// from /proc/PID/stat, in clock ticks of 1/100 s.
func procCPU(pid int) float64 {
	if pid == 0 {
		return 0
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	f := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:]))
	if len(f) < 13 {
		return 0
	}
	utime, _ := strconv.ParseFloat(f[11], 64)
	stime, _ := strconv.ParseFloat(f[12], 64)
	return (utime + stime) / 100
}

// historyEvents is the length of the workflow histories of runs ids (their
// current executions).
func (e *testEnv) historyEvents(ids []string) int64 {
	var total int64
	for _, id := range ids {
		d, err := e.temporal.DescribeWorkflowExecution(context.Background(), models.RunWorkflowID(id), "")
		if err != nil {
			e.t.Logf("describe %s: %v", id, err)
			continue
		}
		total += d.GetWorkflowExecutionInfo().GetHistoryLength()
	}
	return total
}

// benchDevServerPID is devServerPID for a benchmark: 0 when not found.
func benchDevServerPID() int {
	var t testing.T
	pid := 0
	done := make(chan struct{})
	go func() { // devServerPID skips (Goexit) when it finds none
		defer close(done)
		pid = devServerPID(&t)
	}()
	<-done
	return pid
}
