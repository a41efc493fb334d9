package workflows

import (
	"errors"
	"fmt"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/op-stack/executor/models"
)

// TeamState is a team turn's whole state.
type TeamState struct {
	Input      models.TeamInput      `json:"input"`
	Iteration  int                   `json:"iteration"`
	Outputs    []models.WorkerOutput `json:"outputs"`
	Dispatched []string              `json:"dispatched"`
	Warnings   []string              `json:"warnings"`
	Usage      models.Usage          `json:"usage"`
	Events     runSignaler           `json:"events"`
	// Planned are dispatches the turn makes before asking its supervisor
	// again: a fork's (see takePlanned).
	Planned []models.PlannedDispatch `json:"planned,omitempty"`
	// guidance takes the operator's guidance waiting for an agent
	// (steering; nil without it).
	guidance func(agentID string) []string
	// approvals holds the turn's approval gates (the run's); nil without
	// them.
	approvals *approvalBook
	// budget checks the run's budget before each step (inline turns of
	// runs with one); nil: no budget.
	budget *turnBudget
	// Reassigned: the supervisor's model failed for good and its stand-in
	// (Input.SupervisorStandIn) routes for the rest of the turn.
	Reassigned bool `json:"reassigned,omitempty"`
}

// takeGuidance is the guidance waiting for an agent, taken.
func (s *TeamState) takeGuidance(agentID string) []string {
	if s.guidance == nil {
		return nil
	}
	return s.guidance(agentID)
}

// TeamWorkflow runs one team turn: the team supervisor picks a worker and
// an instruction, the worker answers, and so on until the supervisor ends
// the turn, every worker has worked once (with prevent_duplicate), or the
// iteration limit is reached.
//
// Runs started before inline team turns (changeInlineTeams) run each team
// turn as this child workflow; newer runs run the same turn inside the
// run's workflow (runWorkflow.startTeam).
func TeamWorkflow(ctx workflow.Context, in models.TeamInput) (*models.TeamResult, error) {
	in.Options = WithDefaults(in.Options)
	s := &TeamState{Input: in, Events: runSignaler{RunID: in.RunID, Producer: models.TeamWorkflowID(in.RunID, in.Turn)}}
	// Only runs started before inline team turns have TeamWorkflow
	// children, and those run without the delegation caps; with them, the
	// turn would hold a budget of its own.
	delegations := 0
	started := workflow.Now(ctx)
	res, err := runTeamTurn(ctx, s, &s.Events, newDelegationBudget(in.Options, in.Options.MaxDelegationsPerRun, &delegations), nil, nil)
	if res != nil {
		completeTeamResult(ctx, res, in, started)
	}
	return res, err
}

// completeTeamResult fills what a TeamWorkflow child's result shows in the
// Temporal Web UI and what runTeamTurn leaves to the run (which reads only
// Workers, Warnings and SupervisorUsage from it): the team's id, the
// turn's status, its start and end, and its usage. workflow.Now records
// no command, so histories of children that ended before this still
// replay.
func completeTeamResult(ctx workflow.Context, res *models.TeamResult, in models.TeamInput, started time.Time) {
	out := &res.Output
	out.TeamID = in.Team.ID
	if out.Status == "" {
		out.Status = models.TeamCompleted
	}
	ended := workflow.Now(ctx)
	out.StartedAt, out.CompletedAt = &started, &ended
	// out.Usage is the turn's usage already (turnUsage).
}

