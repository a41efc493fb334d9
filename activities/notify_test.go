package activities

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/op-stack/executor/models"
	"github.com/op-stack/executor/store"
	"github.com/op-stack/executor/store/storetest"
)

// notifyTrace records, in order, the batches signalled and the notifications
// sent, so a test can check that each notification follows its signal.
type notifyTrace struct {
	mu    sync.Mutex
	steps []string
	fail  bool // PublishEvents fails
	// onNotify, when set, runs inside Notify.
	onNotify func(runID string)
}

func (tr *notifyTrace) PublishEvents(_ context.Context, runID string, _ models.EventBatch) error {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	if tr.fail {
		tr.steps = append(tr.steps, "failed")
		return errors.New("fake: signal failed")
	}
	tr.steps = append(tr.steps, "signal "+runID)
	return nil
}

func (tr *notifyTrace) Notify(_ context.Context, runID string) {
	if tr.onNotify != nil {
		tr.onNotify(runID)
	}
	tr.mu.Lock()
	defer tr.mu.Unlock()
	tr.steps = append(tr.steps, "notify "+runID)
}

func (tr *notifyTrace) String() string {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	return strings.Join(tr.steps, ", ")
}

func respondInput(runID string) models.RespondInput {
	return models.RespondInput{
		RunID: runID, Purpose: models.PurposeWorker, Task: "t",
		Agent:  models.Agent{AgentID: "w-1", Name: "writer"},
		Source: models.Source{AgentID: "w-1", AgentType: models.AgentTypeWorker, AgentName: "writer"},
	}
}

// TestPublisherNotifiesAfterEachSignal: the run is notified right after
// each batch is signalled, never before the signal (the query it causes
// must find the events). A batch within startAnnounceDelay of the start
// makes the start's own announcement unnecessary.
func TestPublisherNotifiesAfterEachSignal(t *testing.T) {
	tr := &notifyTrace{}
	acts := &Activities{
		LLM:    slowLLM{n: 12, delay: 10 * time.Millisecond, text: "tok "},
		Events: tr, Notifier: tr, FlushInterval: 30 * time.Millisecond,
		Log: slog.New(slog.DiscardHandler),
	}
	if _, err := acts.Respond(context.Background(), respondInput("r1")); err != nil {
		t.Fatal(err)
	}
	tr.mu.Lock()
	steps := append([]string(nil), tr.steps...)
	tr.mu.Unlock()
	signals := 0
	for i, s := range steps {
		want := "signal r1"
		if i%2 == 1 {
			want = "notify r1"
		} else {
			signals++
		}
		if s != want {
			t.Fatalf("step %d = %q, want %q; steps: %s", i, s, want, tr)
		}
	}
	if len(steps)%2 != 0 || signals < 2 {
		t.Fatalf("steps = %s; want several signals, each followed by its notification", tr)
	}
}

// TestPublisherAnnouncesAQuietStart: an activity that signals nothing
// within startAnnounceDelay (a model slow to its first token) announces the
// events before it once, then each of its batches.
func TestPublisherAnnouncesAQuietStart(t *testing.T) {
	tr := &notifyTrace{}
	acts := &Activities{
		LLM:    slowLLM{n: 2, first: 4 * startAnnounceDelay, text: "tok "},
		Events: tr, Notifier: tr, FlushInterval: time.Hour,
		Log: slog.New(slog.DiscardHandler),
	}
	if _, err := acts.Respond(context.Background(), respondInput("r1")); err != nil {
		t.Fatal(err)
	}
	if got := tr.String(); !strings.HasPrefix(got, "notify r1, signal r1, notify r1") {
		t.Fatalf("steps = %s; want the start's announcement, then the first batch and its notification", got)
	}
}

// TestPublisherDoesNotNotifyFailedSignals: nothing reached the workflow,
// so there is nothing to query but what preceded the activity.
func TestPublisherDoesNotNotifyFailedSignals(t *testing.T) {
	tr := &notifyTrace{fail: true}
	acts := &Activities{
		LLM:    slowLLM{n: 3, delay: startAnnounceDelay, text: "tok "},
		Events: tr, Notifier: tr, Log: slog.New(slog.DiscardHandler),
	}
	if _, err := acts.Respond(context.Background(), respondInput("r1")); err != nil {
		t.Fatal(err)
	}
	if got := strings.Count(tr.String(), "notify"); got != 1 {
		t.Fatalf("steps = %s; want the start's notification only", tr)
	}
}

// TestSetRunStatusNotifiesAfterTheWrite: the stream that wakes must read
// the new status (a terminal one ends it).
func TestSetRunStatusNotifiesAfterTheWrite(t *testing.T) {
	st := storetest.SQLite(t)
	ctx := t.Context()
	if err := st.CreateRun(ctx, &store.Run{ID: "run-1", HierarchyID: "h-1", WorkflowID: "run-run-1", Task: "t"}); err != nil {
		t.Fatal(err)
	}
	var seen []string
	tr := &notifyTrace{onNotify: func(runID string) {
		run, err := st.GetRun(context.Background(), runID)
		if err != nil {
			t.Errorf("read run at notification: %v", err)
			return
		}
		seen = append(seen, run.Status)
	}}
	a := &Activities{Store: st, Notifier: tr, Log: slog.New(slog.DiscardHandler)}
	for _, status := range []string{models.RunRunning, models.RunCompleted} {
		if err := a.SetRunStatus(ctx, models.RunStatusUpdate{RunID: "run-1", Status: status}); err != nil {
			t.Fatal(err)
		}
	}
	if strings.Join(seen, ",") != "running,completed" {
		t.Fatalf("statuses stored when notified: %v; want each notification after its write", seen)
	}

	// Without a Notifier nothing is notified and nothing breaks.
	a.Notifier = nil
	if err := a.SetRunStatus(ctx, models.RunStatusUpdate{RunID: "run-1", Status: models.RunCompleted}); err != nil {
		t.Fatal(err)
	}
}
