package workflows

import (
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/op-stack/executor/models"
)

// Event log tuning: the workflow persists its events in batches of
// persistBatch (and at every safe point), and keeps the newest keepEvents
// persisted events for queries; older ones are read from the database.
const (
	persistBatch = 100
	keepEvents   = 500
)

type runWorkflow struct {
	in      models.RunInput
	state   *models.RunState
	hier    *models.Hierarchy
	signals workflow.ReceiveChannel
	// persistUpTo asks the persister to store every event up to it.
	persistUpTo int64
	// timedOut is set when max_execution_time has cancelled the work.
	timedOut bool
	// inlineTeams runs team turns inside this workflow rather than as
	// child workflows (changeInlineTeams).
	inlineTeams bool
	// delegations is the run's delegation budget, counting in
	// state.Delegations; nil without the caps (changeDelegationCaps).
	delegations *delegationBudget
	// routedParallel lets the global supervisor dispatch several teams at
	// once in routed mode (changeRoutedParallel).
	routedParallel bool
	// turnContinueAsNew lets team turns stop between two steps for the run
	// to continue as new (changeTurnContinueAsNew); draining is set once
	// the history is long: turns stop at their next step, and nothing new
	// starts until the run has continued as new.
	turnContinueAsNew bool
	draining          bool
	// signalsSeen counts the event batches (signals) this execution has
	// received.
	signalsSeen int
	// updatesSeen counts the event batches this execution has taken as
	// updates (models.UpdateEvents), and pushedUpTo is the last sequence
	// an update's answer has handed out (see delivery.go).
	updatesSeen int
	pushedUpTo  int64
	// gate holds new steps while the run is paused; nil without pause
	// (changePause).
	gate *pauseGate
	// steer lets an operator cancel a team's turn or redirect an agent;
	// nil in runs from before changeSteer.
	steer *steering
	// statusBusy serializes status writes (pause and resume write from
	// their handlers while the main coroutine may write too).
	statusBusy bool
	// approvals holds the run's open approval gates; nil without them
	// (changeApprovals).
	approvals *approvalBook
	// idleFlush stores every event at once while the run is idle
	// (changeIdleFlush).
	idleFlush bool
	// standIn gives team turns their supervisor's stand-in
	// (changeSupervisorStandIn).
	standIn bool
	// attemptOrder keeps an LLM call's attempts apart in the log
	// (changeAttemptOrder).
	attemptOrder bool
	// batchOrder applies each producer's batches in their order, holding
	// one that arrives early (changeBatchOrder); root is the workflow's
	// context, for the history length that dates a held batch.
	batchOrder bool
	// eventLeases lends the run's next sequences to the LLM activity it
	// waits on alone (changeEventLease, lease.go); noLease is set while
	// teams work in parallel, and producing counts the leasable
	// activities under way.
	eventLeases bool
	noLease     bool
	producing   int
	// forget are the usage record ids whose kept answers the next lease
	// drops (models.EventLease.Forget).
	forget []string
	root   workflow.Context
	// admissionQueue lets a run started queued wait for admission
	// (changeAdmissionQueue); queued is set while it waits.
	admissionQueue bool
	queued         bool
}

// RunWorkflow runs a hierarchy on a task: the global supervisor picks a
// team and an instruction, the team's turn runs as a child TeamWorkflow,
// and so on until the global supervisor finishes (or reaches its iteration
// limit) and writes the final answer. Its state, including the event log
// that activities fill through signals, is one struct; when the history
// grows long the workflow continues as new between team turns, carrying
// that struct.
func RunWorkflow(ctx workflow.Context, in models.RunInput) (*models.RunResult, error) {
	ctx = withBaseline(ctx) // first: before any other version marker
	in.Options = WithDefaults(in.Options)
	state := in.State
	if state == nil {
		state = &models.RunState{Status: models.RunPending}
	}
	in.State = nil
	w := &runWorkflow{in: in, state: state}
	w.hier = &w.in.Hierarchy
	w.inlineTeams = changed(ctx, changeInlineTeams)
	// Carried in the options to the team turns and sub-agents of this
	// execution.
	w.in.Options.DeferWrites = changed(ctx, changeAnswerSaveStep)
	w.in.Options.DelegationCaps = changed(ctx, changeDelegationCaps)
	w.in.Options = recordFieldChanges(ctx, w.in.Options)
	w.delegations = newDelegationBudget(w.in.Options, w.in.Options.MaxDelegationsPerRun, &w.state.Delegations)
	w.in.Options.Pausable = changed(ctx, changePause)
	w.gate = newPauseGate(w.in.Options)
	w.routedParallel = changed(ctx, changeRoutedParallel)
	w.turnContinueAsNew = w.inlineTeams && changed(ctx, changeTurnContinueAsNew)
	if changed(ctx, changeSteer) {
		w.steer = &steering{turns: map[string]*steeredTurn{}}
	}
	w.in.Options.Approvals = changed(ctx, changeApprovals) && w.inlineTeams && w.gate != nil
	w.approvals = newApprovalBook(w)
	w.in.Options = recordBudgets(ctx, w.in.Options)
	w.idleFlush = changed(ctx, changeIdleFlush)
	w.standIn = changed(ctx, changeSupervisorStandIn)
	w.attemptOrder = changed(ctx, changeAttemptOrder)
	w.batchOrder = changed(ctx, changeBatchOrder)
	w.eventLeases = changed(ctx, changeEventLease)
	w.root = ctx
	if in.Queue != nil {
		// Asked only of queued runs, so histories of runs admitted at
		// once are unchanged.
		w.admissionQueue = changed(ctx, changeAdmissionQueue)
	}
	if w.gate != nil && w.state.Status == models.RunPaused {
		w.gate.paused = true // paused across continue-as-new
	}
	if err := w.setup(ctx); err != nil {
		return nil, err
	}
	result, err := w.run(ctx)
	if err != nil {
		if workflow.IsContinueAsNewError(err) {
			return nil, err
		}
		if ferr, ok := w.failBudget(ctx, err); ok {
			return nil, ferr
		}
		return nil, w.fail(ctx, err)
	}
	return result, nil
}

// setup registers the queries, starts receiving event signals and starts
// the persister.
func (w *runWorkflow) setup(ctx workflow.Context) error {
	if err := workflow.SetQueryHandler(ctx, models.QueryProgress, func() (models.Progress, error) {
		return w.progress(), nil
	}); err != nil {
		return err
	}
	if err := workflow.SetQueryHandler(ctx, models.QueryResult, func() (*models.RunResult, error) {
		return w.result(), nil
	}); err != nil {
		return err
	}
	if err := workflow.SetQueryHandler(ctx, models.QueryEvents, func(q models.EventQuery) (models.EventPage, error) {
		return w.state.Log.Page(q, models.IsTerminal(w.state.Status)), nil
	}); err != nil {
		return err
	}
	// Events must be stored while the run is cancelled and cleans up: the
	// persister runs on a context cancellation does not close.
	bg, _ := workflow.NewDisconnectedContext(ctx)
	// Event batches are applied by the main coroutine itself, in await and
	// before it appends an event, never by a coroutine of their own: a
	// receiving coroutine takes a batch out of the channel when the
	// history delivers it but applies it only when it next runs, which may
	// be after the main coroutine has already appended what must follow it.
	w.signals = workflow.GetSignalChannel(ctx, models.SignalEvents)
	workflow.Go(bg, w.persistLoop)
	if err := w.setupDelivery(ctx); err != nil {
		return err
	}
	if err := w.setupSteer(ctx); err != nil {
		return err
	}
	if err := w.setupApprovals(ctx); err != nil {
		return err
	}
	return w.setupPause(ctx)
}

