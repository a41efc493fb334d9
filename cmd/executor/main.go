// Command executor runs op-stack-executor: the HTTP API, the Temporal
// worker, or both, the developer and operator commands, and a client of
// the API:
//
//	executor serve [--role all|api|worker]  run the service against TEMPORAL_ADDRESS and DATABASE_URL
//	executor dev                            run everything on embedded defaults (starts a Temporal dev server)
//	executor migrate                        apply database migrations and exit
//	executor replay h.json...               replay exported histories against the current workflow code
//	executor apikeys create|list|revoke     manage API keys
//	executor bench                          load-test a deployment over its API (runs, streams, checks, latency, CPU)
//	executor hierarchies create|get|list    a client of the API's hierarchies
//	executor runs start|follow|get|list|events|cancel   a client of the API's runs
//	executor runs approvals|approve|reject|pause|resume|redirect|cancel-team|fork-points|fork|delete  steer, fork and delete runs
//	executor threads list|continue          a run's thread and its follow-ups
//	executor mcp-servers create|get|list|update|delete  a client of the API's MCP servers
//	executor schedules create|list|get|pause|unpause|trigger|update|delete  a client of the API's schedules
//	executor webhooks create|get|list|update|delete|deliveries|redeliver  a client of the API's webhooks
//
// Every command takes --help. The commands are built with cobra; flags
// written Go-style with one dash (-role worker) are still accepted.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/op-stack/executor/config"
	"github.com/op-stack/executor/telemetry"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := execute(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// exitError ends the process with code, printing msg (when not empty)
// instead of the usual "executor: <error>".
type exitError struct {
	code int
	msg  string
}

func (e exitError) Error() string {
	if e.msg != "" {
		return e.msg
	}
	return fmt.Sprintf("exit status %d", e.code)
}

// execute runs the command line args and returns the process's exit code.
func execute(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	root := newRootCommand()
	root.SetArgs(normalizeArgs(root, args))
	root.SetOut(stdout)
	root.SetErr(stderr)
	err := root.ExecuteContext(ctx)
	if err == nil {
		return 0
	}
	var ee exitError
	if errors.As(err, &ee) {
		if ee.msg != "" {
			fmt.Fprintln(stderr, "executor:", ee.msg)
		}
		return ee.code
	}
	fmt.Fprintln(stderr, "executor:", err)
	return 1
}

// newRootCommand is the whole command tree.
func newRootCommand() *cobra.Command {
	root := &cobra.Command{
		Use:   "executor",
		Short: "Run hierarchical teams of LLM agents as durable Temporal workflows",
		Long: `executor is op-stack-executor in one binary: the service (serve, dev), its
operator commands (migrate, replay, apikeys) and a client of its HTTP API
(hierarchies, runs, threads, mcp-servers, schedules, webhooks).

The service is configured by environment variables (docs/configuration.md).
The client commands find the API at EXECUTOR_URL (default
http://127.0.0.1:8080) with the key in EXECUTOR_API_KEY, or --url and
--api-key.`,
		SilenceUsage:  true,
		SilenceErrors: true,
		// "executor" alone is a mistake, as it was before: say so.
		Args: cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return groupRun(cmd, args)
		},
	}
	root.AddGroup(&cobra.Group{ID: "service", Title: "Service:"}, &cobra.Group{ID: "client", Title: "API client:"})
	for _, c := range []*cobra.Command{newServeCommand(), newDevCommand(), newMigrateCommand(), newReplayCommand(), newAPIKeysCommand(loadService), newBenchCommand()} {
		c.GroupID = "service"
		root.AddCommand(c)
	}
	for _, c := range []*cobra.Command{newHierarchiesCommand(), newRunsCommand(), newThreadsCommand(), newMCPServersCommand(), newSchedulesCommand(), newWebhooksCommand()} {
		c.GroupID = "client"
		root.AddCommand(c)
	}
	return root
}

// groupRun is the RunE of a command that only groups others: without a
// subcommand it prints its help to stderr and fails, as does an unknown
// subcommand.
func groupRun(cmd *cobra.Command, args []string) error {
	cmd.SetOut(cmd.ErrOrStderr())
	_ = cmd.Help()
	if len(args) > 0 {
		return fmt.Errorf("unknown command %q for %q", args[0], cmd.CommandPath())
	}
	return fmt.Errorf("a command is required (%s --help lists them)", cmd.CommandPath())
}

// normalizeArgs accepts the Go flag package's spelling the commands had
// before cobra: a long flag with one dash (-role worker, -tenant=acme,
// -help) becomes --role, --tenant=acme, --help, for the flags of the
// command args name. Short flags and arguments are left alone, as is
// everything after "--".
func normalizeArgs(root *cobra.Command, args []string) []string {
	cmd, _, err := root.Find(args)
	if err != nil || cmd == nil {
		return args
	}
	out := make([]string, 0, len(args))
	for i, a := range args {
		if a == "--" {
			return append(out, args[i:]...)
		}
		if len(a) > 2 && a[0] == '-' && a[1] != '-' {
			name, _, _ := strings.Cut(a[1:], "=")
			if len(name) > 1 && (name == "help" || cmd.Flags().Lookup(name) != nil || cmd.InheritedFlags().Lookup(name) != nil) {
				a = "-" + a
			}
		}
		out = append(out, a)
	}
	return out
}

