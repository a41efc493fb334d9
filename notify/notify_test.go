package notify

import (
	"context"
	"sync"
	"testing"
	"time"
)

// woken reports whether ch holds a wake-up, waiting up to d for one.
func woken(ch <-chan struct{}, d time.Duration) bool {
	select {
	case <-ch:
		return true
	default:
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ch:
		return true
	case <-t.C:
		return false
	}
}

func TestBrokerWakesEverySubscriberOfTheRun(t *testing.T) {
	b := NewBroker()
	a1, cancelA1 := b.Subscribe("run-a")
	defer cancelA1()
	a2, cancelA2 := b.Subscribe("run-a")
	defer cancelA2()
	other, cancelOther := b.Subscribe("run-b")
	defer cancelOther()

	b.Notify(context.Background(), "run-a")
	if !woken(a1, time.Second) || !woken(a2, time.Second) {
		t.Fatal("a subscriber of run-a was not woken")
	}
	if woken(other, 50*time.Millisecond) {
		t.Fatal("run-b's subscriber was woken by run-a's notification")
	}
	b.Notify(context.Background(), "nobody-listens") // no subscriber: nothing to do, no entry left behind
	if n := b.subscribers("nobody-listens"); n != 0 {
		t.Fatalf("notifying a run without subscribers left %d subscriptions", n)
	}
}

// TestBrokerNeverBlocksNorLosesAWakeUp: a subscriber that is not reading
// never blocks Notify, and finds one pending wake-up for all it missed.
func TestBrokerNeverBlocksNorLosesAWakeUp(t *testing.T) {
	b := NewBroker()
	ch, cancel := b.Subscribe("run")
	defer cancel()

	done := make(chan struct{})
	go func() {
		defer close(done)
		for range 10000 {
			b.Notify(context.Background(), "run")
		}
	}()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Notify blocked on a subscriber that does not read")
	}
	if !woken(ch, 0) {
		t.Fatal("the wake-up was lost")
	}
	if woken(ch, 20*time.Millisecond) {
		t.Fatal("10000 notifications left more than one pending wake-up; want them merged into one")
	}
	// Once consumed, the next notification wakes again.
	b.Notify(context.Background(), "run")
	if !woken(ch, time.Second) {
		t.Fatal("a notification after the subscriber read its wake-up was lost")
	}
}

// TestBrokerConcurrentNotifyReachesBusySubscriber: a notification sent
// while the subscriber handles an earlier one is seen after it.
func TestBrokerConcurrentNotifyReachesBusySubscriber(t *testing.T) {
	b := NewBroker()
	ch, cancel := b.Subscribe("run")
	defer cancel()
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 1000 {
				b.Notify(context.Background(), "run")
			}
		})
	}
	wg.Wait()
	<-ch // the subscriber takes the wake-up, then is "busy"...
	b.Notify(context.Background(), "run")
	if !woken(ch, time.Second) {
		t.Fatal("a notification sent while the subscriber was busy was lost")
	}
}

func TestBrokerCancelUnsubscribes(t *testing.T) {
	b := NewBroker()
	ch, cancel := b.Subscribe("run")
	keep, cancelKeep := b.Subscribe("run")
	defer cancelKeep()
	if n := b.subscribers("run"); n != 2 {
		t.Fatalf("subscribers = %d, want 2", n)
	}
	cancel()
	cancel() // idempotent
	if n := b.subscribers("run"); n != 1 {
		t.Fatalf("after cancel, subscribers = %d, want 1", n)
	}
	b.Notify(context.Background(), "run")
	if woken(ch, 50*time.Millisecond) {
		t.Fatal("a cancelled subscription was woken")
	}
	if !woken(keep, time.Second) {
		t.Fatal("the other subscription was not woken")
	}
	cancelKeep()
	b.mu.Lock()
	_, left := b.subs["run"]
	b.mu.Unlock()
	if left {
		t.Fatal("the run's entry outlived its last subscription")
	}
}

func TestBrokerNotifyAll(t *testing.T) {
	b := NewBroker()
	a, cancelA := b.Subscribe("run-a")
	defer cancelA()
	c, cancelC := b.Subscribe("run-c")
	defer cancelC()
	b.NotifyAll()
	if !woken(a, time.Second) || !woken(c, time.Second) {
		t.Fatal("NotifyAll missed a subscriber")
	}
}

type countingNotifier struct {
	mu   sync.Mutex
	runs []string
}

func (c *countingNotifier) Notify(_ context.Context, runID string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.runs = append(c.runs, runID)
}

func TestCombine(t *testing.T) {
	if Combine() != nil || Combine(nil, nil) != nil {
		t.Fatal("Combine of no notifier must be nil, so that callers can skip notifying")
	}
	one := &countingNotifier{}
	if Combine(nil, one) != Notifier(one) {
		t.Fatal("Combine of one notifier must be that notifier")
	}
	two := &countingNotifier{}
	Combine(one, nil, two).Notify(context.Background(), "run")
	if len(one.runs) != 1 || len(two.runs) != 1 || one.runs[0] != "run" || two.runs[0] != "run" {
		t.Fatalf("notified %v and %v; want each notifier told about run", one.runs, two.runs)
	}
}

