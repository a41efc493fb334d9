package agui

import (
	"encoding/json"
	"strconv"
	"strings"
	"time"

	"github.com/op-stack/executor/models"
)

// Options name the run a Translator translates and where its client
// resumes.
type Options struct {
	// RunID is RUN_STARTED's runId: the run's public id. Empty: the log's
	// run_id.
	RunID string
	// ThreadID is the threadId. Empty: lifecycle.started's thread_id (a
	// follow-up run's thread), else the run id (a run is its own thread).
	ThreadID string
	// ParentRunID is RUN_STARTED's parentRunId: the run this one was
	// forked from (store.Run.ForkedFrom). A fork's log starts with a copy
	// of its original's events, so the log cannot say it.
	ParentRunID string
	// After is the resume point: the last sequence the client has. Next
	// returns nothing for the events up to it, and before the first event
	// after it a prelude that re-opens what is open at that point (see
	// Translator).
	After int64
}

// Translator maps a run's ordered event log to AG-UI events. It must see
// the log from sequence 1, in order: what an event becomes depends on
// what came before (which agent's turn is open, which message it writes).
// It is a deterministic function of the log, so a client that resumes
// after sequence N gets exactly the AG-UI events the log's events after N
// make, with no gap and no duplicate, on any replica.
//
// One thing is added on resume, because an AG-UI client checks each
// connection on its own (@ag-ui/client's verifyEvents: the first event
// must be RUN_STARTED, content must belong to an open message): when the
// run's AG-UI run is open after event N, the resumed stream starts with a
// prelude that re-opens it without repeating any content — RUN_STARTED,
// then STEP_STARTED and SUBAGENT_STARTED for the turns open at N, then
// TEXT_MESSAGE_START and REASONING_START for the messages open at N, all
// with the ids they had. A client that kept its messages appends what
// follows to the same messages.
//
// The mapping (docs/ag-ui.md has the table):
//
//   - lifecycle.started → RUN_STARTED (threadId, runId, parentRunId, the
//     task as the input's user message); lifecycle.completed →
//     RUN_FINISHED (outcome success, result: the final answer, usage per
//     model), .cancelled → RUN_FINISHED (outcome cancelled), .failed →
//     RUN_ERROR (message, code); everything open is closed first.
//   - dispatch.team → STEP_STARTED "team:<name>", then SUBAGENT_STARTED
//     for the team supervisor's turn; dispatch.worker → STEP_STARTED
//     "worker:<name>" (attributed to the team supervisor's turn), then
//     SUBAGENT_STARTED for the worker's turn, its parent the team's. A
//     worker's sub-agent is a SUBAGENT_STARTED nested under its caller,
//     with the delegate call as parentToolCallId. A turn ends (FINISHED,
//     then its step's STEP_FINISHED) when the log shows it over, by the
//     rules spec 001's translator follows (api/stream_v1.go): a team
//     supervisor's next step ends its worker's turn, the global
//     supervisor's next step (routed one team at a time) ends the teams',
//     a delegate call's result ends its sub-agent's, a team's failure
//     (system.error) ends its turn with SUBAGENT_ERROR.
//   - llm.stream → TEXT_MESSAGE_START / CONTENT / END: one message per
//     agent answer, under the message_id the log gives it; it ends at the
//     call's llm.usage, a tool call, a retry or the turn's end.
//   - llm.reasoning → REASONING_START, REASONING_MESSAGE_START / CONTENT /
//     END, REASONING_END.
//   - llm.tool_call → TOOL_CALL_START / ARGS / END, llm.tool_result →
//     TOOL_CALL_RESULT; toolCallId is spec 004's tool_execution_id.
//   - llm.retry, llm.fallback and system.supervisor_reassigned end the
//     agent's open message; its next text goes to a new message (id
//     suffixed "~<n>"), since AG-UI cannot take text back; a CUSTOM event
//     names the superseded message.
//   - approval.requested → RUN_FINISHED with outcome interrupt (every
//     pending approval an interrupt; open turns finish as suspended); the
//     next event re-opens the run with RUN_STARTED, whose input.resume
//     answers the interrupt when that event is approval.resolved.
//   - llm.usage → CUSTOM "executor.usage" (tokens and cost_usd);
//     lifecycle.completed's usage → CUSTOM "executor.run_usage".
//   - every other event (system.topology, warnings, budgets, artifacts,
//     pause and resume, steering) → CUSTOM "executor.<category>.<action>"
//     with the event's data as its value.
//
// Every event but RUN_* names its agent: subagentRunId when the agent's
// turn is a sub-agent invocation (every agent below the global
// supervisor), and metadata {agent_id, agent_name, agent_type,
// team_name} always. The last AG-UI event made from a log event carries
// metadata.sequence, the resume point (as the SSE id does).
type Translator struct {
	opts     Options
	runID    string
	threadID string
	task     string

	inRun   bool // a RUN_STARTED is open
	ended   bool // the run's terminal event has been translated
	preSent bool // the resume prelude has been decided

	seq int64 // the event being translated
	ts  int64 // its timestamp, in ms
	out []Event

	root  *invocation   // the global supervisor (no subagentRunId)
	open  []*invocation // open sub-agent invocations, in the order opened
	byKey map[string]*invocation

	// From system.topology.
	gsID           string
	agents         map[string]agentInfo // agent_id → name and team
	teamSupervisor map[string]string    // team name → its supervisor's agent_id
	parallel       bool
	routedTogether bool
	// completed: the teams dispatch.team's completed_teams listed last.
	completed map[string]bool

	delegations []*delegation
	pending     []map[string]any // open approvals, as AG-UI interrupts

	usage     []map[string]any // per model, for RUN_FINISHED
	usageIdx  map[string]int
	usageSeen map[string]bool // llm_call_ids counted
}

