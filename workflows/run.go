package workflows

import (
	"errors"
	"fmt"
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
}

// RunWorkflow runs a hierarchy on a task: the global supervisor picks a
// team and an instruction, the team's turn runs as a child TeamWorkflow,
// and so on until the global supervisor finishes (or reaches its iteration
// limit) and writes the final answer. Its state, including the event log
// that activities fill through signals, is one struct; when the history
// grows long the workflow continues as new between team turns, carrying
// that struct.
func RunWorkflow(ctx workflow.Context, in models.RunInput) (*models.RunResult, error) {
	in.Options = WithDefaults(in.Options)
	state := in.State
	if state == nil {
		state = &models.RunState{Status: models.RunPending}
	}
	in.State = nil
	w := &runWorkflow{in: in, state: state}
	w.hier = &w.in.Hierarchy
	if err := w.setup(ctx); err != nil {
		return nil, err
	}
	result, err := w.run(ctx)
	if err != nil {
		if workflow.IsContinueAsNewError(err) {
			return nil, err
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
	if err := workflow.SetQueryHandler(ctx, models.QueryEvents, func(q models.EventQuery) (models.EventPage, error) {
		return w.state.Log.Page(q, models.IsTerminal(w.state.Status)), nil
	}); err != nil {
		return err
	}
	// Events keep arriving, and must be stored, while the run is cancelled
	// and cleans up: both loops run on a context cancellation does not close.
	bg, _ := workflow.NewDisconnectedContext(ctx)
	w.signals = workflow.GetSignalChannel(ctx, models.SignalEvents)
	workflow.Go(bg, func(ctx workflow.Context) {
		for {
			var batch models.EventBatch
			w.signals.Receive(ctx, &batch)
			w.applyBatch(batch)
		}
	})
	workflow.Go(bg, w.persistLoop)
	return nil
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
			return pending >= persistBatch || (pending > 0 && w.persistUpTo > log.Persisted)
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

// persistAll waits until every event appended so far is stored.
func (w *runWorkflow) persistAll(ctx workflow.Context) {
	w.persistUpTo = w.state.Log.LastSequence
	_ = workflow.Await(ctx, func() bool { return w.state.Log.Persisted >= w.persistUpTo })
}

// continueAsNewIfLong continues the run as a new execution when its history
// has grown long. It is called only at safe points: no activity or child
// workflow in flight. Every signal delivered so far is applied first and
// the log is stored, so nothing is lost; activities signal by workflow ID,
// so their next batches reach the new execution.
func (w *runWorkflow) continueAsNewIfLong(ctx workflow.Context) error {
	info := workflow.GetInfo(ctx)
	if info.GetCurrentHistoryLength() < w.in.Options.ContinueAsNewAfter && !info.GetContinueAsNewSuggested() {
		return nil
	}
	w.persistAll(ctx)
	w.drainSignals()
	// The carried state must stay small (it is the next execution's
	// input): stored events stay behind, queries read them from the database.
	w.state.Log.MarkPersisted(w.state.Log.Persisted, 0)
	w.state.Generation++
	next := w.in
	next.State = w.state
	return workflow.NewContinueAsNewError(ctx, RunWorkflow, next)
}

func (w *runWorkflow) run(ctx workflow.Context) (*models.RunResult, error) {
	s := w.state
	gs := models.GlobalSupervisorSource(w.hier)
	if s.Status == models.RunPending {
		s.Status = models.RunRunning
		w.emit(ctx, gs, models.CategoryLifecycle, models.ActionStarted, map[string]any{"task": w.in.Task, "hierarchy_id": w.hier.ID})
		w.emit(ctx, systemSource(), models.CategorySystem, models.ActionTopology, topology(w.hier))
		if err := w.setStatus(ctx, models.RunStatusUpdate{RunID: w.in.RunID, Status: models.RunRunning}); err != nil {
			return nil, err
		}
	}

	options := make([]models.Option, 0, len(w.hier.Teams))
	for _, t := range w.hier.Teams {
		options = append(options, models.Option{Name: t.Name, Description: teamDescription(t)})
	}
	finished := false
	for s.Iteration < w.hier.MaxIterations {
		if err := w.continueAsNewIfLong(ctx); err != nil {
			return nil, err
		}
		s.Iteration++
		s.CurrentTeam, s.CurrentWorker, s.ActiveAgentID = "", "", gs.AgentID
		var d models.Decision
		dctx := llmContext(ctx, w.in.Options, agentSummary("", w.hier.GlobalSupervisor, w.in.Options))
		err := workflow.ExecuteActivity(dctx, a.Decide, models.DecideInput{
			RunID:       w.in.RunID,
			Supervisor:  w.hier.GlobalSupervisor,
			Source:      gs,
			Task:        w.in.Task,
			Options:     options,
			Completed:   s.CompletedTeams,
			Context:     teamContext(s.Teams),
			AllowFinish: len(s.Teams) > 0,
			Iteration:   s.Iteration,
			RunOptions:  w.in.Options,
		}).Get(ctx, &d)
		if err != nil {
			return nil, err
		}
		s.Usage = s.Usage.Add(d.Usage)
		if d.Warning != "" {
			w.warn(ctx, gs, d.Warning)
		}
		if d.Action == models.DecisionFinish {
			finished = true
			break
		}
		kind, data := models.DispatchEvent(gs, options, d, s.Iteration)
		w.emit(ctx, gs, kind.Category, kind.Action, data)
		team := findTeam(w.hier, d.Target)
		if team == nil {
			// Decide validates against the options it was given; this guards
			// against an activity version that does not.
			w.warn(ctx, gs, fmt.Sprintf("global supervisor chose %q, which is not a team; dispatching %q instead", d.Target, options[0].Name))
			team = &w.hier.Teams[0]
		}
		out, err := w.runTeam(ctx, team, d.Instruction)
		if err != nil {
			return nil, err
		}
		s.Teams = append(s.Teams, out)
		if !contains(s.CompletedTeams, team.Name) {
			s.CompletedTeams = append(s.CompletedTeams, team.Name)
		}
	}
	s.CurrentTeam, s.CurrentWorker = "", ""
	if !finished {
		w.warn(ctx, gs, fmt.Sprintf("global supervisor reached its iteration limit (%d); writing the final answer from the work done so far", w.hier.MaxIterations))
	}

	s.ActiveAgentID = gs.AgentID
	var final models.RespondResult
	fctx := llmContext(ctx, w.in.Options, agentSummary("", w.hier.GlobalSupervisor, w.in.Options)+" · final answer")
	if err := workflow.ExecuteActivity(fctx, a.Respond, models.RespondInput{
		RunID:       w.in.RunID,
		Purpose:     models.PurposeFinalAnswer,
		Agent:       w.hier.GlobalSupervisor,
		Source:      gs,
		Task:        w.in.Task,
		Instruction: w.in.Task,
		Context:     teamContext(s.Teams),
		RunOptions:  w.in.Options,
		NoTools:     true,
		MessageID:   newMessageID(ctx),
	}).Get(ctx, &final); err != nil {
		return nil, err
	}
	s.Usage = s.Usage.Add(final.Usage)
	s.ActiveAgentID = ""
	result := &models.RunResult{FinalAnswer: final.Output, Teams: s.Teams, Warnings: s.Warnings, Usage: s.Usage}
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

// runTeam runs one team turn as a child workflow.
func (w *runWorkflow) runTeam(ctx workflow.Context, team *models.Team, instruction string) (models.TeamOutput, error) {
	s := w.state
	turn := len(s.Teams) + 1
	s.CurrentTeam, s.ActiveAgentID = team.Name, team.Supervisor.AgentID
	in := models.TeamInput{
		RunID:         w.in.RunID,
		RootAgentID:   w.hier.GlobalSupervisor.AgentID,
		Turn:          turn,
		Task:          w.in.Task,
		Team:          *team,
		Instruction:   instruction,
		MaxIterations: w.hier.MaxIterations,
		Options:       w.in.Options,
	}
	if w.hier.EnableContextSharing {
		in.PriorTeams = s.Teams
	}
	cctx := workflow.WithChildOptions(ctx, workflow.ChildWorkflowOptions{
		WorkflowID:          models.TeamWorkflowID(w.in.RunID, turn),
		StaticSummary:       fmt.Sprintf("%s · turn %d", team.Name, turn),
		StaticDetails:       instruction,
		WaitForCancellation: true,
	})
	var res models.TeamResult
	if err := workflow.ExecuteChildWorkflow(cctx, TeamWorkflow, in).Get(ctx, &res); err != nil {
		return models.TeamOutput{}, err
	}
	s.Warnings = append(s.Warnings, res.Warnings...)
	for _, wo := range res.Output.Workers {
		s.Usage = s.Usage.Add(wo.Usage)
	}
	s.Usage = s.Usage.Add(res.SupervisorUsage)
	return res.Output, nil
}

// fail records a failed or cancelled run in the database and on the stream.
// It runs on a disconnected context: the run's own may be cancelled.
func (w *runWorkflow) fail(ctx workflow.Context, cause error) error {
	s := w.state
	dctx, _ := workflow.NewDisconnectedContext(ctx)
	gs := models.GlobalSupervisorSource(w.hier)
	partial := &models.RunResult{Teams: s.Teams, Warnings: s.Warnings, Usage: s.Usage}
	if temporal.IsCanceledError(cause) || errors.Is(ctx.Err(), workflow.ErrCanceled) {
		s.Status = models.RunCancelled
		w.emit(dctx, gs, models.CategoryLifecycle, models.ActionCancelled, map[string]any{"reason": "cancelled"})
		w.persistAll(dctx)
		_ = w.setStatus(dctx, models.RunStatusUpdate{RunID: w.in.RunID, Status: models.RunCancelled, Result: partial, Error: "cancelled"})
		return cause
	}
	msg := failureMessage(cause)
	s.Status = models.RunFailed
	w.emit(dctx, systemSource(), models.CategorySystem, models.ActionError, map[string]any{"message": msg})
	w.emit(dctx, gs, models.CategoryLifecycle, models.ActionFailed, map[string]any{"error": msg})
	w.persistAll(dctx)
	_ = w.setStatus(dctx, models.RunStatusUpdate{RunID: w.in.RunID, Status: models.RunFailed, Result: partial, Error: msg})
	return cause
}

func (w *runWorkflow) setStatus(ctx workflow.Context, u models.RunStatusUpdate) error {
	return workflow.ExecuteActivity(storeContext(ctx), a.SetRunStatus, u).Get(ctx, nil)
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
	w.state.Log.Append(models.Event{
		RunID:     w.in.RunID,
		Timestamp: models.FormatTimestamp(workflow.Now(ctx)),
		Source:    source,
		Event:     models.EventKind{Category: category, Action: action},
		Data:      data,
	})
}

// drainSignals applies every event batch already delivered.
func (w *runWorkflow) drainSignals() {
	for {
		var batch models.EventBatch
		if !w.signals.ReceiveAsync(&batch) {
			return
		}
		w.applyBatch(batch)
	}
}

// applyBatch appends an activity's events, once per batch, and follows
// dispatch events to keep the progress current.
func (w *runWorkflow) applyBatch(b models.EventBatch) {
	for _, e := range w.state.Log.ApplyBatch(b) {
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

func teamContext(teams []models.TeamOutput) []models.ContextItem {
	items := make([]models.ContextItem, 0, len(teams))
	for _, t := range teams {
		items = append(items, models.ContextItem{From: "team " + t.TeamName, Content: t.Summary()})
	}
	return items
}

func findTeam(h *models.Hierarchy, name string) *models.Team {
	for i := range h.Teams {
		if h.Teams[i].Name == name {
			return &h.Teams[i]
		}
	}
	return nil
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
	if errors.As(err, &timeout) {
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
