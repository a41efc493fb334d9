package api_test

import (
	"context"
	"encoding/json"
	"sync/atomic"
	"testing"
	"time"

	"github.com/op-stack/executor/api"
	"github.com/op-stack/executor/models"
	"github.com/op-stack/executor/notify"
	"github.com/op-stack/executor/store/storetest"
)

// countingListener is a notify.Broker that counts the subscriptions open
// now, to see that pollers, not subscribers, subscribe, and let go.
type countingListener struct {
	*notify.Broker
	open atomic.Int64
}

func (l *countingListener) Subscribe(runID string) (<-chan struct{}, func()) {
	ch, cancel := l.Broker.Subscribe(runID)
	l.open.Add(1)
	var done atomic.Bool
	return ch, func() {
		if done.CompareAndSwap(false, true) {
			l.open.Add(-1)
		}
		cancel()
	}
}

func (l *countingListener) SubscribePushes(runID string) (<-chan struct{}, func() ([][]byte, bool), func()) {
	ch, take, cancel := l.Broker.SubscribePushes(runID)
	l.open.Add(1)
	var done atomic.Bool
	return ch, take, func() {
		if done.CompareAndSwap(false, true) {
			l.open.Add(-1)
		}
		cancel()
	}
}

// openTwoStreams opens two streams of run id from its start, each read
// into a channel, and checks that both begin with event 1. They close with
// the test.
func openTwoStreams(t *testing.T, e *streamEnv, id string) []chan sseMsg {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	var chans []chan sseMsg
	for range 2 {
		resp := e.open(ctx, streamRequest{path: pathStreamGET(id)})
		t.Cleanup(func() { resp.Body.Close() })
		ch := make(chan sseMsg, 16)
		go readInto(resp.Body, ch)
		if m := next(t, ch); m.ID != "1" {
			t.Fatalf("first event %s, want 1", m.ID)
		}
		chans = append(chans, ch)
	}
	return chans
}

// noMessage fails if ch delivers a message within d.
func noMessage(t *testing.T, ch <-chan sseMsg, d time.Duration, why string) {
	t.Helper()
	select {
	case m, ok := <-ch:
		if ok {
			t.Fatalf("%s: got event %s", why, m.ID)
		}
		t.Fatalf("%s: the stream ended", why)
	case <-time.After(d):
	}
}

// TestStreamNotifiedPollerQueriesOnNews: with a Listener, a live run's
// poller queries when the run is notified and not on a timer: silence
// costs no query, an event nobody announces waits, a notification brings
// it at once, and a notified end ends the streams.
func TestStreamNotifiedPollerQueriesOnNews(t *testing.T) {
	l := &countingListener{Broker: notify.NewBroker()}
	// A fast PollInterval that must not be used, and a safety poll that
	// never comes within the test.
	e := newListeningStreamEnv(t, storetest.SQLite(t), api.StreamOptions{
		PollInterval: time.Millisecond, IdlePollInterval: 5 * time.Millisecond, QuietAfter: time.Millisecond,
		SafetyPollInterval: time.Minute,
	}, l)
	id := e.newRun(models.RunRunning)
	e.fake.emit(id, 0, "lifecycle.started")

	chans := openTwoStreams(t, e, id)
	if n := l.open.Load(); n != 1 {
		t.Fatalf("%d subscriptions to the listener for one run's two streams; want the poller's one", n)
	}

	// Silence: no query at all, where the timer would make hundreds.
	before := e.stats().Queries
	time.Sleep(600 * time.Millisecond)
	if q := e.stats().Queries - before; q != 0 {
		t.Fatalf("%d queries in 600ms of silence; want none with a listener and a 1-minute safety poll", q)
	}

	// An event nobody announces is not fetched...
	e.fake.emit(id, 0, "llm.stream")
	noMessage(t, chans[0], 200*time.Millisecond, "an unannounced event was fetched without a notification")
	// ...until the run is notified.
	start := time.Now()
	l.Notify(context.Background(), id)
	for _, ch := range chans {
		if m := next(t, ch); m.ID != "2" {
			t.Fatalf("after the notification got event %s, want 2", m.ID)
		}
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("the notified event took %v", d)
	}
	if w := e.stats().Wakeups; w != 1 {
		t.Fatalf("wake-ups = %d, want 1", w)
	}

	// A notified end ends every stream and stops the poller, which lets
	// go of its subscription.
	e.fake.emit(id, 0, "llm.stream", "lifecycle.completed")
	e.fake.end(id)
	l.Notify(context.Background(), id)
	for _, ch := range chans {
		if m := next(t, ch); m.ID != "3" {
			t.Fatalf("got event %s, want 3", m.ID)
		}
		if m := next(t, ch); m.ID != "4" || m.Type != "lifecycle.completed" {
			t.Fatalf("got event %s %s, want 4 lifecycle.completed", m.ID, m.Type)
		}
		if _, open := <-ch; open {
			t.Fatal("the stream went on after the terminal event")
		}
	}
	waitFor(t, "the poller to stop", func() bool { return e.stats().Pollers == 0 && e.stats().Subscribers == 0 })
	waitFor(t, "the poller's subscription to end", func() bool { return l.open.Load() == 0 })
}

