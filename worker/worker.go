// Package worker wires the Temporal worker: the workflows and activities of
// a run on one task queue.
package worker

import (
	"time"

	"go.temporal.io/sdk/client"
	sdkworker "go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/op-stack/executor/activities"
	"github.com/op-stack/executor/models"
	"github.com/op-stack/executor/workflows"
)

// Options tunes the worker.
type Options struct {
	TaskQueue string
	// HeartbeatThrottle caps how long the SDK holds back an activity
	// heartbeat. Heartbeats carry cancellation back to the activity, so a
	// short throttle makes cancelling a run stop its LLM calls promptly.
	HeartbeatThrottle time.Duration
	// StopTimeout is how long Stop waits for running activities.
	StopTimeout time.Duration
}

// New builds a worker with every workflow and activity registered. Workflows
// and activities share the task queue, which lets the SDK run activities
// eagerly (see docs/performance.md).
func New(c client.Client, acts *activities.Activities, o Options) sdkworker.Worker {
	if o.TaskQueue == "" {
		o.TaskQueue = models.DefaultTaskQueue
	}
	if o.HeartbeatThrottle <= 0 {
		o.HeartbeatThrottle = time.Second
	}
	w := sdkworker.New(c, o.TaskQueue, sdkworker.Options{
		MaxHeartbeatThrottleInterval:     o.HeartbeatThrottle,
		DefaultHeartbeatThrottleInterval: o.HeartbeatThrottle,
		WorkerStopTimeout:                o.StopTimeout,
	})
	Register(w, acts)
	return w
}

// Register registers the workflows and activities on a worker or a test
// environment.
func Register(r interface {
	RegisterWorkflowWithOptions(any, workflow.RegisterOptions)
	RegisterActivity(any)
}, acts *activities.Activities) {
	RegisterWorkflows(r)
	if acts != nil {
		r.RegisterActivity(acts)
	}
}

// RegisterWorkflows registers the workflows under their names, on a worker,
// a test environment or a replayer.
func RegisterWorkflows(r interface {
	RegisterWorkflowWithOptions(any, workflow.RegisterOptions)
}) {
	r.RegisterWorkflowWithOptions(workflows.RunWorkflow, workflow.RegisterOptions{Name: models.RunWorkflowName})
	r.RegisterWorkflowWithOptions(workflows.TeamWorkflow, workflow.RegisterOptions{Name: models.TeamWorkflowName})
	r.RegisterWorkflowWithOptions(workflows.SubAgentWorkflow, workflow.RegisterOptions{Name: models.SubAgentWorkflowName})
	r.RegisterWorkflowWithOptions(workflows.FormatResultsWorkflow, workflow.RegisterOptions{Name: models.FormatResultsWorkflowName})
	r.RegisterWorkflowWithOptions(workflows.ScheduledRunWorkflow, workflow.RegisterOptions{Name: models.ScheduledRunWorkflowName})
	r.RegisterWorkflowWithOptions(workflows.WebhookDeliveryWorkflow, workflow.RegisterOptions{Name: models.WebhookDeliveryWorkflowName})
}
