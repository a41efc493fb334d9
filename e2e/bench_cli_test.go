package e2e

import (
	"encoding/json"
	"fmt"
	"net"
	"os"
	"strconv"
	"testing"

	"github.com/op-stack/executor/config"
	"github.com/op-stack/executor/loadgen"
)

// freeLocalPort is a port on 127.0.0.1 free a moment ago.
func freeLocalPort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// TestBenchCommand runs `executor bench` (the built binary, as a user
// would) against a service whose `compatible` provider is the bench's own
// fake model: 4 runs of the reference shape, 2 at a time, streaming 3
// tokens each answer. It checks the report's figures are sane and that
// every stream was checked against its stored log.
func TestBenchCommand(t *testing.T) {
	port := freeLocalPort(t)
	modelURL := fmt.Sprintf("http://127.0.0.1:%d/v1", port)
	e := newEnv(t, nil, withConfig(func(c *config.Config) {
		c.CompatibleBaseURL = modelURL
		c.RateLimitRPS = 0
	}))
	r := e.runCLI("", "bench", "--runs", "4", "--concurrency", "2", "--warmup", "1",
		"--tokens", "3", "--token-interval", "5ms", "--model-delay", "10ms",
		"--model-listen", "127.0.0.1:"+strconv.Itoa(port),
		"--pids", strconv.Itoa(os.Getpid()), "-o", "json")
	if r.code != 0 {
		t.Fatalf("executor bench exited %d:\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	var rep loadgen.Report
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
		t.Fatalf("report: %v\n%s", err, r.stdout)
	}
	if !rep.OK || rep.Completed != 4 || rep.Failed != 0 || len(rep.Problems) != 0 {
		t.Fatalf("report: ok %v, %d completed, %d failed, problems %q", rep.OK, rep.Completed, rep.Failed, rep.Problems)
	}
	// The warm-up run's stream is checked too.
	if rep.Checked != 5 || rep.CheckFailed != 0 {
		t.Errorf("streams checked %d (want 5), failed %d", rep.Checked, rep.CheckFailed)
	}
	if rep.LLMCalls != 44 || rep.CallsPerRun != 11 || rep.ExpectedCallsPerRun != 11 {
		t.Errorf("LLM calls %d, %.1f per run (the shape makes %d), want 44 and 11", rep.LLMCalls, rep.CallsPerRun, rep.ExpectedCallsPerRun)
	}
	// Every call's 3 tokens reached the client, and each call's first.
	if rep.TokenLatency.N != 44*3 || rep.FirstToken.N != 44 {
		t.Errorf("token latencies %d (want 132), first tokens %d (want 44)", rep.TokenLatency.N, rep.FirstToken.N)
	}
	if rep.TokensExpected != 132 || rep.Tokens != 132 || rep.TokensDuplicated != 0 {
		t.Errorf("tokens: the model sent %d, the streams carried %d (%d twice), want 132", rep.TokensExpected, rep.Tokens, rep.TokensDuplicated)
	}
	if rep.TokenLatency.Min < 0 || rep.TokenLatency.P50 <= 0 || rep.TokenLatency.Max < rep.TokenLatency.P99 || rep.TokenLatency.Max > 60_000 {
		t.Errorf("token latency %+v", rep.TokenLatency)
	}
	// Each call takes at least 10 ms + 2 × 5 ms of model time.
	if rep.ModelTime.N != 4 || rep.ModelTime.Min < 11*20 {
		t.Errorf("model time %+v, want ≥ 220 ms per run", rep.ModelTime)
	}
	if rep.RunWall.Min < rep.ModelTime.Min || rep.Overhead.P50 <= 0 || rep.Overhead.Max > 10_000 {
		t.Errorf("run wall %+v, overhead %+v", rep.RunWall, rep.Overhead)
	}
	if rep.Efficiency.N != 4 || rep.Efficiency.Min <= 0 || rep.Efficiency.Max >= 1 {
		t.Errorf("efficiency %+v, want within (0, 1)", rep.Efficiency)
	}
	if rep.WallS <= 0 || rep.RunsPerSecond <= 0 || rep.RunsPerSecond > 1000 {
		t.Errorf("wall %.2f s, %.2f runs/s", rep.WallS, rep.RunsPerSecond)
	}
	// The service runs in this test's process: its CPU was measured.
	if !rep.CPUMeasured || rep.CPUSeconds <= 0 || rep.CPUPerCallMS <= 0 || len(rep.Processes) == 0 || rep.Processes[0].PID == 0 {
		t.Errorf("CPU: measured %v, %.2f s, %.1f ms per call, processes %+v", rep.CPUMeasured, rep.CPUSeconds, rep.CPUPerCallMS, rep.Processes)
	}
	if len(rep.RunResults) != 4 {
		t.Fatalf("run results: %d", len(rep.RunResults))
	}
	for _, run := range rep.RunResults {
		if run.Status != "completed" || run.Events == 0 || run.CheckError != "" || run.Calls != 11 {
			t.Errorf("run %+v", run)
		}
	}

	// The other shapes make the calls their formula says (2W + 4;
	// T + 2 + T(2W + 1)), all checked.
	for _, shape := range []struct {
		args  []string
		calls int
	}{
		{[]string{"--shape", "sequential", "--workers", "2"}, 8},
		{[]string{"--shape", "teams", "--teams", "2", "--workers", "2"}, 14},
	} {
		args := append([]string{"bench", "--runs", "1", "--model-listen", "127.0.0.1:" + strconv.Itoa(port), "-o", "json"}, shape.args...)
		r := e.runCLI("", args...)
		var rep loadgen.Report
		if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil || r.code != 0 {
			t.Fatalf("%v: exit %d, %v\n%s\n%s", shape.args, r.code, err, r.stdout, r.stderr)
		}
		if !rep.OK || rep.LLMCalls != shape.calls || rep.ExpectedCallsPerRun != shape.calls || rep.Checked != 1 || len(rep.Problems) != 0 {
			t.Errorf("%v: ok %v, %d calls (the shape makes %d, want %d), %d checked, problems %q", shape.args, rep.OK, rep.LLMCalls, rep.ExpectedCallsPerRun, shape.calls, rep.Checked, rep.Problems)
		}
	}

	// A deployment that cannot reach the model fails the command.
	bad := e.runCLI("", "bench", "--runs", "1", "--model-url", "http://127.0.0.1:1/v1", "--run-timeout", "20s", "-o", "json")
	if bad.code == 0 {
		t.Errorf("bench with a model the service may not call exited 0:\n%s", bad.stdout)
	}
}