// TestStreamNotifiedSafetyPoll: with a Listener and nothing notified, the
// poller queries every SafetyPollInterval, not every PollInterval, and
// still finds what nobody announced.
func TestStreamNotifiedSafetyPoll(t *testing.T) {
	const poll, safety = 50 * time.Millisecond, 250 * time.Millisecond
	e := newListeningStreamEnv(t, storetest.SQLite(t), api.StreamOptions{
		PollInterval: poll, IdlePollInterval: poll, SafetyPollInterval: safety,
	}, notify.NewBroker())
	id := e.newRun(models.RunRunning)
	e.fake.emit(id, 0, "lifecycle.started")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp := e.open(ctx, streamRequest{path: pathStreamGET(id)})
	defer resp.Body.Close()
	ch := make(chan sseMsg, 16)
	go readInto(resp.Body, ch)
	next(t, ch)

	before, start := e.stats().Queries, time.Now()
	time.Sleep(600 * time.Millisecond)
	q, elapsed := e.stats().Queries-before, time.Since(start)
	// The 50ms timer would make 12; the safety poll 2.
	if limit := int64(elapsed/safety) + 1; q > limit || q < 1 {
		t.Fatalf("%d queries in %v of silence; want between 1 and %d (a safety poll every %v)", q, elapsed, limit, safety)
	}
	if w := e.stats().Wakeups; w != 0 {
		t.Fatalf("wake-ups = %d with nothing notified", w)
	}
	e.fake.emit(id, 0, "llm.stream")
	if m := next(t, ch); m.ID != "2" {
		t.Fatalf("got event %s, want 2", m.ID)
	}
}

// TestStreamNotificationsCoalesce: notifications that arrive while a query
// runs cost one more query, not one each, and what they announced is
// delivered.
func TestStreamNotificationsCoalesce(t *testing.T) {
	broker := notify.NewBroker()
	e := newListeningStreamEnv(t, storetest.SQLite(t), api.StreamOptions{
		PollInterval: time.Millisecond, SafetyPollInterval: time.Minute,
	}, broker)
	id := e.newRun(models.RunRunning)
	e.fake.emit(id, 0, "lifecycle.started")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp := e.open(ctx, streamRequest{path: pathStreamGET(id)})
	defer resp.Body.Close()
	ch := make(chan sseMsg, 16)
	go readInto(resp.Body, ch)
	next(t, ch)

	e.fake.delay.Store(int64(150 * time.Millisecond))
	before := e.stats().Queries
	e.fake.emit(id, 0, "llm.stream")
	broker.Notify(context.Background(), id)
	waitFor(t, "the notified query to start", func() bool { return e.fake.inFlight.Load() == 1 })
	for range 50 {
		e.fake.emit(id, 0, "llm.stream")
		broker.Notify(context.Background(), id)
	}
	for want := int64(2); want <= 52; want++ {
		if m := next(t, ch); m.Event.Sequence != want {
			t.Fatalf("got event %d, want %d", m.Event.Sequence, want)
		}
	}
	time.Sleep(400 * time.Millisecond)
	// The notified query, then one for everything notified during it.
	if q := e.stats().Queries - before; q != 2 {
		t.Fatalf("%d queries for 51 notifications, 50 of them during a query; want 2", q)
	}
	if m := e.fake.maxInFlight.Load(); m != 1 {
		t.Fatalf("%d concurrent queries of one run, want 1", m)
	}
}

// TestStreamTakesPushedEventsWithoutAQuery: events pushed with a wake-up
// (notify.Pusher, as an activity does after its event update) reach every
// stream without a query while they join up with what the feed holds; a
// push that leaves a gap, and a plain notification, cost one query each,
// which fills the gap.
func TestStreamTakesPushedEventsWithoutAQuery(t *testing.T) {
	b := notify.NewBroker()
	e := newListeningStreamEnv(t, storetest.SQLite(t), api.StreamOptions{SafetyPollInterval: time.Minute}, b)
	id := e.newRun(models.RunRunning)
	e.fake.emit(id, 0, "lifecycle.started")
	chans := openTwoStreams(t, e, id)
	push := func(evs []models.Event) {
		t.Helper()
		payload, err := json.Marshal(evs)
		if err != nil {
			t.Fatal(err)
		}
		b.Push(context.Background(), id, payload)
	}
	expect := func(ids ...string) {
		t.Helper()
		for _, ch := range chans {
			for _, want := range ids {
				if m := next(t, ch); m.ID != want {
					t.Fatalf("got event %s, want %s", m.ID, want)
				}
			}
		}
	}

	before := e.stats()
	push(e.fake.emit(id, 0, "llm.stream", "llm.stream"))
	expect("2", "3")
	push(e.fake.emit(id, 0, "llm.stream"))
	expect("4")
	after := e.stats()
	if q := after.Queries - before.Queries; q != 0 {
		t.Fatalf("%d queries for events pushed in order; want none", q)
	}
	if p := after.Pushes - before.Pushes; p != 2 {
		t.Fatalf("pushes taken = %d, want 2", p)
	}

	// Event 5 is in the run but was never pushed: the push of 6 leaves a
	// gap, and the query it causes brings both.
	e.fake.emit(id, 0, "dispatch.worker")
	push(e.fake.emit(id, 0, "llm.stream"))
	expect("5", "6")
	if q := e.stats().Queries - after.Queries; q != 1 {
		t.Fatalf("%d queries after a push with a gap; want 1", q)
	}

	// A plain notification still queries, and a pushed end ends the streams.
	before = e.stats()
	e.fake.emit(id, 0, "llm.stream")
	b.Notify(context.Background(), id)
	expect("7")
	if q := e.stats().Queries - before.Queries; q != 1 {
		t.Fatalf("%d queries after a plain notification; want 1", q)
	}
	push(e.fake.emit(id, 0, "lifecycle.completed"))
	e.fake.end(id)
	expect("8")
	for _, ch := range chans {
		if _, open := <-ch; open {
			t.Fatal("the stream went on after the pushed terminal event")
		}
	}
	waitFor(t, "the poller to stop", func() bool { return e.stats().Pollers == 0 })
}
