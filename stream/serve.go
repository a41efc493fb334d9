package stream

import (
	"context"
	"time"

	"github.com/op-stack/executor/models"
	"github.com/op-stack/executor/store"
)

const (
	// writeStallTimeout drops a subscriber whose client has stopped reading
	// for this long: its handler would otherwise block in a write forever.
	// It bounds one write, never the length of a stream.
	writeStallTimeout = time.Minute
	// shutdownWriteGrace is how long Close lets a handler write its last
	// message.
	shutdownWriteGrace = time.Second
	// backlogAttempts is how often a subscriber retries reading older
	// events before it ends its stream (the client then resumes).
	backlogAttempts = 5
)

// Message is one message to a client: its event name, its data (JSON) and
// its id, the sequence of the event it comes from (0: none, for all but the
// last message made from one event, so that a client resumes after the
// whole event). SSE, when set, is the whole SSE message, encoded once; else
// the SSE transport encodes the message itself.
type Message struct {
	ID   int64
	Name string
	Data []byte
	SSE  []byte
}

// Encoder turns the frames of a run's log into one protocol's messages.
// One encoder serves one stream: it may keep state from frame to frame.
type Encoder interface {
	// Encode returns the messages that f adds, in order; none when f has
	// no counterpart in the protocol. The messages are valid until the
	// next call: the transport has written them by then.
	Encode(f Frame) ([]Message, error)
}

// Replayer is an Encoder whose messages depend on what came before in the
// log: Serve reads the log from its first event whatever the resume point,
// passes the events up to the resume point to Replay, and the rest to
// Encode, so that every subscriber sees the same messages for the same
// sequence numbers.
type Replayer interface {
	Encoder
	// Replay takes f into the encoder's state, as Encode would, for an
	// event the client already has.
	Replay(f Frame) error
}

// Transport is one open stream's connection to its client: SSE (OpenSSE)
// or WebSocket (AcceptWebSocket). The hub tracks it from its opening, so
// that Close reaches it.
type Transport interface {
	// write sends messages, which may wait in a buffer until flush.
	write(msgs []Message) error
	flush() error
	// deadline bounds the next writes.
	deadline()
	keepAlive() error
	// writeShutdown tells the client that the server is going away.
	writeShutdown()
	// shutdown makes a blocked write return soon (Close).
	shutdown()
	// finish releases the transport once the handler is done with it;
	// complete says the client has every event of the run.
	finish(complete bool)
}

// Serve sends the run's events after resume (the last sequence the client
// has) to conn, encoded by enc, and returns right after the run's terminal
// event, when ctx ends (the client left, or its credential was revoked),
// when the hub closes (after telling the client to reconnect), or when
// the stream fails (the client resumes). A finished run is read from the
// database; a live one from the run's shared feed, and the database for
// what the feed no longer (or not yet) holds. Serve releases conn before
// it returns. The run is the store's: events are read under its key
// (run.ID) and shown with its public id (run.PublicID).
func (h *Hub) Serve(ctx context.Context, conn Transport, run *store.Run, enc Encoder, resume int64) {
	sub := &subscriber{conn: conn, enc: enc}
	cursor := resume
	if r, ok := enc.(Replayer); ok {
		sub.replay, sub.resume = r, resume
		cursor = 0
	}
	defer func() { h.closeConn(sub.conn, sub.complete) }()
	select {
	case <-h.closing:
		sub.conn.writeShutdown()
		return
	default:
	}
	if models.IsTerminal(run.Status) {
		// Every event of a finished run is stored: no worker is woken.
		h.streamStored(ctx, sub, run, cursor)
		return
	}
	h.streamLive(ctx, sub, run, cursor, resume)
}

// streamStored sends a finished run's events from the database.
func (h *Hub) streamStored(ctx context.Context, conn *subscriber, run *store.Run, cursor int64) {
	runID := run.ID
	for {
		evs, err := h.store.ListEvents(ctx, runID, store.EventFilter{After: cursor, Limit: storePageSize})
		if err != nil {
			h.logStreamError(ctx, runID, err)
			return
		}
		frames := make([]Frame, 0, len(evs))
		for _, e := range evs {
			fr, err := encodeFrame(e, run.PublicID)
			if err != nil {
				h.logStreamError(ctx, runID, err)
				return
			}
			frames = append(frames, fr)
		}
		var terminal bool
		if cursor, terminal, err = conn.send(frames, cursor); err != nil || terminal || len(evs) < storePageSize {
			conn.complete = conn.complete || err == nil
			return
		}
		select {
		case <-h.closing:
			conn.writeShutdown()
			return
		default:
		}
	}
}