// persistLoop stores the log's events in the database, in batches, through
// a local activity (one marker in the history per batch, no task queue
// round trip). Writes are idempotent on (run_id, sequence).
func (w *runWorkflow) persistLoop(ctx workflow.Context) {
	log := &w.state.Log
	lctx := workflow.WithLocalActivityOptions(ctx, workflow.LocalActivityOptions{
		StartToCloseTimeout: 30 * time.Second,
		RetryPolicy:         &temporal.RetryPolicy{InitialInterval: 200 * time.Millisecond, BackoffCoefficient: 2, MaximumInterval: 10 * time.Second},
	})
	for {
		_ = workflow.Await(ctx, func() bool {
			pending := log.LastSequence - log.Persisted
			return pending >= persistBatch || (pending > 0 && (w.persistUpTo > log.Persisted || w.idle()))
		})
		events := log.Unpersisted()
		if len(events) == 0 {
			continue
		}
		if err := workflow.ExecuteLocalActivity(lctx, a.PersistEvents, models.PersistEventsInput{Events: events}).Get(ctx, nil); err != nil {
			workflow.GetLogger(ctx).Error("persist events", "run_id", w.in.RunID, "error", err)
			_ = workflow.Sleep(ctx, time.Second)
			continue
		}
		log.MarkPersisted(events[len(events)-1].Sequence, keepEvents)
	}
}

// idle reports whether the run is waiting on a person (paused, or an
// approval gate open) in a run with changeIdleFlush. What it appends then
// (the end of work in flight when the pause came, events of turns still at
// work beside a gate) is stored at once, in the workflow task that appends
// it, rather than when persistBatch events have gathered: a run may wait
// for hours, and runs/events must not lag the stream for as long.
func (w *runWorkflow) idle() bool {
	return w.idleFlush && (w.queued || w.gate.held() || w.approvals.waiting())
}

// persistAll waits until every event appended so far is stored.
func (w *runWorkflow) persistAll(ctx workflow.Context) {
	w.releaseHeld(true) // batches whose gap never filled: keep what came
	w.persistUpTo = w.state.Log.LastSequence
	_ = workflow.Await(ctx, func() bool { return w.state.Log.Persisted >= w.persistUpTo })
}

// continueAsNewIfLong continues the run as a new execution when its history
// has grown long. It is called only at safe points: no activity or child
// workflow in flight. Every signal delivered so far is applied first and
// the log is stored, so nothing is lost; activities signal by workflow ID,
// so their next batches reach the new execution.
func (w *runWorkflow) continueAsNewIfLong(ctx workflow.Context) error {
	if !w.draining && !w.historyLong(ctx) {
		return nil
	}
	if w.gate != nil {
		// A pause or resume in progress finishes in this execution.
		_ = workflow.Await(ctx, func() bool { return workflow.AllHandlersFinished(ctx) })
	}
	w.persistAll(ctx)
	w.drainSignals()
	w.releaseHeld(true)
	// The carried state must stay small (it is the next execution's
	// input): stored events stay behind, queries read them from the database.
	w.state.Log.MarkPersisted(w.state.Log.Persisted, 0)
	// Every batch of every finished activity has been applied (an activity
	// returns only once its batches are delivered), and the next execution's
	// producers carry its own Temporal run id: the map would only grow.
	w.state.Log.Producers = nil
	w.state.Log.Attempts = nil
	w.state.Generation++
	next := w.in
	next.State = w.state
	return workflow.NewContinueAsNewError(ctx, RunWorkflow, next)
}

// continueAsNewSignals is how many signals an execution takes before it
// continues as new (with changeTurnContinueAsNew), whatever its length:
// half Temporal's 10,000 per execution, the other half left for what the
// turns in flight send while the run drains.
var continueAsNewSignals = 5000

// historyLong reports whether the execution's history has grown past
// ContinueAsNewAfter (or, in runs with changeTurnContinueAsNew, has taken
// continueAsNewSignals signals), or Temporal suggests continuing as new.
func (w *runWorkflow) historyLong(ctx workflow.Context) bool {
	info := workflow.GetInfo(ctx)
	return info.GetCurrentHistoryLength() >= w.in.Options.ContinueAsNewAfter || info.GetContinueAsNewSuggested() ||
		(w.turnContinueAsNew && (w.signalsSeen >= continueAsNewSignals || w.updatesSeen >= continueAsNewUpdates))
}

// suspendTurn is what a team turn asks between two steps: whether to stop
// there for the run to continue as new (nil: never, in runs from before
// changeTurnContinueAsNew). Once the history is long the run drains: every
// turn stops at its next step, none starts, and when none is left in
// flight the run continues as new carrying them (RunState.Suspended).
func (w *runWorkflow) suspendTurn(ctx workflow.Context) func() bool {
	if !w.turnContinueAsNew {
		return nil
	}
	return func() bool {
		if !w.draining && w.historyLong(ctx) {
			w.draining = true
		}
		return w.draining
	}
}

func (w *runWorkflow) run(ctx workflow.Context) (*models.RunResult, error) {
	s := w.state
	gs := models.GlobalSupervisorSource(w.hier)
	if w.in.Fork != nil {
		// A fork starts where its original was (fork.go).
		if err := w.startFork(ctx); err != nil {
			return nil, err
		}
	}
	if w.admissionQueue && (s.Status == models.RunPending || s.Status == models.RunQueued) {
		if err := w.waitAdmission(ctx); err != nil {
			return nil, err
		}
	}
	if s.Status == models.RunPending {
		s.Status = models.RunRunning
		now := workflow.Now(ctx)
		s.StartedAt = &now
		started := map[string]any{"task": w.in.Task, "hierarchy_id": w.hier.ID}
		if len(w.in.OfflineAgents) > 0 {
			// Only runs started with the field have it, so replays of
			// older histories emit what they emitted; the event log is
			// data, not a command, so no version marker is needed.
			started["offline"] = true
			started["offline_agents"] = w.in.OfflineAgents
		}
		if p := w.in.Previous; p != nil {
			// A follow-up run (event data, as above).
			started["previous_run_id"], started["thread_id"] = p.RunID, p.ThreadID
		}
		w.emit(ctx, gs, models.CategoryLifecycle, models.ActionStarted, started)
		topo := topology(w.hier)
		if limit := w.routedLimit(); w.routedParallel && limit > 1 {
			// Stream readers learn that the global supervisor may decide
			// while teams are at work (spec 001's translator needs it).
			// Event data, not a command: replay is unaffected.
			topo["max_parallel_teams"] = limit
		}
		w.emit(ctx, systemSource(), models.CategorySystem, models.ActionTopology, topo)
		if err := w.setStatus(ctx, models.RunStatusUpdate{RunID: w.in.RunID, Status: models.RunRunning}); err != nil {
			return nil, err
		}
	}
	work := w.withDeadline(ctx)
	var err error
	if w.hier.ExecutionMode == models.ExecutionModeParallel {
		err = w.runParallel(work)
	} else if limit := w.routedLimit(); limit > 1 {
		err = w.runRouted(work, limit)
	} else {
		err = w.runSequential(work)
	}
	if err != nil {
		return nil, err
	}
	s.CurrentTeam, s.CurrentWorker = "", ""
	if len(s.Errors) > 0 {
		// A team failed: the teams that did not depend on it have run, and
		// the run fails with the work done kept in its result.
		return nil, temporal.NewNonRetryableApplicationError(s.Errors[0].Message, models.ErrTeamFailed, nil)
	}

	if err := w.gate.wait(work); err != nil {
		return nil, err
	}
	s.ActiveAgentID = gs.AgentID
	var final models.RespondResult
	finalID := w.in.AnswerMessageID
	if finalID == "" { // the input decides, so a replay agrees
		finalID = newMessageID(ctx)
	}
	fctx := llmContext(work, w.in.Options, agentSummary("", w.hier.GlobalSupervisor, w.in.Options)+" · final answer", w.hier.GlobalSupervisor)
	w.noLease = false // the teams are done: the final answer streams alone
	lease := w.lease(ctx)
	err = w.await(ctx, workflow.ExecuteActivity(fctx, a.Respond, models.RespondInput{
		RunID:        w.in.RunID,
		Purpose:      models.PurposeFinalAnswer,
		Agent:        w.hier.GlobalSupervisor,
		Source:       gs,
		Task:         w.in.Task,
		Instruction:  w.in.Task,
		Context:      withPrevious(w.previousContext(), teamItems(completedTeams(s.Teams)), w.in.Options),
		RunOptions:   w.in.Options,
		NoTools:      true,
		MessageID:    finalID,
		ReturnEvents: true,
		Lease:        lease,
		DeferWrites:  w.in.Options.DeferWrites,
		Guidance:     w.takeGuidance(gs.AgentID),
	}), &final)
	w.endLease(ctx, lease, final.Events, err)
	if err != nil {
		return nil, llmError(err, gs, w.hier.GlobalSupervisor, w.in.Options)
	}
	if err := saveUnsaved(work, w.in.Options, final.Saved, models.AnswerRecord{
		RunID: w.in.RunID, Calls: final.Calls, MessageID: finalID, Source: gs, Content: final.Output,
	}); err != nil {
		return nil, err
	}
	s.Usage = s.Usage.Add(final.Usage)
	s.ActiveAgentID = ""
	result := w.result()
	result.FinalAnswer = final.Output
	// The terminal event is stored before the terminal status: a client
	// that sees the run finished in the database finds all its events there.
	s.Status = models.RunCompleted
	w.emit(ctx, gs, models.CategoryLifecycle, models.ActionCompleted, map[string]any{"final_answer": final.Output, "usage": s.Usage})
	w.persistAll(ctx)
	if err := w.setStatus(ctx, models.RunStatusUpdate{RunID: w.in.RunID, Status: models.RunCompleted, Result: result}); err != nil {
		return nil, err
	}
	return result, nil
}

