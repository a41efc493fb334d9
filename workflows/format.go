package workflows

import (
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/op-stack/executor/models"
)

// DefaultFormatTimeout bounds one formatting attempt when the input names
// no timeout.
const DefaultFormatTimeout = 2 * time.Minute

// FormatResultsWorkflow fills an output template from a run's results
// (spec 001 §4 results/format) with one activity, FormatResults. It is a
// workflow rather than an API-side call so the LLM keys stay in the worker,
// and the activity gets the run's retry policy for transient provider
// failures. An answer that never matches the template, a rejected request
// and an unusable template fail at once: retrying would not help.
func FormatResultsWorkflow(ctx workflow.Context, in models.FormatInput) (*models.FormatResult, error) {
	o := WithDefaults(in.Options)
	timeout := in.Timeout
	if timeout <= 0 {
		timeout = DefaultFormatTimeout
	}
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: timeout,
		HeartbeatTimeout:    o.HeartbeatTimeout,
		Summary:             "format results · " + agentSummary("", in.Supervisor, o),
		RetryPolicy: &temporal.RetryPolicy{
			InitialInterval:    o.RetryInitial,
			BackoffCoefficient: 2,
			MaximumInterval:    o.RetryMax,
			MaximumAttempts:    o.MaxAttempts,
			NonRetryableErrorTypes: []string{
				models.ErrLLMRejected, models.ErrFormatMismatch, models.ErrFormatInvalidTemplate,
			},
		},
	})
	var res models.FormatResult
	if err := workflow.ExecuteActivity(ctx, a.FormatResults, in).Get(ctx, &res); err != nil {
		return nil, err
	}
	return &res, nil
}
