package loadgen

import (
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"
	"time"
)

// Report is a benchmark's outcome, printed as a table or as JSON
// (`executor bench -o json`). Latencies and times are in milliseconds.
type Report struct {
	URL         string `json:"url"`
	HierarchyID string `json:"hierarchy_id"`
	Shape       string `json:"shape"`
	Runs        int    `json:"runs"`
	Concurrency int    `json:"concurrency"`
	Warmup      int    `json:"warmup"`
	// Model describes the agents' model ("fake: …" or the real model).
	Model string `json:"model"`

	// OK: every run completed and every stream passed its checks (against
	// the stored log and, with the fake model, against the model's tokens).
	OK        bool `json:"ok"`
	Completed int  `json:"completed"`
	// Failed counts runs that did not complete (ended otherwise, or an
	// error of the benchmark's client); their errors are in Problems.
	Failed int `json:"failed"`
	// Checked counts streams compared with their stored log; CheckFailed
	// those that were not gap-free, equal and without duplicate.
	Checked     int `json:"checked"`
	CheckFailed int `json:"check_failed"`
	// TokenCheckFailed counts runs whose stream did not carry each of
	// the model's tokens exactly once (fake model): the contract wants
	// every token on the stream, so such a run fails the benchmark.
	TokenCheckFailed int      `json:"token_check_failed"`
	Problems         []string `json:"problems,omitempty"`

	// WallS is the whole benchmark's wall time (warm-up excluded);
	// RunsPerSecond is Runs ÷ WallS.
	WallS         float64 `json:"wall_s"`
	RunsPerSecond float64 `json:"runs_per_second"`
	LLMCalls      int     `json:"llm_calls"`
	CallsPerRun   float64 `json:"llm_calls_per_run"`
	// ExpectedCallsPerRun is what the shape makes with the fake model.
	ExpectedCallsPerRun int `json:"expected_llm_calls_per_run,omitempty"`

	// TokensExpected and Tokens sum the runs' (fake model): a difference
	// means the service lost or doubled some of the model's text, which
	// the stream check cannot see (the stream equals the stored log).
	TokensExpected   int `json:"tokens_expected,omitempty"`
	Tokens           int `json:"tokens"`
	TokensDuplicated int `json:"tokens_duplicated,omitempty"`

	// RunWall: runs/start sent → terminal event read, per run.
	RunWall Summary `json:"run_wall_ms"`
	// ModelTime: model time on each run's critical path (fake model).
	ModelTime Summary `json:"model_time_ms"`
	// Overhead: (run wall − model time) ÷ the run's LLM calls, per run.
	Overhead Summary `json:"overhead_per_call_ms"`
	// Efficiency: model time ÷ run wall, per run (1 = no overhead).
	Efficiency Summary `json:"efficiency"`
	// TokenLatency: a token's send stamp → the client read the event
	// carrying it; FirstToken the same for each call's first token.
	TokenLatency Summary `json:"token_latency_ms"`
	FirstToken   Summary `json:"first_token_latency_ms"`

	// CPUSeconds is the CPU time of the selected processes during the
	// benchmark (warm-up excluded), CPUPerCallMS that ÷ LLMCalls; Processes
	// lists each. CPUMeasured is false when no process was selected.
	CPUMeasured  bool      `json:"cpu_measured"`
	CPUSeconds   float64   `json:"cpu_seconds"`
	CPUPerCallMS float64   `json:"cpu_ms_per_llm_call"`
	Processes    []ProcCPU `json:"processes,omitempty"`

	// RunResults is every measured run.
	RunResults []RunResult `json:"run_results"`
}

func newReport(cfg Config, hid string, results, warmups []RunResult, wall time.Duration, procs []ProcCPU, cpu float64) *Report {
	r := &Report{URL: cfg.URL, HierarchyID: hid, Shape: cfg.Shape, Runs: cfg.Runs, Concurrency: cfg.Concurrency, Warmup: cfg.Warmup,
		WallS: wall.Seconds(), RunResults: results, CPUMeasured: !cfg.Procs.Empty(), CPUSeconds: cpu, Processes: procs}
	if r.Shape == "" {
		r.Shape = ShapeReference
	}
	if cfg.Fake != nil {
		o := cfg.Fake.opts
		r.Model = fmt.Sprintf("fake at %s: first token after %v, %d tokens, %v apart", cfg.ModelBaseURL, o.FirstTokenDelay, o.Tokens, o.TokenInterval)
		r.ExpectedCallsPerRun = ExpectedCalls(cfg)
	} else {
		r.Model = strings.TrimSpace(cfg.AgentProvider + " " + cfg.Model)
	}
	if wall > 0 {
		r.RunsPerSecond = float64(cfg.Runs) / wall.Seconds()
	}
	warmFailed := 0
	var walls, models, overheads, effs, tokens, first []float64
	problem := func(run RunResult, what string) {
		if len(r.Problems) < 20 {
			name := run.ID
			if name == "" {
				name = "(not started)"
			}
			if run.warmup {
				name += " (warm-up)"
			}
			r.Problems = append(r.Problems, "run "+name+": "+what)
		}
	}
	for _, run := range append(append([]RunResult(nil), warmups...), results...) {
		if run.Error != "" {
			problem(run, run.Error)
		} else if run.Status != "completed" {
			problem(run, "ended "+run.Status)
		}
		if run.Error == "" {
			r.Checked++
			if run.CheckError != "" {
				r.CheckFailed++
				problem(run, "stream check failed: "+run.CheckError)
			}
		}
		if cfg.Fake != nil && run.Error == "" && r.ExpectedCallsPerRun > 0 && run.Calls != r.ExpectedCallsPerRun && run.Status == "completed" {
			problem(run, fmt.Sprintf("made %d LLM calls, the shape makes %d (retries? see its events)", run.Calls, r.ExpectedCallsPerRun))
		}
		if run.Status == "completed" && run.TokensExpected > 0 && (run.Tokens != run.TokensExpected || run.TokensDuplicated > 0) {
			problem(run, fmt.Sprintf("the stream carried %d of the model's %d tokens (%d more than once)", run.Tokens, run.TokensExpected, run.TokensDuplicated))
			r.TokenCheckFailed++
		}
		if run.warmup {
			if run.Error != "" || run.Status != "completed" {
				warmFailed++
			}
			continue
		}
		if run.Error == "" && run.Status == "completed" {
			r.Completed++
		} else {
			r.Failed++
			continue
		}
		r.LLMCalls += run.Calls
		r.TokensExpected += run.TokensExpected
		r.Tokens += run.Tokens
		r.TokensDuplicated += run.TokensDuplicated
		walls = append(walls, run.WallMS)
		tokens = append(tokens, run.tokens...)
		first = append(first, run.first...)
		if cfg.Fake != nil && run.Calls > 0 && run.WallMS > 0 {
			models = append(models, run.ModelMS)
			overheads = append(overheads, (run.WallMS-run.ModelMS)/float64(run.Calls))
			effs = append(effs, run.ModelMS/run.WallMS)
		}
	}
	if r.Completed > 0 {
		r.CallsPerRun = float64(r.LLMCalls) / float64(r.Completed)
	}
	if r.CPUMeasured && r.LLMCalls > 0 {
		r.CPUPerCallMS = cpu * 1000 / float64(r.LLMCalls)
	}
	r.RunWall, r.ModelTime, r.Overhead, r.Efficiency = Summarize(walls), Summarize(models), Summarize(overheads), Summarize(effs)
	r.TokenLatency, r.FirstToken = Summarize(tokens), Summarize(first)
	r.OK = r.Failed == 0 && warmFailed == 0 && r.CheckFailed == 0 && r.TokenCheckFailed == 0
	return r
}

