package e2e

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/op-stack/executor/llm/llmfake"
	"github.com/op-stack/executor/models"
)

// streamingRules make every worker stream 60 four-character tokens, one
// every 20 ms (about 1.2 s per answer, like a fast hosted model); the
// supervisors answer at once. Decisions follow each prompt, so that
// concurrent runs each take the reference path.
func streamingRules() []llmfake.Rule {
	slow := llmfake.Response{Content: strings.Repeat("tok ", 60), ChunkSize: 4, TokenDelay: 20 * time.Millisecond}
	instant := func(content string) llmfake.Response { return llmfake.Response{Content: content} }
	return referenceRulesByState(instant, map[string]llmfake.Response{"W-SEARCHER": slow, "W-ANALYST": slow, "W-WRITER": slow})
}

// latencies collects token-to-client latencies of one run: for each worker
// answer, when the fake server wrote each content chunk and when the SSE
// client read the event that carried it.
type latencies struct {
	mu         sync.Mutex
	token      []float64 // ms, every chunk
	firstToken []float64 // ms, the first chunk of each answer
}

// streamedRun is a run measureRun read to its end.
type streamedRun struct {
	id   string
	wall time.Duration // from runs/start to the end of its stream
	last string        // the stream's last event type, lifecycle.completed when it completed
}

// measureRun starts a run, reads its stream and matches every worker
// chunk the fake wrote to the SSE event that delivered it.
func (e *testEnv) measureRun(hid, task string, out *latencies) streamedRun {
	start := time.Now()
	id := e.startRun(hid, task)
	type received struct {
		at     time.Time
		length int // the agent's text length after this event
	}
	got := map[string][]received{} // by worker agent_id
	length := map[string]int{}
	resp := e.openStream(id, 0, true)
	var last string
	e.readStream(resp, func(m sseMessage) bool {
		last = m.Type
		if m.Type == "llm.stream" && m.Event.Source.AgentType == models.AgentTypeWorker {
			agent := m.Event.Source.AgentID
			length[agent] += len(m.Event.Data["content"].(string))
			got[agent] = append(got[agent], received{time.Now(), length[agent]})
		}
		return false
	})
	run := streamedRun{id: id, wall: time.Since(start), last: last}
	markers := map[string]string{"W-SEARCHER": "w-searcher", "W-ANALYST": "w-analyst", "W-WRITER": "w-writer"}
	out.mu.Lock()
	defer out.mu.Unlock()
	for marker, agent := range markers {
		for _, c := range callsMatching(e.fake.Calls(), marker) {
			if !strings.Contains(lastUser(c), task+"\n") {
				continue // another run's call
			}
			// Chunk 0 carries only the role; content chunk j ends at 4(j+1).
			for j := 1; j < len(c.ChunkTimes); j++ {
				end := 4 * j
				for _, r := range got[agent] {
					if r.length >= end {
						ms := float64(r.at.Sub(c.ChunkTimes[j])) / float64(time.Millisecond)
						out.token = append(out.token, ms)
						if j == 1 {
							out.firstToken = append(out.firstToken, ms)
						}
						break
					}
				}
			}
		}
	}
	return run
}

func percentile(xs []float64, p float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	i := int(p * float64(len(s)-1))
	return s[i]
}

// BenchmarkStreamLatency measures token-to-client latency (the fake model
// writing a chunk → an SSE client reading it) and first-token latency, with
// 1 and with 20 runs streaming at once (streamingRules: 60 tokens 20 ms
// apart per worker). Each iteration is one round of concurrent runs.
func BenchmarkStreamLatency(b *testing.B) {
	forEachServer(b, func(b *testing.B, addr string) {
		for _, concurrent := range []int{1, 20} {
			b.Run(fmt.Sprintf("runs=%d", concurrent), func(b *testing.B) {
				e := newEnv(b, streamingRules(), onTemporal(addr))
				hid := e.createHierarchy(referenceHierarchy())
				var lat latencies
				stats0 := e.api.StreamStats()
				for i := 0; b.Loop(); i++ {
					e.fake.Reset()
					var wg sync.WaitGroup
					for r := 0; r < concurrent; r++ {
						wg.Add(1)
						go func() {
							defer wg.Done()
							e.measureRun(hid, fmt.Sprintf("bench round %d run %d", i, r), &lat)
						}()
					}
					wg.Wait()
				}
				b.ReportMetric(percentile(lat.token, 0.5), "ms-token-p50")
				b.ReportMetric(percentile(lat.token, 0.99), "ms-token-p99")
				b.ReportMetric(percentile(lat.firstToken, 0.5), "ms-first-token-p50")
				b.ReportMetric(float64(len(lat.token)), "tokens")
				stats := e.api.StreamStats()
				b.ReportMetric(float64(stats.Queries-stats0.Queries)/float64(b.N*concurrent), "queries/run")
				b.ReportMetric(float64(stats.Pushes-stats0.Pushes)/float64(b.N*concurrent), "pushes/run")
				b.ReportMetric(0, "ns/op")
				b.Logf("%d concurrent runs: token latency p50 %.1f ms, p99 %.1f ms; first token p50 %.1f ms (%d tokens)",
					concurrent, percentile(lat.token, 0.5), percentile(lat.token, 0.99), percentile(lat.firstToken, 0.5), len(lat.token))
			})
		}
	})
}

