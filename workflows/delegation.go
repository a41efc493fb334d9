package workflows

import (
	"go.temporal.io/sdk/workflow"

	"github.com/op-stack/executor/models"
)

// Delegation caps (runs with RunOptions.DelegationCaps, see
// changeDelegationCaps). A model answer may hold any number of delegate
// calls and sub-agents may delegate in turn, so without caps the sub-agents
// of one turn grow as calls-per-turn to the power of depth. Two caps bound
// them; a delegate call over either is refused, not run: the model gets a
// tool result saying so (and carries on), the stream a system.warning.
//
//   - Per turn (MaxDelegationsPerTurn): agentTurn counts the sub-agents
//     it has started over all its tool rounds.
//   - Per run (MaxDelegationsPerRun): a delegationBudget counts the
//     sub-agents started in the whole run, nested ones included.
//
// A sub-agent runs as a child workflow, which cannot share its caller's
// counter. So the caller lends: when it starts a sub-agent it counts that
// delegation, then lends the child everything left of its budget
// (SubAgentInput.DelegationBudget) and holds it while the child runs; the
// child spends from what it was lent (lending on to its own sub-agents the
// same way) and returns what it spent (SubAgentResult.Delegations), which
// the caller counts, and the rest comes back. Lending everything keeps the
// cap exact and the code deterministic without any messages between
// workflows. A child that fails is counted as having spent all it was
// lent: what it did spend is unknown, and the cap errs low, never high.
//
// Within one workflow execution only the team turns of a parallel run
// delegate at the same time: a delegation made while another turn's
// sub-agent holds the budget waits until it comes back (workflow.Await, no
// history event), then is counted or refused. A sub-agent's workflow and a
// sequential run never wait: one turn delegates at a time, and waits for
// its sub-agent.
//
// The run's workflow counts in RunState.Delegations, which continue-as-new
// carries (it happens only when no sub-agent runs, between team turns or
// between two steps of them, so nothing is lent).
type delegationBudget struct {
	limit int  // what this execution and its sub-agents may start
	used  *int // started so far, children's spending included
	lent  int  // lent to sub-agents running now
}

// newDelegationBudget is the budget of an execution of a run with the caps
// on, counting in *used; nil (no cap) for runs started before them.
func newDelegationBudget(o models.RunOptions, limit int, used *int) *delegationBudget {
	if !o.DelegationCaps {
		return nil
	}
	return &delegationBudget{limit: limit, used: used}
}

func (b *delegationBudget) left() int { return b.limit - *b.used - b.lent }

// take counts one delegation, waiting first while the budget is lent out;
// false when nothing is left.
func (b *delegationBudget) take(ctx workflow.Context) (bool, error) {
	if err := workflow.Await(ctx, func() bool { return b.left() > 0 || b.lent == 0 }); err != nil {
		return false, err
	}
	if b.left() <= 0 {
		return false, nil
	}
	*b.used++
	return true, nil
}

// giveBack uncounts a delegation taken and then refused for another reason.
func (b *delegationBudget) giveBack() { *b.used-- }

// lend lends a sub-agent everything left.
func (b *delegationBudget) lend() int {
	n := max(b.left(), 0)
	b.lent += n
	return n
}

// settle takes back what was lent to a sub-agent that spent spent of it.
func (b *delegationBudget) settle(lent, spent int) {
	b.lent -= lent
	*b.used += min(max(spent, 0), lent)
}
