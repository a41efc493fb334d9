package main

import (
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"

	temporallog "go.temporal.io/sdk/log"
	sdkworker "go.temporal.io/sdk/worker"

	"github.com/op-stack/executor/worker"
)

// replay replays exported histories against the current workflow code:
//
//	temporal workflow show -w run-<id> -o json > h.json
//	executor replay h.json
//
// A change to workflow code that would break runs in flight (one made
// without workflow.GetVersion) fails here with the SDK's nondeterminism
// error. It returns an error when any history fails.
func replay(files []string, out io.Writer) error {
	if len(files) == 0 {
		return fmt.Errorf("usage: executor replay <history.json>... (from `temporal workflow show -w <id> -o json`)")
	}
	r := sdkworker.NewWorkflowReplayer()
	worker.RegisterWorkflows(r)
	quiet := temporallog.NewStructuredLogger(slog.New(slog.NewTextHandler(io.Discard, nil)))
	failed := 0
	for _, f := range files {
		if _, err := os.Stat(f); err != nil {
			return err
		}
		if err := r.ReplayWorkflowHistoryFromJSONFile(quiet, f); err != nil {
			failed++
			kind := "replay failed"
			if strings.Contains(err.Error(), "nondeterministic") || strings.Contains(err.Error(), "[TMPRL1100]") {
				kind = "NONDETERMINISTIC: the current workflow code would not reproduce this history; guard the change with workflow.GetVersion"
			}
			fmt.Fprintf(out, "FAIL %s\n  %s\n  %v\n", f, kind, err)
			continue
		}
		fmt.Fprintf(out, "ok   %s\n", f)
	}
	if failed > 0 {
		return fmt.Errorf("%d of %d histories failed to replay", failed, len(files))
	}
	return nil
}