// invocation is one agent's turn as an AG-UI sub-agent invocation.
type invocation struct {
	id     string // subagentRunId; "" for the root
	key    string // the agent's path
	src    models.Source
	parent *invocation
	// step is the STEP_STARTED this invocation opened with, attributed to
	// its parent ("" for none).
	step        string
	description string
	toolCallID  string // the delegate call that started a sub-agent

	text      *openText
	reasoning string // the open reasoning message's id
	lastMsg   string // the latest message id the agent wrote under (base)
	gen       int    // retries and fallbacks seen: suffix of new message ids
}

type openText struct{ id, base string }

type agentInfo struct{ name, team string }

// delegation is a delegate call in flight: its sub-agent's invocation is
// its child.
type delegation struct {
	execID, callerKey, name string
	child                   *invocation
}

// New returns a Translator for one client's stream.
func New(opts Options) *Translator {
	t := &Translator{
		opts: opts, runID: opts.RunID, threadID: opts.ThreadID,
		byKey: map[string]*invocation{}, agents: map[string]agentInfo{}, teamSupervisor: map[string]string{},
		usageIdx: map[string]int{}, usageSeen: map[string]bool{},
	}
	t.root = &invocation{}
	return t
}

// Next returns the AG-UI events that e adds to the stream, in order; none
// for an event at or before the resume point, and none once the run's
// terminal event has been translated. Events must come in sequence order
// from 1.
func (t *Translator) Next(e models.Event) []Event {
	if t.ended {
		return nil
	}
	t.seq = e.Sequence
	t.ts = 0
	if ts, err := time.Parse(models.TimestampLayout, e.Timestamp); err == nil {
		t.ts = ts.UnixMilli()
	} else if ts, err := time.Parse(time.RFC3339Nano, e.Timestamp); err == nil {
		t.ts = ts.UnixMilli()
	}
	t.out = nil
	if e.Sequence > t.opts.After && !t.preSent {
		t.preSent = true
		if t.opts.After > 0 && t.inRun {
			t.reopen(nil)
		}
	}
	t.translate(e)
	out := t.out
	t.out = nil
	if e.Sequence <= t.opts.After || len(out) == 0 {
		return nil
	}
	last := out[len(out)-1]
	m := last.Metadata()
	if m == nil {
		m = map[string]any{}
		last["metadata"] = m
	}
	m["sequence"] = e.Sequence
	return out
}

// Ended says the run's terminal event has been translated.
func (t *Translator) Ended() bool { return t.ended }

