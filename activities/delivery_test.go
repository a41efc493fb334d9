package activities

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"go.temporal.io/api/serviceerror"

	"github.com/op-stack/executor/models"
)

// fakeRunLog is a fake run workflow for the publisher: it numbers the
// batches it takes by update (DeliverEvents) or signal (PublishEvents)
// like models.EventLog, and records what was pushed to the streams.
type fakeRunLog struct {
	mu        sync.Mutex
	log       models.EventLog
	updateErr error // every update fails with it
	delay     time.Duration
	updates   int
	signals   int
	pushed    []models.Event
	plain     int
}

func (f *fakeRunLog) DeliverEvents(_ context.Context, _ string, b models.EventBatch) (models.EventDelivery, error) {
	time.Sleep(f.delay)
	f.mu.Lock()
	defer f.mu.Unlock()
	f.updates++
	if f.updateErr != nil {
		return models.EventDelivery{}, f.updateErr
	}
	var d models.EventDelivery
	if applied := f.log.ApplyBatch(b); len(applied) > 0 {
		d.First = applied[0].Sequence
	}
	return d, nil
}

func (f *fakeRunLog) PublishEvents(_ context.Context, _ string, b models.EventBatch) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.signals++
	f.log.ApplyBatch(b)
	return nil
}

func (f *fakeRunLog) Notify(context.Context, string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.plain++
}

