package a2aserve

import (
	"context"
	"errors"
	"iter"
	"log/slog"
	"strconv"
	"strings"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2asrv"

	"github.com/op-stack/executor/client"
	"github.com/op-stack/executor/models"
)

// errPushRefused is the answer to every push notification config method,
// and to a message that carries one.
var errPushRefused = a2a.NewError(a2a.ErrPushNotificationNotSupported,
	"push notifications are not supported: this service has no webhooks yet; use SendStreamingMessage or SubscribeToTask (resumable with Last-Event-ID)")

// handler is one A2A request's a2asrv.RequestHandler: the hierarchy's
// agent, calling the executor API with the request's credential.
type handler struct {
	api         *client.Client
	hierarchyID string
	// resumeAfter is the request's Last-Event-ID header (SubscribeToTask).
	resumeAfter string
	log         *slog.Logger
}

var _ a2asrv.RequestHandler = (*handler)(nil)

// getRun reads a run of this hierarchy; a run of another hierarchy (or
// tenant) is not found.
func (h *handler) getRun(ctx context.Context, id a2a.TaskID) (run, error) {
	var r run
	if strings.TrimSpace(string(id)) == "" {
		return r, a2a.NewError(a2a.ErrInvalidParams, "id: a task id is required")
	}
	if err := h.api.Call(ctx, "/runs/get", map[string]string{"id": string(id)}, &r); err != nil {
		return r, a2aError(err)
	}
	if r.HierarchyID != h.hierarchyID {
		return r, a2a.NewError(a2a.ErrTaskNotFound, "task "+string(id)+" not found")
	}
	return r, nil
}

// pending lists a run's open approvals.
func (h *handler) pending(ctx context.Context, id string) ([]approval, error) {
	var out struct {
		Approvals []approval `json:"approvals"`
	}
	if err := h.api.Call(ctx, "/runs/approvals", map[string]string{"id": id}, &out); err != nil {
		return nil, a2aError(err)
	}
	return out.Approvals, nil
}

// task is the task of a run of this hierarchy.
func (h *handler) task(ctx context.Context, id a2a.TaskID, historyLength *int) (*a2a.Task, error) {
	r, err := h.getRun(ctx, id)
	if err != nil {
		return nil, err
	}
	var pending []approval
	if r.Status == models.RunWaitingApproval {
		if pending, err = h.pending(ctx, r.ID); err != nil {
			return nil, err
		}
	}
	return taskOf(r, pending, historyLength == nil || *historyLength > 0), nil
}

// GetTask reads a run.
func (h *handler) GetTask(ctx context.Context, req *a2a.GetTaskRequest) (*a2a.Task, error) {
	return h.task(ctx, req.ID, req.HistoryLength)
}

// ListTasks lists the caller's runs of this hierarchy, newest first; the
// page token is a page number.
func (h *handler) ListTasks(ctx context.Context, req *a2a.ListTasksRequest) (*a2a.ListTasksResponse, error) {
	page, err := pageToken(req.PageToken)
	if err != nil {
		return nil, err
	}
	size := req.PageSize
	if size <= 0 || size > 100 {
		size = 50
	}
	status := ""
	if req.Status != a2a.TaskStateUnspecified {
		if status = RunStatus(req.Status); status == "" {
			return nil, a2a.NewError(a2a.ErrInvalidParams, "status: "+req.Status.String()+" is no task state a run has")
		}
	}
	var out client.Page[run]
	f := client.RunFilter{HierarchyID: h.hierarchyID, ThreadID: req.ContextID, Status: status, Page: page, PageSize: size}
	if err := h.api.Call(ctx, "/runs/list", f, &out); err != nil {
		return nil, a2aError(err)
	}
	resp := &a2a.ListTasksResponse{Tasks: []*a2a.Task{}, TotalSize: out.Total, PageSize: size}
	for _, r := range out.Items {
		if req.StatusTimestampAfter != nil && r.CreatedAt.Before(*req.StatusTimestampAfter) && (r.CompletedAt == nil || r.CompletedAt.Before(*req.StatusTimestampAfter)) {
			continue
		}
		t := taskOf(r, nil, req.HistoryLength != nil && *req.HistoryLength > 0)
		if !req.IncludeArtifacts {
			t.Artifacts = nil
		}
		resp.Tasks = append(resp.Tasks, t)
	}
	if page*size < out.Total {
		resp.NextPageToken = strconv.Itoa(page + 1)
	}
	return resp, nil
}

