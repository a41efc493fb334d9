package activities

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"

	"github.com/op-stack/executor/models"
	"github.com/op-stack/executor/notify"
	"github.com/op-stack/executor/store"
)

// SignalSink delivers event batches as signals to the run's workflow, by
// workflow ID only, so delivery follows the run across continue-as-new.
type SignalSink struct{ Client client.Client }

// PublishEvents implements EventSink.
func (s SignalSink) PublishEvents(ctx context.Context, runID string, batch models.EventBatch) error {
	return s.Client.SignalWorkflow(ctx, models.RunWorkflowID(runID), "", models.SignalEvents, batch)
}

// DeliverEvents implements EventDeliverer: the batch goes as the run's
// UpdateEvents update, identified by its producer and number, so that a
// retried update is applied once by Temporal too.
func (s SignalSink) DeliverEvents(ctx context.Context, runID string, batch models.EventBatch) (models.EventDelivery, error) {
	var d models.EventDelivery
	h, err := s.Client.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{
		UpdateID:     batch.Producer + "#" + strconv.Itoa(batch.Seq),
		WorkflowID:   models.RunWorkflowID(runID),
		UpdateName:   models.UpdateEvents,
		Args:         []any{batch},
		WaitForStage: client.WorkflowUpdateStageCompleted,
	})
	if err != nil {
		return d, err
	}
	return d, h.Get(ctx, &d)
}

// EventDeliverer is an EventSink that can also deliver a batch as an
// update, learning the sequences the run's workflow gave it.
type EventDeliverer interface {
	EventSink
	DeliverEvents(ctx context.Context, runID string, batch models.EventBatch) (models.EventDelivery, error)
}

// updateTimeout bounds one event update. An update waits for a workflow
// task: when the run's worker is slow or gone (its sticky queue holds the
// task until Temporal moves it, 5 s), the batch goes by signal instead,
// which returns once the server has it. It is short because a call's end
// waits for its batches in flight, and must not outlast the heartbeat
// timeout there (measured: a 5 s bound made TestWorkerKilledMidRun's
// retried call time out once more).
const updateTimeout = time.Second

// DefaultFlushInterval is how long streamed deltas wait, at most, before
// they are signalled to the run.
const DefaultFlushInterval = 100 * time.Millisecond

// The flush interval follows the event updates' latency, so that a
// saturated server gets fewer, larger batches instead of a queue: while
// the moving average of the process's update latencies (L) is short the
// interval is the configured one (EVENT_FLUSH_INTERVAL); past it, it is
// flushFactor × L, at most maxFlushInterval. Each attempt has one batch
// in flight at a time, so a batch leaves every max(interval, L): with 100
// streaming calls on a 2-core dev server, a fixed 100 ms asked for 1,000
// updates a second, updates queued past 250 ms and the process fell back
// to unpaced signals, the costlier path (each needs a query to reach the
// streams). A delta then waits about L in its batch and L on its way,
// under a second at most while L stays under maxFlushInterval / 2.
const (
	flushFactor      = 2
	maxFlushInterval = time.Second
	// deliveryWeight is the weight of a new latency in the average (1/4):
	// a few batches move it, one slow batch does not.
	deliveryWeight = 4
)

// flushInterval is the current longest wait of streamed deltas, and
// whether it is lengthened (the deliveries are slow: saturation).
func (a *Activities) flushInterval() (time.Duration, bool) {
	base := a.FlushInterval
	if base <= 0 {
		base = DefaultFlushInterval
	}
	iv := flushFactor * time.Duration(a.deliveryEWMA.Load())
	if iv <= base {
		return base, false
	}
	return min(iv, maxFlushInterval), true
}

// deliveryTook feeds one update's latency into the moving average.
func (a *Activities) deliveryTook(took time.Duration) {
	for {
		old := a.deliveryEWMA.Load()
		next := old + (int64(took)-old)/deliveryWeight
		if old == 0 {
			next = int64(took)
		}
		if a.deliveryEWMA.CompareAndSwap(old, next) {
			break
		}
	}
	if a.Metrics != nil {
		a.Metrics.EventDelivered(took)
		iv, saturated := a.flushInterval()
		a.Metrics.EventFlush(iv, saturated)
	}
}

