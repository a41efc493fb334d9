// Package stream is the stream bridge: it serves each run's one ordered
// event log to any number of subscribers, in the protocol each asks for.
//
// A Hub keeps one poller, and one in-memory log of encoded frames, per
// live run in this process, shared by the run's subscribers, each reading
// at its own pace; subscribers that fall behind, and finished runs, read
// the database. Serve sends a run's log to one subscriber: an Encoder
// turns the log's frames into a protocol's messages (Contract002 here,
// spec 001's in stream/spec001), and a Transport carries them (SSE or
// WebSocket). The API's handlers authenticate, find the run, pick the
// encoder and the transport, and call Serve.
package stream

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/op-stack/executor/models"
	"github.com/op-stack/executor/notify"
	"github.com/op-stack/executor/store"
)

// EventQuerier reads a live run's events from its workflow: the page the
// workflow's events query (models.QueryEvents) answers for q.
type EventQuerier interface {
	QueryEvents(ctx context.Context, workflowID string, q models.EventQuery) (models.EventPage, error)
}

// Reconciler brings a run's stored status up to date with its workflow
// (the API's reconciliation): a workflow terminated by an operator never
// writes its end, and a live stream must still end with it.
type Reconciler interface {
	Reconcile(ctx context.Context, run *store.Run) (*store.Run, error)
}

// Options tune the event streams. Zero fields take the defaults.
type Options struct {
	// PollInterval is how often a live run's poller queries its workflow
	// while events are flowing (default 50ms), when no Listener wakes it.
	// With a Listener it is only the first retry delay of a failed query.
	PollInterval time.Duration
	// IdlePollInterval is the longest interval the poller backs off to
	// while the run is quiet (default 500ms), when no Listener wakes it.
	IdlePollInterval time.Duration
	// QuietAfter is how long a run must send nothing before its poller
	// backs off (default 1s): streaming activities signal every flush
	// interval, so shorter gaps are part of a live answer. Without a
	// Listener only.
	QuietAfter time.Duration
	// SafetyPollInterval is how often a poller that a Listener wakes
	// queries anyway when it hears nothing (default 1s): it bounds the
	// delay of events nobody announced (a lost notification, events the
	// workflow appends itself between activities).
	SafetyPollInterval time.Duration
	// KeepAlive is the interval of the keep-alive message on an idle
	// stream (default 15s), so proxies do not close a quiet connection.
	KeepAlive time.Duration
	// BufferEvents bounds the events of a run held in memory (default
	// 10000); a subscriber further behind reads the database.
	BufferEvents int
}

func (o Options) withDefaults() Options {
	if o.PollInterval <= 0 {
		o.PollInterval = 50 * time.Millisecond
	}
	if o.QuietAfter <= 0 {
		o.QuietAfter = time.Second
	}
	if o.IdlePollInterval <= 0 {
		o.IdlePollInterval = 500 * time.Millisecond
	}
	if o.IdlePollInterval < o.PollInterval {
		o.IdlePollInterval = o.PollInterval
	}
	if o.SafetyPollInterval <= 0 {
		o.SafetyPollInterval = time.Second
	}
	if o.KeepAlive <= 0 {
		o.KeepAlive = 15 * time.Second
	}
	if o.BufferEvents <= 0 {
		o.BufferEvents = 10000
	}
	return o
}

// Stats counts the event streams' work, for metrics, tests and benchmarks.
type Stats struct {
	// Queries is the number of workflow event queries made for streams
	// since the hub was built.
	Queries int64
	// Wakeups is the number of pollers' queries that a notification
	// caused (with a Listener): the rest are first, paging, retry and
	// safety queries.
	Wakeups int64
	// Pollers is the number of pollers running now: at most one per live
	// run that has subscribers.
	Pollers int64
	// Subscribers is the number of event streams open now.
	Subscribers int64
	// Pushes is the number of wake-ups whose news the pollers took from
	// the events pushed with them (notify.PushListener), without a query.
	Pushes int64
}