// CancelTask cancels a run (runs/cancel); an ended run cannot be.
func (h *handler) CancelTask(ctx context.Context, req *a2a.CancelTaskRequest) (*a2a.Task, error) {
	r, err := h.getRun(ctx, req.ID)
	if err != nil {
		return nil, err
	}
	if models.IsTerminal(r.Status) {
		return nil, a2a.NewError(a2a.ErrTaskNotCancelable, "task "+r.ID+" has already ended ("+r.Status+")")
	}
	if _, err := h.api.CancelRun(ctx, r.ID); err != nil {
		var apiErr *client.APIError
		if errors.As(err, &apiErr) && apiErr.ErrorCode == models.CodeExecutionFinished.Name {
			return nil, a2a.NewError(a2a.ErrTaskNotCancelable, apiErr.Message)
		}
		return nil, a2aError(err)
	}
	// The cancel is asked of the workflow; the task reads canceled once
	// the run has ended, which its stream or GetTask tells.
	return h.task(ctx, req.ID, nil)
}

// SendMessage starts a run (or a follow-up, or answers an approval) and,
// unless returnImmediately, waits until the task ends or needs input.
func (h *handler) SendMessage(ctx context.Context, req *a2a.SendMessageRequest) (a2a.SendMessageResult, error) {
	id, answered, err := h.send(ctx, req)
	if err != nil {
		return nil, err
	}
	if req.Config == nil || !req.Config.ReturnImmediately {
		if err := h.settle(ctx, id, answered, func(a2a.Event) bool { return true }); err != nil {
			return nil, err
		}
	}
	return h.task(ctx, a2a.TaskID(id), historyLength(req))
}

// SendStreamingMessage is SendMessage with the task's events streamed
// until it ends or needs input.
func (h *handler) SendStreamingMessage(ctx context.Context, req *a2a.SendMessageRequest) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {
		id, answered, err := h.send(ctx, req)
		if err != nil {
			yield(nil, err)
			return
		}
		t, err := h.task(ctx, a2a.TaskID(id), historyLength(req))
		if err != nil {
			yield(nil, err)
			return
		}
		if answered != "" {
			// The stream of an approval answer picks up at the answer:
			// the client has seen the task's earlier events.
			t.Status = a2a.TaskStatus{State: a2a.TaskStateWorking}
		}
		if !yield(t, nil) {
			return
		}
		if err := h.settle(ctx, id, answered, func(e a2a.Event) bool { return yield(e, nil) }); err != nil {
			yield(nil, err)
		}
	}
}

// SubscribeToTask streams a task from any point: after the event sequence
// in the Last-Event-ID header, or from its first event. It sends the task
// first and ends with the task's terminal status.
func (h *handler) SubscribeToTask(ctx context.Context, req *a2a.SubscribeToTaskRequest) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {
		var after int64
		if v := strings.TrimSpace(h.resumeAfter); v != "" {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil || n < 0 {
				yield(nil, a2a.NewError(a2a.ErrInvalidParams, ResumeHeader+" must be the sequence of a streamed event (its metadata.sequence; the SSE id field is the transport's own, not a resume point), got "+strconv.Quote(v)))
				return
			}
			after = n
		}
		t, err := h.task(ctx, req.ID, nil)
		if err != nil {
			yield(nil, err)
			return
		}
		if !yield(t, nil) {
			return
		}
		tr := newTranslator(string(t.ID), t.ContextID)
		if err := h.follow(ctx, tr, string(t.ID), after, "", false, func(e a2a.Event) bool { return yield(e, nil) }); err != nil {
			yield(nil, err)
		}
	}
}

