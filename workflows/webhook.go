package workflows

import (
	"errors"
	"time"

	enumspb "go.temporal.io/api/enums/v1"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/op-stack/executor/models"
)

// webhookIdle is how long a delivery workflow with nothing to send waits
// for the run's next event before it ends; the next event starts it again
// (signal-with-start), after this one has ended, so order holds.
const webhookIdle = 30 * time.Second

// webhookHistoryLimit continues a delivery workflow as new past this many
// history events (a run that asks for approval thousands of times).
const webhookHistoryLimit = 5000

// WebhookDeliveryWorkflow delivers one run's webhook events to one
// endpoint (docs/webhooks.md). Deliveries arrive as signals, in the order
// of the run's log, and are sent one at a time in that order: the next
// waits until the previous is delivered or has exhausted its retries
// (then recorded as failed). It is not the run's child: the run never
// waits for it, so a slow or dead receiver never slows a run.
func WebhookDeliveryWorkflow(ctx workflow.Context, in models.WebhookDeliveryInput) error {
	ch := workflow.GetSignalChannel(ctx, models.SignalWebhookDelivery)
	queue := append([]string(nil), in.Pending...)
	drain := func() {
		var id string
		for ch.ReceiveAsync(&id) {
			queue = append(queue, id)
		}
	}
	actx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		// Each attempt is bounded by the HTTP client's timeout; the
		// margin covers the database reads and writes around it.
		StartToCloseTimeout:    in.Timeout + 10*time.Second,
		ScheduleToCloseTimeout: in.RetryFor,
		RetryPolicy: &temporal.RetryPolicy{
			InitialInterval:        time.Second,
			BackoffCoefficient:     2,
			MaximumInterval:        in.MaxInterval,
			NonRetryableErrorTypes: []string{models.ErrWebhookRefused},
		},
	})
	fctx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: 30 * time.Second,
		RetryPolicy:         &temporal.RetryPolicy{MaximumInterval: 10 * time.Second},
	})
	for {
		drain()
		if len(queue) == 0 {
			tctx, cancel := workflow.WithCancel(ctx)
			got := false
			sel := workflow.NewSelector(ctx)
			sel.AddReceive(ch, func(c workflow.ReceiveChannel, _ bool) {
				var id string
				c.Receive(ctx, &id)
				queue = append(queue, id)
				got = true
			})
			sel.AddFuture(workflow.NewTimer(tctx, webhookIdle), func(workflow.Future) {})
			sel.Select(ctx)
			cancel()
			if !got {
				drain()
				if len(queue) == 0 {
					return nil
				}
			}
			continue
		}
		if workflow.GetInfo(ctx).GetCurrentHistoryLength() > webhookHistoryLimit {
			drain()
			in.Pending = queue
			return workflow.NewContinueAsNewError(ctx, models.WebhookDeliveryWorkflowName, in)
		}
		id := queue[0]
		queue = queue[1:]
		if err := workflow.ExecuteActivity(actx, a.DeliverWebhook, id).Get(ctx, nil); err != nil {
			_ = workflow.ExecuteActivity(fctx, a.FailWebhookDelivery, id, webhookFailure(err)).Get(ctx, nil)
		}
	}
}

// webhookFailure is what a failed delivery records: that its retries
// ran out (the retry window closed), with the last attempt's error, or
// why it was refused.
func webhookFailure(err error) string {
	last := err.Error()
	var appErr *temporal.ApplicationError
	var timeout *temporal.TimeoutError
	switch {
	case errors.As(err, &appErr):
		last = appErr.Message()
	case errors.As(err, &timeout):
		last = "the attempt timed out"
	}
	var actErr *temporal.ActivityError
	if errors.As(err, &actErr) && actErr.RetryState() != enumspb.RETRY_STATE_NON_RETRYABLE_FAILURE {
		return "retries exhausted (WEBHOOK_RETRY_FOR); last error: " + last
	}
	return last
}