// TestBrokerEchoAccounting: a notification heard from PostgreSQL while
// this process expects the echo of its own is dropped, and whatever was
// dropped in the echo's place is made up for: by the echo itself when it
// arrives, or at once when the NOTIFY failed and no echo will come.
func TestBrokerEchoAccounting(t *testing.T) {
	b := NewBroker()
	ch, cancel := b.Subscribe("run")
	defer cancel()

	// The echo of a NOTIFY whose subscribers were woken in process.
	b.expectEcho("run")
	b.notifyHeard("run", nil)
	if woken(ch, 20*time.Millisecond) {
		t.Fatal("the echo of this process's own notification woke the subscriber again")
	}

	// Another process's notification arrives before the echo: dropped in
	// its place, and the echo, arriving after it, wakes.
	b.expectEcho("run")
	b.notifyHeard("run", nil) // the other process's
	if woken(ch, 20*time.Millisecond) {
		t.Fatal("want the notification that arrived first dropped")
	}
	b.notifyHeard("run", nil) // the echo
	if !woken(ch, time.Second) {
		t.Fatal("the echo after a dropped notification must wake the subscriber")
	}

	// The NOTIFY fails after another process's notification was dropped
	// in place of its echo: no echo comes, so the subscriber wakes now.
	b.expectEcho("run")
	b.notifyHeard("run", nil)
	b.cancelEcho("run", nil)
	if !woken(ch, time.Second) {
		t.Fatal("a notification dropped for an echo that never comes was lost")
	}

	// A failed NOTIFY with nothing dropped: no wake-up, no expectation left.
	b.expectEcho("run")
	b.cancelEcho("run", nil)
	if woken(ch, 20*time.Millisecond) {
		t.Fatal("withdrawing an unspent expectation woke the subscriber")
	}
	b.notifyHeard("run", nil)
	if !woken(ch, time.Second) {
		t.Fatal("a notification after a withdrawn expectation was dropped")
	}

	// A reconnection forgets expectations: their echoes were lost with the
	// connection.
	b.expectEcho("run")
	b.reconnected()
	if !woken(ch, time.Second) {
		t.Fatal("reconnected must wake every subscriber")
	}
	b.notifyHeard("run", nil)
	if !woken(ch, time.Second) {
		t.Fatal("an expectation survived the reconnection and dropped a notification")
	}
	b.mu.Lock()
	left := len(b.echoes)
	b.mu.Unlock()
	if left != 0 {
		t.Fatalf("%d runs with expected echoes left; want none", left)
	}
}

// TestBrokerHandsPushesToPushSubscribers: pushed payloads reach a push
// subscriber in order with their wake-up; a plain notification among them
// says a query is due, after which payloads are not held (the query covers
// them); a plain subscriber is only woken.
func TestBrokerHandsPushesToPushSubscribers(t *testing.T) {
	b := NewBroker()
	ctx := context.Background()
	wake, take, cancel := b.SubscribePushes("run")
	defer cancel()
	plainCh, cancelPlain := b.Subscribe("run")
	defer cancelPlain()

	b.Push(ctx, "run", []byte("1"))
	b.Push(ctx, "run", []byte("2"))
	if !woken(wake, time.Second) || !woken(plainCh, time.Second) {
		t.Fatal("a push did not wake its subscribers")
	}
	payloads, plain := take()
	if plain || len(payloads) != 2 || string(payloads[0]) != "1" || string(payloads[1]) != "2" {
		t.Fatalf("take = %q, plain %v; want [1 2], false", payloads, plain)
	}
	if payloads, plain = take(); plain || len(payloads) != 0 {
		t.Fatalf("second take = %q, %v; want nothing", payloads, plain)
	}

	b.Push(ctx, "run", []byte("3"))
	b.Notify(ctx, "run")
	b.Push(ctx, "run", []byte("4"))
	if payloads, plain = take(); !plain || len(payloads) != 1 || string(payloads[0]) != "3" {
		t.Fatalf("take after a notify = %q, plain %v; want [3], true", payloads, plain)
	}
}

// TestBrokerBoundsHeldPushes: a subscriber that does not take is told to
// query rather than holding pushes without bound.
func TestBrokerBoundsHeldPushes(t *testing.T) {
	b := NewBroker()
	_, take, cancel := b.SubscribePushes("run")
	defer cancel()
	for range maxHeldPushes + 1 {
		b.Push(context.Background(), "run", []byte("x"))
	}
	if payloads, plain := take(); !plain || len(payloads) != 0 {
		t.Fatalf("take = %d payloads, plain %v; want 0, true", len(payloads), plain)
	}
}

func TestNotifyTextCarriesAPayloadThatFits(t *testing.T) {
	for _, tc := range []struct {
		payload string
		want    string
	}{
		{"", ""},
		{`[{"sequence":1}]`, `[{"sequence":1}]`},
		{string(make([]byte, maxNotifyPayload)), ""}, // too big: the run ID alone
	} {
		text := notifyText("run-1", []byte(tc.payload))
		if len(text) > maxNotifyPayload {
			t.Fatalf("NOTIFY text of %d bytes", len(text))
		}
		runID, payload := parseNotifyText(text)
		if runID != "run-1" || string(payload) != tc.want {
			t.Fatalf("parse(notifyText(%.20q)) = %q, %.20q; want run-1, %.20q", tc.payload, runID, payload, tc.want)
		}
	}
}
