package a2aserve

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/op-stack/executor/client"
	"github.com/op-stack/executor/models"
)

// fakeAPI is a named fake of the executor API routes the handler calls:
// it records each call's path and body and answers from runs.
type fakeAPI struct {
	mu      sync.Mutex
	calls   []string
	bodies  []map[string]any
	runs    map[string]run
	pending []approval
}

func (f *fakeAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	raw, _ := io.ReadAll(r.Body)
	var body map[string]any
	_ = json.Unmarshal(raw, &body)
	path := strings.TrimPrefix(r.URL.Path, client.Prefix)
	f.mu.Lock()
	f.calls = append(f.calls, path)
	f.bodies = append(f.bodies, body)
	f.mu.Unlock()
	okJSON := func(data any) {
		_ = json.NewEncoder(w).Encode(map[string]any{"code": 0, "message": "success", "data": data})
	}
	switch path {
	case "/runs/get":
		rn, found := f.runs[body["id"].(string)]
		if !found {
			w.WriteHeader(http.StatusNotFound)
			_ = json.NewEncoder(w).Encode(map[string]any{"code": 40401, "error_code": "EXECUTION_NOT_FOUND", "message": "run not found"})
			return
		}
		okJSON(rn)
	case "/runs/list":
		var items []run
		for _, rn := range f.runs {
			if body["thread_id"] == nil || rn.ThreadID == body["thread_id"] {
				items = append(items, rn)
			}
		}
		// Newest first: the fake's newest run of a thread has the largest id.
		for i := range items {
			for j := i + 1; j < len(items); j++ {
				if items[j].ID > items[i].ID {
					items[i], items[j] = items[j], items[i]
				}
			}
		}
		okJSON(map[string]any{"items": items, "total": len(items)})
	case "/runs/start":
		if body["task"] == "forbidden" {
			w.WriteHeader(http.StatusForbidden)
			_ = json.NewEncoder(w).Encode(map[string]any{"code": 40301, "error_code": "PERMISSION_DENIED", "message": "this route needs the runs:write scope"})
			return
		}
		okJSON(map[string]any{"id": "r9", "thread_id": "r9", "status": "pending"})
	case "/runs/approvals":
		okJSON(map[string]any{"approvals": f.pending})
	case "/runs/approve", "/runs/reject":
		okJSON(map[string]any{})
	default:
		w.WriteHeader(http.StatusNotFound)
	}
}

func newTestHandler(t *testing.T, f *fakeAPI) *handler {
	t.Helper()
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	c, err := client.New(srv.URL, "k", nil)
	if err != nil {
		t.Fatal(err)
	}
	return &handler{api: c, hierarchyID: "h1"}
}

func textMessage(text string) *a2a.Message {
	return a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart(text))
}

// TestSendFollowUpTakesTheThreadsLatestRun: a message with a contextId
// starts a run with previous_run_id = the thread's newest run.
func TestSendFollowUpTakesTheThreadsLatestRun(t *testing.T) {
	f := &fakeAPI{runs: map[string]run{
		"r1": {ID: "r1", HierarchyID: "h1", ThreadID: "r1", Status: models.RunCompleted},
		"r2": {ID: "r2", HierarchyID: "h1", ThreadID: "r1", Status: models.RunCompleted},
		"r3": {ID: "r3", HierarchyID: "h1", ThreadID: "r3", Status: models.RunCompleted},
	}}
	h := newTestHandler(t, f)
	m := textMessage("more")
	m.ContextID = "r1"
	id, answered, err := h.send(context.Background(), &a2a.SendMessageRequest{Message: m})
	if err != nil || id != "r9" || answered != "" {
		t.Fatalf("send = %q %q %v", id, answered, err)
	}
	start := f.bodies[len(f.bodies)-1]
	if f.calls[len(f.calls)-1] != "/runs/start" || start["previous_run_id"] != "r2" || start["task"] != "more" || start["hierarchy_id"] != "h1" {
		t.Errorf("start = %v (calls %v)", start, f.calls)
	}
	// An unknown context is refused, and starts nothing.
	m.ContextID = "nope"
	f.calls = nil
	if _, _, err := h.send(context.Background(), &a2a.SendMessageRequest{Message: m}); !errors.Is(err, a2a.ErrInvalidParams) {
		t.Errorf("unknown context: %v", err)
	}
	for _, c := range f.calls {
		if c == "/runs/start" {
			t.Error("an unknown context started a run")
		}
	}
}