// publisher sends one activity attempt's events to its run's workflow.
//
// Deltas of a streaming answer are coalesced: consecutive deltas of one
// agent and kind become one event. The first delta of a call and every
// other event (dispatches, warnings, retries) are sent at once; coalesced
// deltas at least every flush interval; everything left when the attempt
// ends (finish, error or cancellation), before the activity returns, so the
// run's log has an attempt's events before anything that follows it.
//
// One goroutine sends, in order. Each batch carries the attempt as
// producer and a per-attempt sequence number, which the workflow uses to
// apply a re-sent batch once.
type publisher struct {
	a        *Activities
	runID    string
	producer string
	attempt  int32
	calls    int // LLM calls made by this attempt, for their record ids
	// callKey names the activity across its attempts (workflow id,
	// Temporal run id, activity id): its received answers are kept under
	// it (see keptAnswer); "" outside an activity, which keeps none.
	callKey string
	// answers counts the answers this attempt has received or reused, for
	// the ordinal of the next one.
	answers int
	// keeping counts the answers being kept (keepAnswer); close waits for
	// them.
	keeping sync.WaitGroup
	// deferWrites keeps the successful calls' usage records in records,
	// for the activity's result, rather than writing them.
	deferWrites bool
	records     []models.LLMCallRecord
	// retryMax caps a provider's Retry-After (LLM_RETRY_MAX).
	retryMax time.Duration
	// tenant labels the cost metric (the run's RunOptions.Tenant).
	tenant string
	// thread is the run's thread id, its spans' gen_ai.conversation.id.
	thread string

	mu      sync.Mutex
	pending []models.Event
	// tailCall is the call whose delta the last pending event holds (0:
	// the last pending event is not a delta), so deltas of two calls of one
	// attempt (a decision asked again) never merge.
	tailCall int
	seq      int
	// keep stops sending: finish returns what is left instead.
	keep bool
	// announced says a batch has woken the stream pollers.
	announced atomic.Bool
	// signals counts the batches signalled, and lastSignal is when the
	// latest went: they pace a long stream (signalGap).
	signals    int
	lastSignal time.Time
	// lastFlush is when the latest batch started on its way.
	lastFlush time.Time
	interval  time.Duration
	// lease, when set, is the run's EventLease this attempt holds: batches
	// are numbered here from next on, stored and pushed (flushLeased), and
	// leased keeps every event under the lease, for the result. Guarded by
	// mu, but for leaseOff, which only the sending goroutine touches.
	lease  *models.EventLease
	leased []models.Event
	next   int64
	// leaseOff stops storing and pushing: the lease was claimed by another
	// attempt, or a write failed (the events then reach the streams with
	// the result only, so nothing after a gap is ever pushed).
	leaseOff bool
	// claimed says the attempt holds the lease in the store: a retried
	// attempt claims it as it starts (useLease), a first one with its
	// first write, which saves a call of a fast answer a transaction.
	claimed bool
	// answer is the call's answer record, stored with the attempt's last
	// events (saveWith), and saved says it was.
	answer *models.AnswerRecord
	saved  bool
	// unstored says a write under the lease failed (EventBatch.Unstored).
	unstored bool
	// keeps are received answers to keep (keepAnswer) with the lease's
	// next write.
	keeps   []store.KeptAnswer
	wake    chan struct{}
	done    chan struct{}
	stopped chan struct{}
}

func (a *Activities) newPublisher(ctx context.Context, runID string) *publisher {
	p := &publisher{
		a: a, runID: runID, producer: "local", attempt: 1,
		wake: make(chan struct{}, 1), done: make(chan struct{}), stopped: make(chan struct{}),
	}
	if activity.IsActivity(ctx) {
		info := activity.GetInfo(ctx)
		// The Temporal run id makes the producer unique across
		// continue-as-new, where activity ids start again from 1.
		p.callKey = fmt.Sprintf("%s/%s/%s", info.WorkflowExecution.ID, info.WorkflowExecution.RunID, info.ActivityID)
		p.producer = fmt.Sprintf("%s/%d", p.callKey, info.Attempt)
		p.attempt = info.Attempt
	}
	interval := a.FlushInterval
	if interval <= 0 {
		interval = DefaultFlushInterval
	}
	p.interval = interval
	// Sends outlive a cancelled activity context: the events of a
	// cancelled attempt still belong in the run's log.
	go p.run(context.WithoutCancel(ctx), interval)
	return p
}