func (t *Translator) translate(e models.Event) {
	if t.runID == "" {
		t.runID = e.RunID
	}
	cat, act := e.Event.Category, e.Event.Action
	if cat == models.CategoryLifecycle && act == models.ActionQueued {
		// A queued run's wait (docs/queue.md) is no part of an AG-UI run:
		// its RUN_STARTED comes with lifecycle.started, once admitted.
		return
	}
	if cat == models.CategoryLifecycle && act == models.ActionStarted && !t.inRun {
		t.task = str(e.Data, "task")
		if t.threadID == "" {
			t.threadID = str(e.Data, "thread_id")
		}
		if len(e.Source.Path) > 0 {
			t.gsID = e.Source.Path[0]
		}
		t.root.src = e.Source
		t.reopen(nil)
		return
	}
	if !t.inRun {
		// After an interrupt (or a log that does not start with
		// lifecycle.started): this event opens the next AG-UI run.
		var resume []any
		if cat == models.CategoryApproval && act == models.ActionResolved {
			resume = []any{resumeEntry(e.Data)}
		}
		t.reopen(resume)
	}
	src := e.Source
	if src.AgentType == models.AgentTypeGlobalSupervisor && t.root.src.AgentID == "" {
		t.root.src = src
	}
	switch {
	case cat == models.CategoryLifecycle:
		t.lifecycle(e)
		return
	case cat == models.CategoryApproval:
		t.approval(e)
		return
	case cat == models.CategoryLLM && act == models.ActionUsage:
		t.llmUsage(e)
		return
	case cat == models.CategoryLLM && act == models.ActionArtifact:
		t.custom(e)
		return
	case cat == models.CategorySystem && act == models.ActionTopology:
		t.readTopology(e.Data)
		t.custom(e)
		return
	case cat == models.CategorySystem && act == models.ActionBudget:
		t.custom(e)
		return
	case cat == models.CategoryDispatch && act == models.ActionTeamCancelled:
		t.closeTeam(str(e.Data, "team_name"), "")
		t.custom(e)
		return
	case src.AgentType == models.AgentTypeGlobalSupervisor:
		// Routed one team at a time, the global supervisor acts between
		// team turns only; with teams at work together only its final
		// answer (an LLM event) comes after every team.
		if !t.routedTogether && (!t.parallel || cat == models.CategoryLLM) {
			t.closeChildren(t.root)
		}
	case src.AgentType == models.AgentTypeTeamSupervisor:
		// A team supervisor's next step ends its worker's turn.
		if ts := t.byKey[keyOf(src)]; ts != nil {
			t.closeChildren(ts)
		}
	case cat == models.CategorySystem && act == models.ActionError:
		if team := str(e.Data, "team_name"); team != "" {
			msg := str(e.Data, "message")
			if msg == "" {
				msg = "team " + team + " failed"
			}
			t.closeTeam(team, msg)
		}
		t.custom(e)
		return
	}
	switch {
	case cat == models.CategoryDispatch && act == models.ActionTeam:
		t.dispatchTeam(e)
	case cat == models.CategoryDispatch && act == models.ActionWorker:
		t.dispatchWorker(e)
	case cat == models.CategorySystem && act == models.ActionSupervisorReassigned:
		t.supersede(e, t.ensure(src))
	case cat == models.CategoryLLM:
		t.llm(e)
	default:
		t.custom(e)
	}
}

// event builds an AG-UI event of type typ, attributed to inv (nil or the
// root: not attributed) and to src's agent in its metadata.
func (t *Translator) event(typ string, inv *invocation, src *models.Source, fields map[string]any) Event {
	ev := Event{"type": typ}
	if t.ts != 0 {
		ev["timestamp"] = t.ts
	}
	for k, v := range fields {
		ev[k] = v
	}
	if inv != nil && inv.id != "" {
		ev["subagentRunId"] = inv.id
	}
	if src != nil {
		if m := identity(*src); m != nil {
			ev["metadata"] = m
		}
	}
	return ev
}

func (t *Translator) emit(typ string, inv *invocation, src *models.Source, fields map[string]any) {
	t.out = append(t.out, t.event(typ, inv, src, fields))
}

// identity is an agent's identity as metadata: a fresh map each time,
// since a client merges an event's metadata into its message.
func identity(src models.Source) map[string]any {
	if src.AgentID == "" {
		return nil
	}
	m := map[string]any{"agent_id": src.AgentID, "agent_type": src.AgentType}
	if src.AgentName != "" {
		m["agent_name"] = src.AgentName
	}
	if src.TeamName != nil && *src.TeamName != "" {
		m["team_name"] = *src.TeamName
	}
	return m
}

// runFields are the fields of RUN_STARTED and RUN_FINISHED.
func (t *Translator) runFields() map[string]any {
	thread := t.threadID
	if thread == "" {
		thread = t.runID
	}
	return map[string]any{"threadId": thread, "runId": t.runID}
}

// reopen starts an AG-UI run (RUN_STARTED) and re-opens every turn and
// message open in the log, with their ids: the run's start, its restart
// after an interrupt, and a resumed stream's prelude.
func (t *Translator) reopen(resume []any) {
	t.inRun = true
	f := t.runFields()
	f["protocolVersion"] = ProtocolVersion
	if t.opts.ParentRunID != "" {
		f["parentRunId"] = t.opts.ParentRunID
	}
	input := map[string]any{"threadId": f["threadId"], "runId": f["runId"], "messages": []any{}}
	if t.task != "" {
		input["messages"] = []any{map[string]any{"id": t.runID + ":task", "role": "user", "content": t.task}}
	}
	if f["parentRunId"] != nil {
		input["parentRunId"] = f["parentRunId"]
	}
	if len(resume) > 0 {
		input["resume"] = resume
	}
	f["input"] = input
	t.emit(RunStarted, nil, nil, f)
	for _, inv := range t.open {
		t.startEvents(inv)
	}
	for _, inv := range append([]*invocation{t.root}, t.open...) {
		if inv.text != nil {
			t.emit(TextMessageStart, inv, &inv.src, map[string]any{"messageId": inv.text.id, "role": "assistant", "name": agentName(inv.src)})
		}
		if inv.reasoning != "" {
			t.emit(ReasoningStart, inv, &inv.src, map[string]any{"messageId": inv.reasoning})
			t.emit(ReasoningMessageStart, inv, &inv.src, map[string]any{"messageId": inv.reasoning, "role": "reasoning"})
		}
	}
}

