package workflows

import (
	"errors"
	"fmt"
	"slices"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/op-stack/executor/models"
)

// changeBudgets: a run with execution_config.budget checks it before every
// dispatch (a global supervisor decision, a team turn); asked once at the
// run's start, only by runs with a budget, and carried in
// RunOptions.Budgets.
const changeBudgets = "budgets"

// errBudgetExceeded is the error of a run whose budget was spent with
// on_exceeded "fail".
type errBudgetExceeded struct{ msg string }

func (e *errBudgetExceeded) Error() string { return e.msg }

// recordBudgets asks for changeBudgets when the run has a budget.
func recordBudgets(ctx workflow.Context, o models.RunOptions) models.RunOptions {
	if o.Budget != nil {
		o.Budgets = workflow.GetVersion(ctx, changeBudgets, workflow.DefaultVersion, 1) == 1
	}
	return o
}

// budget is the run's budget when it is enforced, else nil.
func (w *runWorkflow) budget() *models.Budget {
	if !w.in.Options.Budgets {
		return nil
	}
	return w.in.Options.Budget
}

// addTeamUsage counts u against team's budget.
func (w *runWorkflow) addTeamUsage(team string, u models.Usage) {
	if w.budget() == nil {
		return
	}
	s := w.state
	if s.TeamUsage == nil {
		s.TeamUsage = map[string]models.Usage{}
	}
	s.TeamUsage[team] = s.TeamUsage[team].Add(u)
}

// runBudgetSpent tells whether the run's own budget is spent; the first
// time it is, it emits system.budget. Deterministic: it reads the run's
// state only.
func (w *runWorkflow) runBudgetSpent(ctx workflow.Context) bool {
	b := w.budget()
	if b == nil || !b.Spent(w.state.Usage) {
		return false
	}
	if !w.state.BudgetSpent {
		w.state.BudgetSpent = true
		w.emitBudget(ctx, "run", "", b.BudgetLimit, w.state.Usage)
	}
	return true
}

// checkTeamBudgets marks the teams whose budget is spent, emitting
// system.budget for each once; offerableTeams leaves them out.
func (w *runWorkflow) checkTeamBudgets(ctx workflow.Context) {
	b := w.budget()
	if b == nil {
		return
	}
	s := w.state
	for _, t := range w.hier.Teams {
		limit, ok := b.Teams[t.Name]
		if !ok || slices.Contains(s.TeamsOverBudget, t.Name) || !limit.Spent(s.TeamUsage[t.Name]) {
			continue
		}
		s.TeamsOverBudget = append(s.TeamsOverBudget, t.Name)
		w.emitBudget(ctx, "team", t.Name, limit, s.TeamUsage[t.Name])
	}
}

// overBudget tells whether team's budget is spent.
func (w *runWorkflow) overBudget(team string) bool {
	return slices.Contains(w.state.TeamsOverBudget, team)
}

func (w *runWorkflow) emitBudget(ctx workflow.Context, scope, team string, limit models.BudgetLimit, spent models.Usage) {
	b := w.budget()
	data := map[string]any{
		"scope":       scope,
		"on_exceeded": onExceeded(b),
		"spent":       map[string]any{"total_tokens": spent.TotalTokens, "cost_usd": spent.CostUSD, "cost_unknown": spent.CostUnknown},
		"limit":       limit,
	}
	if team != "" {
		data["team_name"] = team
		data["on_exceeded"] = "skip_team"
	}
	w.emit(ctx, systemSource(), models.CategorySystem, models.ActionBudget, data)
}

func onExceeded(b *models.Budget) string {
	if b != nil && b.OnExceeded == models.BudgetFail {
		return models.BudgetFail
	}
	return models.BudgetFinish
}

// budgetEnd ends the dispatching of a run whose budget is spent: nil (the
// final answer is written from what exists) or, with on_exceeded "fail",
// errBudgetExceeded.
func (w *runWorkflow) budgetEnd() error {
	b := w.budget()
	if onExceeded(b) != models.BudgetFail {
		w.state.Warnings = append(w.state.Warnings, "the run's budget is spent; the global supervisor writes the final answer from the work done so far")
		return nil
	}
	u := w.state.Usage
	return &errBudgetExceeded{msg: fmt.Sprintf("the run's budget is spent: %d tokens and $%.6f used, limit max_tokens %d, max_cost_usd %g",
		u.TotalTokens, u.CostUSD, b.MaxTokens, b.MaxCostUSD)}
}

// failBudget ends a run whose budget was spent with on_exceeded "fail".
func (w *runWorkflow) failBudget(ctx workflow.Context, cause error) (error, bool) {
	var be *errBudgetExceeded
	if !errors.As(cause, &be) {
		return nil, false
	}
	s := w.state
	dctx, _ := workflow.NewDisconnectedContext(ctx)
	gs := models.GlobalSupervisorSource(w.hier)
	now := models.FormatTimestamp(workflow.Now(ctx))
	code := models.CodeBudgetExceeded.Name
	s.Errors = append(s.Errors, models.ErrorInfo{ErrorCode: code, Message: be.msg, Timestamp: now})
	s.Status = models.RunFailed
	w.emit(dctx, systemSource(), models.CategorySystem, models.ActionError, map[string]any{"message": be.msg, "error_code": code})
	w.emit(dctx, gs, models.CategoryLifecycle, models.ActionFailed, map[string]any{"error": be.msg, "error_code": code})
	w.persistAll(dctx)
	_ = w.setStatus(dctx, models.RunStatusUpdate{RunID: w.in.RunID, Status: models.RunFailed, Result: w.result(), Error: be.msg})
	return temporal.NewNonRetryableApplicationError(be.msg, code, nil), true
}