// streamLive sends a live run's events from the run's shared feed,
// reading what the feed no longer (or not yet) holds from the database.
// cursor is the last event the subscriber has read, resume the last one
// its client has (they differ for a Replayer, which reads from the start).
func (h *Hub) streamLive(ctx context.Context, conn *subscriber, run *store.Run, cursor, resume int64) {
	f := h.acquire(run.ID, run.PublicID, run.WorkflowID, resume)
	defer h.release(f)
	keepAlive := time.NewTimer(h.opts.KeepAlive)
	defer keepAlive.Stop()
	failures := 0
	for {
		select {
		case <-h.closing:
			conn.writeShutdown()
			return
		case <-ctx.Done():
			return
		default:
		}
		frames, behind, done, changed := f.read(cursor)
		if behind > 0 {
			var err error
			if frames, err = h.backlog(ctx, run.ID, run.PublicID, run.WorkflowID, cursor, behind); err != nil {
				if failures++; failures >= backlogAttempts || ctx.Err() != nil {
					h.logStreamError(ctx, run.ID, err)
					return
				}
				if !sleepCtx(ctx, time.Duration(failures)*100*time.Millisecond) {
					return
				}
				continue
			}
			failures = 0
		}
		if len(frames) > 0 {
			var (
				terminal bool
				err      error
			)
			if cursor, terminal, err = conn.send(frames, cursor); err != nil || terminal {
				return
			}
			keepAlive.Reset(h.opts.KeepAlive)
			continue
		}
		if done {
			conn.complete = true
			return
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return
		case <-h.closing:
			conn.writeShutdown()
			return
		case <-keepAlive.C:
			if conn.conn.keepAlive() != nil {
				return
			}
			keepAlive.Reset(h.opts.KeepAlive)
		}
	}
}

func (h *Hub) logStreamError(ctx context.Context, runID string, err error) {
	if ctx.Err() == nil {
		h.log.WarnContext(ctx, "event stream ended early", "run_id", runID, "error", err)
	}
}

func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// Close makes every open event stream write a final message (SSE: a
// comment with a retry hint; WebSocket: a going-away close) and return
// promptly, and answers later streams the same way, so that
// http.Server.Shutdown need not wait for streams that would otherwise last
// as long as their runs. Clients then reconnect from their last sequence,
// to this or another replica, and continue with no gap and no duplicate.
// It does not wait for the handlers to return.
func (h *Hub) Close() {
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		return
	}
	h.closed = true
	close(h.closing)
	conns := make([]Transport, 0, len(h.conns))
	for c := range h.conns {
		conns = append(conns, c)
	}
	for _, f := range h.feeds {
		if f.refs == 0 {
			h.drop(f)
		}
	}
	h.mu.Unlock()
	for _, c := range conns {
		// A handler blocked writing to a client that stopped reading
		// returns within the grace instead of the stall timeout.
		c.shutdown()
	}
}

// track registers a transport just opened, so that Close reaches it, and
// reports whether Close has already run.
func (h *Hub) track(conn Transport) (closing bool) {
	h.subscribers.Add(1)
	h.mu.Lock()
	defer h.mu.Unlock()
	h.conns[conn] = struct{}{}
	return h.closed
}

func (h *Hub) closeConn(conn Transport, complete bool) {
	h.mu.Lock()
	delete(h.conns, conn)
	h.mu.Unlock()
	conn.finish(complete)
	h.subscribers.Add(-1)
}

// subscriber is one open stream: an encoder over a transport.
type subscriber struct {
	conn Transport
	enc  Encoder
	// replay, if set, takes the events up to resume, the last one the
	// client has, which Serve reads for it from the log's start.
	replay Replayer
	resume int64
	// complete says the client has every event of the run: it ends the
	// stream normally.
	complete bool
}

// send writes the frames after cursor, stopping after a terminal event,
// and flushes: the messages sent together are those that were ready
// together, so none waits in a buffer. It returns the new cursor.
func (s *subscriber) send(frames []Frame, cursor int64) (int64, bool, error) {
	s.conn.deadline()
	for _, fr := range frames {
		if fr.Seq <= cursor {
			continue
		}
		if s.replay != nil && fr.Seq <= s.resume {
			if err := s.replay.Replay(fr); err != nil {
				return cursor, false, err
			}
		} else {
			msgs, err := s.enc.Encode(fr)
			if err != nil {
				return cursor, false, err
			}
			if err := s.conn.write(msgs); err != nil {
				return cursor, false, err
			}
		}
		cursor = fr.Seq
		if fr.Terminal {
			s.complete = true
			return cursor, true, s.conn.flush()
		}
	}
	return cursor, false, s.conn.flush()
}

func (s *subscriber) writeShutdown() { s.conn.writeShutdown() }