// BenchmarkHistoryPerToken reports Temporal history events (the run's
// workflow and its team turns) per 1,000 streamed tokens, for answers
// streamed slowly (flushes every 200 ms) and at once.
func BenchmarkHistoryPerToken(b *testing.B) {
	cases := []struct {
		name  string
		rules func() []llmfake.Rule
	}{
		{"stream=20ms-per-token", streamingRules},
		{"stream=instant", func() []llmfake.Rule {
			fast := llmfake.Response{Content: strings.Repeat("tok ", 500)}
			return referenceRules(map[string][]llmfake.Response{"W-SEARCHER": {fast}, "W-ANALYST": {fast}, "W-WRITER": {fast}})
		}},
	}
	forEachServer(b, func(b *testing.B, addr string) {
		for _, tc := range cases {
			b.Run(tc.name, func(b *testing.B) {
				e := newEnv(b, tc.rules(), onTemporal(addr))
				hid := e.createHierarchy(referenceHierarchy())
				ctx := context.Background()
				var events, tokens int64
				for b.Loop() {
					e.fake.SetRules(tc.rules()...)
					e.fake.Reset()
					id := e.startRun(hid, "history")
					if err := e.temporal.GetWorkflow(ctx, models.RunWorkflowID(id), "").Get(ctx, nil); err != nil {
						b.Fatal(err)
					}
					resp, err := e.temporal.ListWorkflow(ctx, listRequest(fmt.Sprintf("WorkflowId STARTS_WITH 'run-%s'", id)))
					if err != nil {
						b.Fatal(err)
					}
					for _, info := range resp.Executions {
						events += info.GetHistoryLength()
					}
					for _, c := range e.fake.Calls() {
						tokens += int64(len(c.ChunkTimes)) // one chunk ≈ one token here
					}
				}
				perK := float64(events) * 1000 / float64(tokens)
				b.ReportMetric(perK, "history-events/1k-tokens")
				b.ReportMetric(0, "ns/op")
				b.Logf("%s: %.1f history events per 1,000 streamed tokens (%d events, %d tokens)", tc.name, perK, events, tokens)
			})
		}
	})
}

var (
	oneSubscriberQPSMu sync.Mutex
	oneSubscriberQPS   = map[string]float64{} // by Temporal address
)

// BenchmarkQueriesPerSubscriber reports the workflow queries per second the
// API makes for one live run (streamingRules) with 1 and with 1,000 SSE
// subscribers reading it from the start: one poller serves them all. With
// 1,000 it also reports x-queries-vs-1, its queries per second over those
// with 1 subscriber (when subscribers=1 ran first).
func BenchmarkQueriesPerSubscriber(b *testing.B) {
	forEachServer(b, func(b *testing.B, addr string) {
		for _, subscribers := range []int{1, 1000} {
			b.Run(fmt.Sprintf("subscribers=%d", subscribers), func(b *testing.B) {
				e := newEnv(b, streamingRules(), onTemporal(addr))
				hid := e.createHierarchy(referenceHierarchy())
				var qps []float64
				for b.Loop() {
					e.fake.Reset()
					id := e.startRun(hid, "subscribers")
					before := e.api.StreamStats().Queries
					start := time.Now()
					var wg sync.WaitGroup
					for s := 0; s < subscribers; s++ {
						wg.Add(1)
						go func() {
							defer wg.Done()
							e.readStream(e.openStream(id, 0, false), nil)
						}()
					}
					wg.Wait()
					qps = append(qps, float64(e.api.StreamStats().Queries-before)/time.Since(start).Seconds())
				}
				q := median(qps)
				b.ReportMetric(q, "queries/s")
				summary := fmt.Sprintf("%d subscribers on one run: %.1f workflow queries/s", subscribers, q)
				oneSubscriberQPSMu.Lock()
				if subscribers == 1 {
					oneSubscriberQPS[addr] = q
				} else if one, ok := oneSubscriberQPS[addr]; ok && one > 0 {
					b.ReportMetric(q/one, "x-queries-vs-1")
					summary += fmt.Sprintf(", x%.2f the queries with 1 subscriber", q/one)
				}
				oneSubscriberQPSMu.Unlock()
				b.ReportMetric(0, "ns/op")
				b.Log(summary)
			})
		}
	})
}
