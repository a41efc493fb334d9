package activities

import (
	"context"
	"errors"
	"time"

	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"
)

// heartbeat records a heartbeat every HeartbeatInterval until stop is
// called, and returns the context the activity's work (an LLM call, a tool)
// runs on.
//
// The SDK cancels an activity's context when a heartbeat RPC fails with a
// retryable error, a slow RPC included: it gives each RPC the heartbeat
// throttle interval (1s here) as its deadline. Under load that cancelled
// healthy, paid LLM calls. The returned context therefore follows the
// activity's context only for real cancellations (the run or the call was
// cancelled, the activity is gone, paused or reset, the worker stops) and
// for its deadline; a transient heartbeat failure is logged and the work
// goes on. Heartbeats are sent on an uncancelled context and stop joins
// the heartbeat goroutine, so a normal completion never leaves an RPC to be
// cancelled (which the SDK logs as a warning).
func (a *Activities) heartbeat(ctx context.Context) (context.Context, func()) {
	if !activity.IsActivity(ctx) {
		return ctx, func() {}
	}
	interval := a.HeartbeatInterval
	if interval <= 0 {
		interval = time.Second
	}
	beat := context.WithoutCancel(ctx)
	return guardWork(ctx, interval, func() { activity.RecordHeartbeat(beat) }, func(cause error) {
		a.logger(ctx).Info("heartbeat failed; the call goes on", "error", cause)
	})
}

// guardWork calls record every interval until stopped and returns the
// context work runs on: cancelled with ctx only when the cause is a real
// cancellation (ignored causes go to ignored), and at ctx's deadline.
func guardWork(ctx context.Context, interval time.Duration, record func(), ignored func(error)) (context.Context, func()) {
	base := context.WithoutCancel(ctx)
	cancelDeadline := context.CancelFunc(func() {})
	if deadline, ok := ctx.Deadline(); ok {
		base, cancelDeadline = context.WithDeadline(base, deadline)
	}
	work, cancel := context.WithCancelCause(base)
	done, exited := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(exited)
		t := time.NewTicker(interval)
		defer t.Stop()
		cancelled := ctx.Done()
		// The first heartbeat waits an interval: the SDK sends a first one
		// at once as an RPC, which the server writes, and a call that ends
		// within the interval (a fast answer) needs none. The heartbeat
		// timeout counts from the attempt's start either way.
		for first := true; ; first = false {
			if !first {
				record()
			}
			select {
			case <-done:
				return
			case <-cancelled:
				cause := context.Cause(ctx)
				if !realCancellation(cause) {
					// The activity's context stays cancelled for good: a real
					// cancellation now reaches the work only at its end, when
					// the server refuses the completion.
					ignored(cause)
					cancelled = nil
					continue
				}
				cancel(cause)
				return
			case <-t.C:
			}
		}
	}()
	return work, func() {
		close(done)
		<-exited
		cancel(nil)
		cancelDeadline()
	}
}

// realCancellation says whether the cause of an activity context's
// cancellation means the work must stop, rather than a heartbeat RPC that
// failed transiently.
func realCancellation(cause error) bool {
	var (
		canceled  *temporal.CanceledError
		notFound  *serviceerror.NotFound
		nsMissing *serviceerror.NamespaceNotFound
		nsOff     *serviceerror.NamespaceNotActive
	)
	return cause == nil ||
		errors.As(cause, &canceled) || errors.As(cause, &notFound) || errors.As(cause, &nsMissing) || errors.As(cause, &nsOff) ||
		errors.Is(cause, activity.ErrActivityPaused) || errors.Is(cause, activity.ErrActivityReset) ||
		errors.Is(cause, context.Canceled) || errors.Is(cause, context.DeadlineExceeded)
}