// startEvents opens inv: its step, then its SUBAGENT_STARTED.
func (t *Translator) startEvents(inv *invocation) {
	if inv.step != "" {
		t.emit(StepStarted, inv.parent, &inv.parent.src, map[string]any{"stepName": inv.step})
	}
	f := map[string]any{"name": agentName(inv.src)}
	if inv.description != "" {
		f["description"] = inv.description
	}
	if inv.parent != nil && inv.parent.id != "" {
		f["parentSubagentRunId"] = inv.parent.id
	}
	if inv.toolCallID != "" {
		f["parentToolCallId"] = inv.toolCallID
	}
	t.emit(SubagentStarted, nil, &inv.src, f)
	t.out[len(t.out)-1]["subagentRunId"] = inv.id
}

func agentName(src models.Source) string {
	if src.AgentName != "" {
		return src.AgentName
	}
	return src.AgentID
}

// endEvents closes inv's messages, then inv (SUBAGENT_FINISHED with
// outcome, or SUBAGENT_ERROR with errMsg), then its step. It does not
// change the log's state: suspend uses it too.
func (t *Translator) endEvents(inv *invocation, outcome map[string]any, errMsg string) {
	t.endMessages(inv, false)
	if inv.id == "" {
		return
	}
	switch {
	case errMsg != "":
		t.emit(SubagentError, nil, &inv.src, map[string]any{"subagentRunId": inv.id, "message": errMsg})
	case outcome != nil:
		t.emit(SubagentFinished, nil, &inv.src, map[string]any{"subagentRunId": inv.id, "outcome": outcome})
	default:
		t.emit(SubagentFinished, nil, &inv.src, map[string]any{"subagentRunId": inv.id})
	}
	if inv.step != "" {
		t.emit(StepFinished, inv.parent, &inv.parent.src, map[string]any{"stepName": inv.step})
	}
}

// endMessages ends inv's open text and reasoning; forget also clears them
// from the log's state (suspend keeps them, to re-open them).
func (t *Translator) endMessages(inv *invocation, forget bool) {
	if inv.reasoning != "" {
		t.emit(ReasoningMessageEnd, inv, &inv.src, map[string]any{"messageId": inv.reasoning})
		t.emit(ReasoningEnd, inv, &inv.src, map[string]any{"messageId": inv.reasoning})
		if forget {
			inv.reasoning = ""
		}
	}
	if inv.text != nil {
		t.emit(TextMessageEnd, inv, &inv.src, map[string]any{"messageId": inv.text.id})
		if forget {
			inv.text = nil
		}
	}
}

// close ends inv's turn, and first those of the sub-agents it opened.
func (t *Translator) close(inv *invocation, errMsg string) {
	if inv == nil || inv == t.root {
		return
	}
	t.closeChildren(inv)
	t.endMessages(inv, true)
	t.endEvents(inv, nil, errMsg)
	for i, o := range t.open {
		if o == inv {
			t.open = append(t.open[:i], t.open[i+1:]...)
			break
		}
	}
	if t.byKey[inv.key] == inv {
		delete(t.byKey, inv.key)
	}
}

// closeChildren ends the turns opened under inv, the latest first.
func (t *Translator) closeChildren(inv *invocation) {
	for i := len(t.open) - 1; i >= 0; i-- {
		if i < len(t.open) && t.open[i].parent == inv {
			t.close(t.open[i], "")
		}
	}
}

// closeAll ends every turn and message: the run is over.
func (t *Translator) closeAll() {
	t.closeChildren(t.root)
	t.endMessages(t.root, true)
}

// closeTeam ends a team's turn; errMsg: with SUBAGENT_ERROR.
func (t *Translator) closeTeam(team, errMsg string) {
	for i := len(t.open) - 1; i >= 0; i-- {
		inv := t.open[i]
		if inv.parent == t.root && inv.src.TeamName != nil && *inv.src.TeamName == team {
			t.close(inv, errMsg)
			return
		}
	}
}

// suspend ends the AG-UI run with an interrupt outcome: every turn open
// finishes as suspended (naming its own pending interrupts), but stays
// open in the log's state, and is re-opened with the next run.
func (t *Translator) suspend() {
	for i := len(t.open) - 1; i >= 0; i-- {
		inv := t.open[i]
		outcome := map[string]any{"type": "suspended"}
		var ids []any
		for _, in := range t.pending {
			if in["subagentRunId"] == inv.id {
				ids = append(ids, in["id"])
			}
		}
		if len(ids) > 0 {
			outcome["interruptIds"] = ids
		}
		t.endEvents(inv, outcome, "")
	}
	t.endMessages(t.root, false)
	interrupts := make([]any, len(t.pending))
	for i, in := range t.pending {
		interrupts[i] = in
	}
	f := t.runFields()
	f["outcome"] = map[string]any{"type": "interrupt", "interrupts": interrupts}
	t.emit(RunFinished, nil, nil, f)
	t.inRun = false
}