// result is the run's result so far.
func (w *runWorkflow) result() *models.RunResult {
	s := w.state
	r := &models.RunResult{Teams: s.Teams, Warnings: s.Warnings, Errors: s.Errors, Usage: s.Usage}
	for _, t := range s.Teams {
		for _, wo := range t.Workers {
			if wo.SubAgentUsage != nil {
				r.SubAgentUsage = r.SubAgentUsage.Add(*wo.SubAgentUsage)
			}
		}
	}
	return r
}

// withDeadline returns the context the run's work runs on: with
// max_execution_time set, a timer cancels it when the time is up (measured
// from the run's start, across continue-as-new).
func (w *runWorkflow) withDeadline(ctx workflow.Context) workflow.Context {
	if w.hier.MaxExecutionTime <= 0 {
		return ctx
	}
	work, cancel := workflow.WithCancel(ctx)
	remaining := w.state.StartedAt.Add(time.Duration(w.hier.MaxExecutionTime) * time.Second).Sub(workflow.Now(ctx))
	workflow.Go(ctx, func(ctx workflow.Context) {
		if remaining > 0 {
			if err := workflow.NewTimer(ctx, remaining).Get(ctx, nil); err != nil {
				return // the run ended or was cancelled first
			}
		}
		w.timedOut = true
		cancel()
	})
	return work
}

// runSequential is the global supervisor's loop: it is offered the teams
// whose dependencies are complete and picks one at a time, with an
// instruction, until it finishes, nothing is left to offer, or it reaches
// its iteration limit.
func (w *runWorkflow) runSequential(ctx workflow.Context) error {
	s := w.state
	gs := models.GlobalSupervisorSource(w.hier)
	limit := w.hier.GlobalSupervisor.MaxIterations
	if limit <= 0 {
		limit = w.hier.MaxIterations
	}
	if len(s.Suspended) > 0 {
		// The turn the previous execution stopped in the middle of.
		t := s.Suspended[0]
		s.Suspended = nil
		out, err := w.finishTeam(ctx, w.resumeTeam(ctx, t))
		if err != nil {
			if errors.Is(err, errSuspended) {
				return w.continueAsNewIfLong(ctx)
			}
			return err
		}
		w.recordTeam(ctx, out)
	}
	for s.Iteration < limit {
		if err := w.continueAsNewIfLong(ctx); err != nil {
			return err
		}
		if err := w.gate.wait(ctx); err != nil {
			return err
		}
		if w.runBudgetSpent(ctx) {
			return w.budgetEnd()
		}
		w.checkTeamBudgets(ctx)
		if w.state.BudgetSpent { // a team's budget failed the run (change scoped-budget-fail)
			return w.budgetEnd()
		}
		options := w.offerableTeams()
		if len(options) == 0 {
			return nil // every team is done, failed or blocked
		}
		s.Iteration++
		s.CurrentTeam, s.CurrentWorker, s.ActiveAgentID = "", "", gs.AgentID
		var d models.Decision
		dctx := llmContext(ctx, w.in.Options, agentSummary("", w.hier.GlobalSupervisor, w.in.Options), w.hier.GlobalSupervisor)
		lease := w.lease(ctx)
		err := w.await(ctx, workflow.ExecuteActivity(dctx, a.Decide, models.DecideInput{
			RunID:        w.in.RunID,
			Supervisor:   w.hier.GlobalSupervisor,
			Source:       gs,
			Task:         w.in.Task,
			Options:      options,
			Completed:    s.CompletedTeams,
			Context:      withPrevious(w.previousContext(), teamItems(completedTeams(s.Teams)), w.in.Options),
			AllowFinish:  len(s.CompletedTeams) > 0,
			Iteration:    s.Iteration,
			RunOptions:   w.in.Options,
			ReturnEvents: true,
			Lease:        lease,
			DeferWrites:  w.in.Options.DeferWrites,
			Guidance:     w.takeGuidance(gs.AgentID),
		}), &d)
		w.endLease(ctx, lease, d.Events, err)
		if err != nil {
			return llmError(err, gs, w.hier.GlobalSupervisor, w.in.Options)
		}
		if err := saveUnsaved(ctx, w.in.Options, d.Saved, models.AnswerRecord{RunID: w.in.RunID, Calls: d.Calls}); err != nil {
			return err
		}
		s.Usage = s.Usage.Add(d.Usage)
		w.addAgentUsage(gs.AgentID, d.Usage)
		if d.Warning != "" {
			w.warn(ctx, gs, d.Warning)
		}
		if d.Action == models.DecisionFinish {
			return nil
		}
		if !offered(options, d.Target) {
			// Decide validates against the options it was given; this guards
			// against an activity version that does not.
			w.warn(ctx, gs, fmt.Sprintf("global supervisor chose %q, which was not offered; dispatching %q instead", d.Target, options[0].Name))
			d.Target = options[0].Name
		}
		kind, data := models.DispatchEvent(gs, options, d, s.Iteration)
		w.emit(ctx, gs, kind.Category, kind.Action, data)
		team := findTeam(w.hier, d.Target)
		out, err := w.finishTeam(ctx, w.startTeam(ctx, team, d.Instruction))
		if err != nil {
			if errors.Is(err, errSuspended) {
				return w.continueAsNewIfLong(ctx)
			}
			return err
		}
		w.recordTeam(ctx, out)
	}
	w.warn(ctx, gs, fmt.Sprintf("global supervisor reached its iteration limit (%d); writing the final answer from the work done so far", limit))
	return nil
}