// service is what the service commands run with: the configuration from
// the environment and the process's logger.
type service struct {
	cfg config.Config
	log *slog.Logger
}

// loadService reads the configuration. Only the commands that run or
// manage the service do, so a client command never fails on the service's
// variables.
func loadService() (service, error) {
	cfg, err := config.Load()
	if err != nil {
		return service{}, err
	}
	return service{cfg: cfg, log: newLogger(cfg)}, nil
}

func newServeCommand() *cobra.Command {
	var role string
	cmd := &cobra.Command{
		Use:   "serve [--role all|api|worker]",
		Short: "Run the HTTP API and the Temporal worker against TEMPORAL_ADDRESS and DATABASE_URL",
		Long: `Run the service: the HTTP API and the Temporal worker in one process (--role
all), or one of them (--role api, --role worker), against the Temporal
server at TEMPORAL_ADDRESS (default 127.0.0.1:7233) and the database at
DATABASE_URL (default: SQLite under DATA_DIR).

Access control is on unless AUTH_MODE=off: create keys with
'executor apikeys create'. SIGINT or SIGTERM shuts it down gracefully
within SHUTDOWN_TIMEOUT.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			r, err := parseRole(role)
			if err != nil {
				return err
			}
			svc, err := loadService()
			if err != nil {
				return err
			}
			if svc.cfg.TemporalAddress == "" {
				svc.cfg.TemporalAddress = fmt.Sprintf("127.0.0.1:%d", svc.cfg.DevServerPort)
			}
			svc.cfg.ResolveCommandDefaults(false)
			return serve(cmd.Context(), svc.cfg, svc.log, r)
		},
	}
	cmd.Flags().StringVar(&role, "role", "all", "which parts to run: all, api or worker")
	return cmd
}

func newDevCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "dev",
		Short: "Run everything on embedded defaults (a Temporal dev server with its Web UI, SQLite)",
		Long: `Run the whole service on this machine: when TEMPORAL_ADDRESS is unset it
starts a Temporal dev server from the temporal CLI at TEMPORAL_CLI
(./bin/temporal, which 'make run' builds) with its Web UI on
TEMPORAL_UI_PORT (8233), and stops it on exit; with DATABASE_URL unset it
keeps its data in SQLite under DATA_DIR (./.data). The API listens on
HTTP_ADDR (127.0.0.1:8080) without access control unless AUTH_MODE says
otherwise.

Its ports must be free: when one is taken it exits at once, naming the
process that holds it and the variable to set instead.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			svc, err := loadService()
			if err != nil {
				return err
			}
			svc.cfg.ResolveCommandDefaults(true)
			return dev(cmd.Context(), svc.cfg, svc.log)
		},
	}
}

func newMigrateCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "migrate",
		Short: "Apply pending database migrations and exit",
		Long: `Apply the pending migrations to the database at DATABASE_URL (or the SQLite
file under DATA_DIR) and exit. Replicas starting together may all run it:
one applies, the others wait.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			svc, err := loadService()
			if err != nil {
				return err
			}
			return migrate(cmd.Context(), svc.cfg, svc.log)
		},
	}
}

func newReplayCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "replay HISTORY.json...",
		Short: "Replay exported histories against this build's workflows and report nondeterminism",
		Long: `Replay workflow histories exported with

  temporal workflow show -w run-<id> -o json > h.json

against this build's workflow code. A change to workflow code that would
break runs in flight (one made without workflow.GetVersion) fails here with
the SDK's nondeterminism error. Exits non-zero when any history fails.`,
		Example: "  ./bin/temporal workflow show -w run-9f1e... -o json > h.json\n  ./bin/executor replay h.json",
		RunE: func(cmd *cobra.Command, args []string) error {
			return replay(args, cmd.OutOrStdout())
		},
	}
}

// newLogger is the process's logger: text or JSON (LOG_FORMAT) on standard
// error at LOG_LEVEL. Lines logged with a traced context carry trace_id and
// span_id, so that with tracing on a log line leads to its trace. The
// Temporal SDK logs through it too (temporallog.NewStructuredLogger).
func newLogger(cfg config.Config) *slog.Logger {
	var level slog.Level
	if err := level.UnmarshalText([]byte(strings.ToUpper(cfg.LogLevel))); err != nil {
		level = slog.LevelInfo
	}
	opts := &slog.HandlerOptions{Level: level}
	var h slog.Handler = slog.NewTextHandler(os.Stderr, opts)
	if cfg.LogFormat == "json" {
		h = slog.NewJSONHandler(os.Stderr, opts)
	}
	return slog.New(telemetry.LogHandler(h))
}
