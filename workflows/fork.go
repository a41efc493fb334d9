package workflows

import (
	"fmt"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/op-stack/executor/models"
)

// startFork starts a forked run from its seed (RunInput.Fork): the state
// its original run had right after the fork point, built by the API from
// what the original stored. The copied events are in the database
// already (the API stored them under the fork's id), so the log goes on
// from the fork point's sequence, gap-free, and neither lifecycle.started
// nor system.topology is emitted again. A team turn the fork point was in
// carries on as a suspended turn would after continue-as-new: the run's
// loops resume it first. Nothing here calls a model.
func (w *runWorkflow) startFork(ctx workflow.Context) error {
	seed := w.in.Fork
	// Not carried across continue-as-new: the state is.
	w.in.Fork = nil
	s := w.state
	if s.Status != models.RunPending {
		return nil
	}
	_ = changed(ctx, changeForkSeed)
	now := workflow.Now(ctx)
	s.Status, s.StartedAt = models.RunRunning, &now
	s.Log.LastSequence, s.Log.Persisted = seed.From.Sequence, seed.From.Sequence
	s.Iteration, s.Turns = seed.Iteration, seed.Turns
	s.Teams = append([]models.TeamOutput(nil), seed.Teams...)
	for _, t := range s.Teams {
		if t.Status == models.TeamCompleted && !contains(s.CompletedTeams, t.TeamName) {
			s.CompletedTeams = append(s.CompletedTeams, t.TeamName)
		}
	}
	s.Warnings = append([]string(nil), seed.Warnings...)
	s.Errors = append([]models.ErrorInfo(nil), seed.Errors...)
	s.Usage = seed.Usage
	if w.budget() != nil {
		s.TeamUsage, s.AgentUsage = copyUsage(seed.TeamUsage), copyUsage(seed.AgentUsage)
	}
	if t := seed.Turn; t != nil {
		team := findTeam(w.hier, t.TeamName)
		if team == nil {
			return temporal.NewNonRetryableApplicationError(fmt.Sprintf("fork: team %q is not in the run's hierarchy", t.TeamName), models.ErrForkSeed, nil)
		}
		turn := t.Turn
		if t.Forced {
			// changes.next_team: the global supervisor's next dispatch,
			// made for it.
			s.Iteration++
			s.Turns++
			turn = s.Turns
			gs := models.GlobalSupervisorSource(w.hier)
			w.emit(ctx, gs, models.CategoryDispatch, models.ActionTeam, map[string]any{
				"team_name": team.Name, "instruction": t.Instruction, "reason": "forced by the fork (changes.next_team)", "iteration": s.Iteration,
			})
		}
		s.Suspended = []models.SuspendedTurn{{
			Output: models.TeamOutput{Turn: turn, TeamID: team.ID, TeamName: team.Name, Instruction: t.Instruction, StartedAt: &now},
			Input:  w.teamInput(team, t.Instruction, turn), Iteration: t.Iteration,
			Outputs: t.Outputs, Dispatched: t.Dispatched, Warnings: t.Warnings, Usage: t.Usage, Planned: t.Planned,
		}}
	}
	w.describe(ctx)
	return w.setStatus(ctx, models.RunStatusUpdate{RunID: w.in.RunID, Status: models.RunRunning})
}

func copyUsage(m map[string]models.Usage) map[string]models.Usage {
	if m == nil {
		return nil
	}
	out := make(map[string]models.Usage, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// takePlanned takes the turn's next planned dispatch (a fork's), if any,
// as the supervisor's decision. The dispatch the fork point copied is
// counted and on the stream already; a forced one (changes.next_worker)
// counts as an iteration and emits its dispatch.worker event here.
func (s *TeamState) takePlanned(ctx workflow.Context, sink eventSink, source models.Source, options []models.Option) (models.Decision, bool) {
	if len(s.Planned) == 0 {
		return models.Decision{}, false
	}
	p := s.Planned[0]
	s.Planned = s.Planned[1:]
	d := models.Decision{Action: models.DecisionDispatch, Target: p.Worker, Instruction: p.Instruction, Reason: "the fork's starting point"}
	if p.Forced {
		s.Iteration++
		d.Reason = "forced by the fork (changes.next_worker)"
		kind, data := models.DispatchEvent(source, options, d, s.Iteration)
		sink.emit(ctx, source, kind.Category, kind.Action, data)
	}
	return d, true
}