// Stats returns the event streams' counters.
func (h *Hub) Stats() Stats {
	return Stats{Queries: h.queries.Load(), Wakeups: h.wakeups.Load(), Pollers: h.pollers.Load(), Subscribers: h.subscribers.Load(), Pushes: h.pushes.Load()}
}

const (
	// queryPageBytes keeps a query answer well under Temporal's payload
	// limits.
	queryPageBytes = 512 << 10
	// storePageSize is the page size of event reads from the database.
	storePageSize = 500
	// streamQueryTimeout bounds one workflow query; a run whose worker is
	// down answers only at the deadline.
	streamQueryTimeout = 10 * time.Second
	// maxErrorBackoff is the longest wait between failed queries.
	maxErrorBackoff = 2 * time.Second
	// statusCheckInterval is how often a poller that gets nothing from the
	// workflow looks at the run's stored status, so a run whose workflow can
	// no longer tell (terminated, history gone) still ends its streams.
	statusCheckInterval = 2 * time.Second
)

// Config is what a Hub reads runs from.
type Config struct {
	// Store holds the runs and their stored events.
	Store *store.Store
	// Querier reads live runs' events from their workflows; nil: this
	// process streams finished runs only (see Hub.Live).
	Querier EventQuerier
	// Reconciler, if set, updates a run's stored status from its workflow
	// when its poller hears nothing, so that the streams of a terminated
	// workflow end.
	Reconciler Reconciler
	// Listener wakes pollers when a run has news; nil: pollers poll on
	// their timer alone.
	Listener notify.Listener
	Options  Options
	Logger   *slog.Logger
}

// Hub is the stream bridge of one process: it shares one poller, and one
// in-memory log, per live run among all of the run's subscribers, and
// tracks the open streams for Close. Build it with New; serve a stream
// with Serve.
type Hub struct {
	store      *store.Store
	reconciler Reconciler
	querier    EventQuerier
	listener   notify.Listener // nil: pollers poll on their timer alone
	opts       Options
	log        *slog.Logger

	queries     atomic.Int64
	wakeups     atomic.Int64
	pushes      atomic.Int64
	pollers     atomic.Int64
	subscribers atomic.Int64

	mu      sync.Mutex
	feeds   map[string]*feed
	conns   map[Transport]struct{}
	closed  bool
	closing chan struct{} // closed by Close
}

// New returns a hub reading runs as cfg says.
func New(cfg Config) *Hub {
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	return &Hub{
		store: cfg.Store, reconciler: cfg.Reconciler, querier: cfg.Querier, listener: cfg.Listener, opts: cfg.Options.withDefaults(), log: log,
		feeds: map[string]*feed{}, conns: map[Transport]struct{}{}, closing: make(chan struct{}),
	}
}

// Live reports whether this hub streams live runs (it has a Querier).
func (h *Hub) Live() bool { return h.querier != nil }

// grace is how long a poller outlives its last subscriber, so a client
// that reconnects at once finds it still running.
func (h *Hub) grace() time.Duration { return 2 * h.opts.IdlePollInterval }

func (h *Hub) query(ctx context.Context, workflowID string, after int64) (models.EventPage, error) {
	h.queries.Add(1)
	ctx, cancel := context.WithTimeout(ctx, streamQueryTimeout)
	defer cancel()
	return h.querier.QueryEvents(ctx, workflowID, models.EventQuery{After: after, MaxBytes: queryPageBytes})
}

