package models

import "time"

// Event categories and actions (contract 002's table, plus llm.retry).
const (
	CategoryLifecycle = "lifecycle"
	CategoryLLM       = "llm"
	CategoryDispatch  = "dispatch"
	CategorySystem    = "system"

	ActionStarted    = "started"
	ActionCompleted  = "completed"
	ActionFailed     = "failed"
	ActionCancelled  = "cancelled"
	ActionPaused     = "paused"
	ActionResumed    = "resumed"
	ActionStream     = "stream"
	ActionReasoning  = "reasoning"
	ActionToolCall   = "tool_call"
	ActionToolResult = "tool_result"
	ActionRetry      = "retry"
	// ActionUsage (llm.usage) follows each successful LLM call: its tokens
	// and cost in US dollars.
	ActionUsage    = "usage"
	ActionTeam     = "team"
	ActionWorker   = "worker"
	ActionTopology = "topology"
	ActionWarning  = "warning"
	ActionError    = "error"
	ActionFallback = "fallback" // llm.fallback: the call moves to the agent's next model
	ActionBudget   = "budget"
	// ActionSupervisorReassigned (system.supervisor_reassigned): a team
	// supervisor's model failed for good, and its routing passed to its
	// stand-in, the global supervisor's model with the team supervisor's
	// prompt (spec 001's error recovery 3, supervisor reassignment).
	ActionSupervisorReassigned = "supervisor_reassigned"
)

// Agent types in an event's source.
const (
	AgentTypeGlobalSupervisor = "global_supervisor"
	AgentTypeTeamSupervisor   = "team_supervisor"
	AgentTypeWorker           = "worker"
	AgentTypeSubAgent         = "sub_agent"
	AgentTypeSystem           = "system"
	// AgentTypeUser is the user's message of a run (runs/start's
	// user_message_id, spec 003): the task, stored under the client's id.
	// It is a message's agent type, never an event's.
	AgentTypeUser = "user"
)

// TimestampLayout is the events' timestamp format: UTC with milliseconds,
// e.g. 2025-12-30T10:30:00.123Z (spec 000 FR-015).
const TimestampLayout = "2006-01-02T15:04:05.000Z"

// FormatTimestamp formats t for an event.
func FormatTimestamp(t time.Time) string { return t.UTC().Format(TimestampLayout) }

// Source says which agent an event comes from. AgentID is exactly the
// agent_id given at creation (or generated then); TeamName is null for the
// global supervisor and for system events.
//
// Depth and Path place the agent in the run's tree: Path lists the
// agent_ids from the run's root (the global supervisor) down to this agent,
// and Depth is its length minus one (global supervisor 0, team supervisors
// 1, workers 2, a worker's sub-agent 3, and so on).
type Source struct {
	AgentID   string   `json:"agent_id"`
	AgentType string   `json:"agent_type"`
	AgentName string   `json:"agent_name"`
	TeamName  *string  `json:"team_name"`
	Depth     int      `json:"depth"`
	Path      []string `json:"path"`
}

// GlobalSupervisorSource is the source of the global supervisor's events.
func GlobalSupervisorSource(h *Hierarchy) Source {
	id := h.GlobalSupervisor.AgentID
	return Source{AgentID: id, AgentType: AgentTypeGlobalSupervisor, AgentName: h.GlobalSupervisor.Name, Path: []string{id}}
}

// TeamSupervisorSource is the source of a team supervisor's events.
func TeamSupervisorSource(h *Hierarchy, t *Team) Source {
	name := t.Name
	return Source{
		AgentID: t.Supervisor.AgentID, AgentType: AgentTypeTeamSupervisor, AgentName: t.Supervisor.Name, TeamName: &name,
		Depth: 1, Path: []string{h.GlobalSupervisor.AgentID, t.Supervisor.AgentID},
	}
}

// WorkerSource is the source of a worker's events.
func WorkerSource(h *Hierarchy, t *Team, w *Agent) Source {
	name := t.Name
	return Source{
		AgentID: w.AgentID, AgentType: AgentTypeWorker, AgentName: w.Name, TeamName: &name,
		Depth: 2, Path: []string{h.GlobalSupervisor.AgentID, t.Supervisor.AgentID, w.AgentID},
	}
}

// SubAgentSource is the source of a sub-agent called by caller: one level
// deeper, in the caller's team.
func SubAgentSource(caller Source, s *SubAgent) Source {
	path := append(append([]string{}, caller.Path...), s.ID)
	return Source{AgentID: s.ID, AgentType: AgentTypeSubAgent, AgentName: s.Name, TeamName: caller.TeamName, Depth: caller.Depth + 1, Path: path}
}

// SubAgentLevel is how many sub-agent calls deep a source is (0 for the
// hierarchy's own agents).
func (s Source) SubAgentLevel() int {
	if s.AgentType != AgentTypeSubAgent {
		return 0
	}
	return s.Depth - 2
}

// IsTerminalEvent says whether an event of kind k ends its run's log
// (lifecycle.completed, failed or cancelled).
func IsTerminalEvent(k EventKind) bool {
	return k.Category == CategoryLifecycle && (k.Action == ActionCompleted || k.Action == ActionFailed || k.Action == ActionCancelled)
}

// IsStatusEvent says whether an event of kind k comes with a change of its
// run's stored status (lifecycle.*, approval.requested): the workflow
// writes the status after it, and a client that reads the event may read
// the status next.
func IsStatusEvent(k EventKind) bool {
	return k.Category == CategoryLifecycle || (k.Category == CategoryApproval && k.Action == ActionRequested)
}

