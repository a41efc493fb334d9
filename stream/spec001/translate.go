package spec001

import (
	"slices"
	"strings"

	"github.com/op-stack/executor/models"
)

// Spec 001's stream event types (its section "流式事件接口").
const (
	ExecutionStarted   = "execution_started"
	ExecutionCompleted = "execution_completed"
	SupervisorRouting  = "supervisor_routing"
	AgentStarted       = "agent_started"
	AgentProgress      = "agent_progress"
	AgentCompleted     = "agent_completed"
	TeamTransition     = "team_transition"
	// ExecutionBudget is not in spec 001: it carries the log's
	// system.budget (a budget of the execution found spent).
	ExecutionBudget = "execution_budget"
	// SupervisorReassigned carries the log's
	// system.supervisor_reassigned: spec 001's supervisor reassignment
	// (error recovery 3), which its stream has no event for.
	SupervisorReassigned = "supervisor_reassigned"
)

// Spec 001's source_type values.
const (
	SourceSystem     = "system"
	SourceSupervisor = "supervisor"
	SourceAgent      = "agent"
)

// event is one event of spec 001's stream: its type (the SSE event name)
// and its data object.
type event struct {
	Type string
	Data map[string]any
}

// translator maps a run's ordered 002 event log to spec 001's events.
// It must see the log from sequence 1 in order: some spec 001 events need
// what came before (team_transition names the previous team, and
// agent_completed carries the worker's answer, streamed in pieces). A
// stream that resumes in the middle replays the log from the start through
// a translator and sends only what follows the resume point, so every
// subscriber sees the same spec 001 events for the same sequence numbers.
//
// The mapping:
//
//   - lifecycle.started → execution_started
//   - dispatch.team → supervisor_routing with selected_team (the first
//     one), then team_transition from the previous team to this one
//   - dispatch.worker → supervisor_routing with selected_agent, then
//     agent_started (content: the worker's instruction)
//   - a worker's llm.stream → agent_progress (content: the next piece of
//     its answer; progress: its team turn's workers done ÷ the team's
//     workers, execution_progress: teams completed ÷ teams in the plan,
//     both from system.topology and what the log has shown finished);
//     llm.tool_call and llm.tool_result → agent_progress
//     naming the tool; a sub-agent's llm.stream → agent_progress with its
//     own agent_id and parent_agent_id
//   - agent_completed (result: the worker's answer after its last tool
//     result or retry) when the log shows the worker's turn over: its team
//     supervisor's next step, its team's failure (system.error naming the
//     team, status failed) or next turn, a step of the global supervisor
//     (routed, it acts only between team turns; in parallel mode only its
//     final answer counts), or the run's end
//   - system.budget → execution_budget (scope, team, agent, spent, limit,
//     on_exceeded); it opens and closes nothing
//   - system.supervisor_reassigned → supervisor_reassigned (the team
//     supervisor's step: it ends the team's open worker, as its decisions do)
//   - lifecycle.completed, .failed and .cancelled → execution_completed
//     with status completed, failed (timed_out when its error_code is
//     EXECUTION_TIMEOUT) or cancelled and result_url; any other
//     lifecycle action (e.g. paused) → execution_<action>
//   - everything else (system.topology, supervisors' llm.* events, which
//     supervisor_routing sums up, llm.reasoning, llm.retry, system.warning)
//     has no spec 001 counterpart and is skipped.
type translator struct {
	runID       string
	hierarchyID string
	resultURL   string
	teamIDs     map[string]string // team name → team id
	lastTeam    string            // the team of the latest dispatch.team
	parallel    bool              // system.topology says execution_mode parallel
	// routedTogether: routed, with max_parallel_teams above 1 (system.topology
	// says so): the global supervisor decides, and streams its decisions,
	// while teams are at work, so none of its steps ends a worker's turn;
	// each ends at its team supervisor's next step, its team's failure or
	// the run's end.
	routedTogether bool
	open           map[string]*worker

	// Progress (spec 001's progress, issue 23): the plan from
	// system.topology, and what the log has shown finished.
	teamWorkers map[string]int             // team name → its workers
	totalTeams  int                        // teams in the plan
	turnDone    map[string]map[string]bool // team → agent_ids done in its current turn
	active      map[string]bool            // teams whose turn is under way
	teamsDone   map[string]bool            // teams that completed a turn
}