// runTeamTurn is one team turn, its events going to sink and its workers'
// delegations counted in budget (nil: no delegation caps); each step waits
// at gate while the run is paused (nil: no pause). Before each decision
// after its first step in this execution, the turn asks suspend (nil:
// never) whether to stop there for the run to continue as new; it then
// returns errSuspended, with s holding where it stopped.
func runTeamTurn(ctx workflow.Context, s *TeamState, sink eventSink, budget *delegationBudget, gate *pauseGate, suspend func() bool) (*models.TeamResult, error) {
	in := s.Input
	team := &s.Input.Team
	root := &models.Hierarchy{GlobalSupervisor: models.Agent{AgentID: in.RootAgentID}}
	source := models.TeamSupervisorSource(root, team)
	limit := team.Supervisor.MaxIterations
	if limit <= 0 {
		limit = in.MaxIterations
	}
	prior := in.PriorContext
	if len(prior) == 0 && len(in.PriorTeams) > 0 {
		prior = teamItems(in.PriorTeams) // a run started before PriorContext
	}
	finished := false
	stepped := false
	if s.approvals != nil && team.Supervisor.RequiresApproval && s.Iteration == 0 {
		// The team supervisor's turn waits for approval before it starts.
		if err := gate.wait(ctx); err != nil {
			return nil, err
		}
		r, err := s.approvals.askAgent(ctx, source, team.Supervisor, in.Instruction)
		if err != nil {
			return nil, err
		}
		if r.Decision == models.ApprovalRejected {
			// The global supervisor is told, as this team's only answer,
			// and routes on.
			return &models.TeamResult{Output: models.TeamOutput{
				Turn: in.Turn, TeamName: team.Name, Instruction: in.Instruction,
				Workers: []models.WorkerOutput{{
					AgentID: team.Supervisor.AgentID, Name: team.Supervisor.Name, Instruction: in.Instruction,
					Output: "team turn " + rejectionText(r),
				}},
			}}, nil
		}
		s.Input.Instruction, in.Instruction = r.Instruction, r.Instruction
	}
	for s.Iteration < limit || len(s.Planned) > 0 {
		if suspend != nil && stepped && suspend() {
			return nil, errSuspended
		}
		stepped = true
		options := availableWorkers(team, s.Dispatched)
		if len(options) == 0 {
			finished = true // prevent_duplicate: every worker has had its turn
			break
		}
		if s.budget != nil {
			if options = s.budget.workers(ctx, s, options); len(options) == 0 || s.budget.stop(ctx, s) {
				finished = true // the budget is spent: the turn ends with what it has
				break
			}
		}
		if err := gate.wait(ctx); err != nil {
			return nil, err
		}
		// A fork's planned dispatch is made without asking the supervisor.
		d, planned := s.takePlanned(ctx, sink, source, options)
		if !planned {
			s.Iteration++
			din := models.DecideInput{
				RunID:        in.RunID,
				Supervisor:   s.supervisor(),
				Source:       source,
				Task:         in.Task,
				Instruction:  in.Instruction,
				Options:      options,
				Completed:    s.Dispatched,
				Context:      withPrevious(in.PreviousContext, concat(prior, workerItems(s.Outputs)), in.Options),
				AllowFinish:  len(s.Outputs) > 0,
				Iteration:    s.Iteration,
				RunOptions:   in.Options,
				Publish:      true,
				ReturnEvents: sink.returnsEvents(),
				DeferWrites:  in.Options.DeferWrites,
				Guidance:     s.takeGuidance(team.Supervisor.AgentID),
			}
			var err error
			if d, err = teamDecide(ctx, sink, team.Name, din); err != nil {
				if !s.reassign(ctx, sink, source, err) {
					return nil, llmError(err, source, din.Supervisor, in.Options)
				}
				// The stand-in decides this step, and the turn's next ones.
				din.Supervisor = s.supervisor()
				if d, err = teamDecide(ctx, sink, team.Name, din); err != nil {
					return nil, llmError(err, source, din.Supervisor, in.Options)
				}
			}
			if err := saveUnsaved(ctx, in.Options, d.Saved, models.AnswerRecord{RunID: in.RunID, Calls: d.Calls}); err != nil {
				return nil, err
			}
			s.Usage = s.Usage.Add(d.Usage)
			if d.Warning != "" {
				s.Warnings = append(s.Warnings, d.Warning)
			}
			if d.Action == models.DecisionFinish {
				finished = true
				break
			}
		}
		if !offered(options, d.Target) {
			// Decide validates against the options it was given; this guards
			// against an activity version that does not.
			msg := fmt.Sprintf("team supervisor of %q chose %q, which was not offered; dispatching %q instead", team.Name, d.Target, options[0].Name)
			s.Warnings = append(s.Warnings, msg)
			sink.emit(ctx, source, models.CategorySystem, models.ActionWarning, map[string]any{"message": msg})
			d.Target = options[0].Name
		}
		worker := findWorker(team, d.Target)
		turn := &agentTurn{
			RunID: in.RunID, Agent: *worker, Source: models.WorkerSource(root, team, worker), Task: in.Task,
			Instruction: d.Instruction, Context: bounded(prior, in.Options), Purpose: models.PurposeWorker,
			MessageID: newMessageID(ctx), Options: in.Options, Events: sink, Budget: budget, Gate: gate,
			Guidance:  s.guidance,
			Approvals: s.approvals,
		}
		if team.ShareContext {
			turn.Context = bounded(concat(prior, workerItems(s.Outputs)), in.Options)
		}
		if err := gate.wait(ctx); err != nil {
			return nil, err
		}
		if s.approvals != nil && worker.RequiresApproval {
			// The worker's turn waits for approval before it starts.
			r, err := s.approvals.askAgent(ctx, turn.Source, *worker, d.Instruction)
			if err != nil {
				return nil, err
			}
			if err := gate.wait(ctx); err != nil {
				return nil, err
			}
			if r.Decision == models.ApprovalRejected {
				// The team supervisor reads the rejection as the worker's
				// answer and routes on.
				s.Outputs = append(s.Outputs, models.WorkerOutput{
					AgentID: worker.AgentID, Name: worker.Name, Instruction: d.Instruction,
					Output: rejectionText(r),
				}.WithPreview())
				if !contains(s.Dispatched, worker.Name) {
					s.Dispatched = append(s.Dispatched, worker.Name)
				}
				continue
			}
			d.Instruction, turn.Instruction = r.Instruction, r.Instruction
		}
		tr, err := turn.run(ctx)
		if err != nil {
			return nil, err
		}
		s.Warnings = append(s.Warnings, tr.Warnings...)
		res := tr.Answer
		// The whole answer is stored as message MessageID (by Respond); the
		// turn keeps a preview, so its state and result stay small.
		s.Outputs = append(s.Outputs, models.WorkerOutput{
			AgentID: worker.AgentID, Name: worker.Name, Instruction: d.Instruction,
			Output: res.Output, Model: res.Model, Offline: res.Offline, Usage: tr.Usage, SubAgentUsage: tr.SubAgentUsage,
			ToolsUsed: tr.ToolsUsed, MessageID: turn.MessageID,
		}.WithPreview())
		if !contains(s.Dispatched, worker.Name) {
			s.Dispatched = append(s.Dispatched, worker.Name)
		}
	}
	if !finished {
		msg := fmt.Sprintf("team supervisor of %q reached its iteration limit (%d); ending the team's turn", team.Name, limit)
		s.Warnings = append(s.Warnings, msg)
		sink.emit(ctx, source, models.CategorySystem, models.ActionWarning, map[string]any{"message": msg})
	}
	return &models.TeamResult{
		Output: models.TeamOutput{
			Turn: in.Turn, TeamName: team.Name, Instruction: in.Instruction,
			Workers: s.Outputs, Usage: turnUsage(s.Usage, s.Outputs),
		},
		Warnings:        s.Warnings,
		SupervisorUsage: s.Usage,
	}, nil
}