// send starts the run a message asks for, or answers an approval; it
// returns the run's id and, for an answer, the approval answered.
func (h *handler) send(ctx context.Context, req *a2a.SendMessageRequest) (id, answered string, err error) {
	if req.Config != nil && req.Config.PushConfig != nil {
		return "", "", errPushRefused
	}
	m := req.Message
	if m == nil {
		return "", "", a2a.NewError(a2a.ErrInvalidParams, "message is required")
	}
	text := messageText(m)
	if text == "" {
		return "", "", a2a.NewError(a2a.ErrInvalidParams, "message: a text part is required (the task of the run)")
	}
	if m.TaskID != "" {
		return h.answer(ctx, m, text)
	}
	start := client.StartRequest{HierarchyID: h.hierarchyID, Task: text}
	if m.ContextID != "" {
		var page client.Page[run]
		if err := h.api.Call(ctx, "/runs/list", client.RunFilter{HierarchyID: h.hierarchyID, ThreadID: m.ContextID, PageSize: 1}, &page); err != nil {
			return "", "", a2aError(err)
		}
		if len(page.Items) == 0 {
			return "", "", a2a.NewError(a2a.ErrInvalidParams, "contextId "+strconv.Quote(m.ContextID)+" names no thread of this agent: omit it to start a new one")
		}
		start.PreviousRunID = page.Items[0].ID
	}
	started, err := h.api.StartRun(ctx, start)
	if err != nil {
		return "", "", a2aError(err)
	}
	return started.ID, "", nil
}

// answer resolves the pending approval of an input-required task with a
// message's text: "approve [comment]" or "reject [comment]" (also yes/no).
// metadata.approval_id picks the approval when several are pending; else
// the first is answered.
func (h *handler) answer(ctx context.Context, m *a2a.Message, text string) (string, string, error) {
	r, err := h.getRun(ctx, m.TaskID)
	if err != nil {
		return "", "", err
	}
	if models.IsTerminal(r.Status) {
		return "", "", a2a.NewError(a2a.ErrUnsupportedOperation, "task "+r.ID+" has ended ("+r.Status+"): send a message with its contextId (and no taskId) to start a follow-up")
	}
	if r.Status != models.RunWaitingApproval {
		return "", "", a2a.NewError(a2a.ErrUnsupportedOperation, "task "+r.ID+" is not waiting for input (it is "+r.Status+")")
	}
	approve, comment, ok := decision(text)
	if !ok {
		return "", "", a2a.NewError(a2a.ErrInvalidParams, "task "+r.ID+" waits for an approval: answer 'approve [comment]' or 'reject [comment]'")
	}
	pending, err := h.pending(ctx, r.ID)
	if err != nil {
		return "", "", err
	}
	want, _ := m.Metadata["approval_id"].(string)
	var target string
	for _, a := range pending {
		if want == "" || a.ID == want {
			target = a.ID
			break
		}
	}
	if target == "" {
		return "", "", a2a.NewError(a2a.ErrInvalidParams, "task "+r.ID+" has no pending approval "+strconv.Quote(want))
	}
	path := "/runs/reject"
	if approve {
		path = "/runs/approve"
	}
	if err := h.api.Call(ctx, path, map[string]string{"id": r.ID, "approval_id": target, "comment": comment}, nil); err != nil {
		return "", "", a2aError(err)
	}
	return r.ID, target, nil
}

// settle follows a run until it ends or waits for input, emitting its
// events; after an approval answer it starts at that approval's
// resolution.
func (h *handler) settle(ctx context.Context, id, answered string, emit func(a2a.Event) bool) error {
	r, err := h.getRun(ctx, a2a.TaskID(id))
	if err != nil {
		return err
	}
	return h.follow(ctx, newTranslator(r.ID, r.ThreadID), r.ID, 0, answered, true, emit)
}

