package a2aserve

import (
	"strconv"
	"strings"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/op-stack/executor/models"
)

// FinalAnswerArtifactID is the id of the artifact that holds a completed
// run's final answer.
const FinalAnswerArtifactID a2a.ArtifactID = "final_answer"

// run is the part of a run (runs/get, runs/list) a task is made of.
type run struct {
	ID          string     `json:"id"`
	HierarchyID string     `json:"hierarchy_id"`
	Task        string     `json:"task"`
	Status      string     `json:"status"`
	FinalAnswer string     `json:"final_answer"`
	Error       string     `json:"error"`
	ThreadID    string     `json:"thread_id"`
	CreatedAt   time.Time  `json:"created_at"`
	StartedAt   *time.Time `json:"started_at"`
	CompletedAt *time.Time `json:"completed_at"`
}

// approval is the part of a pending approval (runs/approvals) that
// input-required shows.
type approval struct {
	ID          string `json:"approval_id"`
	Kind        string `json:"kind"`
	AgentID     string `json:"agent_id"`
	AgentName   string `json:"agent_name"`
	Tool        string `json:"tool"`
	Instruction string `json:"instruction"`
	Reason      string `json:"reason"`
}

// State maps a run status onto an A2A task state.
func State(status string) a2a.TaskState {
	switch status {
	case models.RunPending, models.RunQueued:
		return a2a.TaskStateSubmitted
	case models.RunRunning, models.RunPaused:
		return a2a.TaskStateWorking
	case models.RunWaitingApproval:
		return a2a.TaskStateInputRequired
	case models.RunCompleted:
		return a2a.TaskStateCompleted
	case models.RunFailed, models.RunTimedOut:
		return a2a.TaskStateFailed
	case models.RunCancelled:
		return a2a.TaskStateCanceled
	}
	return a2a.TaskStateUnspecified
}

// RunStatus maps an A2A task state back onto the run status ListTasks
// filters by ("" for a state no run has).
func RunStatus(s a2a.TaskState) string {
	switch s {
	case a2a.TaskStateSubmitted:
		return models.RunPending
	case a2a.TaskStateWorking:
		return models.RunRunning
	case a2a.TaskStateInputRequired:
		return models.RunWaitingApproval
	case a2a.TaskStateCompleted:
		return models.RunCompleted
	case a2a.TaskStateFailed:
		return models.RunFailed
	case a2a.TaskStateCanceled:
		return models.RunCancelled
	}
	return ""
}

// taskOf is the task of a run. pending lists the run's open approvals
// (shown in the input-required status message); withHistory adds the
// user's message (the run's task).
func taskOf(r run, pending []approval, withHistory bool) *a2a.Task {
	t := &a2a.Task{
		ID:        a2a.TaskID(r.ID),
		ContextID: r.ThreadID,
		Status:    a2a.TaskStatus{State: State(r.Status)},
		Metadata:  map[string]any{"run_status": r.Status, "hierarchy_id": r.HierarchyID},
	}
	ts := r.CreatedAt
	if r.CompletedAt != nil {
		ts = *r.CompletedAt
	} else if r.StartedAt != nil {
		ts = *r.StartedAt
	}
	if !ts.IsZero() {
		ts = ts.UTC()
		t.Status.Timestamp = &ts
	}
	switch t.Status.State {
	case a2a.TaskStateCompleted:
		t.Artifacts = []*a2a.Artifact{finalAnswer(r.FinalAnswer)}
	case a2a.TaskStateFailed:
		if r.Error != "" {
			t.Status.Message = agentMessage(t, r.Error)
		}
	case a2a.TaskStateInputRequired:
		t.Status.Message = inputRequired(t, pending)
	}
	if withHistory {
		t.History = []*a2a.Message{{ID: "task-" + r.ID, Role: a2a.MessageRoleUser, TaskID: t.ID, ContextID: t.ContextID, Parts: a2a.ContentParts{a2a.NewTextPart(r.Task)}}}
	}
	return t
}

func finalAnswer(text string) *a2a.Artifact {
	return &a2a.Artifact{ID: FinalAnswerArtifactID, Name: "final_answer", Description: "the run's final answer", Parts: a2a.ContentParts{a2a.NewTextPart(text)}}
}

func agentMessage(info a2a.TaskInfoProvider, text string) *a2a.Message {
	m := a2a.NewMessageForTask(a2a.MessageRoleAgent, info, a2a.NewTextPart(text))
	return m
}

// inputRequired is the status message of a task waiting for approvals: one
// line per approval, and the approvals in metadata.
func inputRequired(info a2a.TaskInfoProvider, pending []approval) *a2a.Message {
	var lines []string
	var meta []any
	for _, a := range pending {
		what := a.Instruction
		if a.Tool != "" {
			what = "run tool " + a.Tool
			if a.Reason != "" {
				what += " (" + a.Reason + ")"
			}
		}
		who := a.AgentName
		if who == "" {
			who = a.AgentID
		}
		lines = append(lines, "approval "+a.ID+" for "+who+": "+what)
		meta = append(meta, map[string]any{"approval_id": a.ID, "kind": a.Kind, "agent_id": a.AgentID, "tool": a.Tool})
	}
	text := "waiting for approval; answer with a message on this task: 'approve [comment]' or 'reject [comment]'"
	if len(lines) > 0 {
		text = strings.Join(lines, "\n") + "\n" + text
	}
	m := agentMessage(info, text)
	m.Metadata = map[string]any{"approvals": meta}
	return m
}

