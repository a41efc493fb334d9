package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	temporallog "go.temporal.io/sdk/log"
	"go.temporal.io/sdk/temporal"
)

// TestSDKLogQuietsCancels: the SDK's "Activity error." for a cancelled
// activity (context.Canceled, or the SDK's canceled error, wrapped or not)
// is logged at INFO, or not at all below INFO; any other activity error
// keeps its ERROR level.
func TestSDKLogQuietsCancels(t *testing.T) {
	logAt := func(level slog.Level, err error) string {
		var out bytes.Buffer
		h := slog.NewTextHandler(&out, &slog.HandlerOptions{Level: level})
		// As dialTemporal wires it, through the SDK's own adapter.
		sdk := temporallog.NewStructuredLogger(slog.New(sdkLogHandler{h}).With("component", "temporal"))
		sdk.Error("Activity error.", "WorkflowID", "run-1", "ActivityType", "Respond", "Attempt", 1, "Error", err)
		return out.String()
	}
	for _, err := range []error{context.Canceled, fmt.Errorf("respond: %w", context.Canceled), temporal.NewCanceledError("run cancelled")} {
		out := logAt(slog.LevelInfo, err)
		if !strings.Contains(out, "level=INFO") || !strings.Contains(out, `msg="Activity error."`) || !strings.Contains(out, "component=temporal") || !strings.Contains(out, "WorkflowID=run-1") {
			t.Errorf("%v: logged %q, want it at INFO with its attributes", err, out)
		}
		if out := logAt(slog.LevelWarn, err); out != "" {
			t.Errorf("%v at LOG_LEVEL=warn: logged %q", err, out)
		}
	}
	if out := logAt(slog.LevelInfo, errors.New("openai: HTTP 401")); !strings.Contains(out, "level=ERROR") {
		t.Errorf("a real failure: logged %q, want ERROR", out)
	}
}
