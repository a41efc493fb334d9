package api

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"go.temporal.io/api/serviceerror"
)

// TestTemporalGate: a failed health check or an Unavailable call marks
// Temporal down; while down, calls are refused without a check; the
// background probe lets them through again once the frontend answers.
func TestTemporalGate(t *testing.T) {
	var healthy atomic.Bool
	var checks atomic.Int32
	g := newTemporalGate(func(context.Context) error {
		checks.Add(1)
		if healthy.Load() {
			return nil
		}
		return errors.New("connection refused")
	})
	ctx := context.Background()
	if err := g.admit(ctx); !isTemporalOutage(err) {
		t.Fatalf("first call with Temporal down: %v", err)
	}
	n := checks.Load()
	for range 50 {
		if err := g.admit(ctx); !isTemporalOutage(err) {
			t.Fatalf("call while down: %v", err)
		}
	}
	if extra := checks.Load() - n; extra > 1 {
		t.Errorf("%d health checks for 50 calls while down, want none but the background probe's", extra)
	}
	healthy.Store(true)
	deadline := time.Now().Add(3 * temporalProbeInterval)
	for g.admit(ctx) != nil {
		if time.Now().After(deadline) {
			t.Fatal("still refused after Temporal came back")
		}
		time.Sleep(20 * time.Millisecond)
	}
	// Fresh: no check per call.
	n = checks.Load()
	for range 50 {
		if err := g.admit(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if checks.Load() != n {
		t.Errorf("%d checks for calls right after a success", checks.Load()-n)
	}
	// A call that finds the frontend gone marks it down; an answer (not
	// found) does not.
	g.observe(serviceerror.NewNotFound("no such workflow"))
	if g.down.Load() {
		t.Fatal("an answer marked Temporal down")
	}
	healthy.Store(false)
	g.observe(serviceerror.NewUnavailable("connection refused"))
	if err := g.admit(ctx); !isTemporalOutage(err) {
		t.Fatalf("after an Unavailable call: %v", err)
	}
}