// keyOf is an agent's key: its path in the run's tree. "" for the root
// (the global supervisor) and for events of no agent (system, operator).
func keyOf(src models.Source) string {
	switch src.AgentType {
	case models.AgentTypeGlobalSupervisor, models.AgentTypeSystem, "operator", "":
		return ""
	}
	if len(src.Path) <= 1 {
		return ""
	}
	return strings.Join(src.Path, "/")
}

// lookup returns the open invocation of src's agent, or nil (the root for
// the root's events).
func (t *Translator) lookup(src models.Source) *invocation {
	key := keyOf(src)
	if key == "" {
		return t.root
	}
	return t.byKey[key]
}

// ensure returns the open invocation of src's agent, opening it (and its
// callers') when the log shows its work without a dispatch before it.
func (t *Translator) ensure(src models.Source) *invocation {
	key := keyOf(src)
	if key == "" {
		return t.root
	}
	if inv := t.byKey[key]; inv != nil {
		return inv
	}
	parent := t.root
	if n := len(src.Path); n > 2 {
		parent = t.ensure(t.sourceOf(src.Path[:n-1], src))
	}
	inv := t.openInvocation(src, parent, "", "")
	if src.AgentType == models.AgentTypeSubAgent {
		for _, d := range t.delegations {
			if d.child == nil && d.callerKey == parent.key && d.name == src.AgentName {
				d.child, inv.toolCallID = inv, d.execID
				break
			}
		}
	}
	t.startEvents(inv)
	return inv
}

// sourceOf is the source of the agent at path, which calls child.
func (t *Translator) sourceOf(path []string, child models.Source) models.Source {
	if inv := t.byKey[strings.Join(path, "/")]; inv != nil {
		return inv.src
	}
	id := path[len(path)-1]
	src := models.Source{AgentID: id, AgentName: t.agents[id].name, TeamName: child.TeamName, Depth: len(path) - 1, Path: path}
	switch len(path) {
	case 2:
		src.AgentType = models.AgentTypeTeamSupervisor
	case 3:
		src.AgentType = models.AgentTypeWorker
	default:
		src.AgentType = models.AgentTypeSubAgent
	}
	return src
}

// openInvocation records a new invocation (its events are the caller's
// to emit, after setting what they carry).
func (t *Translator) openInvocation(src models.Source, parent *invocation, step, description string) *invocation {
	inv := &invocation{
		id: src.AgentID + "@" + strconv.FormatInt(t.seq, 10), key: keyOf(src), src: src,
		parent: parent, step: step, description: description,
	}
	t.open = append(t.open, inv)
	t.byKey[inv.key] = inv
	return inv
}

func (t *Translator) dispatchTeam(e models.Event) {
	team := str(e.Data, "team_name")
	t.closeTeam(team, "")
	// With teams at work together, a team's end is not otherwise in the
	// log: the workflow lists the teams that have completed a turn
	// (completed_teams). A team listed already when its open turn began
	// completed an earlier turn, not this one.
	done := map[string]bool{}
	if list, ok := e.Data["completed_teams"].([]any); ok {
		for _, v := range list {
			if name, ok := v.(string); ok {
				done[name] = true
			}
		}
	} else if list, ok := e.Data["completed_teams"].([]string); ok {
		for _, name := range list {
			done[name] = true
		}
	}
	for i := len(t.open) - 1; i >= 0; i-- {
		if i >= len(t.open) {
			continue
		}
		inv := t.open[i]
		if inv.parent == t.root && inv.src.TeamName != nil && done[*inv.src.TeamName] && !t.completed[*inv.src.TeamName] {
			t.close(inv, "")
		}
	}
	t.completed = done
	gs := t.gsID
	if gs == "" && len(e.Source.Path) > 0 {
		gs = e.Source.Path[0]
	}
	tsID := t.teamSupervisor[team]
	if tsID == "" {
		tsID = "team:" + team
	}
	name := team
	src := models.Source{
		AgentID: tsID, AgentType: models.AgentTypeTeamSupervisor, AgentName: t.agents[tsID].name, TeamName: &name,
		Depth: 1, Path: []string{gs, tsID},
	}
	inv := t.openInvocation(src, t.root, "team:"+team, str(e.Data, "instruction"))
	t.startEvents(inv)
	t.annotateStep(e)
}