func (f *fakeRunLog) Push(_ context.Context, _ string, payload []byte) {
	var evs []models.Event
	if err := json.Unmarshal(payload, &evs); err != nil {
		panic(err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.pushed = append(f.pushed, evs...)
}

// streamingActivities answer with n tokens 10 ms apart, flushed every
// 20 ms, publishing to run.
func streamingActivities(run *fakeRunLog, n int) *Activities {
	return &Activities{
		LLM:    slowLLM{n: n, delay: 10 * time.Millisecond, text: "tok "},
		Events: run, Notifier: run, FlushInterval: 20 * time.Millisecond,
		Log: slog.New(slog.DiscardHandler),
	}
}

// TestPublisherDeliversByUpdateAndPushes: a streaming call's batches go as
// updates, and the events pushed to the streams carry exactly the
// sequences the run's log gave them, in order, without a gap.
func TestPublisherDeliversByUpdateAndPushes(t *testing.T) {
	run := &fakeRunLog{}
	acts := streamingActivities(run, 12)
	if _, err := acts.Respond(context.Background(), respondInput("r1")); err != nil {
		t.Fatal(err)
	}
	run.mu.Lock()
	defer run.mu.Unlock()
	if run.updates == 0 || run.signals != 0 {
		t.Fatalf("updates %d, signals %d; want updates only", run.updates, run.signals)
	}
	if len(run.pushed) == 0 {
		t.Fatal("nothing was pushed to the streams")
	}
	for i, e := range run.pushed {
		held := run.log.Events[e.Sequence-1]
		if e.Sequence != int64(i+1) || held.Event != e.Event || held.Data["content"] != e.Data["content"] {
			t.Fatalf("pushed event %d is %d %s %q; the log has %d %s %q", i, e.Sequence, e.Event, e.Data["content"], held.Sequence, held.Event, held.Data["content"])
		}
	}
}

// TestPublisherSignalsWhenUpdatesFail: a failed update sends the same
// batch by signal and notifies; a server that refuses updates as
// unsupported switches them off for the process.
func TestPublisherSignalsWhenUpdatesFail(t *testing.T) {
	for _, tc := range []struct {
		name    string
		err     error
		stopped bool
	}{
		{"rejected", errors.New("fake: update rejected"), false},
		{"unsupported", serviceerror.NewUnimplemented("fake: no updates"), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			run := &fakeRunLog{updateErr: tc.err}
			acts := streamingActivities(run, 12)
			if _, err := acts.Respond(context.Background(), respondInput("r1")); err != nil {
				t.Fatal(err)
			}
			run.mu.Lock()
			defer run.mu.Unlock()
			if run.signals == 0 || run.plain < run.signals || len(run.pushed) != 0 {
				t.Fatalf("signals %d, plain notifications %d, pushed %d; want every batch signalled and notified, none pushed", run.signals, run.plain, len(run.pushed))
			}
			if tc.stopped && run.updates != 1 {
				t.Fatalf("%d updates tried after the server refused them; want 1", run.updates)
			}
			if !tc.stopped && run.updates != run.signals {
				t.Fatalf("%d updates, %d signals; want an update tried before each signal", run.updates, run.signals)
			}
			if acts.updatesOff.Load() != tc.stopped {
				t.Fatalf("updates off = %v, want %v", acts.updatesOff.Load(), tc.stopped)
			}
		})
	}
}

// TestPublisherSignalsWhileUpdatesAreSlow: an update slower than
// slowUpdate sends the process's batches by signal for slowUpdateBackoff;
// nothing is lost or repeated.
func TestPublisherSignalsWhileUpdatesAreSlow(t *testing.T) {
	run := &fakeRunLog{delay: slowUpdate + 50*time.Millisecond}
	acts := streamingActivities(run, 30)
	res, err := acts.Respond(context.Background(), respondInput("r1"))
	if err != nil {
		t.Fatal(err)
	}
	run.mu.Lock()
	defer run.mu.Unlock()
	if run.updates != 1 || run.signals == 0 {
		t.Fatalf("updates %d, signals %d; want one slow update, then signals", run.updates, run.signals)
	}
	if until := acts.slowUpdatesUntil.Load(); time.Until(time.Unix(0, until)) < slowUpdateBackoff/2 {
		t.Fatalf("updates held back until %v; want about %v from now", time.Unix(0, until), slowUpdateBackoff)
	}
	if res.Events != nil {
		run.log.ApplyBatch(*res.Events)
	}
	var text string
	for _, e := range run.log.Events {
		if e.Event.Action == models.ActionStream {
			text += e.Data["content"].(string)
		}
	}
	if want := strings.Repeat("tok ", 30); text != want {
		t.Fatalf("the log's text = %q, want %q", text, want)
	}
}

// TestBatchesGrowWhileUpdatesAreSlow (issue 28): the flush interval follows
// the updates' latency, so slower updates (below slowUpdate: no fallback to
// signals) make fewer, larger batches of the same text, nothing lost or
// repeated; the process reports the lengthened interval as saturation.
func TestBatchesGrowWhileUpdatesAreSlow(t *testing.T) {
	respond := func(delay time.Duration) (*fakeRunLog, *Activities) {
		run := &fakeRunLog{delay: delay}
		acts := streamingActivities(run, 60) // 600 ms of tokens, flushed every 20 ms
		res, err := acts.Respond(context.Background(), respondInput("r1"))
		if err != nil {
			t.Fatal(err)
		}
		run.mu.Lock()
		defer run.mu.Unlock()
		if res.Events != nil {
			run.log.ApplyBatch(*res.Events)
		}
		var text string
		for _, e := range run.log.Events {
			if e.Event.Action == models.ActionStream {
				text += e.Data["content"].(string)
			}
		}
		if want := strings.Repeat("tok ", 60); text != want {
			t.Fatalf("update delay %v: the log's text = %q, want %q", delay, text, want)
		}
		if run.signals != 0 {
			t.Fatalf("update delay %v: %d signals; want updates only", delay, run.signals)
		}
		return run, acts
	}
	fast, fastActs := respond(0)
	slow, slowActs := respond(40 * time.Millisecond)
	t.Logf("updates: %d with instant updates, %d with 40 ms updates", fast.updates, slow.updates)
	if _, saturated := fastActs.flushInterval(); saturated {
		t.Errorf("instant updates: the flush interval is lengthened")
	}
	iv, saturated := slowActs.flushInterval()
	if !saturated || iv < 60*time.Millisecond {
		t.Errorf("40 ms updates: flush interval %v (lengthened %v); want about 80 ms, lengthened", iv, saturated)
	}
	// At a fixed 20 ms the slow updates would go every 40 ms (one in
	// flight at a time): 15 batches for 600 ms. Following the latency,
	// every 80 ms: about 8.
	if slow.updates > 11 {
		t.Errorf("%d updates with 40 ms updates; want at most 11 (every twice the latency)", slow.updates)
	}
	if fast.updates <= slow.updates {
		t.Errorf("%d updates with instant updates, %d with 40 ms ones; want fewer when slow", fast.updates, slow.updates)
	}
}

// TestFlushIntervalBounds: the interval is the configured one while
// updates are quick, twice their moving average when that is longer, and
// never more than maxFlushInterval.
func TestFlushIntervalBounds(t *testing.T) {
	a := &Activities{FlushInterval: 100 * time.Millisecond}
	if iv, sat := a.flushInterval(); iv != 100*time.Millisecond || sat {
		t.Fatalf("no deliveries yet: %v %v", iv, sat)
	}
	a.deliveryTook(30 * time.Millisecond)
	if iv, sat := a.flushInterval(); iv != 100*time.Millisecond || sat {
		t.Fatalf("30 ms deliveries: %v %v; want the configured 100 ms", iv, sat)
	}
	for range 20 {
		a.deliveryTook(200 * time.Millisecond)
	}
	if iv, sat := a.flushInterval(); iv < 380*time.Millisecond || iv > 400*time.Millisecond || !sat {
		t.Fatalf("200 ms deliveries: %v %v; want about 400 ms, lengthened", iv, sat)
	}
	for range 20 {
		a.deliveryTook(5 * time.Second)
	}
	if iv, _ := a.flushInterval(); iv != maxFlushInterval {
		t.Fatalf("5 s deliveries: %v; want the cap %v", iv, maxFlushInterval)
	}
	for range 40 {
		a.deliveryTook(10 * time.Millisecond)
	}
	if iv, sat := a.flushInterval(); iv != 100*time.Millisecond || sat {
		t.Fatalf("quick again: %v %v; want back to 100 ms", iv, sat)
	}
}