// follow streams a run's events after the sequence after through tr to
// emit, until the run's terminal event (then the final artifact and
// status), or, with stopAtInput, until the run waits for an approval. With
// skipUntil set, nothing is emitted (nor stops the stream) before the
// resolution of that approval. emit returning false stops quietly.
func (h *handler) follow(ctx context.Context, tr *translator, id string, after int64, skipUntil string, stopAtInput bool, emit func(a2a.Event) bool) error {
	errStop := errors.New("stop")
	live := skipUntil == ""
	_, err := h.api.Follow(ctx, id, client.FollowOptions{After: after}, func(ev models.Event) error {
		if client.IsTerminal(ev) {
			r, err := h.getRun(ctx, a2a.TaskID(id))
			if err != nil {
				return err
			}
			for _, e := range tr.final(r, ev.Sequence) {
				if !emit(e) {
					return errStop
				}
			}
			return errStop
		}
		events := tr.event(ev)
		if !live {
			if ev.Event.Category == models.CategoryApproval && ev.Event.Action == models.ActionResolved && str(ev.Data, "approval_id") == skipUntil {
				live = true
			}
			return nil
		}
		for _, e := range events {
			if !emit(e) {
				return errStop
			}
		}
		if stopAtInput && tr.waiting() {
			return errStop
		}
		return nil
	})
	if err == nil || errors.Is(err, errStop) {
		return nil
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	var a2aErr *a2a.Error
	if errors.As(err, &a2aErr) {
		return err
	}
	return a2aError(err)
}

// decision reads an approval answer: its first word approves (approve,
// approved, yes, y, ok) or rejects (reject, rejected, no, n, deny); the
// rest is the comment.
func decision(text string) (approve bool, comment string, ok bool) {
	word, rest, _ := strings.Cut(strings.TrimSpace(text), " ")
	switch strings.ToLower(strings.Trim(word, ".,:;!")) {
	case "approve", "approved", "yes", "y", "ok":
		return true, strings.TrimSpace(rest), true
	case "reject", "rejected", "no", "n", "deny":
		return false, strings.TrimSpace(rest), true
	}
	return false, "", false
}

// messageText is the text of a message's text parts, joined by newlines.
func messageText(m *a2a.Message) string {
	var parts []string
	for _, p := range m.Parts {
		if p == nil {
			continue
		}
		if t := strings.TrimSpace(p.Text()); t != "" {
			parts = append(parts, t)
		}
	}
	return strings.Join(parts, "\n")
}

func historyLength(req *a2a.SendMessageRequest) *int {
	if req.Config == nil {
		return nil
	}
	return req.Config.HistoryLength
}

// GetTaskPushConfig refuses: no webhooks.
func (h *handler) GetTaskPushConfig(context.Context, *a2a.GetTaskPushConfigRequest) (*a2a.PushConfig, error) {
	return nil, errPushRefused
}

// ListTaskPushConfigs refuses: no webhooks.
func (h *handler) ListTaskPushConfigs(context.Context, *a2a.ListTaskPushConfigRequest) (*a2a.ListTaskPushConfigResponse, error) {
	return nil, errPushRefused
}

// CreateTaskPushConfig refuses: no webhooks.
func (h *handler) CreateTaskPushConfig(context.Context, *a2a.PushConfig) (*a2a.PushConfig, error) {
	return nil, errPushRefused
}

// DeleteTaskPushConfig refuses: no webhooks.
func (h *handler) DeleteTaskPushConfig(context.Context, *a2a.DeleteTaskPushConfigRequest) error {
	return errPushRefused
}

// GetExtendedAgentCard: the agent has no extended card.
func (h *handler) GetExtendedAgentCard(context.Context, *a2a.GetExtendedAgentCardRequest) (*a2a.AgentCard, error) {
	return nil, a2a.NewError(a2a.ErrExtendedCardNotConfigured, "this agent has no extended card")
}