func (t *Translator) dispatchWorker(e models.Event) {
	ts := t.ensure(e.Source)
	id, name := str(e.Data, "worker_agent_id"), str(e.Data, "worker_name")
	if id == "" {
		id = name
	}
	path := append(append([]string{}, ts.src.Path...), id)
	src := models.Source{
		AgentID: id, AgentType: models.AgentTypeWorker, AgentName: name, TeamName: e.Source.TeamName,
		Depth: ts.src.Depth + 1, Path: path,
	}
	if old := t.byKey[keyOf(src)]; old != nil {
		t.close(old, "")
	}
	inv := t.openInvocation(src, ts, "worker:"+name, str(e.Data, "instruction"))
	t.startEvents(inv)
	t.annotateStep(e)
}

// annotateStep puts the dispatch's decision (instruction, reason,
// iteration) in its STEP_STARTED's metadata.
func (t *Translator) annotateStep(e models.Event) {
	for i := len(t.out) - 1; i >= 0; i-- {
		if t.out[i].Type() != StepStarted {
			continue
		}
		m := identity(e.Source)
		if m == nil {
			m = map[string]any{}
		}
		for _, k := range []string{"instruction", "reason", "iteration"} {
			if v, ok := e.Data[k]; ok {
				m[k] = v
			}
		}
		t.out[i]["metadata"] = m
		return
	}
}

// msgID is the AG-UI id of an agent's message whose log id is base: the
// same, or suffixed after a retry, so that a superseded attempt's text
// never joins its successor's.
func msgID(inv *invocation, base string) string {
	if inv.gen == 0 {
		return base
	}
	return base + "~" + strconv.Itoa(inv.gen)
}

func (t *Translator) llm(e models.Event) {
	src := e.Source
	if src.AgentType == models.AgentTypeWorker {
		// A worker's work ends the turn of its team's other worker (one
		// whose end the log did not otherwise show).
		if n := len(src.Path); n >= 2 {
			if ts := t.byKey[strings.Join(src.Path[:n-1], "/")]; ts != nil {
				for i := len(t.open) - 1; i >= 0; i-- {
					if i < len(t.open) && t.open[i].parent == ts && t.open[i].key != keyOf(src) {
						t.close(t.open[i], "")
					}
				}
			}
		}
	}
	inv := t.ensure(src)
	switch e.Event.Action {
	case models.ActionStream:
		content := str(e.Data, "content")
		if content == "" {
			return
		}
		if inv.reasoning != "" {
			t.emit(ReasoningMessageEnd, inv, &src, map[string]any{"messageId": inv.reasoning})
			t.emit(ReasoningEnd, inv, &src, map[string]any{"messageId": inv.reasoning})
			inv.reasoning = ""
		}
		base := str(e.Data, "message_id")
		if base == "" {
			if inv.text != nil {
				base = inv.text.base
			} else {
				base = "msg-" + src.AgentID + "@" + strconv.FormatInt(t.seq, 10)
			}
		}
		id := msgID(inv, base)
		if inv.text != nil && inv.text.id != id {
			t.emit(TextMessageEnd, inv, &src, map[string]any{"messageId": inv.text.id})
			inv.text = nil
		}
		if inv.text == nil {
			inv.text = &openText{id: id, base: base}
			t.emit(TextMessageStart, inv, &src, map[string]any{"messageId": id, "role": "assistant", "name": agentName(src)})
		}
		inv.lastMsg = base
		t.emit(TextMessageContent, inv, &src, map[string]any{"messageId": id, "delta": content})
	case models.ActionReasoning:
		content := str(e.Data, "content")
		if content == "" {
			return
		}
		if inv.text != nil {
			t.emit(TextMessageEnd, inv, &src, map[string]any{"messageId": inv.text.id})
			inv.text = nil
		}
		if inv.reasoning == "" {
			inv.reasoning = "reasoning-" + src.AgentID + "@" + strconv.FormatInt(t.seq, 10)
			t.emit(ReasoningStart, inv, &src, map[string]any{"messageId": inv.reasoning})
			t.emit(ReasoningMessageStart, inv, &src, map[string]any{"messageId": inv.reasoning, "role": "reasoning"})
		}
		if b := str(e.Data, "message_id"); b != "" {
			inv.lastMsg = b
		}
		t.emit(ReasoningMessageContent, inv, &src, map[string]any{"messageId": inv.reasoning, "delta": content})
	case models.ActionToolCall:
		t.endMessages(inv, true)
		id := toolCallID(e)
		name := str(e.Data, "tool_name")
		f := map[string]any{"toolCallId": id, "toolCallName": name}
		if inv.lastMsg != "" {
			f["parentMessageId"] = msgID(inv, inv.lastMsg)
		}
		t.emit(ToolCallStart, inv, &src, f)
		if args := argsText(e.Data); args != "" {
			t.emit(ToolCallArgs, inv, &src, map[string]any{"toolCallId": id, "delta": args})
		}
		t.emit(ToolCallEnd, inv, &src, map[string]any{"toolCallId": id})
		if name == models.DelegateToolName {
			target := ""
			if m, ok := e.Data["tool_input"].(map[string]any); ok {
				target = str(m, "name")
			}
			t.delegations = append(t.delegations, &delegation{execID: id, callerKey: inv.key, name: target})
		}
	case models.ActionToolResult:
		id := toolCallID(e)
		for i, d := range t.delegations {
			if d.execID == id {
				t.close(d.child, "")
				t.delegations = append(t.delegations[:i], t.delegations[i+1:]...)
				break
			}
		}
		t.emit(ToolCallResult, inv, &src, map[string]any{
			"messageId": "result-" + id, "toolCallId": id, "content": resultText(e.Data), "role": "tool",
		})
	case models.ActionRetry, models.ActionFallback:
		t.supersede(e, inv)
	default:
		t.custom(e)
	}
}