// translator turns a run's events into A2A stream events, in order.
type translator struct {
	info a2a.TaskInfo
	// answers holds the artifact of each agent answer seen, by the key of
	// its message, so that later chunks append to it.
	answers map[string]bool
	// open holds the approvals requested and not yet resolved.
	open map[string]bool
	// working is whether the last status sent was working.
	working bool
}

func newTranslator(taskID, contextID string) *translator {
	return &translator{info: a2a.TaskInfo{TaskID: a2a.TaskID(taskID), ContextID: contextID}, answers: map[string]bool{}, open: map[string]bool{}}
}

// event translates one event of the run's log. The terminal lifecycle
// event yields nothing: the caller reads the run for its final answer and
// sends the final status (see final).
func (t *translator) event(ev models.Event) []a2a.Event {
	cat, act := ev.Event.Category, ev.Event.Action
	src := ev.Source
	switch {
	case cat == models.CategoryLifecycle && (act == models.ActionStarted || act == models.ActionResumed):
		if t.working {
			return nil
		}
		return []a2a.Event{t.status(ev, a2a.TaskStateWorking, nil)}
	case cat == models.CategoryLLM && act == models.ActionStream:
		content, _ := ev.Data["content"].(string)
		if content == "" {
			return nil
		}
		msg, _ := ev.Data["message_id"].(string)
		key := src.AgentID + "/" + msg
		id := a2a.ArtifactID("answer-" + src.AgentID + "-" + strconv.FormatInt(ev.Sequence, 10))
		if msg != "" {
			id = a2a.ArtifactID("answer-" + src.AgentID + "-" + msg)
		}
		var out []a2a.Event
		if !t.working {
			out = append(out, t.status(ev, a2a.TaskStateWorking, nil))
		}
		e := &a2a.TaskArtifactUpdateEvent{
			TaskID: t.info.TaskID, ContextID: t.info.ContextID, Append: t.answers[key],
			Artifact: &a2a.Artifact{ID: id, Name: "answer of " + agentName(src), Parts: a2a.ContentParts{a2a.NewTextPart(content)}, Metadata: sourceMeta(src)},
			Metadata: map[string]any{"sequence": ev.Sequence},
		}
		if msg == "" {
			// Without a message id a chunk cannot be tied to the next: each
			// is an artifact of its own.
			key = ""
		}
		if key != "" {
			t.answers[key] = true
		}
		return append(out, e)
	case cat == models.CategoryApproval && act == models.ActionRequested:
		a := approval{
			ID: str(ev.Data, "approval_id"), Kind: str(ev.Data, "kind"), AgentID: src.AgentID, AgentName: src.AgentName,
			Tool: str(ev.Data, "tool"), Instruction: str(ev.Data, "instruction"), Reason: str(ev.Data, "reason"),
		}
		t.open[a.ID] = true
		return []a2a.Event{t.status(ev, a2a.TaskStateInputRequired, inputRequired(t.info, []approval{a}))}
	case cat == models.CategoryApproval && act == models.ActionResolved:
		delete(t.open, str(ev.Data, "approval_id"))
		if len(t.open) > 0 {
			return nil
		}
		return []a2a.Event{t.status(ev, a2a.TaskStateWorking, nil)}
	}
	return nil
}

// waiting reports whether the run waits for an approval (input-required),
// as far as the events seen tell.
func (t *translator) waiting() bool { return len(t.open) > 0 }

// final is the end of a task's stream: the final answer's artifact (for a
// completed run) and the terminal status.
func (t *translator) final(r run, seq int64) []a2a.Event {
	task := taskOf(r, nil, false)
	var out []a2a.Event
	meta := map[string]any{"sequence": seq, "run_status": r.Status}
	if task.Status.State == a2a.TaskStateCompleted {
		out = append(out, &a2a.TaskArtifactUpdateEvent{TaskID: t.info.TaskID, ContextID: t.info.ContextID, Artifact: finalAnswer(r.FinalAnswer), LastChunk: true, Metadata: meta})
	}
	st := task.Status
	if st.Message != nil {
		st.Message.TaskID, st.Message.ContextID = t.info.TaskID, t.info.ContextID
	}
	return append(out, &a2a.TaskStatusUpdateEvent{TaskID: t.info.TaskID, ContextID: t.info.ContextID, Status: st, Metadata: meta})
}

func (t *translator) status(ev models.Event, state a2a.TaskState, msg *a2a.Message) *a2a.TaskStatusUpdateEvent {
	t.working = state == a2a.TaskStateWorking
	ts, err := time.Parse(models.TimestampLayout, ev.Timestamp)
	if err != nil {
		ts = time.Now().UTC()
	}
	meta := map[string]any{"sequence": ev.Sequence}
	for k, v := range sourceMeta(ev.Source) {
		meta[k] = v
	}
	return &a2a.TaskStatusUpdateEvent{TaskID: t.info.TaskID, ContextID: t.info.ContextID, Status: a2a.TaskStatus{State: state, Message: msg, Timestamp: &ts}, Metadata: meta}
}

// sourceMeta is an event's agent, as metadata.
func sourceMeta(src models.Source) map[string]any {
	m := map[string]any{"agent_id": src.AgentID, "agent_name": src.AgentName, "agent_type": src.AgentType}
	if src.TeamName != nil {
		m["team_name"] = *src.TeamName
	}
	return m
}

func agentName(src models.Source) string {
	if src.AgentName != "" {
		return src.AgentName
	}
	return src.AgentID
}

func str(m map[string]any, k string) string {
	s, _ := m[k].(string)
	return s
}