// routedLimit is how many teams the global supervisor may have at work at
// once in routed mode: max_parallel_teams (the run's, else the
// hierarchy's), 1 when unset or in runs from before routed parallelism.
func (w *runWorkflow) routedLimit() int {
	if !w.routedParallel {
		return 1
	}
	limit := w.in.Options.MaxParallelTeams
	if limit <= 0 {
		limit = w.hier.MaxParallelTeams
	}
	return max(limit, 1)
}

// runRouted is the global supervisor's loop with max_parallel_teams above
// 1: whenever a team may start (fewer than limit at work, a ready team not
// at work, and none started since the last completion or nothing at work)
// it is asked, told which teams are at work, and may dispatch several
// ready teams at once, each with its own instruction, up to the free
// places. The teams run at once as in parallel mode. Finishing while teams
// are at work waits for them and asks again; finishing with none at work
// ends the loop. Each decision is an iteration.
func (w *runWorkflow) runRouted(ctx workflow.Context, limit int) error {
	w.noLease = limit > 1
	s := w.state
	gs := models.GlobalSupervisorSource(w.hier)
	iterations := w.hier.GlobalSupervisor.MaxIterations
	if iterations <= 0 {
		iterations = w.hier.MaxIterations
	}
	running := map[string]bool{}
	sel := workflow.NewSelector(ctx)
	sel.AddReceive(w.signals, func(c workflow.ReceiveChannel, _ bool) { w.applyOne(ctx, c) })
	var failure error
	// ask says a decision is due: at the start, and after each completion.
	ask := true
	watch := func(name string, started startedTeam) {
		running[name] = true
		sel.AddFuture(started.future, func(workflow.Future) {
			out, err := w.finishTeam(ctx, started)
			delete(running, name)
			ask = true
			if errors.Is(err, errSuspended) {
				return
			}
			if err != nil {
				failure = err
				return
			}
			w.recordTeam(ctx, out)
		})
	}
	w.resumeSuspended(ctx, watch)
	for {
		if len(running) == 0 {
			if err := w.continueAsNewIfLong(ctx); err != nil {
				return err
			}
			if err := w.gate.wait(ctx); err != nil {
				return err
			}
		}
		spent := w.runBudgetSpent(ctx)
		if spent && len(running) == 0 {
			return w.budgetEnd()
		}
		w.checkTeamBudgets(ctx)
		if !spent && w.state.BudgetSpent { // a team's budget failed the run (change scoped-budget-fail)
			if spent = true; len(running) == 0 {
				return w.budgetEnd()
			}
		}
		var options []models.Option
		for _, o := range w.offerableTeams() {
			if !running[o.Name] {
				options = append(options, o)
			}
		}
		if ask && !spent && !w.gate.held() && !w.draining && len(running) < limit && len(options) > 0 && s.Iteration < iterations {
			ask = false
			s.Iteration++
			s.CurrentWorker, s.ActiveAgentID = "", gs.AgentID
			var d models.Decision
			dctx := llmContext(ctx, w.in.Options, agentSummary("", w.hier.GlobalSupervisor, w.in.Options), w.hier.GlobalSupervisor)
			lease := w.lease(ctx)
			err := w.await(ctx, workflow.ExecuteActivity(dctx, a.Decide, models.DecideInput{
				RunID:        w.in.RunID,
				Supervisor:   w.hier.GlobalSupervisor,
				Source:       gs,
				Task:         w.in.Task,
				Options:      options,
				Completed:    s.CompletedTeams,
				Context:      withPrevious(w.previousContext(), teamItems(completedTeams(s.Teams)), w.in.Options),
				AllowFinish:  len(s.CompletedTeams) > 0 || len(running) > 0,
				Iteration:    s.Iteration,
				RunOptions:   w.in.Options,
				ReturnEvents: true,
				Lease:        lease,
				DeferWrites:  w.in.Options.DeferWrites,
				MaxTargets:   limit - len(running),
				Running:      sortedNames(running),
				Guidance:     w.takeGuidance(gs.AgentID),
			}), &d)
			w.endLease(ctx, lease, d.Events, err)
			if err != nil {
				return llmError(err, gs, w.hier.GlobalSupervisor, w.in.Options)
			}
			if err := saveUnsaved(ctx, w.in.Options, d.Saved, models.AnswerRecord{RunID: w.in.RunID, Calls: d.Calls}); err != nil {
				return err
			}
			s.Usage = s.Usage.Add(d.Usage)
			w.addAgentUsage(gs.AgentID, d.Usage)
			if d.Warning != "" {
				w.warn(ctx, gs, d.Warning)
			}
			if d.Action == models.DecisionFinish && len(running) == 0 {
				return nil
			}
			if d.Action == models.DecisionDispatch {
				targets := append([]models.DispatchTarget{{Target: d.Target, Instruction: d.Instruction}}, d.Also...)
				for _, t := range targets {
					if len(running) >= limit || running[t.Target] {
						continue
					}
					if !offered(options, t.Target) {
						// Decide validates against the options it was given;
						// this guards against an activity version that does not.
						w.warn(ctx, gs, fmt.Sprintf("global supervisor chose %q, which was not offered; it was not dispatched", t.Target))
						continue
					}
					one := d
					one.Target, one.Instruction, one.Also = t.Target, t.Instruction, nil
					kind, data := models.DispatchEvent(gs, options, one, s.Iteration)
					w.emit(ctx, gs, kind.Category, kind.Action, data)
					watch(t.Target, w.startTeam(ctx, findTeam(w.hier, t.Target), t.Instruction))
				}
			}
		}
		if len(running) == 0 {
			if w.draining {
				continue // continues as new at the top
			}
			if s.Iteration >= iterations && len(options) > 0 {
				w.warn(ctx, gs, fmt.Sprintf("global supervisor reached its iteration limit (%d); writing the final answer from the work done so far", iterations))
				return nil
			}
			if len(options) == 0 {
				return nil // every team is done, failed or blocked
			}
			// A decision that dispatched nothing it could (a guard above
			// warned): ask again; each ask is an iteration, so this ends.
			ask = true
			continue
		}
		s.CurrentTeam = strings.Join(sortedNames(running), ", ")
		sel.Select(ctx)
		if failure != nil {
			return failure
		}
	}
}