// worker is a worker whose turn has started and not yet ended.
type worker struct {
	agentID, name, team string
	answer              strings.Builder
}

func newTranslator(x Execution) *translator {
	return &translator{
		runID: x.ID, hierarchyID: x.HierarchyID, teamIDs: x.TeamIDs,
		resultURL:   x.ResultURL,
		open:        map[string]*worker{},
		teamWorkers: map[string]int{}, turnDone: map[string]map[string]bool{},
		active: map[string]bool{}, teamsDone: map[string]bool{},
	}
}

// teamProgress is a team turn's progress in percent: its workers whose
// work in this turn is over ÷ the team's workers (each may be dispatched;
// one dispatched twice counts once, and not while it works again). nil
// when the plan is unknown.
func (t *translator) teamProgress(team string) any {
	n := t.teamWorkers[team]
	if n == 0 {
		return nil
	}
	done := len(t.turnDone[team])
	if w := t.open[team]; w != nil && t.turnDone[team][w.agentID] {
		done-- // at work again: not finished
	}
	return min(100, 100*done/n)
}

// runProgress is the execution's progress in percent: teams that completed
// a turn ÷ teams in the plan (system.topology). nil when the plan is
// unknown.
func (t *translator) runProgress() any {
	if t.totalTeams == 0 {
		return nil
	}
	return min(100, 100*len(t.teamsDone)/t.totalTeams)
}

// endTeam records that team's turn is over, with status.
func (t *translator) endTeam(team, status string) {
	if !t.active[team] {
		return
	}
	delete(t.active, team)
	if status == models.TeamCompleted {
		t.teamsDone[team] = true
	}
}

// endAllTeams ends every team turn under way, with status.
func (t *translator) endAllTeams(status string) {
	for team := range t.active {
		t.endTeam(team, status)
	}
}

// readTopology learns the plan: the teams and their workers.
func (t *translator) readTopology(data map[string]any) {
	teams := anyList(data["teams"])
	t.totalTeams = len(teams)
	for _, item := range teams {
		team, _ := item.(map[string]any)
		if name := str(team, "name"); name != "" {
			t.teamWorkers[name] = len(anyList(team["workers"]))
		}
	}
}

// anyList reads a JSON list as the log holds it: []any once decoded, or
// the typed slices the workflow built.
func anyList(v any) []any {
	switch l := v.(type) {
	case []any:
		return l
	case []map[string]any:
		out := make([]any, len(l))
		for i, m := range l {
			out[i] = m
		}
		return out
	case []string:
		out := make([]any, len(l))
		for i, x := range l {
			out[i] = x
		}
		return out
	}
	return nil
}

func (t *translator) teamID(name string) string { return lookupID(t.teamIDs, name) }

func (t *translator) base(e models.Event, sourceType string) map[string]any {
	return map[string]any{"timestamp": e.Timestamp, "source_type": sourceType, "execution_id": t.runID, "sequence": e.Sequence}
}

func str(m map[string]any, key string) string {
	s, _ := m[key].(string)
	return s
}