// acquire subscribes to the run's feed, starting its poller at the
// subscriber's resume point if the run has none in this process yet.
// runID is the run's key, publicID the id its events show (store.Run).
func (h *Hub) acquire(runID, publicID, workflowID string, cursor int64) *feed {
	h.mu.Lock()
	defer h.mu.Unlock()
	f := h.feeds[runID]
	if f == nil {
		// The poller starts one event early: if the subscriber's last event
		// was the run's terminal one, the feed learns that the run has ended.
		start := max(cursor-1, 0)
		ctx, cancel := context.WithCancel(context.Background())
		f = &feed{hub: h, runID: runID, publicID: publicID, workflowID: workflowID, stop: cancel, first: start + 1, last: start, changed: make(chan struct{})}
		h.feeds[runID] = f
		h.pollers.Add(1)
		go f.poll(ctx)
	}
	if f.grace != nil {
		f.grace.Stop()
		f.grace = nil
	}
	f.refs++
	return f
}

// release unsubscribes from a feed. The last subscriber's leaving stops
// the poller at once if the run has ended (or the server is closing), else
// after the grace period.
func (h *Hub) release(f *feed) {
	h.mu.Lock()
	defer h.mu.Unlock()
	f.refs--
	if f.refs > 0 {
		return
	}
	if h.closed || f.isEnded() {
		h.drop(f)
		return
	}
	f.grace = time.AfterFunc(h.grace(), func() {
		h.mu.Lock()
		defer h.mu.Unlock()
		if f.refs == 0 {
			h.drop(f)
		}
	})
}

// drop removes a feed so that a later subscriber starts a new poller.
// h.mu must be held.
func (h *Hub) drop(f *feed) {
	if h.feeds[f.runID] == f {
		delete(h.feeds, f.runID)
	}
	f.stop()
}

// feed is the in-memory tail of one live run's event log, filled by one
// poller goroutine and read by any number of subscribers, each at its own
// pace with its own cursor. The poller never waits for a subscriber:
// appending only takes the lock briefly and wakes the waiting subscribers
// by closing the changed channel.
type feed struct {
	hub        *Hub
	runID      string // the run's key
	publicID   string // the run's public id, its events' run_id
	workflowID string
	stop       context.CancelFunc

	// Guarded by hub.mu.
	refs  int
	grace *time.Timer

	mu      sync.Mutex
	frames  []Frame       // contiguous: frames[i].Seq == first+i; never modified in place
	first   int64         // sequence of frames[0]; last+1 when frames is empty
	last    int64         // the newest sequence the poller has
	ended   bool          // last is the run's final event
	changed chan struct{} // closed and replaced whenever frames or ended change
}

// read returns what a subscriber at cursor can send now. behind > 0 means
// the events (cursor, behind] are older than what the feed holds and must
// be read elsewhere first. done means the run has ended and the subscriber
// has everything. Otherwise, with nothing to send, the subscriber waits on
// changed.
func (f *feed) read(cursor int64) (frames []Frame, behind int64, done bool, changed <-chan struct{}) {
	f.mu.Lock()
	defer f.mu.Unlock()
	switch {
	case cursor+1 < f.first:
		return nil, f.first - 1, false, f.changed
	case cursor < f.last:
		// A full slice expression: the subscriber can never write into the
		// feed's array.
		return f.frames[cursor+1-f.first : len(f.frames) : len(f.frames)], 0, false, f.changed
	}
	return nil, 0, f.ended && cursor >= f.last, f.changed
}

func (f *feed) lastSeq() int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.last
}

func (f *feed) isEnded() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.ended
}

