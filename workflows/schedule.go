package workflows

import (
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/op-stack/executor/models"
)

// ScheduledRunResult is what a scheduled start answers: the run it started
// (its public id; its status and result are the run's, in runs/get).
type ScheduledRunResult struct {
	RunID string `json:"run_id"`
}

// ScheduledRunWorkflow is the action of a schedule (docs/schedules.md). Its
// activity stores the run's row with runs/start's checks and returns the
// run's workflow input; the run then runs as this workflow's child, with
// the id and search attributes runs/start gives it. The scheduled workflow
// lives until the run ends, so Temporal's overlap policy (skip, buffer
// one, allow all, cancel the previous) applies to the runs, and a
// cancellation of it (cancel the previous) cancels the run and waits for
// it to stop.
func ScheduledRunWorkflow(ctx workflow.Context, in models.ScheduledRunInput) (*ScheduledRunResult, error) {
	actx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: time.Minute,
		// A refusal (the hierarchy is gone, the tenant is at its limit, a
		// model has no key) is not retried: the schedule's next action
		// tries again, and this one fails where the schedule shows it.
		RetryPolicy: &temporal.RetryPolicy{InitialInterval: time.Second, MaximumAttempts: 5},
	})
	var start models.ScheduledRunStart
	if err := workflow.ExecuteActivity(actx, models.ActivityPrepareScheduledRun, in).Get(ctx, &start); err != nil {
		return nil, err
	}
	cctx := workflow.WithChildOptions(ctx, workflow.ChildWorkflowOptions{
		WorkflowID:            start.WorkflowID,
		StaticSummary:         start.StaticSummary,
		StaticDetails:         start.StaticDetails,
		TypedSearchAttributes: scheduledRunSearchAttributes(start.SearchAttributes),
		// The run stops with the schedule's workflow (terminated by an
		// operator, or cancelled by the overlap policy), never outlives it
		// unseen.
		ParentClosePolicy:   enumspb.PARENT_CLOSE_POLICY_REQUEST_CANCEL,
		WaitForCancellation: true,
	})
	err := workflow.ExecuteChildWorkflow(cctx, models.RunWorkflowName, start.Input).Get(ctx, nil)
	return &ScheduledRunResult{RunID: start.RunID}, err
}

// scheduledRunSearchAttributes types the run's search attributes: the
// hierarchy's name is Text, every other one a Keyword (models/search.go).
func scheduledRunSearchAttributes(attrs map[string]string) temporal.SearchAttributes {
	if len(attrs) == 0 {
		return temporal.SearchAttributes{}
	}
	updates := make([]temporal.SearchAttributeUpdate, 0, len(attrs))
	for name, v := range attrs {
		if name == models.SearchHierarchyName.GetName() {
			updates = append(updates, temporal.NewSearchAttributeKeyString(name).ValueSet(v))
			continue
		}
		updates = append(updates, temporal.NewSearchAttributeKeyKeyword(name).ValueSet(v))
	}
	return temporal.NewSearchAttributes(updates...)
}