// WriteText prints the report as a table.
func (r *Report) WriteText(w io.Writer) error {
	fmt.Fprintf(w, "executor bench: %s, %d runs at concurrency %d (+%d warm-up), shape %s\n", r.URL, r.Runs, r.Concurrency, r.Warmup, r.Shape)
	fmt.Fprintf(w, "model: %s\n\n", r.Model)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	row := func(name string, s Summary, unit string) {
		if s.N == 0 {
			fmt.Fprintf(tw, "%s\t—\t\t\t\t\t\t%s\t\n", name, unit)
			return
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%s\t%s\t%s\t\n", name, s.N, num(s.Min), num(s.P50), num(s.P90), num(s.P99), num(s.Max), unit)
	}
	fmt.Fprintf(tw, "\tn\tmin\tp50\tp90\tp99\tmax\t\t\n")
	row("run wall", r.RunWall, "ms")
	row("model time (critical path)", r.ModelTime, "ms")
	row("overhead per LLM call", r.Overhead, "ms")
	row("efficiency (model ÷ wall)", r.Efficiency, "")
	row("token → client", r.TokenLatency, "ms")
	row("first token → client", r.FirstToken, "ms")
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(w, "\nwall %.2f s, %.2f runs/s, %d LLM calls (%.1f per run", r.WallS, r.RunsPerSecond, r.LLMCalls, r.CallsPerRun)
	if r.ExpectedCallsPerRun > 0 {
		fmt.Fprintf(w, ", the shape makes %d", r.ExpectedCallsPerRun)
	}
	fmt.Fprintln(w, ")")
	if r.TokensExpected > 0 {
		fmt.Fprintf(w, "tokens: the model sent %d, the streams carried %d", r.TokensExpected, r.Tokens)
		if r.TokensDuplicated > 0 {
			fmt.Fprintf(w, " (and %d more than once)", r.TokensDuplicated)
		}
		fmt.Fprintln(w)
	}
	if r.CPUMeasured {
		fmt.Fprintf(w, "service CPU: %.2f s, %.1f ms per LLM call:", r.CPUSeconds, r.CPUPerCallMS)
		procs := append([]ProcCPU(nil), r.Processes...)
		sort.SliceStable(procs, func(i, j int) bool { return procs[i].CPUSeconds > procs[j].CPUSeconds })
		for i, p := range procs {
			if i == 6 {
				fmt.Fprintf(w, " …")
				break
			}
			fmt.Fprintf(w, " %s[%d] %.2f s", p.Command, p.PID, p.CPUSeconds)
		}
		fmt.Fprintln(w)
	} else {
		fmt.Fprintln(w, "service CPU: not measured (--pids or --proc-match)")
	}
	fmt.Fprintf(w, "runs: %d completed, %d failed; streams checked against the stored log: %d, %d failed\n", r.Completed, r.Failed, r.Checked, r.CheckFailed)
	if r.TokensExpected > 0 {
		fmt.Fprintf(w, "streams checked against the model's tokens: %d failed\n", r.TokenCheckFailed)
	}
	for _, p := range r.Problems {
		fmt.Fprintln(w, "  problem:", p)
	}
	if r.OK {
		_, err := fmt.Fprintln(w, "OK")
		return err
	}
	_, err := fmt.Fprintln(w, "FAILED")
	return err
}

func num(x float64) string {
	switch {
	case x == 0:
		return "0"
	case x < 1:
		return fmt.Sprintf("%.3f", x)
	case x < 10:
		return fmt.Sprintf("%.2f", x)
	case x < 1000:
		return fmt.Sprintf("%.1f", x)
	default:
		return fmt.Sprintf("%.0f", x)
	}
}
