package api

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/op-stack/executor/models"
)

// During a Temporal outage the SDK retries each call until its own 10 s
// RPC deadline, so every request that needs Temporal would wait 10 s
// before its 503. The gate answers those requests at once instead: a call
// is let through when Temporal answered within the last temporalFresh;
// otherwise the frontend's gRPC health check, bounded by
// temporalProbeTimeout, decides first. Once Temporal is found down
// (a failed check, or a call that failed with Unavailable), calls fail
// fast with errTemporalUnavailable, and one background probe per
// temporalProbeInterval finds it back.
const (
	// temporalProbeTimeout bounds a health check: a healthy frontend
	// answers in milliseconds.
	temporalProbeTimeout = time.Second
	// temporalFresh is how long a success lets calls through unchecked.
	temporalFresh = 2 * time.Second
	// temporalProbeInterval is how often a down Temporal is checked again.
	temporalProbeInterval = time.Second
	// temporalRetryAfter is the Retry-After of a Temporal outage's 503,
	// in seconds: a restarted frontend takes a few seconds to serve.
	temporalRetryAfter = "5"
)

// errTemporalUnavailable is the cause of the 503 the gate answers.
var errTemporalUnavailable = errors.New("temporal frontend unreachable")

// isTemporalOutage reports whether err says Temporal could not be reached
// (the gate's own refusal, or a call the frontend never answered), as
// opposed to an answer (not found, already started, a query's failure).
// A deadline is not counted: a query times out when no worker answers it.
func isTemporalOutage(err error) bool {
	if err == nil {
		return false
	}
	if errors.Is(err, errTemporalUnavailable) {
		return true
	}
	var unavailable *serviceerror.Unavailable
	if errors.As(err, &unavailable) {
		return true
	}
	if s, ok := status.FromError(err); ok && s.Code() == codes.Unavailable {
		return true
	}
	return false
}

// temporalGate tracks whether the Temporal frontend answers.
type temporalGate struct {
	check  func(ctx context.Context) error // the frontend's health check
	lastOK atomic.Int64                    // UnixNano of the last answer
	down   atomic.Bool

	mu      sync.Mutex
	probing bool
	now     func() time.Time
}

func newTemporalGate(check func(ctx context.Context) error) *temporalGate {
	return &temporalGate{check: check, now: time.Now}
}

// unavailable is the error of a call the gate refuses.
func unavailable() error {
	return &models.Error{Code: models.CodeUnavailable, Message: "Temporal is unavailable; retry shortly", Err: errTemporalUnavailable}
}

// admit returns nil when a call may go to Temporal, else the 503 error.
func (g *temporalGate) admit(ctx context.Context) error {
	if g.down.Load() {
		g.startProbing()
		return unavailable()
	}
	if g.now().Sub(time.Unix(0, g.lastOK.Load())) < temporalFresh {
		return nil
	}
	pctx, cancel := context.WithTimeout(ctx, temporalProbeTimeout)
	err := g.check(pctx)
	cancel()
	switch {
	case err == nil:
		g.lastOK.Store(g.now().UnixNano())
		return nil
	case ctx.Err() != nil:
		return ctx.Err() // the caller left: that says nothing of Temporal
	}
	g.markDown()
	return unavailable()
}

// observe learns from a call's outcome: any answer is a sign of life, a
// transport failure marks Temporal down.
func (g *temporalGate) observe(err error) {
	switch {
	case isTemporalOutage(err):
		g.markDown()
	case err == nil || !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded):
		g.lastOK.Store(g.now().UnixNano())
	}
}

func (g *temporalGate) markDown() {
	g.down.Store(true)
	g.startProbing()
}

// startProbing runs one background prober until Temporal answers.
func (g *temporalGate) startProbing() {
	g.mu.Lock()
	if g.probing {
		g.mu.Unlock()
		return
	}
	g.probing = true
	g.mu.Unlock()
	go func() {
		t := time.NewTicker(temporalProbeInterval)
		defer t.Stop()
		for range t.C {
			ctx, cancel := context.WithTimeout(context.Background(), temporalProbeTimeout)
			err := g.check(ctx)
			cancel()
			if err == nil {
				g.lastOK.Store(g.now().UnixNano())
				g.mu.Lock()
				g.probing = false
				g.down.Store(false)
				g.mu.Unlock()
				return
			}
		}
	}()
}

// gatedClient is the API's Temporal client: the calls the API makes go
// through the gate; anything else goes straight to the client.
type gatedClient struct {
	client.Client
	gate *temporalGate
}

// gateTemporal wraps c so that the API's calls fail fast while Temporal
// is down (see temporalGate).
func gateTemporal(c client.Client) client.Client {
	if _, done := c.(gatedClient); done {
		return c
	}
	return gatedClient{Client: c, gate: newTemporalGate(func(ctx context.Context) error {
		_, err := c.CheckHealth(ctx, &client.CheckHealthRequest{})
		return err
	})}
}

func (c gatedClient) ExecuteWorkflow(ctx context.Context, options client.StartWorkflowOptions, workflow any, args ...any) (client.WorkflowRun, error) {
	if err := c.gate.admit(ctx); err != nil {
		return nil, err
	}
	run, err := c.Client.ExecuteWorkflow(ctx, options, workflow, args...)
	c.gate.observe(err)
	return run, err
}

func (c gatedClient) CancelWorkflow(ctx context.Context, workflowID, runID string) error {
	if err := c.gate.admit(ctx); err != nil {
		return err
	}
	err := c.Client.CancelWorkflow(ctx, workflowID, runID)
	c.gate.observe(err)
	return err
}

func (c gatedClient) QueryWorkflow(ctx context.Context, workflowID, runID, queryType string, args ...any) (converter.EncodedValue, error) {
	if err := c.gate.admit(ctx); err != nil {
		return nil, err
	}
	v, err := c.Client.QueryWorkflow(ctx, workflowID, runID, queryType, args...)
	c.gate.observe(err)
	return v, err
}

func (c gatedClient) UpdateWorkflow(ctx context.Context, options client.UpdateWorkflowOptions) (client.WorkflowUpdateHandle, error) {
	if err := c.gate.admit(ctx); err != nil {
		return nil, err
	}
	h, err := c.Client.UpdateWorkflow(ctx, options)
	c.gate.observe(err)
	return h, err
}

func (c gatedClient) SignalWorkflow(ctx context.Context, workflowID, runID, signalName string, arg any) error {
	if err := c.gate.admit(ctx); err != nil {
		return err
	}
	err := c.Client.SignalWorkflow(ctx, workflowID, runID, signalName, arg)
	c.gate.observe(err)
	return err
}

func (c gatedClient) DescribeWorkflowExecution(ctx context.Context, workflowID, runID string) (*workflowservice.DescribeWorkflowExecutionResponse, error) {
	if err := c.gate.admit(ctx); err != nil {
		return nil, err
	}
	resp, err := c.Client.DescribeWorkflowExecution(ctx, workflowID, runID)
	c.gate.observe(err)
	return resp, err
}