// event builds an event; the workflow assigns its sequence.
func (p *publisher) event(source models.Source, category, action string, data map[string]any) models.Event {
	if data == nil {
		data = map[string]any{}
	}
	if category == models.CategoryLLM {
		// spec 000: every llm.* event carries the agent_id and content;
		// retries are told apart by attempt.
		data["agent_id"] = source.AgentID
		if _, ok := data["content"]; !ok {
			data["content"] = ""
		}
		data["attempt"] = p.attempt
	}
	return models.Event{
		RunID:     p.runID,
		Timestamp: models.FormatTimestamp(time.Now()),
		Source:    source,
		Event:     models.EventKind{Category: category, Action: action},
		Data:      data,
	}
}

// emitLast queues events that end the attempt: they go with whatever the
// attempt sends last (its final batch, or its result; see finish).
func (p *publisher) emitLast(events ...models.Event) {
	p.mu.Lock()
	p.pending = append(p.pending, events...)
	p.tailCall = 0
	p.mu.Unlock()
}

// emit queues events to be sent at once.
func (p *publisher) emit(events ...models.Event) {
	p.mu.Lock()
	p.pending = append(p.pending, events...)
	p.tailCall = 0
	p.mu.Unlock()
	p.flushSoon()
}

// delta queues streamed text (action llm.stream or llm.reasoning),
// appending to the previous event when it is the same agent's same kind of
// text. first says this is the call's first delta, which is sent at once.
func (p *publisher) delta(source models.Source, action, text string, extra map[string]any, first bool) {
	call := p.calls + 1 // the call in progress
	p.mu.Lock()
	if n := len(p.pending); n > 0 && p.tailCall == call {
		last := &p.pending[n-1]
		if last.Event.Action == action && last.Source.AgentID == source.AgentID {
			last.Data["content"] = last.Data["content"].(string) + text
			p.mu.Unlock()
			return
		}
	}
	data := map[string]any{"content": text}
	for k, v := range extra {
		data[k] = v
	}
	p.pending = append(p.pending, p.event(source, models.CategoryLLM, action, data))
	p.tailCall = call
	grace := firstDeltaGrace
	if p.lease != nil {
		grace = leasedFirstDeltaGrace
	}
	p.mu.Unlock()
	if first {
		// Shortly, not at once: an answer that is complete within the grace
		// (a short decision, a fast model) then goes in one batch, or in the
		// activity's result, rather than costing the run an extra signal
		// and workflow task, which would also hold back the activity's
		// completion behind it.
		time.AfterFunc(grace, p.flushSoon)
	}
}

// firstDeltaGrace is how long a call's first delta waits for more before it
// is sent. Measured against 1 and 5 ms (docs/performance.md): at 5 ms it was
// a sixth of the first token's way to a client at 20 runs; at 1 ms answers
// that arrive at once were split into two batches often enough to cost
// 1.5–2 ms per call; 2 ms keeps both.
const firstDeltaGrace = 2 * time.Millisecond

// leasedFirstDeltaGrace is firstDeltaGrace under an event lease, where a
// batch is a database write: an answer complete within it (a zero-delay
// model answers in about 2.5 ms here) costs one write with its answer
// record and kept answer, rather than two on the call's way; the first
// token still reaches a client in a few milliseconds.
const leasedFirstDeltaGrace = 5 * time.Millisecond