// TestAnswerPicksTheNamedApproval: metadata.approval_id picks the approval
// answered; "reject" calls runs/reject with the rest as comment.
func TestAnswerPicksTheNamedApproval(t *testing.T) {
	f := &fakeAPI{
		runs:    map[string]run{"r1": {ID: "r1", HierarchyID: "h1", ThreadID: "r1", Status: models.RunWaitingApproval}},
		pending: []approval{{ID: "ap1"}, {ID: "ap2"}},
	}
	h := newTestHandler(t, f)
	m := textMessage("reject not now")
	m.TaskID, m.Metadata = "r1", map[string]any{"approval_id": "ap2"}
	id, answered, err := h.send(context.Background(), &a2a.SendMessageRequest{Message: m})
	if err != nil || id != "r1" || answered != "ap2" {
		t.Fatalf("answer = %q %q %v", id, answered, err)
	}
	last := f.bodies[len(f.bodies)-1]
	if f.calls[len(f.calls)-1] != "/runs/reject" || last["approval_id"] != "ap2" || last["comment"] != "not now" || last["id"] != "r1" {
		t.Errorf("reject call %s %v", f.calls[len(f.calls)-1], last)
	}
	// Without a name the oldest is approved.
	m = textMessage("approve")
	m.TaskID = "r1"
	if _, answered, err := h.send(context.Background(), &a2a.SendMessageRequest{Message: m}); err != nil || answered != "ap1" || f.calls[len(f.calls)-1] != "/runs/approve" {
		t.Errorf("approve: %q %v %v", answered, err, f.calls)
	}
	// Neither approve nor reject.
	m = textMessage("perhaps")
	m.TaskID = "r1"
	if _, _, err := h.send(context.Background(), &a2a.SendMessageRequest{Message: m}); !errors.Is(err, a2a.ErrInvalidParams) {
		t.Errorf("perhaps: %v", err)
	}
}

// TestHandlerRefusals: another hierarchy's run is not found, a missing
// scope is permission denied, push configs and messages carrying one are
// refused, a message without text is invalid.
func TestHandlerRefusals(t *testing.T) {
	f := &fakeAPI{runs: map[string]run{"r1": {ID: "r1", HierarchyID: "other", ThreadID: "r1", Status: models.RunCompleted}}}
	h := newTestHandler(t, f)
	ctx := context.Background()
	if _, err := h.GetTask(ctx, &a2a.GetTaskRequest{ID: "r1"}); !errors.Is(err, a2a.ErrTaskNotFound) {
		t.Errorf("another hierarchy's task: %v", err)
	}
	if _, err := h.GetTask(ctx, &a2a.GetTaskRequest{ID: "missing"}); !errors.Is(err, a2a.ErrTaskNotFound) {
		t.Errorf("unknown task: %v", err)
	}
	if _, err := h.SendMessage(ctx, &a2a.SendMessageRequest{Message: textMessage("forbidden")}); !errors.Is(err, a2a.ErrUnauthorized) || !strings.Contains(err.Error(), "runs:write") {
		t.Errorf("no runs:write: %v", err)
	}
	if _, err := h.SendMessage(ctx, &a2a.SendMessageRequest{Message: textMessage("x"), Config: &a2a.SendMessageConfig{PushConfig: &a2a.PushConfig{URL: "http://127.0.0.1:9/"}}}); !errors.Is(err, a2a.ErrPushNotificationNotSupported) {
		t.Errorf("a message with a push config: %v", err)
	}
	if _, err := h.CreateTaskPushConfig(ctx, &a2a.PushConfig{}); !errors.Is(err, a2a.ErrPushNotificationNotSupported) || !strings.Contains(err.Error(), "webhooks") {
		t.Errorf("push config: %v", err)
	}
	if _, err := h.SendMessage(ctx, &a2a.SendMessageRequest{Message: a2a.NewMessage(a2a.MessageRoleUser, a2a.NewDataPart(map[string]any{"a": 1}))}); !errors.Is(err, a2a.ErrInvalidParams) {
		t.Errorf("no text: %v", err)
	}
	if _, err := h.CancelTask(ctx, &a2a.CancelTaskRequest{ID: "r1"}); !errors.Is(err, a2a.ErrTaskNotFound) {
		t.Errorf("cancel another hierarchy's task: %v", err)
	}
}