// append adds the events that continue the feed's log, skipping those it
// has. terminal says the run ends at lastSeq (a terminal page). An event
// that would leave a gap stops the append with an error.
func (f *feed) append(events []models.Event, terminal bool, lastSeq int64) (int, error) {
	frames := make([]Frame, 0, len(events))
	for _, e := range events {
		fr, err := encodeFrame(e, f.publicID)
		if err != nil {
			return 0, err
		}
		frames = append(frames, fr)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	n, wasEnded := 0, f.ended
	var gap error
	for _, fr := range frames {
		if f.ended {
			break
		}
		if fr.Seq <= f.last {
			continue
		}
		if fr.Seq != f.last+1 {
			gap = fmt.Errorf("run %s: got event %d after %d", f.runID, fr.Seq, f.last)
			break
		}
		f.frames = append(f.frames, fr)
		f.last = fr.Seq
		n++
		if fr.Terminal {
			f.ended = true
		}
	}
	if terminal && gap == nil && f.last == lastSeq {
		f.ended = true
	}
	if limit := f.hub.opts.BufferEvents; len(f.frames) > limit {
		// Trim to three quarters in one copy, so trimming costs O(1) per
		// event and the dropped events' memory is released.
		keep := limit - limit/4
		f.frames = append(make([]Frame, 0, limit+1), f.frames[len(f.frames)-keep:]...)
	}
	if len(f.frames) > 0 {
		f.first = f.frames[0].Seq
	} else {
		f.first = f.last + 1
	}
	if n > 0 || f.ended != wasEnded {
		close(f.changed)
		f.changed = make(chan struct{})
	}
	return n, gap
}

// rewind moves an empty feed back to the run's real end: its first
// subscriber resumed past it (a stale or foreign Last-Event-ID).
func (f *feed) rewind(last int64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.frames) == 0 && last < f.last {
		f.last, f.first = last, last+1
	}
}

func (f *feed) markEnded() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.ended {
		f.ended = true
		close(f.changed)
		f.changed = make(chan struct{})
	}
}

// poll is the feed's poller. It returns once the run's end is in the feed
// or ctx is done. It pages through More at once and retries errors with
// backoff. Between queries:
//
//   - with a Listener, it waits for the run's next wake-up, at most
//     SafetyPollInterval. A wake-up that arrives during a query is kept by
//     the subscription (one pending at most), so the query that follows
//     covers every notification sent before it began: news is never
//     missed, and a burst of notifications costs one query.
//   - without one, it queries every PollInterval while events flow and
//     doubles the interval up to IdlePollInterval once the run has been
//     quiet for QuietAfter.
func (f *feed) poll(ctx context.Context) {
	h := f.hub
	defer h.pollers.Add(-1)
	// Subscribed before the first query, so news from then on wakes a
	// query that comes after it. take, with a PushListener, hands over the
	// events pushed with the wake-ups (see models.EventDelivery).
	var wake <-chan struct{}
	var take func() ([][]byte, bool)
	if pl, ok := h.listener.(notify.PushListener); ok {
		ch, tk, cancel := pl.SubscribePushes(f.runID)
		defer cancel()
		wake, take = ch, tk
	} else if h.listener != nil {
		ch, cancel := h.listener.Subscribe(f.runID)
		defer cancel()
		wake = ch
	}
	interval, failures := h.opts.PollInterval, 0
	lastCheck, lastProgress := time.Now(), time.Now()
	timer := time.NewTimer(0)
	defer timer.Stop()
	first := true
	for {
		// While queries fail, news waits for the backoff: it does not make
		// the next query more likely to succeed.
		woken := wake
		if failures > 0 {
			woken = nil
		}
		byWakeUp := false
		select {
		case <-ctx.Done():
			return
		case <-timer.C:
		case <-woken:
			h.wakeups.Add(1)
			byWakeUp = true
		}
		if wake != nil {
			// The query below covers a wake-up that is pending now.
			select {
			case <-wake:
			default:
			}
		}
		if take != nil {
			// Taken before the query: what is pushed from now on wakes
			// the loop again.
			payloads, plain := take()
			joined := f.applyPushes(ctx, payloads)
			if byWakeUp && !plain && !first && (joined || len(payloads) == 0) {
				// Nothing to ask the run: the pushed events joined up, or
				// this wake-up's news was taken with the last one.
				if joined {
					h.pushes.Add(1)
					if f.isEnded() {
						return
					}
					lastProgress = time.Now()
				}
				timer.Reset(h.opts.SafetyPollInterval)
				continue
			}
		}
		first = false
		more, progressed, err := f.pollOnce(ctx)
		if f.isEnded() || ctx.Err() != nil {
			return
		}
		var delay time.Duration
		switch {
		case err != nil:
			failures++
			delay = min(h.opts.PollInterval<<min(failures, 16), max(maxErrorBackoff, h.opts.IdlePollInterval))
			level := slog.LevelDebug
			if failures%20 == 0 {
				level = slog.LevelWarn
			}
			h.log.Log(ctx, level, "event stream poll", "run_id", f.runID, "failures", failures, "error", err)
		case more && progressed:
			failures, interval, delay = 0, h.opts.PollInterval, 0
			lastProgress = time.Now()
		case wake != nil && more:
			// The feed was rewound past a stale resume point: read the
			// real tail soon, as without a Listener.
			failures, delay = 0, h.opts.PollInterval
		case wake != nil:
			failures, delay = 0, h.opts.SafetyPollInterval
		case progressed:
			failures, interval = 0, h.opts.PollInterval
			delay = interval
			lastProgress = time.Now()
		case time.Since(lastProgress) < h.opts.QuietAfter:
			failures, delay = 0, interval
		default:
			failures = 0
			interval = min(2*interval, h.opts.IdlePollInterval)
			delay = interval
		}
		if !progressed && time.Since(lastCheck) >= statusCheckInterval {
			lastCheck = time.Now()
			if f.finishFromStore(ctx) {
				return
			}
		}
		timer.Reset(delay)
	}
}