// supersede ends inv's open message, which a retry, a fallback or a
// stand-in replaces: the agent's next text goes to a new message. A
// CUSTOM event names the superseded one.
func (t *Translator) supersede(e models.Event, inv *invocation) {
	value := copyData(e.Data)
	if inv.text != nil {
		value["superseded_message_id"] = inv.text.id
	}
	if inv.reasoning != "" {
		value["superseded_reasoning_id"] = inv.reasoning
	}
	t.endMessages(inv, true)
	inv.gen++
	t.emit(Custom, inv, &e.Source, map[string]any{"name": "executor." + e.Event.String(), "value": value})
}

func (t *Translator) llmUsage(e models.Event) {
	inv := t.lookup(e.Source)
	if inv != nil {
		// The call is over: its answer is complete.
		t.endMessages(inv, true)
		if b := str(e.Data, "message_id"); b != "" {
			inv.lastMsg = b
		}
	}
	t.emit(Custom, inv, &e.Source, map[string]any{"name": "executor.usage", "value": copyData(e.Data)})
	if id := str(e.Data, "llm_call_id"); id != "" {
		if t.usageSeen[id] {
			return
		}
		t.usageSeen[id] = true
	}
	model := str(e.Data, "model")
	i, ok := t.usageIdx[model]
	if !ok {
		i = len(t.usage)
		t.usageIdx[model] = i
		u := map[string]any{}
		if model != "" {
			u["model"] = model
		}
		t.usage = append(t.usage, u)
	}
	u := t.usage[i]
	for from, to := range map[string]string{
		"prompt_tokens": "inputTokens", "completion_tokens": "outputTokens", "total_tokens": "totalTokens",
		"reasoning_tokens": "reasoningTokens", "cached_tokens": "cachedInputTokens", "cache_write_tokens": "cacheWriteInputTokens",
	} {
		if n, ok := toInt(e.Data[from]); ok && n >= 0 {
			prev, _ := u[to].(int64)
			u[to] = prev + n
		}
	}
}

func (t *Translator) lifecycle(e models.Event) {
	switch e.Event.Action {
	case models.ActionCompleted:
		t.closeAll()
		if u, ok := e.Data["usage"]; ok && u != nil {
			t.emit(Custom, nil, &e.Source, map[string]any{"name": "executor.run_usage", "value": u})
		}
		f := t.runFields()
		f["outcome"] = map[string]any{"type": "success"}
		if a := str(e.Data, "final_answer"); a != "" {
			f["result"] = a
		}
		if len(t.usage) > 0 {
			f["usage"] = t.usageList()
		}
		t.emit(RunFinished, nil, nil, f)
	case models.ActionCancelled:
		t.closeAll()
		f := t.runFields()
		f["outcome"] = map[string]any{"type": "cancelled"}
		if len(t.usage) > 0 {
			f["usage"] = t.usageList()
		}
		t.emit(RunFinished, nil, nil, f)
	case models.ActionFailed:
		t.closeAll()
		msg := str(e.Data, "error")
		if msg == "" {
			msg = "the run failed"
		}
		f := map[string]any{"message": msg}
		if code := str(e.Data, "error_code"); code != "" {
			f["code"] = code
		}
		if len(t.usage) > 0 {
			f["usage"] = t.usageList()
		}
		t.emit(RunError, nil, nil, f)
	default:
		t.custom(e)
		return
	}
	t.inRun, t.ended = false, true
}

func (t *Translator) usageList() []any {
	out := make([]any, len(t.usage))
	for i, u := range t.usage {
		out[i] = u
	}
	return out
}

func (t *Translator) approval(e models.Event) {
	id := str(e.Data, "approval_id")
	switch e.Event.Action {
	case models.ActionRequested:
		in := map[string]any{"id": id, "reason": "approval"}
		meta := copyData(e.Data)
		if m := identity(e.Source); m != nil {
			for k, v := range m {
				meta[k] = v
			}
		}
		in["metadata"] = meta
		if s := str(e.Data, "instruction"); s != "" {
			in["message"] = s
		} else if s := str(e.Data, "tool"); s != "" {
			in["message"] = "run tool " + s
		}
		if s := str(e.Data, "timeout_at"); s != "" {
			in["expiresAt"] = s
		}
		if inv := t.lookup(e.Source); inv != nil && inv.id != "" {
			in["subagentRunId"] = inv.id
		}
		t.pending = append(t.pending, in)
		t.suspend()
	default:
		for i, in := range t.pending {
			if in["id"] == id {
				t.pending = append(t.pending[:i], t.pending[i+1:]...)
				break
			}
		}
		t.custom(e)
	}
}