// teamDecide runs a team supervisor's decision.
func teamDecide(ctx workflow.Context, sink eventSink, team string, in models.DecideInput) (models.Decision, error) {
	var d models.Decision
	o := in.RunOptions
	dctx := llmContext(ctx, o, agentSummary(team, in.Supervisor, o), in.Supervisor)
	in.Lease = sink.lease(ctx)
	err := workflow.ExecuteActivity(dctx, a.Decide, in).Get(ctx, &d)
	sink.endLease(ctx, in.Lease, d.Events, err)
	return d, err
}

// supervisor is who makes the turn's decisions: its team supervisor, or
// once reassigned its stand-in.
func (s *TeamState) supervisor() models.Agent {
	if s.Reassigned {
		return standInFor(s.Input.Team.Supervisor, *s.Input.SupervisorStandIn)
	}
	return s.Input.Team.Supervisor
}

// standInFor is the stand-in of team supervisor ts: ts itself (its
// agent_id, name, role, prompt, temperature and token limit: it still
// routes as the team's supervisor) calling the global supervisor's model
// (gs: its model, provider, endpoint, region, time limit and fallbacks).
func standInFor(ts, gs models.Agent) models.Agent {
	a := ts
	a.Model, a.Provider, a.BaseURL, a.Region = gs.Model, gs.Provider, gs.BaseURL, gs.Region
	a.Timeout, a.FallbackModels = gs.Timeout, gs.FallbackModels
	return a
}

