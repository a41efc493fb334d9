package api

import (
	"errors"
	"testing"

	"github.com/op-stack/executor/models"
)

func TestCheckBudget(t *testing.T) {
	h := &models.Hierarchy{ID: "h-1", GlobalSupervisor: models.Agent{AgentID: "gs"}, Teams: []models.Team{
		{Name: "research", Supervisor: models.Agent{AgentID: "ts-r"}, Workers: []models.Agent{{AgentID: "w-1"}}},
	}}
	limit := func(tokens int, cost float64) models.BudgetLimit {
		return models.BudgetLimit{MaxTokens: tokens, MaxCostUSD: cost}
	}
	for _, c := range []struct {
		b     *models.Budget
		field string
	}{
		{nil, ""},
		{&models.Budget{BudgetLimit: limit(100, 0)}, ""},
		{&models.Budget{BudgetLimit: limit(0, 0.5), OnExceeded: "fail", Teams: map[string]models.BudgetLimit{"research": limit(10, 0)}, Agents: map[string]models.BudgetLimit{"w-1": limit(0, 0.1), "gs": limit(5, 0)}}, ""},
		{&models.Budget{}, "execution_config.budget"},
		{&models.Budget{BudgetLimit: limit(-1, 0)}, "execution_config.budget.max_tokens"},
		{&models.Budget{BudgetLimit: limit(0, -0.5)}, "execution_config.budget.max_cost_usd"},
		{&models.Budget{BudgetLimit: limit(1, 0), OnExceeded: "stop"}, "execution_config.budget.on_exceeded"},
		{&models.Budget{Teams: map[string]models.BudgetLimit{"nope": limit(1, 0)}}, "execution_config.budget.teams.nope"},
		{&models.Budget{Teams: map[string]models.BudgetLimit{"research": {}}}, "execution_config.budget.teams.research"},
		{&models.Budget{Agents: map[string]models.BudgetLimit{"w-2": limit(1, 0)}}, "execution_config.budget.agents.w-2"},
		{&models.Budget{Agents: map[string]models.BudgetLimit{"w-1": limit(-3, 0)}}, "execution_config.budget.agents.w-1.max_tokens"},
	} {
		err := checkBudget(c.b, h)
		var me *models.Error
		switch {
		case c.field == "" && err != nil:
			t.Errorf("%+v: %v", c.b, err)
		case c.field != "" && (!errors.As(err, &me) || me.Field != c.field || me.Code != models.CodeInvalidParameters):
			t.Errorf("%+v: want a 400 on %s, got %v", c.b, c.field, err)
		}
	}
}