// translate returns the spec 001 events that e adds, in order; none when e
// has no counterpart.
func (t *translator) translate(e models.Event) []event {
	var out []event
	src := e.Source
	team := ""
	if src.TeamName != nil {
		team = *src.TeamName
	}
	switch {
	case e.Event.Category == models.CategoryLifecycle:
		return t.lifecycle(e)
	case e.Event.Category == models.CategoryApproval:
		// Spec 001 has no approval events; a gate's event must not close
		// its team supervisor's team either.
		return nil
	case e.Event.Category == models.CategoryLLM && (e.Event.Action == models.ActionUsage || e.Event.Action == models.ActionArtifact):
		// Nor usage events (llm.usage) or stored files (llm.artifact,
		// listed on the results instead): they follow an agent's call and
		// must not open or close teams or workers.
		return nil
	case e.Event.Category == models.CategorySystem && e.Event.Action == models.ActionBudget:
		return []event{{ExecutionBudget, t.budgetData(e)}}
	case e.Event.Category == models.CategorySystem && e.Event.Action == models.ActionTopology:
		// Teams may be at work together in parallel mode, and in routed
		// mode when the run's max_parallel_teams is above 1 (the workflow
		// puts it in the topology then).
		limit, _ := e.Data["max_parallel_teams"].(float64)
		if n, ok := e.Data["max_parallel_teams"].(int); ok {
			limit = float64(n)
		}
		t.parallel = str(e.Data, "execution_mode") == models.ExecutionModeParallel
		t.routedTogether = !t.parallel && limit > 1
		t.readTopology(e.Data)
		return nil
	case e.Event.Category == models.CategoryDispatch && e.Event.Action == models.ActionTeamCancelled:
		// An operator cancelled a team's turn: its open worker ends
		// cancelled (runs/teams/cancel).
		out = t.close(e, str(e.Data, "team_name"), models.TeamCancelled, out)
		t.endTeam(str(e.Data, "team_name"), models.TeamCancelled)
		return out
	case src.AgentType == models.AgentTypeGlobalSupervisor:
		// Routed one team at a time, the global supervisor acts between
		// team turns only; with teams at work together (parallel mode, or
		// routed with max_parallel_teams above 1) it dispatches teams while
		// others run, and only its final answer comes after every team.
		if !t.routedTogether && (!t.parallel || e.Event.Category == models.CategoryLLM) {
			out = t.closeAll(e, models.TeamCompleted, out)
			t.endAllTeams(models.TeamCompleted)
		}
	case src.AgentType == models.AgentTypeTeamSupervisor:
		out = t.close(e, team, models.TeamCompleted, out)
	case e.Event.Category == models.CategorySystem && e.Event.Action == models.ActionError:
		if name := str(e.Data, "team_name"); name != "" {
			out = t.close(e, name, models.TeamFailed, out)
			t.endTeam(name, models.TeamFailed)
		}
		return out
	}
	switch {
	case e.Event.Category == models.CategorySystem && e.Event.Action == models.ActionSupervisorReassigned:
		return append(out, event{SupervisorReassigned, t.reassignedData(e, team)})
	case e.Event.Category == models.CategoryDispatch && e.Event.Action == models.ActionTeam:
		return append(out, t.dispatchTeam(e)...)
	case e.Event.Category == models.CategoryDispatch && e.Event.Action == models.ActionWorker:
		return append(out, t.dispatchWorker(e, team)...)
	case e.Event.Category != models.CategoryLLM:
		return out
	case src.AgentType == models.AgentTypeWorker:
		return append(out, t.workerLLM(e, team)...)
	case src.AgentType == models.AgentTypeSubAgent && e.Event.Action == models.ActionStream:
		d := t.agentData(e, team, src.AgentID, src.AgentName, "progress")
		d["content"] = str(e.Data, "content")
		d["progress"], d["execution_progress"] = t.teamProgress(team), t.runProgress()
		if n := len(src.Path); n >= 2 {
			d["parent_agent_id"] = src.Path[n-2]
		}
		return append(out, event{AgentProgress, d})
	}
	return out
}

