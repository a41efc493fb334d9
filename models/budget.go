package models

import (
	"math"
	"sort"
)

// CheckBudget validates a budget (field names it in errors: a run's
// execution_config.budget, a hierarchy's budget) against the hierarchy:
// limits positive, at least one set, on_exceeded finish or fail, teams and
// agent_ids known.
func CheckBudget(b *Budget, f string, h *Hierarchy) error {
	if b == nil {
		return nil
	}
	if err := checkBudgetLimit(f, b.BudgetLimit); err != nil {
		return err
	}
	switch b.OnExceeded {
	case "", BudgetFinish, BudgetFail:
	default:
		return FieldError(f+".on_exceeded", "must be %q or %q, got %q", BudgetFinish, BudgetFail, b.OnExceeded)
	}
	if b.MaxTokens == 0 && b.MaxCostUSD == 0 && len(b.Teams) == 0 && len(b.Agents) == 0 {
		return FieldError(f, "must set max_tokens, max_cost_usd, teams or agents")
	}
	names := make([]string, 0, len(b.Teams))
	for name := range b.Teams {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		known := false
		for _, t := range h.Teams {
			known = known || t.Name == name
		}
		tf := f + ".teams." + name
		if !known {
			return FieldError(tf, "is not a team of hierarchy %q", h.ID)
		}
		l := b.Teams[name]
		if err := checkBudgetLimit(tf, l); err != nil {
			return err
		}
		if l.MaxTokens == 0 && l.MaxCostUSD == 0 {
			return FieldError(tf, "must set max_tokens or max_cost_usd")
		}
	}
	agents := map[string]bool{h.GlobalSupervisor.AgentID: true}
	for _, t := range h.Teams {
		agents[t.Supervisor.AgentID] = true
		for _, w := range t.Workers {
			agents[w.AgentID] = true
		}
	}
	ids := make([]string, 0, len(b.Agents))
	for id := range b.Agents {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		af := f + ".agents." + id
		if !agents[id] {
			return FieldError(af, "is not an agent_id of hierarchy %q", h.ID)
		}
		l := b.Agents[id]
		if err := checkBudgetLimit(af, l); err != nil {
			return err
		}
		if l.MaxTokens == 0 && l.MaxCostUSD == 0 {
			return FieldError(af, "must set max_tokens or max_cost_usd")
		}
	}
	return nil
}

func checkBudgetLimit(field string, l BudgetLimit) error {
	if l.MaxTokens < 0 {
		return FieldError(field+".max_tokens", "must be positive, got %d", l.MaxTokens)
	}
	if l.MaxCostUSD < 0 || math.IsNaN(l.MaxCostUSD) || math.IsInf(l.MaxCostUSD, 0) {
		return FieldError(field+".max_cost_usd", "must be positive, got %g", l.MaxCostUSD)
	}
	return nil
}
