package workflows

import (
	"fmt"
	"strings"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/op-stack/executor/models"
)

// Steering a running team (runs with changeSteer): an operator cancels one
// team's turn without cancelling the run (the cancel_team update), or gives
// an agent guidance for its next prompt (the redirect update).
//
// A team turn runs on a context of its own, a child of the run's: cancelling
// it cancels the turn's in-flight LLM calls and tool calls and its
// sub-agent child workflows (or, for a turn run as a TeamWorkflow child,
// that child), and nothing else. The turn then ends with status cancelled
// and the reason; the global supervisor is no longer offered the team, and
// the teams that depend on it are skipped, as after a failure, but the run
// does not fail. Guidance waits in RunState.Guidance (so continue-as-new
// carries it) until the agent's next Decide or Respond takes it.

// steering is a run's steering state; nil in runs from before changeSteer.
type steering struct {
	// turns are the team turns at work now, by team name.
	turns map[string]*steeredTurn
}

// steeredTurn is one team turn at work that an operator may cancel.
type steeredTurn struct {
	cancel    workflow.CancelFunc
	cancelled bool
	reason    string
	by        string
}

// steerTurn gives a team turn about to start its own cancellable context
// and registers it; without steering it returns ctx as it is.
func (w *runWorkflow) steerTurn(ctx workflow.Context, team string) (workflow.Context, *steeredTurn) {
	if w.steer == nil {
		return ctx, nil
	}
	tctx, cancel := workflow.WithCancel(ctx)
	t := &steeredTurn{cancel: cancel}
	w.steer.turns[team] = t
	return tctx, t
}

// endTurn forgets a turn that has ended: it can no longer be cancelled.
func (w *runWorkflow) endTurn(team string, t *steeredTurn) {
	if w.steer != nil && t != nil && w.steer.turns[team] == t {
		delete(w.steer.turns, team)
	}
}

// takeGuidance returns, and forgets, the guidance waiting for an agent.
func (w *runWorkflow) takeGuidance(agentID string) []string {
	if w.steer == nil || agentID == "" {
		return nil
	}
	g := w.state.Guidance[agentID]
	if len(g) == 0 {
		return nil
	}
	delete(w.state.Guidance, agentID)
	return g
}

// knownAgent reports whether agentID is the global supervisor, a team
// supervisor or a worker of the run's hierarchy.
func (w *runWorkflow) knownAgent(agentID string) bool {
	if agentID == "" {
		return false
	}
	if w.hier.GlobalSupervisor.AgentID == agentID {
		return true
	}
	for _, t := range w.hier.Teams {
		if t.Supervisor.AgentID == agentID {
			return true
		}
		for _, wk := range t.Workers {
			if wk.AgentID == agentID {
				return true
			}
		}
	}
	return false
}