// applyPushes appends the events pushed with wake-ups (each payload a JSON
// array of sequenced events). It reports whether they all joined the feed
// without a gap; the caller queries when they did not, and the query
// covers what was pushed.
func (f *feed) applyPushes(ctx context.Context, payloads [][]byte) bool {
	if len(payloads) == 0 {
		return false
	}
	for _, p := range payloads {
		var events []models.Event
		if err := json.Unmarshal(p, &events); err != nil || len(events) == 0 {
			return false
		}
		if gap := events[0].Sequence - f.lastSeq() - 1; gap > 0 && gap <= storePageSize {
			// An activity under an event lease stores its batches before
			// it pushes them: what this feed missed (it joined during the
			// lease, or lost a push) is in the database.
			if !f.fillFromStore(ctx, events[0].Sequence-1) {
				return false
			}
		}
		if _, err := f.append(events, false, 0); err != nil {
			return false
		}
	}
	return true
}

// fillFromStore appends the stored events after the feed's last, up to
// upto, and reports whether the feed then reaches upto.
func (f *feed) fillFromStore(ctx context.Context, upto int64) bool {
	last := f.lastSeq()
	if upto <= last {
		return true
	}
	evs, err := f.hub.store.ListEvents(ctx, f.runID, store.EventFilter{After: last, Limit: int(min(upto-last, storePageSize))})
	if err != nil {
		return false
	}
	if _, err := f.append(evs, false, 0); err != nil {
		return false
	}
	return f.lastSeq() >= upto
}

// pollOnce makes one query and adds what it brings, filling from the
// database the events the workflow no longer holds.
func (f *feed) pollOnce(ctx context.Context) (more, progressed bool, err error) {
	after := f.lastSeq()
	page, err := f.hub.query(ctx, f.workflowID, after)
	if err != nil {
		return false, false, err
	}
	if page.LeaseFrom > 0 && after >= page.LastSequence {
		// The feed is past the workflow's log: it has events an activity
		// holding the run's event lease stored and pushed (a resume point
		// there is real). Catch up from the database.
		n, err := f.appendLeased(ctx)
		return false, n > 0, err
	}
	if page.LastSequence < after {
		// As in acquire, one event early, to see whether it is terminal.
		f.rewind(max(page.LastSequence-1, 0))
		return true, false, nil
	}
	if after+1 < page.FirstAvailable {
		// The workflow dropped these after storing them.
		evs, err := f.hub.store.ListEvents(ctx, f.runID, store.EventFilter{After: after, Limit: int(min(page.FirstAvailable-1-after, 1000))})
		if err != nil {
			return false, false, err
		}
		n, err := f.append(evs, false, 0)
		if err == nil && n == 0 {
			err = fmt.Errorf("run %s: events %d to %d are neither held by the workflow nor stored", f.runID, after+1, page.FirstAvailable-1)
		}
		return true, n > 0, err
	}
	n, err := f.append(page.Events, page.Terminal, page.LastSequence)
	if err == nil && !page.More && page.LeaseFrom > 0 {
		// The rest of the log is the lease's, in the database so far.
		var m int
		m, err = f.appendLeased(ctx)
		n += m
	}
	return page.More, n > 0, err
}