func (p *publisher) flushSoon() {
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

// close sends what is left and stops the sender. It returns once every
// queued event has been handed to the sink and every received answer is
// kept (keepAnswer): the activity returns, and so reports its completion,
// only after that.
func (p *publisher) close() {
	select {
	case <-p.done:
	default:
		close(p.done)
	}
	<-p.stopped
	p.keeping.Wait()
}

// finish ends a successful attempt. With keep, the events still queued are
// not signalled but returned, to travel in the activity's result: the
// workflow that called the activity appends them itself, which saves a
// signal and a workflow task per call. Batches already under way are
// delivered first, and the returned batch continues their numbering, so
// the run's log keeps the attempt's order and applies each batch once.
// Without keep it is close, and returns nil.
func (p *publisher) finish(keep bool) *models.EventBatch {
	if p.leasing() {
		// Everything is stored and pushed by close; the result carries
		// the lease's events as numbered.
		p.close()
		p.mu.Lock()
		defer p.mu.Unlock()
		if len(p.leased) == 0 {
			return nil
		}
		p.seq++
		return &models.EventBatch{Producer: p.producer, Seq: p.seq, Events: p.leased, Leased: true, Unstored: p.unstored}
	}
	if keep && p.streamed() && p.canDeliver() {
		// A streaming answer's last deltas go by update too: pushed, they
		// reach the streams now; in the result they would wait for the
		// next activity's announcement and a query. It costs one more
		// workflow task per streamed call, against a dozen a second while
		// it streams. Also while deliveries are slow (a lengthened flush
		// interval): kept in the result then, the tail of every answer
		// waited for a query behind the same queue, and the tokens' p99
		// grew (docs/performance.md, issue 28 round 4).
		keep = false
	}
	if !keep {
		p.close()
		return nil
	}
	p.mu.Lock()
	p.keep = true
	p.mu.Unlock()
	p.close()
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.pending) == 0 {
		return nil
	}
	p.seq++
	batch := &models.EventBatch{Producer: p.producer, Seq: p.seq, Events: p.pending}
	p.pending = nil
	if p.a.Metrics != nil {
		// Delivered with the result rather than by signal.
		for _, e := range batch.Events {
			p.a.Metrics.EventPublished(e.Event.Category, e.Event.Action)
		}
	}
	return batch
}

func (p *publisher) run(ctx context.Context, interval time.Duration) {
	defer close(p.stopped)
	// An activity starts after the workflow task that scheduled it, so the
	// events the workflow appended just before (its own, like
	// dispatch.team, and those the previous activity returned with its
	// result) can be read now, and nothing else would announce them. The
	// announcement waits a little: a batch signalled by then announces
	// them too, and the query it saves would land in the busiest moment of
	// a call, as it starts.
	announce := time.NewTimer(startAnnounceDelay)
	defer announce.Stop()
	t := time.NewTimer(interval)
	defer t.Stop()
	for {
		select {
		case <-p.wake:
		case <-t.C:
			// The interval follows the deliveries' latency (flushInterval),
			// counted from the start of the last batch.
			iv, _ := p.a.flushInterval()
			if wait := iv - time.Since(p.lastFlush); wait > 0 {
				t.Reset(wait)
				continue
			}
			t.Reset(iv)
		case <-announce.C:
			if !p.announced.Load() {
				p.a.notifyRun(ctx, p.runID)
			}
			continue
		case <-p.done:
			p.flush(ctx)
			return
		}
		// A long stream is paced (signalGap): deltas wait for the next
		// tick after the gap instead of going now.
		if time.Since(p.lastSignal) < signalGap(p.interval, p.signals) {
			continue
		}
		p.flush(ctx)
	}
}

// Pacing of a long stream. Every signal is an event in the run's history,
// and Temporal takes at most 10,000 signals per execution; the run
// continues as new once it has taken half that (or its history is long),
// but only between steps, so what the calls in flight send after that
// must stay bounded. The first fastSignals batches of an attempt go every
// flush interval; after that the gap doubles every slowStep batches, up to
// maxSignalGap. A call streaming at 100 ms for five minutes sends about
// 800 signals instead of 3,000: text of a long answer arrives in bigger
// pieces after its first half minute, and no call can flood the history.
const (
	fastSignals  = 300
	slowStep     = 100
	maxSignalGap = 5 * time.Second
)

// signalGap is the least time between the sent-th and the next signal of
// one attempt.
func signalGap(interval time.Duration, sent int) time.Duration {
	if sent < fastSignals {
		return 0
	}
	gap := interval
	for n := sent - fastSignals; n >= 0 && gap < maxSignalGap; n -= slowStep {
		gap *= 2
	}
	return min(gap, maxSignalGap)
}

// startAnnounceDelay is how long an activity waits before it announces the
// events that preceded it, unless a batch of its own has announced them.
const startAnnounceDelay = 25 * time.Millisecond