// setupSteer registers the cancel_team and redirect updates. They are
// registered in every run, so that a run from before steering refuses
// them with a clear error.
func (w *runWorkflow) setupSteer(ctx workflow.Context) error {
	live := func() error {
		if w.steer == nil {
			return temporal.NewApplicationError("the run started before steering was supported", models.ErrSteerRefused)
		}
		if models.IsTerminal(w.state.Status) {
			return temporal.NewApplicationError("the run has already "+w.state.Status, models.ErrSteerRefused)
		}
		return nil
	}
	if err := workflow.SetUpdateHandlerWithOptions(ctx, models.UpdateCancelTeam, func(ctx workflow.Context, r models.CancelTeamRequest) (string, error) {
		return w.cancelTeam(ctx, r)
	}, workflow.UpdateHandlerOptions{Validator: func(_ workflow.Context, r models.CancelTeamRequest) error {
		if err := live(); err != nil {
			return err
		}
		if findTeam(w.hier, r.TeamName) == nil {
			return temporal.NewApplicationError(fmt.Sprintf("team %q is not in the run's hierarchy", r.TeamName), models.ErrUnknownTeam)
		}
		if t := w.steer.turns[r.TeamName]; t == nil || t.cancelled {
			status := w.teamStatus(r.TeamName)
			if t != nil {
				status = "being cancelled"
			} else if status == "" {
				status = "not started"
			}
			return temporal.NewApplicationError(fmt.Sprintf("team %q is not running (%s)", r.TeamName, status), models.ErrTeamNotRunning)
		}
		return nil
	}}); err != nil {
		return err
	}
	return workflow.SetUpdateHandlerWithOptions(ctx, models.UpdateRedirect, func(ctx workflow.Context, r models.RedirectRequest) (string, error) {
		return w.redirect(ctx, r)
	}, workflow.UpdateHandlerOptions{Validator: func(_ workflow.Context, r models.RedirectRequest) error {
		if err := live(); err != nil {
			return err
		}
		if !w.knownAgent(r.AgentID) {
			return temporal.NewApplicationError(fmt.Sprintf("agent_id %q is not an agent of the run's hierarchy", r.AgentID), models.ErrUnknownAgent)
		}
		if strings.TrimSpace(r.Message) == "" {
			return temporal.NewApplicationError("the message is empty", models.ErrSteerRefused)
		}
		return nil
	}})
}

// cancelTeam cancels a running team's turn; the turn's own coroutine (or
// child workflow) ends, and finishTeam records it as cancelled.
func (w *runWorkflow) cancelTeam(ctx workflow.Context, r models.CancelTeamRequest) (string, error) {
	t := w.steer.turns[r.TeamName]
	if t == nil || t.cancelled {
		return r.TeamName, nil // it ended meanwhile
	}
	reason := strings.TrimSpace(r.Reason)
	if reason == "" {
		reason = "no reason given"
	}
	t.cancelled, t.reason, t.by = true, reason, models.OperatorSource(r.By).AgentID
	w.emit(ctx, models.OperatorSource(r.By), models.CategoryDispatch, models.ActionTeamCancelled, map[string]any{
		"team_name": r.TeamName, "reason": reason, "by": t.by,
	})
	// The global supervisor is told at its next decision.
	gs := w.hier.GlobalSupervisor.AgentID
	if gs != "" {
		if w.state.Guidance == nil {
			w.state.Guidance = map[string][]string{}
		}
		w.state.Guidance[gs] = append(w.state.Guidance[gs], fmt.Sprintf("Team %q was cancelled by %s: %s. It is no longer offered; route on without it.", r.TeamName, t.by, reason))
	}
	t.cancel()
	return r.TeamName, nil
}

// redirect queues guidance for an agent's next prompt.
func (w *runWorkflow) redirect(ctx workflow.Context, r models.RedirectRequest) (string, error) {
	if w.state.Guidance == nil {
		w.state.Guidance = map[string][]string{}
	}
	msg := strings.TrimSpace(r.Message)
	w.state.Guidance[r.AgentID] = append(w.state.Guidance[r.AgentID], msg)
	src := models.OperatorSource(r.By)
	w.emit(ctx, src, models.CategoryDispatch, models.ActionRedirect, map[string]any{
		"agent_id": r.AgentID, "target_agent_id": r.AgentID, "message": msg, "by": src.AgentID,
	})
	return r.AgentID, nil
}

// cancelledTurn is the output of a turn an operator cancelled, if t was:
// status cancelled with the reason, and (with partial results) the
// outputs of the workers that finished before.
func (w *runWorkflow) cancelledTurn(out models.TeamOutput, t startedTeam) (models.TeamOutput, bool) {
	if t.steer == nil || !t.steer.cancelled {
		return out, false
	}
	out.Status = models.TeamCancelled
	out.Error = fmt.Sprintf("cancelled by %s: %s", t.steer.by, t.steer.reason)
	w.keepFinishedWorkers(&out, t.state)
	return out, true
}
