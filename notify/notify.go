// Package notify tells the API's event-stream pollers that a run has news,
// so that they query the run's workflow when there is something to read
// instead of on a fast timer.
//
// A notification carries only a run ID and means "query this run again": it
// is a hint, never the data. Losing one costs latency, never an event (the
// pollers keep a slow safety poll), and receiving one twice costs one query.
// That is why the implementations favour never blocking a producer over
// exactly-once delivery.
//
// Producers (the worker's activities) use a Notifier; consumers (the API's
// pollers) use a Listener. Within one process the Broker is both. Across
// processes, PostgresNotifier sends NOTIFY and a PostgresListener turns the
// notifications it LISTENs to into Broker wake-ups; Loopback serves a
// process that is both a producer and a consumer on PostgreSQL.
package notify

import (
	"context"
	"sync"
)

// Notifier is the producer side: it says that a run's workflow has new
// events, or a new status, worth a query.
type Notifier interface {
	// Notify wakes the pollers of runID. It never fails the caller: a lost
	// notification only delays a stream until its safety poll.
	Notify(ctx context.Context, runID string)
}

// Pusher is a Notifier that can carry data with a wake-up: a run's events
// that its workflow has numbered, encoded by the caller, so that a poller
// that holds everything before them can pass them on without a query.
// The payload is still a hint: a subscriber that cannot use it (a gap
// before it, a payload lost on the way) queries as after Notify.
type Pusher interface {
	Notifier
	// Push wakes the pollers of runID like Notify and hands them payload.
	Push(ctx context.Context, runID string, payload []byte)
}

// PushListener is a Listener whose subscribers also receive the payloads
// of Push.
type PushListener interface {
	Listener
	// SubscribePushes is Subscribe, with take: it returns the payloads
	// pushed since the last take, oldest first, and whether a wake-up
	// without a payload (Notify, or pushes dropped for want of room) came
	// in that time, which only a query answers.
	SubscribePushes(runID string) (wake <-chan struct{}, take func() (payloads [][]byte, plain bool), cancel func())
}

// maxHeldPushes bounds the payloads a subscriber holds between two takes;
// past it they are dropped and the subscriber told to query.
const maxHeldPushes = 256

// Listener is the consumer side: the API's poller of a live run subscribes
// to the run's wake-ups.
type Listener interface {
	// Subscribe returns a channel that receives a value after runID is
	// notified, and a function that ends the subscription. The channel
	// holds one pending wake-up: notifications that arrive while one is
	// pending merge into it, so a subscriber that was busy sees one wake-up
	// for all of them, never none. cancel is idempotent.
	Subscribe(runID string) (wake <-chan struct{}, cancel func())
}

// Broker is the in-process Notifier and Listener: Notify wakes every
// subscriber of the run in this process. It serves a process that runs both
// the worker and the API (serve -role all, executor dev), and is where a
// PostgresListener delivers what it hears. The zero value is not usable;
// call NewBroker.
type Broker struct {
	mu   sync.Mutex
	subs map[string]map[*subscription]struct{}
	// echoes counts, per run, the NOTIFYs this process sent after waking
	// its own subscribers (Loopback), whose copy from PostgreSQL its
	// listener is still to hear: that copy would only cost a second query.
	echoes map[string]int
}

type subscription struct {
	// ch has capacity 1: a send either fills the slot or finds a wake-up
	// already pending, so Notify never blocks and never loses the last
	// wake-up.
	ch chan struct{}
	// pushes says the subscriber takes payloads; the rest are guarded by
	// the Broker's mu.
	pushes   bool
	payloads [][]byte
	plain    bool
}

// NewBroker returns a Broker without subscribers.
func NewBroker() *Broker {
	return &Broker{subs: map[string]map[*subscription]struct{}{}, echoes: map[string]int{}}
}

// Notify wakes every current subscriber of runID. It does not block.
func (b *Broker) Notify(_ context.Context, runID string) { b.deliver(runID, nil) }

// Push wakes every current subscriber of runID and hands payload to those
// that take payloads. It does not block.
func (b *Broker) Push(_ context.Context, runID string, payload []byte) { b.deliver(runID, payload) }

// deliver wakes runID's subscribers with payload (nil: a plain wake-up).
func (b *Broker) deliver(runID string, payload []byte) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for s := range b.subs[runID] {
		s.add(payload)
		s.wake()
	}
}

// NotifyAll wakes every subscriber of every run: used when notifications
// may have been missed (a PostgresListener that reconnected).
func (b *Broker) NotifyAll() {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, subs := range b.subs {
		for s := range subs {
			s.add(nil)
			s.wake()
		}
	}
}

// expectEcho registers a NOTIFY about to be sent for runID after its
// subscribers here were woken. It comes before the NOTIFY, so that the
// echo can never arrive first.
func (b *Broker) expectEcho(runID string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.echoes[runID]++
}

// cancelEcho withdraws an expected echo whose NOTIFY failed. If the count
// is already spent, a notification from elsewhere was dropped in its
// place, and no echo will come after it: wake the subscribers now.
func (b *Broker) cancelEcho(runID string, payload []byte) { b.spendEchoOrWake(runID, payload) }

