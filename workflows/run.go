package workflows

import (
	"errors"
	"fmt"
	"strings"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/op-stack/executor/models"
)

// RunState is a run's whole state. It is serializable so that it can be
// carried across continue-as-new.
type RunState struct {
	Input          models.RunInput     `json:"input"`
	Status         string              `json:"status"`
	Iteration      int                 `json:"iteration"`
	Teams          []models.TeamOutput `json:"teams"`
	CompletedTeams []string            `json:"completed_teams"`
	CurrentTeam    string              `json:"current_team"`
	CurrentWorker  string              `json:"current_worker"`
	ActiveAgentID  string              `json:"active_agent_id"`
	Warnings       []string            `json:"warnings"`
	Usage          models.Usage        `json:"usage"`
	Log            EventLog            `json:"log"`
}

type runWorkflow struct {
	state *RunState
	hier  *models.Hierarchy
}

// RunWorkflow runs a hierarchy on a task: the global supervisor picks a
// team and an instruction, the team's turn runs as a child TeamWorkflow,
// and so on until the global supervisor finishes (or reaches its iteration
// limit) and writes the final answer.
func RunWorkflow(ctx workflow.Context, in models.RunInput) (*models.RunResult, error) {
	in.Options = WithDefaults(in.Options)
	w := &runWorkflow{state: &RunState{Input: in, Status: models.RunPending}}
	w.hier = &w.state.Input.Hierarchy
	if err := w.setup(ctx); err != nil {
		return nil, err
	}
	result, err := w.run(ctx)
	if err != nil {
		return nil, w.fail(ctx, err)
	}
	return result, nil
}

// setup registers the queries and starts receiving event signals.
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
	// Events keep arriving while the run is cancelled and cleans up, so the
	// receiver runs on a context that cancellation does not close.
	recvCtx, _ := workflow.NewDisconnectedContext(ctx)
	ch := workflow.GetSignalChannel(ctx, models.SignalEvents)
	workflow.Go(recvCtx, func(ctx workflow.Context) {
		for {
			var batch models.EventBatch
			ch.Receive(ctx, &batch)
			w.applyBatch(batch)
		}
	})
	return nil
}