// appendLeased appends what the database holds after the feed's last
// event: while an activity holds the run's event lease, the events it
// stored and pushed, which its workflow learns of only at its end.
func (f *feed) appendLeased(ctx context.Context) (int, error) {
	evs, err := f.hub.store.ListEvents(ctx, f.runID, store.EventFilter{After: f.lastSeq(), Limit: storePageSize})
	if err != nil {
		return 0, err
	}
	return f.append(evs, false, 0)
}

// finishFromStore ends the feed from the database if the run's stored
// status is terminal: by then every event is stored.
func (f *feed) finishFromStore(ctx context.Context) bool {
	run, err := f.hub.store.GetRun(ctx, f.runID)
	if err != nil {
		return false
	}
	if !models.IsTerminal(run.Status) && f.hub.reconciler != nil {
		// A workflow terminated by an operator never writes its end: the
		// reconciliation does, and the stream then ends with it.
		if run, err = f.hub.reconciler.Reconcile(ctx, run); err != nil {
			return false
		}
	}
	if !models.IsTerminal(run.Status) {
		return false
	}
	for {
		evs, err := f.hub.store.ListEvents(ctx, f.runID, store.EventFilter{After: f.lastSeq(), Limit: 1000})
		if err != nil {
			return false
		}
		n, err := f.append(evs, false, 0)
		if err != nil {
			f.hub.log.Warn("event stream: stored events have a gap", "run_id", f.runID, "error", err)
			break
		}
		if n == 0 || len(evs) < 1000 {
			break
		}
	}
	f.markEnded()
	return true
}

// backlog reads the events (cursor, upto] for a subscriber that is behind
// what the feed holds: from the database, or where the database does not
// have them yet, from the workflow. It returns at least one event or an
// error.
func (h *Hub) backlog(ctx context.Context, runID, publicID, workflowID string, cursor, upto int64) ([]Frame, error) {
	evs, err := h.store.ListEvents(ctx, runID, store.EventFilter{After: cursor, Limit: int(min(upto-cursor, storePageSize))})
	if err != nil {
		return nil, err
	}
	frames, err := contiguous(evs, publicID, cursor, upto)
	if err != nil || len(frames) > 0 {
		return frames, err
	}
	page, err := h.query(ctx, workflowID, cursor)
	if err != nil {
		return nil, err
	}
	if frames, err = contiguous(page.Events, publicID, cursor, upto); err == nil && len(frames) == 0 {
		err = fmt.Errorf("run %s: event %d is neither stored nor held by the workflow", runID, cursor+1)
	}
	return frames, err
}

// contiguous encodes the events that follow cursor without a gap, up to
// upto, with publicID as their run_id.
func contiguous(evs []models.Event, publicID string, cursor, upto int64) ([]Frame, error) {
	var out []Frame
	for _, e := range evs {
		if e.Sequence != cursor+1 || e.Sequence > upto {
			break
		}
		fr, err := encodeFrame(e, publicID)
		if err != nil {
			return nil, err
		}
		out = append(out, fr)
		cursor = e.Sequence
	}
	return out, nil
}