// dropEcho spends one expected echo of runID, which has n. b.mu is held.
func (b *Broker) dropEcho(runID string, n int) {
	if n == 1 {
		delete(b.echoes, runID)
	} else {
		b.echoes[runID] = n - 1
	}
}

// notifyHeard delivers a notification heard from PostgreSQL, unless it is
// the echo of one this process delivered already. Counting cannot tell an
// echo from another process's notification that arrives before it; if it
// drops the latter, the echo still to come wakes the subscribers after it,
// so nothing is missed.
func (b *Broker) notifyHeard(runID string, payload []byte) { b.spendEchoOrWake(runID, payload) }

// spendEchoOrWake spends one expected echo of runID if there is one, and
// otherwise wakes the run's subscribers with payload.
func (b *Broker) spendEchoOrWake(runID string, payload []byte) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if n := b.echoes[runID]; n > 0 {
		b.dropEcho(runID, n)
		return
	}
	for s := range b.subs[runID] {
		s.add(payload)
		s.wake()
	}
}

// reconnected wakes every subscriber after a PostgresListener reconnected:
// what was sent while it was away is lost, echoes included, so none is
// expected any more.
func (b *Broker) reconnected() {
	b.mu.Lock()
	clear(b.echoes)
	b.mu.Unlock()
	b.NotifyAll()
}

// Subscribe implements Listener.
func (b *Broker) Subscribe(runID string) (<-chan struct{}, func()) {
	return b.subscribe(runID, &subscription{ch: make(chan struct{}, 1)})
}

// SubscribePushes implements PushListener.
func (b *Broker) SubscribePushes(runID string) (<-chan struct{}, func() ([][]byte, bool), func()) {
	s := &subscription{ch: make(chan struct{}, 1), pushes: true}
	wake, cancel := b.subscribe(runID, s)
	take := func() ([][]byte, bool) {
		b.mu.Lock()
		defer b.mu.Unlock()
		payloads, plain := s.payloads, s.plain
		s.payloads, s.plain = nil, false
		return payloads, plain
	}
	return wake, take, cancel
}

func (b *Broker) subscribe(runID string, s *subscription) (<-chan struct{}, func()) {
	b.mu.Lock()
	subs := b.subs[runID]
	if subs == nil {
		subs = map[*subscription]struct{}{}
		b.subs[runID] = subs
	}
	subs[s] = struct{}{}
	b.mu.Unlock()
	var once sync.Once
	return s.ch, func() {
		once.Do(func() {
			b.mu.Lock()
			defer b.mu.Unlock()
			delete(b.subs[runID], s)
			// Runs come and go: an empty entry would be kept forever.
			if len(b.subs[runID]) == 0 {
				delete(b.subs, runID)
			}
		})
	}
}

// subscribers counts the subscriptions of runID, for tests.
func (b *Broker) subscribers(runID string) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.subs[runID])
}

// add records what a wake-up brings. The Broker's mu is held.
func (s *subscription) add(payload []byte) {
	switch {
	case !s.pushes:
	case payload == nil:
		s.plain = true
	case len(s.payloads) >= maxHeldPushes:
		// A subscriber this far behind reads the run with a query.
		s.payloads, s.plain = nil, true
	case s.plain:
		// A query is due anyway, after this push: it covers the events.
	default:
		s.payloads = append(s.payloads, payload)
	}
}

func (s *subscription) wake() {
	select {
	case s.ch <- struct{}{}:
	default: // a wake-up is already pending; it covers this one
	}
}

// Combine returns a Notifier that notifies through each non-nil one of ns,
// in order, or nil when there is none. For a Broker and PostgreSQL in one
// process, Loopback is better: it does not wake the process twice.
func Combine(ns ...Notifier) Notifier {
	var out multi
	for _, n := range ns {
		if n != nil {
			out = append(out, n)
		}
	}
	switch len(out) {
	case 0:
		return nil
	case 1:
		return out[0]
	}
	return out
}

type multi []Notifier

func (m multi) Notify(ctx context.Context, runID string) {
	for _, n := range m {
		n.Notify(ctx, runID)
	}
}

func (m multi) Push(ctx context.Context, runID string, payload []byte) {
	for _, n := range m {
		if p, ok := n.(Pusher); ok {
			p.Push(ctx, runID, payload)
		} else {
			n.Notify(ctx, runID)
		}
	}
}

// Loopback is the Notifier of a process that runs both the worker and the
// API on PostgreSQL. It wakes b's subscribers at once and sends NOTIFY for
// the other API processes. The process's own PostgresListener, which must
// deliver to b, hears that NOTIFY too; b drops that echo, which would
// otherwise cost each notified run a second query (measured: nearly twice
// the queries of in-process notifications alone).
func Loopback(b *Broker, pg *PostgresNotifier) Notifier { return loopback{b, pg} }

type loopback struct {
	b  *Broker
	pg *PostgresNotifier
}

func (l loopback) Notify(ctx context.Context, runID string) { l.Push(ctx, runID, nil) }

func (l loopback) Push(ctx context.Context, runID string, payload []byte) {
	l.b.deliver(runID, payload)
	l.b.expectEcho(runID)
	if !l.pg.send(ctx, runID, payload) {
		l.b.cancelEcho(runID, nil)
	}
}