// runParallel runs every team whose dependencies are complete at once, up
// to max_parallel_teams, in waves along the execution order, each on the
// run's task; the stream stays one ordered log.
func (w *runWorkflow) runParallel(ctx workflow.Context) error {
	w.noLease = true // teams stream at once: none waits on another's lease
	s := w.state
	gs := models.GlobalSupervisorSource(w.hier)
	limit := w.in.Options.MaxParallelTeams
	if limit <= 0 {
		limit = w.hier.MaxParallelTeams
	}
	if limit <= 0 {
		limit = len(w.hier.Teams)
	}
	running := map[string]bool{}
	sel := workflow.NewSelector(ctx)
	// Signals first: when a team's last events and its completion arrive
	// together, the events are applied before the completion.
	sel.AddReceive(w.signals, func(c workflow.ReceiveChannel, _ bool) { w.applyOne(ctx, c) })
	var failure error
	watch := func(name string, started startedTeam) {
		running[name] = true
		sel.AddFuture(started.future, func(workflow.Future) {
			out, err := w.finishTeam(ctx, started)
			delete(running, name)
			if errors.Is(err, errSuspended) {
				return
			}
			if err != nil {
				failure = err
				return
			}
			w.recordTeam(ctx, out)
		})
	}
	w.resumeSuspended(ctx, watch)
	for {
		if len(running) == 0 {
			if err := w.continueAsNewIfLong(ctx); err != nil {
				return err
			}
		}
		if len(running) == 0 {
			if err := w.gate.wait(ctx); err != nil {
				return err
			}
		}
		spent := w.runBudgetSpent(ctx)
		if spent && len(running) == 0 {
			return w.budgetEnd()
		}
		if w.checkAgentBudgets(ctx); !spent && w.state.BudgetSpent { // change scoped-budget-fail
			if spent = true; len(running) == 0 {
				return w.budgetEnd()
			}
		}
		for _, name := range w.hier.ExecutionOrder {
			if spent || len(running) >= limit || w.gate.held() || w.draining {
				break
			}
			if running[name] || w.teamStatus(name) != "" || !w.depsComplete(name) {
				continue
			}
			team := findTeam(w.hier, name)
			s.Iteration++
			w.emit(ctx, gs, models.CategoryDispatch, models.ActionTeam, map[string]any{
				"team_name": name, "instruction": w.in.Task, "reason": "parallel mode: its dependencies are complete", "iteration": s.Iteration,
			})
			watch(name, w.startTeam(ctx, team, w.in.Task))
		}
		if len(running) == 0 {
			if w.draining {
				continue // continues as new at the top
			}
			return nil
		}
		s.CurrentTeam = strings.Join(sortedNames(running), ", ")
		sel.Select(ctx)
		if failure != nil {
			return failure
		}
	}
}

// startedTeam is a team turn in flight.
type startedTeam struct {
	future workflow.Future
	output models.TeamOutput // what is known before it ends
	state  *TeamState        // an inline turn's state, read if it fails
	steer  *steeredTurn      // how an operator may cancel it (nil: no steering)
}

// startTeam starts one team turn as a child workflow.
func (w *runWorkflow) startTeam(ctx workflow.Context, team *models.Team, instruction string) startedTeam {
	s := w.state
	s.Turns++
	s.CurrentTeam, s.ActiveAgentID = team.Name, team.Supervisor.AgentID
	w.describe(ctx)
	now := workflow.Now(ctx)
	in := w.teamInput(team, instruction, s.Turns)
	output := models.TeamOutput{Turn: s.Turns, TeamID: team.ID, TeamName: team.Name, Instruction: instruction, StartedAt: &now}
	if w.inlineTeams {
		return w.runInline(ctx, &TeamState{Input: in}, output)
	}
	cctx, steer := w.steerTurn(ctx, team.Name)
	cctx = workflow.WithChildOptions(cctx, workflow.ChildWorkflowOptions{
		WorkflowID:          models.TeamWorkflowID(w.in.RunID, s.Turns),
		StaticSummary:       fmt.Sprintf("%s · turn %d", team.Name, s.Turns),
		StaticDetails:       instruction,
		WaitForCancellation: true,
	})
	return startedTeam{future: workflow.ExecuteChildWorkflow(cctx, TeamWorkflow, in), output: output, steer: steer}
}

// teamInput is the input of a team turn starting now.
func (w *runWorkflow) teamInput(team *models.Team, instruction string, turn int) models.TeamInput {
	return models.TeamInput{
		RunID:         w.in.RunID,
		RootAgentID:   w.hier.GlobalSupervisor.AgentID,
		Turn:          turn,
		Task:          w.in.Task,
		Team:          *team,
		Instruction:   instruction,
		MaxIterations: w.hier.MaxIterations,
		Options:       w.in.Options,
		PriorContext:  bounded(teamItems(w.contextFor(team.Name)), w.in.Options),
		// A follow-up run's team supervisors see the previous run too.
		PreviousContext: w.previousContext(),
		// The team supervisor's stand-in when its model fails for good.
		SupervisorStandIn: w.supervisorStandIn(),
	}
}

// supervisorStandIn is the LLM settings of the global supervisor, which
// route for a team supervisor whose model fails for good (team.go); nil in
// runs from before changeSupervisorStandIn. Only the settings travel: the
// stand-in keeps the team supervisor's prompt and identity.
func (w *runWorkflow) supervisorStandIn() *models.Agent {
	if !w.standIn {
		return nil
	}
	gs := w.hier.GlobalSupervisor
	return &models.Agent{
		AgentID: gs.AgentID, Name: gs.Name, Model: gs.Model, Provider: gs.Provider, BaseURL: gs.BaseURL,
		Region: gs.Region, Timeout: gs.Timeout, FallbackModels: gs.FallbackModels,
	}
}

// runInline runs a team turn here, in a coroutine: no child workflow to
// start and complete, and its events go straight into the run's log. A
// turn that stops for continue-as-new settles with its state
// (TeamResult.Suspended).
func (w *runWorkflow) runInline(ctx workflow.Context, st *TeamState, output models.TeamOutput) startedTeam {
	done, settle := workflow.NewFuture(ctx)
	sink := &runLogSink{w: w, id: models.TeamWorkflowID(w.in.RunID, output.Turn)}
	ctx, steer := w.steerTurn(ctx, output.TeamName)
	if w.steer != nil {
		st.guidance = w.takeGuidance
	}
	st.approvals = w.approvals
	if w.budget() != nil {
		st.budget = &turnBudget{w: w, team: output.TeamName, supervisor: st.Input.Team.Supervisor.AgentID}
	}
	workflow.Go(ctx, func(ctx workflow.Context) {
		res, err := runTeamTurn(ctx, st, sink, w.delegations, w.gate, w.suspendTurn(ctx))
		if errors.Is(err, errSuspended) {
			res, err = &models.TeamResult{Suspended: suspendedTurn(st, output)}, nil
		}
		w.endTurn(output.TeamName, steer)
		settle.Set(res, err)
	})
	return startedTeam{future: done, output: output, state: st, steer: steer}
}

// resumeTeam carries on with a turn the previous execution stopped.
func (w *runWorkflow) resumeTeam(ctx workflow.Context, t models.SuspendedTurn) startedTeam {
	w.state.CurrentTeam, w.state.ActiveAgentID = t.Output.TeamName, t.Input.Team.Supervisor.AgentID
	w.describe(ctx)
	return w.runInline(ctx, resumedState(t), t.Output)
}

// resumeSuspended carries on with every turn the previous execution
// stopped, handing each to watch.
func (w *runWorkflow) resumeSuspended(ctx workflow.Context, watch func(string, startedTeam)) {
	turns := w.state.Suspended
	w.state.Suspended = nil
	for _, t := range turns {
		watch(t.Output.TeamName, w.resumeTeam(ctx, t))
	}
}