// reassign hands the turn's routing to its supervisor's stand-in after the
// supervisor's decision failed with err, and says so on the stream
// (system.supervisor_reassigned) and in the turn's warnings. It reports
// false, changing nothing, when the turn has no stand-in (a run from
// before changeSupervisorStandIn), has handed over already, was
// cancelled, or the stand-in would call the very model that failed.
func (s *TeamState) reassign(ctx workflow.Context, sink eventSink, source models.Source, err error) bool {
	in := s.Input
	if in.SupervisorStandIn == nil || s.Reassigned || ctx.Err() != nil || temporal.IsCanceledError(err) {
		return false
	}
	ts := in.Team.Supervisor
	standIn := standInFor(ts, *in.SupervisorStandIn)
	o := in.Options
	from, to := o.ModelFor(ts), o.ModelFor(standIn)
	if from == to && ts.Provider == standIn.Provider && ts.BaseURL == standIn.BaseURL && ts.Region == standIn.Region {
		return false
	}
	s.Reassigned = true
	msg := fmt.Sprintf("team supervisor %q (agent_id %s) of team %q failed on model %q: %s; its routing passes to the global supervisor's model %q (agent_id %s) for the rest of the turn",
		ts.Name, ts.AgentID, in.Team.Name, from, failureMessage(llmError(err, source, ts, o)), to, in.SupervisorStandIn.AgentID)
	s.Warnings = append(s.Warnings, msg)
	sink.emit(ctx, source, models.CategorySystem, models.ActionSupervisorReassigned, map[string]any{
		"agent_id":          ts.AgentID,
		"stand_in_agent_id": in.SupervisorStandIn.AgentID,
		"team_name":         in.Team.Name,
		"from_model":        from,
		"to_model":          to,
		"error":             failureMessage(llmError(err, source, ts, o)),
		"message":           msg,
		"iteration":         s.Iteration,
	})
	return true
}

// errSuspended ends a team turn stopped for the run to continue as new.
var errSuspended = errors.New("team turn suspended for continue-as-new")

// suspendedTurn is what a stopped turn carries to the next execution.
func suspendedTurn(s *TeamState, output models.TeamOutput) *models.SuspendedTurn {
	return &models.SuspendedTurn{
		Output: output, Input: s.Input, Iteration: s.Iteration, Outputs: s.Outputs,
		Dispatched: s.Dispatched, Warnings: s.Warnings, Usage: s.Usage, Planned: s.Planned, Reassigned: s.Reassigned,
	}
}

// resumedState is a stopped turn's state again.
func resumedState(t models.SuspendedTurn) *TeamState {
	return &TeamState{Input: t.Input, Iteration: t.Iteration, Outputs: t.Outputs, Dispatched: t.Dispatched, Warnings: t.Warnings, Usage: t.Usage, Planned: t.Planned, Reassigned: t.Reassigned}
}

// turnUsage is a team turn's usage: its supervisor's and its workers'.
func turnUsage(supervisor models.Usage, workers []models.WorkerOutput) models.Usage {
	u := supervisor
	for _, w := range workers {
		u = u.Add(w.Usage)
	}
	return u
}

func availableWorkers(team *models.Team, dispatched []string) []models.Option {
	var options []models.Option
	for _, w := range team.Workers {
		if team.PreventDuplicate && contains(dispatched, w.Name) {
			continue
		}
		options = append(options, models.Option{Name: w.Name, AgentID: w.AgentID, Description: w.Role + ": " + firstLine(w.SystemPrompt)})
	}
	return options
}

func offered(options []models.Option, name string) bool {
	for _, o := range options {
		if o.Name == name {
			return true
		}
	}
	return false
}

func findWorker(team *models.Team, name string) *models.Agent {
	for i := range team.Workers {
		if team.Workers[i].Name == name {
			return &team.Workers[i]
		}
	}
	return nil
}

// concat returns a new slice holding a then b.
func concat(a, b []models.ContextItem) []models.ContextItem {
	return append(append(make([]models.ContextItem, 0, len(a)+len(b)), a...), b...)
}