// resumeEntry is the RUN_STARTED input's answer to an interrupt, from
// approval.resolved's data.
func resumeEntry(data map[string]any) map[string]any {
	payload := map[string]any{}
	for _, k := range []string{"decision", "comment", "decided_by", "decided_at", "edited", "instruction", "arguments"} {
		if v, ok := data[k]; ok && v != nil {
			payload[k] = v
		}
	}
	return map[string]any{"interruptId": str(data, "approval_id"), "status": "resolved", "payload": payload}
}

// custom sends e as a CUSTOM event named after it, attributed to its
// agent's open turn.
func (t *Translator) custom(e models.Event) {
	t.emit(Custom, t.lookup(e.Source), &e.Source, map[string]any{"name": "executor." + e.Event.String(), "value": copyData(e.Data)})
}

func (t *Translator) readTopology(data map[string]any) {
	// Round-trip through JSON: the log holds decoded JSON or, in process,
	// the typed values the workflow built.
	var topo struct {
		ExecutionMode    string `json:"execution_mode"`
		MaxParallelTeams int    `json:"max_parallel_teams"`
		Global           struct {
			AgentID string `json:"agent_id"`
			Name    string `json:"name"`
		} `json:"global_supervisor_agent"`
		Teams []struct {
			Name       string `json:"name"`
			Supervisor struct {
				AgentID string `json:"agent_id"`
				Name    string `json:"name"`
			} `json:"team_supervisor_agent"`
			Workers []struct {
				AgentID string `json:"agent_id"`
				Name    string `json:"name"`
			} `json:"workers"`
		} `json:"teams"`
	}
	b, err := json.Marshal(data)
	if err != nil || json.Unmarshal(b, &topo) != nil {
		return
	}
	t.parallel = topo.ExecutionMode == models.ExecutionModeParallel
	t.routedTogether = !t.parallel && topo.MaxParallelTeams > 1
	if topo.Global.AgentID != "" {
		t.gsID = topo.Global.AgentID
		t.agents[topo.Global.AgentID] = agentInfo{name: topo.Global.Name}
	}
	for _, team := range topo.Teams {
		t.teamSupervisor[team.Name] = team.Supervisor.AgentID
		t.agents[team.Supervisor.AgentID] = agentInfo{name: team.Supervisor.Name, team: team.Name}
		for _, w := range team.Workers {
			t.agents[w.AgentID] = agentInfo{name: w.Name, team: team.Name}
		}
	}
}

func str(m map[string]any, key string) string {
	s, _ := m[key].(string)
	return s
}

// copyData is an event's data as a CUSTOM value: a copy (never nil), so
// that adding to it leaves the log's event alone.
func copyData(data map[string]any) map[string]any {
	out := make(map[string]any, len(data)+1)
	for k, v := range data {
		out[k] = v
	}
	return out
}

func toolCallID(e models.Event) string {
	for _, k := range []string{"tool_execution_id", "execution_id", "call_id"} {
		if s := str(e.Data, k); s != "" {
			return s
		}
	}
	return "tool-" + e.Source.AgentID + "@" + strconv.FormatInt(e.Sequence, 10)
}

// argsText is a tool call's arguments as the JSON text AG-UI streams.
func argsText(data map[string]any) string {
	v, ok := data["tool_input"]
	if !ok {
		v = data["arguments"]
	}
	switch a := v.(type) {
	case nil:
		return ""
	case string:
		return a
	default:
		b, err := json.Marshal(a)
		if err != nil {
			return ""
		}
		return string(b)
	}
}

// resultText is a tool result's content: the error of a failed call, the
// tool's text, or its JSON result encoded.
func resultText(data map[string]any) string {
	if isErr, _ := data["is_error"].(bool); isErr || str(data, "status") == models.ToolStatusFailed {
		if s := str(data, "error"); s != "" {
			return s
		}
	}
	switch r := data["result"].(type) {
	case nil:
		return ""
	case string:
		return r
	default:
		b, err := json.Marshal(r)
		if err != nil {
			return ""
		}
		return string(b)
	}
}

func toInt(v any) (int64, bool) {
	switch n := v.(type) {
	case float64:
		return int64(n), true
	case int:
		return int64(n), true
	case int64:
		return n, true
	case json.Number:
		i, err := n.Int64()
		return i, err == nil
	}
	return 0, false
}
