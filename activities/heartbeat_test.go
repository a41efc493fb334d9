package activities

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/temporal"
)

func TestRealCancellation(t *testing.T) {
	for _, tc := range []struct {
		name  string
		cause error
		real  bool
	}{
		{"run cancelled", temporal.NewCanceledError(), true},
		{"activity gone", serviceerror.NewNotFound("gone"), true},
		{"worker stopping", context.Canceled, true},
		{"start-to-close deadline", context.DeadlineExceeded, true},
		{"slow heartbeat RPC", serviceerror.NewDeadlineExceeded("context deadline exceeded"), false},
		{"server unavailable", serviceerror.NewUnavailable("connection refused"), false},
		{"throttled", serviceerror.NewResourceExhausted(0, "busy"), false},
	} {
		if got := realCancellation(tc.cause); got != tc.real {
			t.Errorf("%s: realCancellation(%v) = %v, want %v", tc.name, tc.cause, got, tc.real)
		}
	}
}

// A heartbeat RPC that times out cancels the activity's context; the work's
// context must stay alive, and a real cancellation must still reach it.
func TestGuardWorkIgnoresTransientHeartbeatFailures(t *testing.T) {
	activityCtx, cancelActivity := context.WithCancelCause(context.Background())
	var beats atomic.Int32
	var ignored atomic.Value
	work, stop := guardWork(activityCtx, 5*time.Millisecond, func() { beats.Add(1) }, func(err error) { ignored.Store(err) })
	defer stop()

	cancelActivity(serviceerror.NewDeadlineExceeded("heartbeat RPC timed out"))
	time.Sleep(50 * time.Millisecond)
	if work.Err() != nil {
		t.Fatalf("work context cancelled by a transient heartbeat failure: %v", context.Cause(work))
	}
	if ignored.Load() == nil {
		t.Fatal("the ignored failure was not reported")
	}
	before := beats.Load()
	time.Sleep(30 * time.Millisecond)
	if beats.Load() <= before {
		t.Fatal("heartbeats stopped after a transient failure")
	}
}

func TestGuardWorkFollowsRealCancellation(t *testing.T) {
	activityCtx, cancelActivity := context.WithCancelCause(context.Background())
	work, stop := guardWork(activityCtx, 5*time.Millisecond, func() {}, func(error) { t.Error("a real cancellation was ignored") })
	defer stop()
	cancelActivity(temporal.NewCanceledError())
	select {
	case <-work.Done():
	case <-time.After(2 * time.Second):
		t.Fatal("work context not cancelled after the run was cancelled")
	}
	var canceled *temporal.CanceledError
	if !errors.As(context.Cause(work), &canceled) {
		t.Fatalf("cause = %v, want the CanceledError", context.Cause(work))
	}
}

func TestGuardWorkKeepsTheDeadline(t *testing.T) {
	activityCtx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	work, stop := guardWork(activityCtx, time.Second, func() {}, func(error) {})
	defer stop()
	select {
	case <-work.Done():
	case <-time.After(2 * time.Second):
		t.Fatal("work context outlived the activity's deadline")
	}
}