// finishTeam waits for a team turn. A failed turn is an output with status
// failed; only cancellation (of the run, or by its time limit) is an error.
func (w *runWorkflow) finishTeam(ctx workflow.Context, t startedTeam) (models.TeamOutput, error) {
	var res models.TeamResult
	err := w.await(ctx, t.future, &res)
	w.endTurn(t.output.TeamName, t.steer)
	now := workflow.Now(ctx)
	out := t.output
	out.CompletedAt = &now
	if err != nil {
		if ctx.Err() == nil {
			if cancelled, ok := w.cancelledTurn(out, t); ok {
				return cancelled, nil // an operator cancelled it: the run goes on
			}
		}
		if temporal.IsCanceledError(err) || ctx.Err() != nil {
			if w.timedOut {
				out.Status, out.Error = models.TeamFailed, "stopped: the run exceeded its max_execution_time"
				w.keepFinishedWorkers(&out, t.state)
				w.state.Teams = append(w.state.Teams, out)
			}
			return out, err
		}
		out.Status, out.Error = models.TeamFailed, failureMessage(err)
		out.ErrorCode = keyFailureCode(ctx, err)
		w.keepFinishedWorkers(&out, t.state)
		return out, nil
	}
	s := w.state
	if res.Suspended != nil {
		// Carried to the next execution, which carries on with it.
		s.Suspended = append(s.Suspended, *res.Suspended)
		return out, errSuspended
	}
	s.Warnings = append(s.Warnings, res.Warnings...)
	for _, wo := range res.Output.Workers {
		s.Usage = s.Usage.Add(wo.Usage)
		w.addTeamUsage(out.TeamName, wo.AgentID, wo.Usage)
	}
	s.Usage = s.Usage.Add(res.SupervisorUsage)
	w.addTeamUsage(out.TeamName, w.supervisorOf(out.TeamName), res.SupervisorUsage)
	out.Workers, out.Status = res.Output.Workers, models.TeamCompleted
	out.Usage = turnUsage(res.SupervisorUsage, res.Output.Workers)
	w.upsertUsage(ctx)
	return out, nil
}

// keepFinishedWorkers keeps, in a failed turn's output, the outputs of the
// workers that finished before it failed, marked partial, with their usage
// and warnings (changePartialResults; an inline turn's state only).
func (w *runWorkflow) keepFinishedWorkers(out *models.TeamOutput, ts *TeamState) {
	if !w.in.Options.PartialResults || ts == nil {
		return
	}
	s := w.state
	s.Warnings = append(s.Warnings, ts.Warnings...)
	for _, wo := range ts.Outputs {
		s.Usage = s.Usage.Add(wo.Usage)
		w.addTeamUsage(out.TeamName, wo.AgentID, wo.Usage)
	}
	s.Usage = s.Usage.Add(ts.Usage)
	w.addTeamUsage(out.TeamName, ts.Input.Team.Supervisor.AgentID, ts.Usage)
	if len(ts.Outputs) > 0 {
		out.Workers, out.Partial = append([]models.WorkerOutput(nil), ts.Outputs...), true
	}
	out.Usage = turnUsage(ts.Usage, ts.Outputs)
}

// recordTeam adds a finished turn to the run. A failure is recorded as an
// error and blocks the teams that depend on it, which are skipped with the
// reason.
func (w *runWorkflow) recordTeam(ctx workflow.Context, out models.TeamOutput) {
	s := w.state
	s.Teams = append(s.Teams, out)
	defer w.describe(ctx)
	switch out.Status {
	case models.TeamCompleted:
		if !contains(s.CompletedTeams, out.TeamName) {
			s.CompletedTeams = append(s.CompletedTeams, out.TeamName)
		}
		return
	case models.TeamFailed:
	case models.TeamCancelled:
		// An operator's decision, not a failure: the run goes on, and
		// what depends on the team is skipped.
		w.skipDependents(ctx)
		return
	default:
		return
	}
	now := models.FormatTimestamp(workflow.Now(ctx))
	msg := fmt.Sprintf("team %q failed: %s", out.TeamName, out.Error)
	code := models.CodeExecutionFailed.Name
	data := map[string]any{"message": msg, "team_name": out.TeamName}
	if out.ErrorCode != "" {
		code, data["error_code"] = out.ErrorCode, out.ErrorCode
	}
	s.Errors = append(s.Errors, models.ErrorInfo{ErrorCode: code, Message: msg, Timestamp: now,
		Context: map[string]any{"team_id": out.TeamID, "team_name": out.TeamName}})
	w.emit(ctx, systemSource(), models.CategorySystem, models.ActionError, data)
	w.skipDependents(ctx)
}

// skipDependents skips, with the reason, the teams that have not run and
// depend, directly or not, on a failed, cancelled or skipped team.
func (w *runWorkflow) skipDependents(ctx workflow.Context) {
	s := w.state
	for changed := true; changed; {
		changed = false
		for _, t := range w.hier.Teams {
			if w.teamStatus(t.Name) != "" {
				continue
			}
			for _, dep := range w.hier.Dependencies[t.Name] {
				if st := w.teamStatus(dep); st == models.TeamFailed || st == models.TeamSkipped || st == models.TeamCancelled {
					reason := fmt.Sprintf("skipped: upstream team %q %s", dep, st)
					s.Teams = append(s.Teams, models.TeamOutput{TeamID: t.ID, TeamName: t.Name, Status: models.TeamSkipped, Error: reason})
					w.warn(ctx, models.GlobalSupervisorSource(w.hier), fmt.Sprintf("team %q %s", t.Name, reason))
					changed = true
					break
				}
			}
		}
	}
}

// teamStatus is a team's outcome so far: completed if any turn completed,
// else failed or skipped, "" when it has not run.
func (w *runWorkflow) teamStatus(name string) string {
	status := ""
	for _, t := range w.state.Teams {
		if t.TeamName != name {
			continue
		}
		if t.Status == models.TeamCompleted {
			return models.TeamCompleted
		}
		status = t.Status
	}
	return status
}

func (w *runWorkflow) depsComplete(name string) bool {
	for _, dep := range w.hier.Dependencies[name] {
		if w.teamStatus(dep) != models.TeamCompleted {
			return false
		}
	}
	return true
}

// offerableTeams are the teams the global supervisor may pick: their
// dependencies are complete and they have neither failed nor been skipped
// (a completed team may be asked again).
func (w *runWorkflow) offerableTeams() []models.Option {
	var options []models.Option
	for _, t := range w.hier.Teams {
		st := w.teamStatus(t.Name)
		if st == models.TeamFailed || st == models.TeamSkipped || st == models.TeamCancelled || !w.depsComplete(t.Name) || w.overBudget(t.Name) {
			continue
		}
		options = append(options, models.Option{Name: t.Name, Description: teamDescription(t)})
	}
	return options
}

// contextFor is what a team turn sees of earlier teams: everything done so
// far with enable_context_sharing, else its upstream teams' outputs.
func (w *runWorkflow) contextFor(name string) []models.TeamOutput {
	done := completedTeams(w.state.Teams)
	if w.hier.EnableContextSharing {
		return done
	}
	var upstream []models.TeamOutput
	for _, t := range done {
		if contains(w.hier.Dependencies[name], t.TeamName) {
			upstream = append(upstream, t)
		}
	}
	return upstream
}

func completedTeams(teams []models.TeamOutput) []models.TeamOutput {
	var out []models.TeamOutput
	for _, t := range teams {
		if t.Status == models.TeamCompleted {
			out = append(out, t)
		}
	}
	return out
}

