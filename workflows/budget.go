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

// changeScopedBudgetFail: with on_exceeded "fail", a team's or an agent's
// budget spent fails the run (before it, the team or agent was only no
// longer offered, whatever on_exceeded said). Asked only by runs whose
// budget fails and has team or agent limits; carried in
// RunOptions.ScopedBudgetFail.
const changeScopedBudgetFail = "scoped-budget-fail"

// errBudgetExceeded is the error of a run whose budget was spent with
// on_exceeded "fail".
type errBudgetExceeded struct{ msg string }

func (e *errBudgetExceeded) Error() string { return e.msg }

// recordBudgets asks for changeBudgets when the run has a budget.
func recordBudgets(ctx workflow.Context, o models.RunOptions) models.RunOptions {
	if o.Budget != nil {
		o.Budgets = changed(ctx, changeBudgets)
	}
	if b := o.Budget; o.Budgets && b.OnExceeded == models.BudgetFail && (len(b.Teams) > 0 || len(b.Agents) > 0) {
		o.ScopedBudgetFail = changed(ctx, changeScopedBudgetFail)
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

// addTeamUsage counts u against team's budget and agentID's.
func (w *runWorkflow) addTeamUsage(team, agentID string, u models.Usage) {
	if w.budget() == nil {
		return
	}
	s := w.state
	if s.TeamUsage == nil {
		s.TeamUsage = map[string]models.Usage{}
	}
	s.TeamUsage[team] = s.TeamUsage[team].Add(u)
	w.addAgentUsage(agentID, u)
}

// addAgentUsage counts u against agentID's budget.
func (w *runWorkflow) addAgentUsage(agentID string, u models.Usage) {
	if w.budget() == nil || agentID == "" {
		return
	}
	s := w.state
	if s.AgentUsage == nil {
		s.AgentUsage = map[string]models.Usage{}
	}
	s.AgentUsage[agentID] = s.AgentUsage[agentID].Add(u)
}

func (w *runWorkflow) supervisorOf(team string) string {
	if t := findTeam(w.hier, team); t != nil {
		return t.Supervisor.AgentID
	}
	return ""
}

// runBudgetSpent tells whether the run's own budget (or its global
// supervisor's) is spent; the first time it is, it emits system.budget.
// Deterministic: it reads the run's state only.
func (w *runWorkflow) runBudgetSpent(ctx workflow.Context) bool {
	return w.runBudgetSpentWith(ctx, w.state.Usage)
}

// runBudgetSpentWith is runBudgetSpent with the run's usage given (a team
// turn adds its own, not yet counted).
func (w *runWorkflow) runBudgetSpentWith(ctx workflow.Context, usage models.Usage) bool {
	b := w.budget()
	if b == nil {
		return false
	}
	if w.state.BudgetSpent {
		return true
	}
	if b.Spent(usage) {
		w.state.BudgetSpent = true
		w.emitBudget(ctx, "run", "", "", b.BudgetLimit, usage)
		return true
	}
	if w.agentSpent(ctx, w.hier.GlobalSupervisor.AgentID, models.Usage{}) {
		w.state.BudgetSpent = true
		return true
	}
	return false
}

// agentSpent tells whether agentID's budget is spent, its usage so far
// plus extra (what the current turn has spent); the first time, it emits
// system.budget.
func (w *runWorkflow) agentSpent(ctx workflow.Context, agentID string, extra models.Usage) bool {
	b := w.budget()
	if b == nil {
		return false
	}
	s := w.state
	if slices.Contains(s.AgentsOverBudget, agentID) {
		return true
	}
	limit, ok := b.Agents[agentID]
	u := s.AgentUsage[agentID].Add(extra)
	if !ok || !limit.Spent(u) {
		return false
	}
	s.AgentsOverBudget = append(s.AgentsOverBudget, agentID)
	w.emitBudget(ctx, "agent", "", agentID, limit, u)
	w.failScope(fmt.Sprintf("agent %s", agentID), limit, u)
	return true
}

// teamSpent tells whether team's budget is spent, its usage so far plus
// extra; the first time, it emits system.budget.
func (w *runWorkflow) teamSpent(ctx workflow.Context, team string, extra models.Usage) bool {
	b := w.budget()
	if b == nil {
		return false
	}
	s := w.state
	if slices.Contains(s.TeamsOverBudget, team) {
		return true
	}
	limit, ok := b.Teams[team]
	u := s.TeamUsage[team].Add(extra)
	if !ok || !limit.Spent(u) {
		return false
	}
	s.TeamsOverBudget = append(s.TeamsOverBudget, team)
	w.emitBudget(ctx, "team", team, "", limit, u)
	w.failScope(fmt.Sprintf("team %s", team), limit, u)
	return true
}

// failScope marks the run's budget spent when a team's or an agent's is and
// on_exceeded is "fail" (RunOptions.ScopedBudgetFail): every check that
// follows (the turn's next step, the global supervisor's next decision)
// then ends the run with BUDGET_EXCEEDED naming who spent it.
func (w *runWorkflow) failScope(who string, limit models.BudgetLimit, u models.Usage) {
	if !w.in.Options.ScopedBudgetFail || w.state.BudgetSpent {
		return
	}
	w.state.BudgetSpent = true
	w.state.BudgetFailure = fmt.Sprintf("the budget of %s is spent: %d tokens and $%.6f used, limit max_tokens %d, max_cost_usd %g",
		who, u.TotalTokens, u.CostUSD, limit.MaxTokens, limit.MaxCostUSD)
}

// turnBudget is what an inline team turn of a run with a budget asks
// before each step.
type turnBudget struct {
	w          *runWorkflow
	team       string
	supervisor string
}

// stop tells whether the turn must end before its supervisor's next
// decision: the run's, the team's or the team supervisor's budget is
// spent, counting what the turn has spent so far.
func (t *turnBudget) stop(ctx workflow.Context, s *TeamState) bool {
	turn := s.Usage
	for _, o := range s.Outputs {
		turn = turn.Add(o.Usage)
	}
	if t.w.runBudgetSpentWith(ctx, t.w.state.Usage.Add(turn)) {
		return true
	}
	if t.w.teamSpent(ctx, t.team, turn) {
		return true
	}
	if t.w.agentSpent(ctx, t.supervisor, s.Usage) {
		return true
	}
	if t.w.in.Options.ScopedBudgetFail {
		// Under "fail" a worker already done in this turn (no longer an
		// option, so workers did not look at it) fails the run too.
		if team := findTeam(t.w.hier, t.team); team != nil {
			for _, wk := range team.Workers {
				if _, ok := t.w.budget().Agents[wk.AgentID]; ok && t.w.agentSpent(ctx, wk.AgentID, workerTurnUsage(s, wk.AgentID)) {
					return true
				}
			}
		}
	}
	return false
}

// workerTurnUsage is what agentID has spent in the turn s so far.
func workerTurnUsage(s *TeamState, agentID string) models.Usage {
	var u models.Usage
	for _, o := range s.Outputs {
		if o.AgentID == agentID {
			u = u.Add(o.Usage)
		}
	}
	return u
}

// workers leaves out of options the workers whose budget is spent.
func (t *turnBudget) workers(ctx workflow.Context, s *TeamState, options []models.Option) []models.Option {
	var out []models.Option
	for _, o := range options {
		var turn models.Usage
		for _, wo := range s.Outputs {
			if wo.AgentID == o.AgentID {
				turn = turn.Add(wo.Usage)
			}
		}
		if !t.w.agentSpent(ctx, o.AgentID, turn) {
			out = append(out, o)
		}
	}
	return out
}

// checkTeamBudgets marks the teams whose budget is spent, emitting
// system.budget for each once; offerableTeams leaves them out.
func (w *runWorkflow) checkTeamBudgets(ctx workflow.Context) {
	b := w.budget()
	if b == nil {
		return
	}
	for _, t := range w.hier.Teams {
		if _, ok := b.Teams[t.Name]; ok {
			w.teamSpent(ctx, t.Name, models.Usage{})
		}
	}
	w.checkAgentBudgets(ctx)
}

// checkAgentBudgets, under change scoped-budget-fail, looks at every agent
// with a limit, in the hierarchy's order: one whose budget is spent fails
// the run (failScope), also when it is no longer an option anywhere.
func (w *runWorkflow) checkAgentBudgets(ctx workflow.Context) {
	b := w.budget()
	if b == nil || !w.in.Options.ScopedBudgetFail || w.state.BudgetSpent {
		return
	}
	for _, t := range w.hier.Teams {
		for _, a := range append([]models.Agent{t.Supervisor}, t.Workers...) {
			if _, ok := b.Agents[a.AgentID]; ok && w.agentSpent(ctx, a.AgentID, models.Usage{}) {
				return
			}
		}
	}
}

// overBudget tells whether team's budget is spent.
func (w *runWorkflow) overBudget(team string) bool {
	return slices.Contains(w.state.TeamsOverBudget, team)
}

func (w *runWorkflow) emitBudget(ctx workflow.Context, scope, team, agentID string, limit models.BudgetLimit, spent models.Usage) {
	b := w.budget()
	data := map[string]any{
		"scope":       scope,
		"on_exceeded": onExceeded(b),
		"spent":       map[string]any{"total_tokens": spent.TotalTokens, "cost_usd": spent.CostUSD, "cost_unknown": spent.CostUnknown},
		"limit":       limit,
	}
	// Under change scoped-budget-fail a team or agent over a "fail"
	// budget fails the run: on_exceeded stays "fail".
	scoped := !w.in.Options.ScopedBudgetFail
	if team != "" {
		data["team_name"] = team
		if scoped {
			data["on_exceeded"] = "skip_team"
		}
	}
	if agentID != "" {
		data["agent_id"] = agentID
		if agentID != w.hier.GlobalSupervisor.AgentID && scoped {
			data["on_exceeded"] = "skip_agent"
		}
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
	if w.state.BudgetFailure != "" {
		return &errBudgetExceeded{msg: w.state.BudgetFailure}
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