// flush sends the queued events as one batch. A failure is logged, not
// returned: an undelivered event must not fail the LLM call that caused it.
func (p *publisher) flush(ctx context.Context) {
	p.mu.Lock()
	if p.keep {
		p.mu.Unlock()
		return // finish takes what is left
	}
	events := p.pending
	if p.lease != nil {
		if len(events) == 0 && p.answer == nil && len(p.keeps) == 0 {
			p.mu.Unlock()
			return
		}
		p.pending, p.tailCall = nil, 0
		p.mu.Unlock()
		p.flushLeased(ctx, events)
		return
	}
	if len(events) == 0 || p.a.Events == nil {
		p.mu.Unlock()
		return
	}
	p.pending, p.tailCall = nil, 0
	p.seq++
	seq := p.seq
	p.mu.Unlock()
	p.lastFlush = time.Now()
	batch := models.EventBatch{Producer: p.producer, Seq: seq, Events: events}
	if !p.deliver(ctx, batch) {
		sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		if err := p.a.Events.PublishEvents(sctx, p.runID, batch); err != nil {
			p.a.Metrics.EventPublishFailed()
			p.a.logger(ctx).Warn("publish events", "run_id", p.runID, "events", len(events), "error", err)
			return
		}
		// The signal is in the run's history: Temporal answers a query
		// made now after the workflow task that applies it, so the query
		// sees these events.
		p.a.notifyRun(ctx, p.runID)
	}
	p.announced.Store(true)
	// Only the run goroutine flushes, so these need no lock.
	p.signals++
	p.lastSignal = time.Now()
	if p.a.Metrics != nil {
		for _, e := range events {
			p.a.Metrics.EventPublished(e.Event.Category, e.Event.Action)
		}
	}
}

// streamed reports whether the attempt has sent a batch already.
func (p *publisher) streamed() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.seq > 0
}

// canDeliver reports whether batches can go as updates whose events are
// pushed to the streams.
func (p *publisher) canDeliver() bool {
	_, ok := p.a.Events.(EventDeliverer)
	_, canPush := p.a.Notifier.(notify.Pusher)
	return ok && canPush && !p.a.updatesOff.Load() && time.Now().UnixNano() >= p.a.slowUpdatesUntil.Load()
}

// An update waits for the run's workflow task, and a call's end waits for
// its updates; a signal returns once the server has it. When updates get
// slow, the workers' workflow tasks are queueing (a saturated worker or
// server): the process then signals for a while, which keeps calls from
// waiting on that queue (measured: 100 runs at once took twice as long per
// run with updates throughout), and queries find the events as before.
const (
	slowUpdate        = 250 * time.Millisecond
	slowUpdateBackoff = 10 * time.Second
)

// deliver sends batch as an update and pushes the sequenced events to the
// API's streams. It reports false when the batch must go by signal: no
// Pusher to hand the events to (an update would only cost more history
// than a signal), updates switched off for the process, or a failed
// update (the limits of the run, a server without updates, a worker of an
// older version, a slow worker).
func (p *publisher) deliver(ctx context.Context, batch models.EventBatch) bool {
	if !p.canDeliver() {
		return false
	}
	sink, pusher := p.a.Events.(EventDeliverer), p.a.Notifier.(notify.Pusher)
	uctx, cancel := context.WithTimeout(ctx, updateTimeout)
	defer cancel()
	start := time.Now()
	d, err := sink.DeliverEvents(uctx, p.runID, batch)
	took := time.Since(start)
	if err == nil || errors.Is(err, context.DeadlineExceeded) {
		p.a.deliveryTook(took)
	}
	if took > slowUpdate || errors.Is(err, context.DeadlineExceeded) {
		p.a.slowUpdatesUntil.Store(time.Now().Add(slowUpdateBackoff).UnixNano())
		p.a.logger(ctx).Debug("event updates are slow; signalling for a while", "took", took, "error", err)
	}
	if err != nil {
		var unimplemented *serviceerror.Unimplemented
		var denied *serviceerror.PermissionDenied
		if errors.As(err, &unimplemented) || errors.As(err, &denied) {
			// The server or namespace takes no updates: stop trying.
			if p.a.updatesOff.CompareAndSwap(false, true) {
				p.a.logger(ctx).Warn("event updates refused by the server; events go by signal", "error", err)
			}
		}
		p.a.logger(ctx).Debug("event update failed; signalling the batch", "run_id", p.runID, "error", err)
		return false
	}
	if d.First == 0 {
		p.a.notifyRun(ctx, p.runID) // applied already; nothing new to push
		return true
	}
	payload, err := json.Marshal(d.Sequenced(batch.Events))
	if err != nil {
		p.a.notifyRun(ctx, p.runID)
		return true
	}
	pusher.Push(ctx, p.runID, payload)
	return true
}

