package main

import (
	"encoding/json"
	"fmt"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/op-stack/executor/loadgen"
)

// newBenchCommand is `executor bench`, the load generator of package
// loadgen.
func newBenchCommand() *cobra.Command {
	var (
		af                                    apiFlags
		shape, provider, model, agentProvider string
		modelListen, modelURL                 string
		teams, workers                        int
		runs, concurrency, warmup, tokens     int
		modelDelay, tokenInterval, runTimeout time.Duration
		pids                                  []int
		procMatch                             []string
		modelOnly                             bool
	)
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Load-test a deployment over its API: runs, streams, checks, latency, CPU per LLM call",
		Long: `bench drives a deployment of the executor over its public API, as users do:
it creates a hierarchy (--shape), starts --runs runs, --concurrency at a time,
reads every run's SSE stream from its start, and checks each stream against
the run's stored log (runs/events): gap-free, equal, no duplicate; with the
fake model, also that it carried each of the model's tokens once. A failed
check or a run that does not complete fails the command (exit code 1).

With --provider fake (the default) the command serves an OpenAI-compatible
model itself (POST /v1/chat/completions, streaming and not) on --model-listen,
whose every answer is --tokens tokens, the first after --model-delay, then one
every --token-interval (all 0: the zero-delay model); each token carries the
time it was sent, so the command measures token → client latency. The
hierarchy's agents name it in their llm_config (provider --agent-provider,
base_url --model-url, default the address it listens on): the deployment must
have that provider configured and allow that base URL, e.g. start it with
COMPATIBLE_BASE_URL=<the model's URL>, or list the URL in
LLM_ALLOWED_BASE_URLS (docs/performance.md). --provider real uses --model as
the deployment routes it (no latency stamps: wall, runs/s and CPU only).

It reports wall time, runs/s, orchestration overhead per LLM call (a run's
wall minus the model time on its critical path, ÷ its calls), efficiency (that
model time ÷ the run's wall), token and first-token latency percentiles, and,
with --pids or --proc-match, the CPU-seconds per LLM call of those processes
on this machine (and their descendants: 'executor dev' and its Temporal dev
server). --model-only serves the fake model until interrupted and runs nothing.` + clientLong,
		Example: `  executor bench --runs 10 --tokens 1 --pids $(pgrep -f 'executor dev')
  executor bench --runs 20 --concurrency 20 --tokens 60 --token-interval 20ms -o json
  executor bench --runs 100 --concurrency 100 --model-delay 300ms --tokens 40 --token-interval 25ms --proc-match executor,temporal`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if af.output != "text" && af.output != "json" {
				return fmt.Errorf("--output: want text or json, got %q", af.output)
			}
			cfg := loadgen.Config{Shape: shape, Teams: teams, Workers: workers, Runs: runs, Concurrency: concurrency, Warmup: warmup,
				Model: model, AgentProvider: agentProvider, RunTimeout: runTimeout,
				Procs: loadgen.ProcSelector{PIDs: pids, Match: procMatch}}
			switch provider {
			case "fake":
				fake, err := loadgen.StartFakeModel(modelListen, loadgen.ModelOptions{FirstTokenDelay: modelDelay, Tokens: tokens, TokenInterval: tokenInterval})
				if err != nil {
					return err
				}
				defer fake.Close()
				if modelOnly {
					fmt.Fprintf(cmd.ErrOrStderr(), "executor bench: fake model at %s (interrupt to stop)\n", fake.URL())
					<-cmd.Context().Done()
					return nil
				}
				cfg.Fake, cfg.ModelBaseURL = fake, fake.URL()
				if modelURL != "" {
					cfg.ModelBaseURL = modelURL
				}
				if cfg.Model == "" {
					cfg.Model = "bench-fake"
				}
				if !cmd.Flags().Changed("agent-provider") {
					cfg.AgentProvider = "compatible"
				}
			case "real":
				if cfg.Model == "" {
					return fmt.Errorf("--provider real needs --model")
				}
			default:
				return fmt.Errorf("--provider: want fake or real, got %q", provider)
			}
			c, err := af.client()
			if err != nil {
				return err
			}
			cfg.URL = c.BaseURL()
			cfg.APIKey = af.apiKey
			if cfg.APIKey == "" {
				cfg.APIKey = os.Getenv("EXECUTOR_API_KEY")
			}
			report, err := loadgen.Run(cmd.Context(), cfg)
			if err != nil {
				return err
			}
			if af.json() {
				enc := json.NewEncoder(cmd.OutOrStdout())
				enc.SetIndent("", "  ")
				if err := enc.Encode(report); err != nil {
					return err
				}
			} else if err := report.WriteText(cmd.OutOrStdout()); err != nil {
				return err
			}
			if !report.OK {
				return exitError{code: 1, msg: fmt.Sprintf("benchmark failed: %d of %d runs did not complete, %d of %d stream checks failed, %d streams lost or doubled model tokens", report.Failed, report.Runs, report.CheckFailed, report.Checked, report.TokenCheckFailed)}
			}
			return nil
		},
	}
	af.register(cmd)
	cmd.AddCommand(newBenchReportCommand(), newBenchCompareCommand())
	f := cmd.Flags()
	f.StringVar(&shape, "shape", loadgen.ShapeReference, "the hierarchy: reference (2 teams, 3 workers, 11 LLM calls a run), sequential (one team of --workers workers), teams (--teams teams of --workers workers)")
	f.IntVar(&teams, "teams", 2, "teams of --shape teams")
	f.IntVar(&workers, "workers", 3, "workers per team of --shape sequential and teams")
	f.IntVar(&runs, "runs", 1, "runs to start (measured)")
	f.IntVarP(&concurrency, "concurrency", "c", 1, "runs in progress at once")
	f.IntVar(&warmup, "warmup", 0, "runs made first, one at a time, checked but not measured")
	f.StringVar(&provider, "provider", "fake", "fake: the fake model this command serves; real: --model as the deployment routes it")
	f.StringVar(&model, "model", "", "the agents' model (default bench-fake with the fake model)")
	f.StringVar(&agentProvider, "agent-provider", "", "the agents' llm_config.provider (default compatible with the fake model)")
	f.StringVar(&modelListen, "model-listen", "127.0.0.1:0", "address the fake model listens on")
	f.StringVar(&modelURL, "model-url", "", "base URL the agents name for the fake model (default http://<model-listen>/v1)")
	f.DurationVar(&modelDelay, "model-delay", 0, "the fake model's delay before an answer's first token")
	f.IntVar(&tokens, "tokens", 1, "tokens in each of the fake model's answers")
	f.DurationVar(&tokenInterval, "token-interval", 0, "the fake model's delay between two tokens")
	f.IntSliceVar(&pids, "pids", nil, "measure the CPU time of these processes and their descendants (comma-separated)")
	f.StringSliceVar(&procMatch, "proc-match", nil, "measure the CPU time of processes whose command name contains one of these (comma-separated, e.g. executor,temporal), and their descendants")
	f.DurationVar(&runTimeout, "run-timeout", 10*time.Minute, "longest time one run may take, start to checked log")
	f.BoolVar(&modelOnly, "model-only", false, "only serve the fake model, until interrupted")
	return cmd
}

// newBenchReportCommand is `executor bench report FILE...`: saved JSON
// reports (-o json) printed as tables.
func newBenchReportCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "report FILE...",
		Short: "Print saved JSON reports of executor bench as tables",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			for i, name := range args {
				raw, err := os.ReadFile(name)
				if err != nil {
					return err
				}
				var r loadgen.Report
				if err := json.Unmarshal(raw, &r); err != nil {
					return fmt.Errorf("%s: %w", name, err)
				}
				if i > 0 {
					fmt.Fprintln(cmd.OutOrStdout())
				}
				if err := r.WriteText(cmd.OutOrStdout()); err != nil {
					return err
				}
			}
			return nil
		},
	}
}

// newBenchCompareCommand is `executor bench compare DIR LABEL...`: the
// rounds scripts/bench-ab.sh saved, side by side.
func newBenchCompareCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "compare DIR LABEL...",
		Short: "Compare alternating rounds of saved reports (DIR/<label>-r<round>/<row>.json): each round's value, median and range",
		Args:  cobra.MinimumNArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			return loadgen.Compare(cmd.OutOrStdout(), args[0], args[1:])
		},
	}
}