// EventKind is an event's type: "<category>.<action>" on the wire.
type EventKind struct {
	Category string `json:"category"`
	Action   string `json:"action"`
}

// String returns the SSE event name, e.g. "llm.stream".
func (k EventKind) String() string { return k.Category + "." + k.Action }

// Event is one entry of a run's ordered log: the envelope clients receive.
// Sequence is assigned by the run's workflow: per run, from 1, no gaps.
type Event struct {
	RunID     string         `json:"run_id"`
	Timestamp string         `json:"timestamp"`
	Sequence  int64          `json:"sequence"`
	Source    Source         `json:"source"`
	Event     EventKind      `json:"event"`
	Data      map[string]any `json:"data"`
}

// EventBatch is what an activity signals to its run's workflow. Producer
// identifies one activity attempt and Seq counts its batches from 1; the
// workflow applies a batch only if Seq is above the last one it applied for
// that producer, so a re-sent batch is applied once.
type EventBatch struct {
	Producer string  `json:"producer"`
	Seq      int     `json:"seq"`
	Events   []Event `json:"events"`
	// Leased, in an activity's result, says its events carry the
	// sequences the activity gave them under its EventLease, from the
	// lease's From on; they are stored and were pushed to the streams.
	Leased bool `json:"leased,omitempty"`
	// Unstored, with Leased, says some of the events (or of those the
	// lease carried) could not be stored, or their webhooks queued: the
	// workflow stores them as its own (PersistEvents).
	Unstored bool `json:"unstored,omitempty"`
}

// EventLease hands a run's next sequences to the one activity the
// workflow is waiting on (docs/events.md, "Leased sequences"): from From
// on, the activity numbers its events itself, stores each batch and
// pushes it to the streams at once, with no workflow task on the way, and
// returns them all in its result, which the workflow appends as they are.
// While a lease is out the workflow appends nothing itself: what it or
// another producer adds waits for the lease's end (EventLog.Deferred).
type EventLease struct {
	// From is the first sequence the activity gives.
	From int64 `json:"from"`
	// Events are the run's events before From that are not stored yet,
	// or that no stream was handed yet: the activity stores them (once)
	// and pushes them with its first batch, so the database and the
	// streams stay gap-free.
	Events []Event `json:"events,omitempty"`
	// Forget are the usage record ids (llm_call_id) of the calls of the
	// previous leased activity, which has completed: the answers kept
	// for its retries go with the lease's claim (an activity that stores
	// its answer record itself leaves them to the next).
	Forget []string `json:"forget,omitempty"`
}

// ReleaseLeaseInput takes a run's EventLease back after the activity that
// held it failed.
type ReleaseLeaseInput struct {
	RunID string     `json:"run_id"`
	Lease EventLease `json:"lease"`
}

// EventDelivery is the workflow's answer to an UpdateEvents batch.
type EventDelivery struct {
	// First is the sequence given to the batch's first event; the rest
	// follow it without a gap. 0: the batch had been applied already.
	First int64 `json:"first"`
	// Before holds the events the workflow appended after those it last
	// handed out in such an answer and before this batch (its own
	// dispatches, what activities returned or signalled), so that pushed
	// events join up without a query. Empty when there were none or too
	// many to carry; a stream that then sees a gap queries.
	Before []Event `json:"before,omitempty"`
}

// Sequenced returns before followed by batch's events numbered from first:
// the events in the run's log, as an EventDelivery describes them.
func (d EventDelivery) Sequenced(batch []Event) []Event {
	out := make([]Event, 0, len(d.Before)+len(batch))
	out = append(out, d.Before...)
	for i, e := range batch {
		e.Sequence = d.First + int64(i)
		if e.Data == nil {
			e.Data = map[string]any{}
		}
		out = append(out, e)
	}
	return out
}

// EventQuery asks a run's workflow (or the database) for the events after
// a sequence number, at most MaxBytes of them (encoded) and at most Limit.
type EventQuery struct {
	After    int64 `json:"after"`
	Limit    int   `json:"limit,omitempty"`
	MaxBytes int   `json:"max_bytes,omitempty"`
}

// EventPage answers an EventQuery. Events are in sequence order with no
// gaps, starting at After+1, unless FirstAvailable > After+1: then the
// events before FirstAvailable are no longer in the workflow and must be
// read from the database. More says a further page is ready now; Terminal
// says the run has ended and LastSequence is its final event.
type EventPage struct {
	Events         []Event `json:"events"`
	LastSequence   int64   `json:"last_sequence"`
	FirstAvailable int64   `json:"first_available"`
	More           bool    `json:"more"`
	Terminal       bool    `json:"terminal"`
	// LeaseFrom, when not 0, says an activity holds the sequences from it
	// on (EventLease): events past LastSequence are in the database and
	// pushed, not in the workflow yet.
	LeaseFrom int64 `json:"lease_from,omitempty"`
}

// DispatchEvent is the dispatch.team or dispatch.worker event of a
// supervisor's decision: which option it chose, with the instruction and
// the reason.
func DispatchEvent(source Source, options []Option, d Decision, iteration int) (EventKind, map[string]any) {
	data := map[string]any{"instruction": d.Instruction, "reason": d.Reason, "iteration": iteration}
	if source.AgentType == AgentTypeGlobalSupervisor {
		data["team_name"] = d.Target
		return EventKind{Category: CategoryDispatch, Action: ActionTeam}, data
	}
	data["worker_name"] = d.Target
	for _, o := range options {
		if o.Name == d.Target {
			data["worker_agent_id"] = o.AgentID
		}
	}
	return EventKind{Category: CategoryDispatch, Action: ActionWorker}, data
}
