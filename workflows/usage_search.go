package workflows

import (
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/op-stack/executor/models"
)

// upsertUsage keeps the run's TotalTokens and CostUsd search attributes at
// its usage so far, when they changed (changeUsageSearchAttributes; only
// when the namespace has them, RunOptions.UsageSearchAttributes).
func (w *runWorkflow) upsertUsage(ctx workflow.Context) {
	if !w.in.Options.UsageSearchAttributes {
		return
	}
	if !changed(w.root, changeUsageSearchAttributes) {
		return
	}
	u := w.state.Usage
	sa := workflow.GetTypedSearchAttributes(ctx)
	tokens, hasTokens := sa.GetInt64(models.SearchTotalTokens)
	cost, hasCost := sa.GetFloat64(models.SearchCostUSD)
	if hasTokens && hasCost && tokens == int64(u.TotalTokens) && cost == u.CostUSD {
		return
	}
	updates := []temporal.SearchAttributeUpdate{
		models.SearchTotalTokens.ValueSet(int64(u.TotalTokens)),
		models.SearchCostUSD.ValueSet(u.CostUSD),
	}
	if err := workflow.UpsertTypedSearchAttributes(ctx, updates...); err != nil {
		workflow.GetLogger(ctx).Warn("upsert usage search attributes", "error", err)
	}
}