func (t *translator) lifecycle(e models.Event) []event {
	d := t.base(e, SourceSystem)
	switch e.Event.Action {
	case models.ActionStarted:
		d["status"] = "started"
		d["team_id"] = t.hierarchyID
		d["task"] = str(e.Data, "task")
		return []event{{ExecutionStarted, d}}
	case models.ActionCompleted, models.ActionFailed, models.ActionCancelled:
		status := map[string]string{models.ActionCompleted: models.TeamCompleted, models.ActionFailed: models.TeamFailed, models.ActionCancelled: "cancelled"}[e.Event.Action]
		if e.Event.Action == models.ActionFailed && str(e.Data, "error_code") == models.CodeExecutionTimeout.Name {
			// A run that overran its max_execution_time ends with
			// lifecycle.failed, and its status is timed_out: the stream
			// says what GET /executions/{id} says (issue 23).
			status = models.RunTimedOut
		}
		out := t.closeAll(e, status, nil)
		if e.Event.Action == models.ActionCompleted {
			t.endAllTeams(models.TeamCompleted)
		} else {
			t.endAllTeams(status)
		}
		d["status"] = status
		d["result_url"] = t.resultURL
		d["progress"] = t.runProgress()
		if e.Event.Action == models.ActionCompleted && t.totalTeams > 0 {
			// A completed execution is whole, as GET /executions/{id}
			// says, even when some teams were skipped or never chosen.
			d["progress"] = 100
		}
		if msg := firstNonEmpty(str(e.Data, "error"), str(e.Data, "reason")); e.Event.Action != models.ActionCompleted && msg != "" {
			d["error"] = msg
			if code := str(e.Data, "error_code"); code != "" {
				d["error_code"] = code
			}
		}
		return append(out, event{ExecutionCompleted, d})
	}
	d["status"] = e.Event.Action
	return []event{{"execution_" + e.Event.Action, d}}
}

func (t *translator) supervisorData(e models.Event) map[string]any {
	d := t.base(e, SourceSupervisor)
	d["supervisor_id"] = e.Source.AgentID
	d["supervisor_name"] = e.Source.AgentName
	return d
}

// reassignedData is a supervisor_reassigned event's data: the team
// supervisor (supervisor_id), its team, and system.supervisor_reassigned's
// fields.
func (t *translator) reassignedData(e models.Event, team string) map[string]any {
	d := t.supervisorData(e)
	d["team_id"] = t.teamID(team)
	d["action"] = "supervisor_reassigned"
	d["content"] = str(e.Data, "message")
	for _, k := range []string{"stand_in_agent_id", "from_model", "to_model", "error"} {
		d[k] = str(e.Data, k)
	}
	return d
}

func (t *translator) dispatchTeam(e models.Event) []event {
	name := str(e.Data, "team_name")
	// A team's new turn ends its previous one.
	out := t.close(e, name, models.TeamCompleted, nil)
	t.endTeam(name, models.TeamCompleted)
	// The workflow says which teams have completed (completed_teams, on
	// runs that carry it): with teams at work together, a team's end is
	// not otherwise in the log.
	for _, done := range anyList(e.Data["completed_teams"]) {
		if n, ok := done.(string); ok && n != "" {
			t.teamsDone[n] = true
		}
	}
	t.active[name] = true
	t.turnDone[name] = map[string]bool{}
	d := t.supervisorData(e)
	d["progress"] = t.runProgress()
	d["content"] = firstNonEmpty(str(e.Data, "reason"), str(e.Data, "instruction"))
	d["instruction"] = str(e.Data, "instruction")
	prev := t.lastTeam
	t.lastTeam = name
	if prev == "" {
		d["team_id"] = t.hierarchyID
		d["action"] = "routing"
		d["selected_team"] = t.teamID(name)
		d["selected_team_name"] = name
		return append(out, event{SupervisorRouting, d})
	}
	d["action"] = "team_transition"
	d["from_team"] = t.teamID(prev)
	d["to_team"] = t.teamID(name)
	d["from_team_name"] = prev
	d["to_team_name"] = name
	return append(out, event{TeamTransition, d})
}

func (t *translator) dispatchWorker(e models.Event, team string) []event {
	d := t.supervisorData(e)
	d["team_id"] = t.teamID(team)
	d["action"] = "routing"
	d["content"] = firstNonEmpty(str(e.Data, "reason"), str(e.Data, "instruction"))
	d["selected_agent"] = str(e.Data, "worker_agent_id")
	d["selected_agent_name"] = str(e.Data, "worker_name")
	d["instruction"] = str(e.Data, "instruction")
	w := &worker{agentID: str(e.Data, "worker_agent_id"), name: str(e.Data, "worker_name"), team: team}
	t.open[team] = w
	s := t.agentData(e, team, w.agentID, w.name, "started")
	s["source_type"] = SourceAgent
	s["content"] = str(e.Data, "instruction")
	s["status"] = "running"
	return []event{{SupervisorRouting, d}, {AgentStarted, s}}
}