func sortedNames(set map[string]bool) []string {
	names := make([]string, 0, len(set))
	for n := range set {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// fail records a failed or cancelled run in the database and on the stream.
// It runs on a disconnected context: the run's own may be cancelled.
func (w *runWorkflow) fail(ctx workflow.Context, cause error) error {
	s := w.state
	dctx, _ := workflow.NewDisconnectedContext(ctx)
	gs := models.GlobalSupervisorSource(w.hier)
	now := models.FormatTimestamp(workflow.Now(ctx))
	switch {
	case w.timedOut:
		// Spec 001 EXECUTION_TIMEOUT: the run ends as timed out, with what it
		// had done kept in its result.
		msg := fmt.Sprintf("the run exceeded its max_execution_time of %ds", w.hier.MaxExecutionTime)
		s.Errors = append(s.Errors, models.ErrorInfo{ErrorCode: models.CodeExecutionTimeout.Name, Message: msg, Timestamp: now})
		s.Status = models.RunTimedOut
		w.emit(dctx, systemSource(), models.CategorySystem, models.ActionError, map[string]any{"message": msg, "error_code": models.CodeExecutionTimeout.Name})
		w.emit(dctx, gs, models.CategoryLifecycle, models.ActionFailed, map[string]any{"error": msg, "error_code": models.CodeExecutionTimeout.Name})
		w.persistAll(dctx)
		_ = w.setStatus(dctx, models.RunStatusUpdate{RunID: w.in.RunID, Status: models.RunTimedOut, Result: w.result(), Error: msg})
		return temporal.NewNonRetryableApplicationError(msg, models.CodeExecutionTimeout.Name, nil)
	case temporal.IsCanceledError(cause) || errors.Is(ctx.Err(), workflow.ErrCanceled):
		s.Status = models.RunCancelled
		w.emit(dctx, gs, models.CategoryLifecycle, models.ActionCancelled, map[string]any{"reason": "cancelled"})
		w.persistAll(dctx)
		_ = w.setStatus(dctx, models.RunStatusUpdate{RunID: w.in.RunID, Status: models.RunCancelled, Result: w.result(), Error: "cancelled"})
		return cause
	}
	msg := failureMessage(cause)
	code := models.CodeExecutionFailed.Name
	if len(s.Errors) == 0 {
		// Not a team's failure (those are recorded as they happen).
		data := map[string]any{"message": msg}
		if kc := keyFailureCode(dctx, cause); kc != "" {
			code, data["error_code"] = kc, kc
		}
		s.Errors = append(s.Errors, models.ErrorInfo{ErrorCode: code, Message: msg, Timestamp: now})
		w.emit(dctx, systemSource(), models.CategorySystem, models.ActionError, data)
	} else if first := s.Errors[0]; first.Message == msg && first.ErrorCode == models.CodeProviderKeyRejected.Name {
		// The run fails on its first team failure (TeamFailed carries its
		// message), whose code was decided, versioned, when it was
		// recorded.
		code = first.ErrorCode
	}
	s.Status = models.RunFailed
	w.emit(dctx, gs, models.CategoryLifecycle, models.ActionFailed, map[string]any{"error": msg, "error_code": code})
	w.persistAll(dctx)
	_ = w.setStatus(dctx, models.RunStatusUpdate{RunID: w.in.RunID, Status: models.RunFailed, Result: w.result(), Error: msg})
	return cause
}

func (w *runWorkflow) setStatus(ctx workflow.Context, u models.RunStatusUpdate) error {
	if w.gate != nil {
		// One write at a time, in the order they were decided; a pause or
		// resume written after the end is left out.
		_ = workflow.Await(ctx, func() bool { return !w.statusBusy })
		if !models.IsTerminal(u.Status) && models.IsTerminal(w.state.Status) {
			return nil
		}
		w.statusBusy = true
		defer func() { w.statusBusy = false }()
	}
	if w.in.Options.SearchAttributes {
		// Keeps `RunStatus="failed"` queries in the Web UI and the CLI right.
		if err := workflow.UpsertTypedSearchAttributes(ctx, models.SearchRunStatus.ValueSet(u.Status)); err != nil {
			workflow.GetLogger(ctx).Warn("upsert RunStatus", "error", err)
		}
	}
	w.upsertUsage(ctx)
	w.describe(ctx)
	// w.root: pause and resume write their status from their handlers,
	// whose context does not carry the baseline.
	if changed(w.root, changeStatusLocalActivity) {
		// A local activity: the write runs inside the workflow task that
		// decides it, with no round trip through the task queue.
		return w.await(ctx, workflow.ExecuteLocalActivity(storeLocalContext(ctx), a.SetRunStatus, u), nil)
	}
	return w.await(ctx, workflow.ExecuteActivity(storeContext(ctx), a.SetRunStatus, u), nil)
}

// describe sets the run's current details, shown in the Web UI: the
// routing so far, each team's outcome, and the agent active now.
func (w *runWorkflow) describe(ctx workflow.Context) {
	s := w.state
	var b strings.Builder
	fmt.Fprintf(&b, "**%s** · %s · status %s\n\n", w.hier.Name, w.hier.ExecutionMode, s.Status)
	fmt.Fprintf(&b, "- global supervisor %s (`%s`)\n", w.hier.GlobalSupervisor.Name, w.hier.GlobalSupervisor.AgentID)
	for _, t := range s.Teams {
		fmt.Fprintf(&b, "  - turn %d: team **%s** — %s", t.Turn, t.TeamName, t.Status)
		if t.Error != "" {
			fmt.Fprintf(&b, " (%s)", oneLine(t.Error, 120))
		}
		b.WriteString("\n")
		for _, wo := range t.Workers {
			fmt.Fprintf(&b, "    - %s (`%s`): %s\n", wo.Name, wo.AgentID, oneLine(wo.Instruction, 80))
		}
	}
	if s.CurrentTeam != "" {
		fmt.Fprintf(&b, "  - running: team **%s**", s.CurrentTeam)
		if s.CurrentWorker != "" {
			fmt.Fprintf(&b, ", worker %s", s.CurrentWorker)
		}
		b.WriteString("\n")
	}
	if s.ActiveAgentID != "" {
		fmt.Fprintf(&b, "\nActive agent: `%s`\n", s.ActiveAgentID)
	}
	workflow.SetCurrentDetails(ctx, b.String())
}

func oneLine(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > n {
		return string(r[:n]) + "…"
	}
	return s
}

func (w *runWorkflow) warn(ctx workflow.Context, source models.Source, msg string) {
	w.state.Warnings = append(w.state.Warnings, msg)
	w.emit(ctx, source, models.CategorySystem, models.ActionWarning, map[string]any{"message": msg})
}

// emit appends an event the workflow itself produces. Signals delivered in
// the same workflow task come first: an activity's events, signalled before
// it completed, must precede what the workflow does after its completion,
// whichever coroutine the SDK happens to run first.
func (w *runWorkflow) emit(ctx workflow.Context, source models.Source, category, action string, data map[string]any) {
	w.drainSignals()
	if category == models.CategoryDispatch && action == models.ActionTeam && data != nil {
		// Which teams have completed so far: with teams at work together a
		// team's end is not otherwise in the log, and spec 001's stream
		// derives the execution's progress from it. Event data, not a
		// command: replays are unaffected.
		data["completed_teams"] = append([]string{}, w.state.CompletedTeams...)
	}
	w.state.Log.Append(models.Event{
		RunID:     w.in.RunID,
		Timestamp: models.FormatTimestamp(workflow.Now(ctx)),
		Source:    source,
		Event:     models.EventKind{Category: category, Action: action},
		Data:      data,
	})
}

// await waits for f while applying the event batches that arrive, in
// history order: batches delivered before f's completion are applied first.
func (w *runWorkflow) await(ctx workflow.Context, f workflow.Future, valuePtr any) error {
	done := false
	sel := workflow.NewSelector(ctx)
	sel.AddReceive(w.signals, func(c workflow.ReceiveChannel, _ bool) { w.applyOne(ctx, c) })
	sel.AddFuture(f, func(workflow.Future) { done = true })
	for !done {
		sel.Select(ctx)
	}
	return f.Get(ctx, valuePtr)
}

// applyOne applies the batch a selector found ready.
func (w *runWorkflow) applyOne(ctx workflow.Context, c workflow.ReceiveChannel) {
	var batch models.EventBatch
	c.Receive(ctx, &batch)
	w.signalsSeen++
	worker := w.state.CurrentWorker
	w.applyBatch(batch)
	if w.state.CurrentWorker != worker {
		w.describe(ctx) // a team supervisor dispatched a worker
	}
}

// applyReturned appends the events an activity returned in its result,
// after the batches signalled before it completed.
func (w *runWorkflow) applyReturned(b *models.EventBatch) {
	if b == nil {
		return
	}
	w.drainSignals()
	w.applyBatch(*b)
}

// runLogSink is the eventSink of a team turn run inside the run's
// workflow: its events go straight into the run's log.
type runLogSink struct {
	w  *runWorkflow
	id string
}

func (r *runLogSink) emit(ctx workflow.Context, source models.Source, category, action string, data map[string]any) {
	r.w.emit(ctx, source, category, action, llmEventData(source, category, data))
}
func (r *runLogSink) returnsEvents() bool { return true }
func (r *runLogSink) lease(ctx workflow.Context) *models.EventLease {
	return r.w.lease(ctx)
}
func (r *runLogSink) endLease(ctx workflow.Context, l *models.EventLease, batch *models.EventBatch, err error) {
	r.w.endLease(ctx, l, batch, err)
}
func (r *runLogSink) apply(batch *models.EventBatch) { r.w.applyReturned(batch) }
func (r *runLogSink) name() string                   { return r.id }

// drainSignals applies every event batch already delivered.
func (w *runWorkflow) drainSignals() {
	for {
		var batch models.EventBatch
		if !w.signals.ReceiveAsync(&batch) {
			return
		}
		w.signalsSeen++
		w.applyBatch(batch)
	}
}

// applyBatch appends an activity's events, once per batch, and follows
// dispatch events to keep the progress current.
func (w *runWorkflow) applyBatch(b models.EventBatch) []models.Event {
	if !w.batchOrder {
		return w.applyInOrder(b)
	}
	if w.state.Log.Gap(b) {
		// An earlier batch of its producer is on its way (taken by a
		// selector of a coroutine that has not run yet, most often):
		// applied now, it would make that one a repeat.
		workflow.GetLogger(w.root).Debug("event batch held for an earlier one", "producer", b.Producer, "seq", b.Seq)
		w.state.Log.Hold(b, w.historyLength())
		w.releaseHeld(false)
		return nil
	}
	applied := w.applyInOrder(b)
	w.releaseHeld(false)
	return applied
}

// releaseHeld applies the held batches whose earlier batches are applied
// now, and, with all or once their gap has lasted past the workflow task
// that held them (the batch it waits for was lost: its signal failed),
// the rest, in each producer's order.
func (w *runWorkflow) releaseHeld(all bool) {
	if len(w.state.Log.Held) == 0 {
		return
	}
	now := w.historyLength()
	for {
		b, ok := w.state.Log.NextHeld(func(at int64) bool { return all || at < now })
		if !ok {
			return
		}
		w.applyInOrder(b)
	}
}

// historyLength dates a held batch: it grows with every workflow task,
// and replays the same.
func (w *runWorkflow) historyLength() int64 {
	return int64(workflow.GetInfo(w.root).GetCurrentHistoryLength())
}

// applyInOrder applies a batch whose turn it is.
func (w *runWorkflow) applyInOrder(b models.EventBatch) []models.Event {
	var applied []models.Event
	if w.attemptOrder {
		applied = w.state.Log.ApplyAttemptBatch(b)
	} else {
		applied = w.state.Log.ApplyBatch(b)
	}
	w.follow(applied)
	return applied
}

// follow keeps the progress current with the dispatch events an activity
// sent.
func (w *runWorkflow) follow(applied []models.Event) {
	for _, e := range applied {
		switch {
		case e.Event.Category == models.CategoryDispatch && e.Event.Action == models.ActionWorker:
			w.state.CurrentWorker, _ = e.Data["worker_name"].(string)
			w.state.ActiveAgentID, _ = e.Data["worker_agent_id"].(string)
		case e.Event.Category == models.CategoryDispatch && e.Event.Action == models.ActionTeam:
			w.state.CurrentWorker = ""
		}
	}
}

func (w *runWorkflow) progress() models.Progress {
	s := w.state
	return models.Progress{
		Status:         s.Status,
		CurrentTeam:    s.CurrentTeam,
		CurrentWorker:  s.CurrentWorker,
		ActiveAgentID:  s.ActiveAgentID,
		CompletedTeams: append([]string{}, s.CompletedTeams...),
		TotalTeams:     len(w.hier.Teams),
		Iteration:      s.Iteration,
	}
}

func systemSource() models.Source {
	return models.Source{AgentID: "system", AgentType: models.AgentTypeSystem, AgentName: "system"}
}

// topology is the system.topology event's data: the hierarchy with every
// agent_id.
func topology(h *models.Hierarchy) map[string]any {
	teams := make([]any, 0, len(h.Teams))
	for _, t := range h.Teams {
		workers := make([]any, 0, len(t.Workers))
		for _, wk := range t.Workers {
			workers = append(workers, map[string]any{"agent_id": wk.AgentID, "name": wk.Name, "role": wk.Role, "model": wk.Model})
		}
		teams = append(teams, map[string]any{
			"name":                  t.Name,
			"team_supervisor_agent": map[string]any{"agent_id": t.Supervisor.AgentID, "name": t.Supervisor.Name},
			"workers":               workers,
		})
	}
	return map[string]any{
		"hierarchy_id":            h.ID,
		"name":                    h.Name,
		"execution_mode":          h.ExecutionMode,
		"global_supervisor_agent": map[string]any{"agent_id": h.GlobalSupervisor.AgentID, "name": h.GlobalSupervisor.Name},
		"teams":                   teams,
	}
}

func teamDescription(t models.Team) string {
	names := make([]string, 0, len(t.Workers))
	for _, wk := range t.Workers {
		names = append(names, wk.Name+" ("+wk.Role+")")
	}
	desc := t.Description
	if desc == "" {
		desc = firstLine(t.Supervisor.SystemPrompt)
	}
	return desc + " Workers: " + strings.Join(names, ", ")
}

func findTeam(h *models.Hierarchy, name string) *models.Team {
	for i := range h.Teams {
		if h.Teams[i].Name == name {
			return &h.Teams[i]
		}
	}
	return nil
}

// keyFailureCode is the error code of a failure caused by a provider
// refusing its key (an ErrLLMKeyRejected application error anywhere in the
// chain): PROVIDER_KEY_REJECTED, or "" for any other failure, and for runs
// replaying a history from before changeKeyRejectedCode.
func keyFailureCode(ctx workflow.Context, err error) string {
	if !hasFailureType(err, models.ErrLLMKeyRejected) {
		return ""
	}
	if !changed(ctx, changeKeyRejectedCode) {
		return ""
	}
	return models.CodeProviderKeyRejected.Name
}

// hasFailureType tells whether an application error of type typ is in
// err's chain: an activity's failure reaches the run wrapped in an
// ActivityError, a sub-agent's or a team child's in further layers.
func hasFailureType(err error, typ string) bool {
	for ; err != nil; err = errors.Unwrap(err) {
		if appErr, ok := err.(*temporal.ApplicationError); ok && appErr.Type() == typ {
			return true
		}
	}
	return false
}

// failureMessage is the run's error as stored and streamed: the
// application error's message, which names the agent and model for LLM
// failures.
func failureMessage(err error) string {
	msg := err.Error()
	var appErr *temporal.ApplicationError
	if errors.As(err, &appErr) {
		msg = appErr.Message()
	}
	var timeout *temporal.TimeoutError
	if errors.As(err, &timeout) && (appErr == nil || appErr.Type() != models.ErrLLMTimeout) {
		msg = fmt.Sprintf("%s (timeout: %s)", msg, timeout.TimeoutType())
	}
	return msg
}

func firstLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexAny(s, "\n"); i >= 0 {
		return s[:i]
	}
	return s
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
