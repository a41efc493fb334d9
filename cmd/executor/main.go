// Command executor runs op-stack-executor: the HTTP API, the Temporal
// worker, or both, plus the developer and operator subcommands.
//
//	executor serve [-role all|api|worker]   run the service against TEMPORAL_ADDRESS and DATABASE_URL
//	executor dev                            run everything on embedded defaults (starts a Temporal dev server)
//	executor migrate                        apply database migrations and exit
//	executor replay h.json...               replay exported histories against the current workflow code
//	executor apikeys create|list|revoke     manage API keys (executor apikeys -h)
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/op-stack/executor/config"
	"github.com/op-stack/executor/telemetry"
)

const usage = `usage: executor <command> [flags]

commands:
  serve    run the HTTP API and the Temporal worker (-role all|api|worker)
  dev      run everything on embedded defaults: a Temporal dev server with its
           Web UI when TEMPORAL_ADDRESS is unset, SQLite when DATABASE_URL is unset
  migrate  apply pending database migrations and exit
  replay   replay exported histories (temporal workflow show -o json) against
           this build's workflows and report nondeterminism
  apikeys  create, list and revoke API keys (executor apikeys -h)

Configuration comes from environment variables; see README.md.
`

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "executor:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		fmt.Fprint(os.Stderr, usage)
		if len(args) == 0 {
			return errors.New("a command is required")
		}
		return nil
	}
	cfg, err := config.Load()
	if err != nil {
		return err
	}
	log := newLogger(cfg)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	cmd, rest := args[0], args[1:]
	switch cmd {
	case "serve":
		fs := flag.NewFlagSet("serve", flag.ContinueOnError)
		role := fs.String("role", "all", "which parts to run: all, api or worker")
		if err := fs.Parse(rest); err != nil {
			return err
		}
		r, err := parseRole(*role)
		if err != nil {
			return err
		}
		if cfg.TemporalAddress == "" {
			cfg.TemporalAddress = fmt.Sprintf("127.0.0.1:%d", cfg.DevServerPort)
		}
		cfg.ResolveCommandDefaults(false)
		return serve(ctx, cfg, log, r)
	case "dev":
		cfg.ResolveCommandDefaults(true)
		return dev(ctx, cfg, log)
	case "migrate":
		return migrate(ctx, cfg, log)
	case "replay":
		return replay(rest, os.Stdout)
	case "apikeys":
		return apikeys(ctx, cfg, log, rest, os.Stdout, os.Stderr)
	default:
		fmt.Fprint(os.Stderr, usage)
		return fmt.Errorf("unknown command %q", cmd)
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