func (t *translator) agentData(e models.Event, team, agentID, name, action string) map[string]any {
	d := t.base(e, SourceAgent)
	d["team_id"] = t.teamID(team)
	d["agent_id"] = agentID
	d["agent_name"] = name
	d["action"] = action
	return d
}

func (t *translator) workerLLM(e models.Event, team string) []event {
	var out []event
	w := t.open[team]
	if w == nil || w.agentID != e.Source.AgentID {
		// A worker whose dispatch was not seen: the team's previous worker
		// is done, and this one is followed from here.
		out = t.close(e, team, models.TeamCompleted, nil)
		w = &worker{agentID: e.Source.AgentID, name: e.Source.AgentName, team: team}
		t.open[team] = w
	}
	d := t.agentData(e, team, w.agentID, w.name, "progress")
	d["progress"], d["execution_progress"] = t.teamProgress(team), t.runProgress()
	if a, ok := e.Data["attempt"]; ok {
		d["attempt"] = a
	}
	switch e.Event.Action {
	case models.ActionStream:
		c := str(e.Data, "content")
		w.answer.WriteString(c)
		d["content"] = c
	case models.ActionRetry, models.ActionFallback:
		w.answer.Reset()
		return out
	case models.ActionToolCall:
		d["content"] = "calling tool " + str(e.Data, "tool_name")
		d["tool_name"] = str(e.Data, "tool_name")
	case models.ActionToolResult:
		// The answer is what the worker writes after its last tool result.
		w.answer.Reset()
		d["tool_name"] = str(e.Data, "tool_name")
		// is_error, or spec 004's status, whichever the event carries.
		if isErr, _ := e.Data["is_error"].(bool); isErr || str(e.Data, "status") == "error" {
			d["content"] = "tool " + str(e.Data, "tool_name") + " failed: " + str(e.Data, "error")
		} else {
			d["content"] = "tool " + str(e.Data, "tool_name") + " returned"
		}
	default:
		return out
	}
	return append(out, event{AgentProgress, d})
}

// close ends team's open worker, if any, with status.
func (t *translator) close(e models.Event, team, status string, out []event) []event {
	w := t.open[team]
	if w == nil {
		return out
	}
	delete(t.open, team)
	if t.turnDone[team] == nil {
		t.turnDone[team] = map[string]bool{}
	}
	t.turnDone[team][w.agentID] = true
	d := t.agentData(e, team, w.agentID, w.name, "completed")
	d["result"] = w.answer.String()
	d["status"] = status
	return append(out, event{AgentCompleted, d})
}

// closeAll ends every open worker, in team name order.
func (t *translator) closeAll(e models.Event, status string, out []event) []event {
	teams := make([]string, 0, len(t.open))
	for name := range t.open {
		teams = append(teams, name)
	}
	slices.Sort(teams)
	for _, name := range teams {
		out = t.close(e, name, status, out)
	}
	return out
}

// budgetData is an execution_budget event's data: system.budget's fields,
// with the team's id next to its name.
func (t *translator) budgetData(e models.Event) map[string]any {
	d := t.base(e, SourceSystem)
	d["action"] = "budget_exceeded"
	for _, k := range []string{"scope", "on_exceeded", "spent", "limit", "agent_id"} {
		if v, ok := e.Data[k]; ok {
			d[k] = v
		}
	}
	if name := str(e.Data, "team_name"); name != "" {
		d["team_name"], d["team_id"] = name, t.teamID(name)
	}
	return d
}

// lookupID is a team's id, or its name when the id is unknown (the
// hierarchy was edited or deleted since the run started).
func lookupID(ids map[string]string, name string) string {
	if id, ok := ids[name]; ok && id != "" {
		return id
	}
	return name
}

func firstNonEmpty(values ...string) string {
	for _, v := range values {
		if strings.TrimSpace(v) != "" {
			return v
		}
	}
	return ""
}