// notifyRun tells the API's stream pollers that runID has news worth a
// query; a no-op without a Notifier. Call it only after the news is in the
// workflow (a signal delivered, an activity started, a status written):
// the query it causes must find it.
func (a *Activities) notifyRun(ctx context.Context, runID string) {
	if a.Notifier != nil {
		a.Notifier.Notify(ctx, runID)
	}
}

// useLease makes the attempt the writer of the run's events under lease
// (models.EventLease; nil: events go to the workflow as before). It claims
// the lease in the store, which stores the events the lease carries and
// fences out earlier attempts, and continues after what they stored. A
// failed claim fails the attempt, before any model call: Temporal retries
// it.
func (p *publisher) useLease(ctx context.Context, lease *models.EventLease) error {
	if lease == nil || p.a.Store == nil || p.callKey == "" {
		return nil
	}
	if p.attempt <= 1 {
		// Nothing is stored under the lease yet: the first write claims it.
		p.mu.Lock()
		p.lease, p.next = lease, lease.From
		p.mu.Unlock()
		return nil
	}
	prior, err := p.a.Store.ClaimEventLease(ctx, p.runID, p.callKey, p.producer, lease.From, lease.Events, lease.Forget)
	if err == nil {
		err = p.a.queueWebhooks(ctx, lease.Events)
	}
	if err != nil {
		return fmt.Errorf("claim the run's event lease: %w", err)
	}
	for i, e := range prior {
		if e.Sequence != lease.From+int64(i) {
			return fmt.Errorf("claim the run's event lease: stored events from %d have a gap at %d", lease.From, lease.From+int64(i))
		}
	}
	p.mu.Lock()
	p.lease, p.leased, p.next, p.claimed = lease, prior, lease.From+int64(len(prior)), true
	p.mu.Unlock()
	if len(prior) > 0 {
		// An earlier attempt's events are stored and were pushed: the
		// streams have what came before this attempt.
		p.announced.Store(true)
	}
	return nil
}

// finishSaving is finish that, under a lease and with deferred writes,
// stores the call's answer record rec with the last events, and says
// whether it did: the workflow then skips its SaveAnswer step.
func (p *publisher) finishSaving(keep, deferWrites bool, rec models.AnswerRecord) (*models.EventBatch, bool) {
	if deferWrites && (len(rec.Calls) > 0 || rec.MessageID != "") {
		p.saveWith(rec)
	}
	batch := p.finish(keep)
	return batch, p.answerSaved()
}

// keepWithLease has a received answer kept (keepAnswer) with the lease's
// next write, in its transaction: the attempt's last events, most often,
// which follow at once. It reports false without a lease in use; the
// caller keeps the answer on its own then. A write that comes later than
// keepSoon (the attempt asks the model again, or runs tools) is made
// for it.
func (p *publisher) keepWithLease(k store.KeptAnswer) bool {
	p.mu.Lock()
	if p.lease == nil || p.unstored {
		p.mu.Unlock()
		return false
	}
	p.keeps = append(p.keeps, k)
	p.mu.Unlock()
	time.AfterFunc(keepSoon, p.flushSoon)
	return true
}

// keepSoon bounds how long a received answer waits to be kept with the
// lease's next write.
const keepSoon = 5 * time.Millisecond

// keepAlone keeps answers that a leased write did not take, each in a
// transaction of its own (as keepAnswer does without a lease).
func (p *publisher) keepAlone(ctx context.Context, keeps []store.KeptAnswer) {
	for _, k := range keeps {
		kctx, cancel := context.WithTimeout(ctx, keptAnswerTimeout)
		if err := p.a.Store.KeepAnswer(kctx, k); err != nil {
			p.a.logger(ctx).Warn("keep LLM answer", "run_id", p.runID, "llm_call_id", k.Record.ID, "error", err)
		}
		cancel()
	}
}

// saveWith has the call's answer record stored with the attempt's last
// events, under the lease (a no-op without one); answerSaved then says
// whether it was, so the workflow need not store it (SaveAnswer).
func (p *publisher) saveWith(rec models.AnswerRecord) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.lease != nil {
		p.answer = &rec
	}
}