func (w *runWorkflow) run(ctx workflow.Context) (*models.RunResult, error) {
	s := w.state
	gs := models.GlobalSupervisorSource(w.hier)
	s.Status = models.RunRunning
	w.emit(ctx, gs, models.CategoryLifecycle, models.ActionStarted, map[string]any{"task": s.Input.Task, "hierarchy_id": w.hier.ID})
	w.emit(ctx, systemSource(), models.CategorySystem, models.ActionTopology, topology(w.hier))
	if err := w.setStatus(ctx, models.RunStatusUpdate{RunID: s.Input.RunID, Status: models.RunRunning}); err != nil {
		return nil, err
	}

	options := make([]models.Option, 0, len(w.hier.Teams))
	for _, t := range w.hier.Teams {
		options = append(options, models.Option{Name: t.Name, Description: teamDescription(t)})
	}
	finished := false
	for s.Iteration < w.hier.MaxIterations {
		s.Iteration++
		s.CurrentTeam, s.CurrentWorker, s.ActiveAgentID = "", "", gs.AgentID
		var d models.Decision
		dctx := llmContext(ctx, s.Input.Options, agentSummary("", w.hier.GlobalSupervisor, s.Input.Options))
		err := workflow.ExecuteActivity(dctx, a.Decide, models.DecideInput{
			RunID:       s.Input.RunID,
			Supervisor:  w.hier.GlobalSupervisor,
			Source:      gs,
			Task:        s.Input.Task,
			Options:     options,
			Completed:   s.CompletedTeams,
			Context:     teamContext(s.Teams),
			AllowFinish: len(s.Teams) > 0,
			Iteration:   s.Iteration,
			RunOptions:  s.Input.Options,
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
	fctx := llmContext(ctx, s.Input.Options, agentSummary("", w.hier.GlobalSupervisor, s.Input.Options)+" · final answer")
	if err := workflow.ExecuteActivity(fctx, a.Respond, models.RespondInput{
		RunID:       s.Input.RunID,
		Purpose:     models.PurposeFinalAnswer,
		Agent:       w.hier.GlobalSupervisor,
		Source:      gs,
		Task:        s.Input.Task,
		Instruction: s.Input.Task,
		Context:     teamContext(s.Teams),
		RunOptions:  s.Input.Options,
	}).Get(ctx, &final); err != nil {
		return nil, err
	}
	s.Usage = s.Usage.Add(final.Usage)
	s.ActiveAgentID = ""
	result := &models.RunResult{FinalAnswer: final.Output, Teams: s.Teams, Warnings: s.Warnings, Usage: s.Usage}
	if err := w.setStatus(ctx, models.RunStatusUpdate{RunID: s.Input.RunID, Status: models.RunCompleted, Result: result}); err != nil {
		return nil, err
	}
	s.Status = models.RunCompleted
	w.emit(ctx, gs, models.CategoryLifecycle, models.ActionCompleted, map[string]any{"final_answer": final.Output, "usage": s.Usage})
	return result, nil
}

// runTeam runs one team turn as a child workflow.
func (w *runWorkflow) runTeam(ctx workflow.Context, team *models.Team, instruction string) (models.TeamOutput, error) {
	s := w.state
	turn := len(s.Teams) + 1
	s.CurrentTeam, s.ActiveAgentID = team.Name, team.Supervisor.AgentID
	in := models.TeamInput{
		RunID:         s.Input.RunID,
		Turn:          turn,
		Task:          s.Input.Task,
		Team:          *team,
		Instruction:   instruction,
		MaxIterations: w.hier.MaxIterations,
		Options:       s.Input.Options,
	}
	if w.hier.EnableContextSharing {
		in.PriorTeams = s.Teams
	}
	cctx := workflow.WithChildOptions(ctx, workflow.ChildWorkflowOptions{
		WorkflowID:          models.TeamWorkflowID(s.Input.RunID, turn),
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
		_ = w.setStatus(dctx, models.RunStatusUpdate{RunID: s.Input.RunID, Status: models.RunCancelled, Result: partial, Error: "cancelled"})
		w.emit(dctx, gs, models.CategoryLifecycle, models.ActionCancelled, map[string]any{"reason": "cancelled"})
		return cause
	}
	msg := failureMessage(cause)
	s.Status = models.RunFailed
	_ = w.setStatus(dctx, models.RunStatusUpdate{RunID: s.Input.RunID, Status: models.RunFailed, Result: partial, Error: msg})
	w.emit(dctx, systemSource(), models.CategorySystem, models.ActionError, map[string]any{"message": msg})
	w.emit(dctx, gs, models.CategoryLifecycle, models.ActionFailed, map[string]any{"error": msg})
	return cause
}

func (w *runWorkflow) setStatus(ctx workflow.Context, u models.RunStatusUpdate) error {
	return workflow.ExecuteActivity(storeContext(ctx), a.SetRunStatus, u).Get(ctx, nil)
}

func (w *runWorkflow) warn(ctx workflow.Context, source models.Source, msg string) {
	w.state.Warnings = append(w.state.Warnings, msg)
	w.emit(ctx, source, models.CategorySystem, models.ActionWarning, map[string]any{"message": msg})
}

// emit appends an event the workflow itself produces.
func (w *runWorkflow) emit(ctx workflow.Context, source models.Source, category, action string, data map[string]any) {
	w.state.Log.Append(models.Event{
		RunID:     w.state.Input.RunID,
		Timestamp: models.FormatTimestamp(workflow.Now(ctx)),
		Source:    source,
		Event:     models.EventKind{Category: category, Action: action},
		Data:      data,
	})
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
		items = append(items, models.ContextItem{From: "team " + t.TeamName, Content: t.Summary})
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