func (p *publisher) answerSaved() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.saved
}

func (p *publisher) leasing() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.lease != nil
}

// flushLeased numbers a batch under the lease, stores it and pushes it to
// the streams: no workflow task on a token's way to a client. The store
// write is what the flush interval follows then (deliveryTook).
func (p *publisher) flushLeased(ctx context.Context, events []models.Event) {
	p.mu.Lock()
	first := len(p.leased) == 0
	kept := events[:0:0]
	for _, e := range events {
		if models.UsageReported(p.leased, e) {
			continue // a kept answer's usage, reported by an earlier attempt
		}
		e.Sequence = p.next
		p.next++
		kept = append(kept, e)
	}
	p.leased = append(p.leased, kept...)
	w := store.LeaseWrite{RunID: p.runID, CallKey: p.callKey, Producer: p.producer, From: p.lease.From, Claim: !p.claimed, Events: kept, Answer: p.answer, Keep: p.keeps}
	if w.Claim {
		w.Carried, w.Forget = p.lease.Events, p.lease.Forget
	}
	carried := p.lease.Events
	p.answer, p.keeps = nil, nil
	p.mu.Unlock()
	p.signals++
	p.lastSignal = time.Now()
	if p.leaseOff {
		p.keepAlone(ctx, w.Keep)
		return
	}
	if len(kept) == 0 && w.Answer == nil && len(w.Keep) == 0 {
		return
	}
	sctx, cancel := context.WithTimeout(ctx, updateTimeout)
	defer cancel()
	start := time.Now()
	held, err := p.a.Store.WriteLeased(sctx, w)
	p.a.deliveryTook(time.Since(start))
	switch {
	case err != nil:
		p.leaseOff = true
		p.mu.Lock()
		p.unstored = true
		p.mu.Unlock()
		p.a.logger(ctx).Warn("store leased events; the rest of the call's events go with its result", "run_id", p.runID, "error", err)
		p.keepAlone(ctx, w.Keep)
		return
	case !held:
		p.leaseOff = true
		p.a.logger(ctx).Info("event lease claimed by a later attempt; this attempt stops storing events", "run_id", p.runID, "producer", p.producer)
		p.keepAlone(ctx, w.Keep)
		return
	}
	p.mu.Lock()
	p.claimed, p.saved = true, p.saved || w.Answer != nil
	p.mu.Unlock()
	if p.a.Metrics != nil {
		for _, e := range kept {
			p.a.Metrics.EventPublished(e.Event.Category, e.Event.Action)
		}
	}
	webhookEvents := kept
	if w.Claim {
		webhookEvents = append(append([]models.Event(nil), w.Carried...), kept...)
	}
	if err := p.a.queueWebhooks(ctx, webhookEvents); err != nil {
		// The workflow's own store step queues them again (once).
		p.mu.Lock()
		p.unstored = true
		p.mu.Unlock()
		p.a.logger(ctx).Warn("queue webhooks of leased events", "run_id", p.runID, "error", err)
	}
	p.announced.Store(true)
	if len(kept) == 0 { // the answer alone
		if _, ok := p.a.Notifier.(notify.Pusher); !ok {
			p.a.notifyRun(ctx, p.runID)
		}
		return
	}
	if first && len(carried) > 0 {
		kept = append(append([]models.Event(nil), carried...), kept...)
	}
	if !p.a.push(ctx, kept) {
		p.a.notifyRun(ctx, p.runID) // no Pusher: the pollers ask the store (lease_from)
	}
}

// ReleaseEventLease takes a run's event lease back after the activity
// holding it failed (a local activity of the run's workflow): it fences
// out attempts still running, stores the events the lease carried and
// returns what the attempts stored under it, for the run's log.
func (a *Activities) ReleaseEventLease(ctx context.Context, in models.ReleaseLeaseInput) ([]models.Event, error) {
	if a.Store == nil {
		return nil, nil // a worker without the store takes no lease (useLease)
	}
	stored, err := a.Store.ReleaseEventLease(ctx, in.RunID, in.Lease.From, in.Lease.Events)
	if err != nil {
		return nil, err
	}
	if err := a.queueWebhooks(ctx, append(append([]models.Event(nil), in.Lease.Events...), stored...)); err != nil {
		return nil, err
	}
	return stored, nil
}
