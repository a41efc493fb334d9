package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/op-stack/executor/auth"
	"github.com/op-stack/executor/models"
	"github.com/op-stack/executor/store"
)

const (
	// writeStallTimeout drops a subscriber whose client has stopped reading
	// for this long: its handler would otherwise block in a write forever.
	// It bounds one write, never the length of a stream.
	writeStallTimeout = time.Minute
	// shutdownWriteGrace is how long CloseStreams lets a handler write its
	// last message.
	shutdownWriteGrace = time.Second
	// backlogAttempts is how often a subscriber retries reading older
	// events before it ends its stream (the client then resumes).
	backlogAttempts = 5
)

// shutdownMessage tells an EventSource to reconnect after a second; it
// resumes with Last-Event-ID, on this or another replica.
const shutdownMessage = ": server shutting down; reconnect with Last-Event-ID\nretry: 1000\n\n"

// keepAliveMessage is an SSE comment: clients ignore it, proxies see
// traffic.
const keepAliveMessage = ": keep-alive\n\n"

type streamInput struct {
	runIDInput
	After *int64 `json:"after"`
}

// streamRunPOST is runs/stream (contract 002): {"id","after"}.
func (s *Server) streamRunPOST(c *gin.Context) {
	in, id, valid := readIDBody[streamInput](s, c)
	if !valid {
		return
	}
	// Reading the body to its end lets net/http watch the connection, so
	// the request's context ends when the client goes away.
	_, _ = io.Copy(io.Discard, c.Request.Body)
	s.streamRun(c, id, in.After)
}

// streamRunGET is GET runs/:id/stream?after=N, for browsers' EventSource,
// which can only GET and resumes by sending Last-Event-ID.
func (s *Server) streamRunGET(c *gin.Context) {
	if id, after, ok := s.streamGETParams(c); ok {
		s.streamRun(c, id, after)
	}
}

// streamGETParams reads a GET stream's :id and ?after=.
func (s *Server) streamGETParams(c *gin.Context) (string, *int64, bool) {
	id := strings.TrimSpace(c.Param("id"))
	if id == "" {
		s.writeError(c, models.FieldError("id", "is required"))
		return "", nil, false
	}
	var after *int64
	if v, present := c.GetQuery("after"); present && v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			s.writeError(c, models.FieldError("after", "must be an integer, got %q", v))
			return "", nil, false
		}
		after = &n
	}
	return id, after, true
}

// v1StreamGET is spec 001's GET /executions/:id/stream: the same log as
// spec 001's events (stream_v1.go), with the same ids and resume.
func (s *Server) v1StreamGET(c *gin.Context) {
	if id, after, ok := s.streamGETParams(c); ok {
		s.serveStream(c, id, after, streamSpec001, transportSSE)
	}
}

// resumePoint is the sequence a stream continues after: Last-Event-ID
// (what a reconnecting EventSource sends), else after, else 0.
func resumePoint(c *gin.Context, after *int64) (int64, error) {
	if v := strings.TrimSpace(c.GetHeader("Last-Event-ID")); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			return 0, models.FieldError("Last-Event-ID", "must be an event's sequence number, got %q", v)
		}
		return n, nil
	}
	if after == nil {
		return 0, nil
	}
	if *after < 0 {
		return 0, models.FieldError("after", "must not be negative, got %d", *after)
	}
	return *after, nil
}

// Stream formats and transports.
const (
	streamContract002 = iota // the executor's events (contract 002)
	streamSpec001            // spec 001's events
)

const (
	transportSSE = iota
	transportWebSocket
)

// streamRun answers with the run's events after the resume point as
// Server-Sent Events, in contract 002's format.
func (s *Server) streamRun(c *gin.Context, id string, after *int64) {
	s.serveStream(c, id, after, streamContract002, transportSSE)
}

// serveStream answers with the run's events after the resume point, in
// format over transport, and returns right after the run's terminal
// event. Errors found before the first byte (or before the WebSocket
// upgrade) are the usual JSON errors.
func (s *Server) serveStream(c *gin.Context, id string, after *int64, format, transport int) {
	resume, err := resumePoint(c, after)
	if err != nil {
		s.writeError(c, err)
		return
	}
	ctx := c.Request.Context()
	run, err := s.visibleRun(ctx, id)
	if err != nil {
		s.writeError(c, err)
		return
	}
	if format == streamSpec001 && !runStreams(run) {
		// Spec 001's enable_streaming / stream_events false: this
		// execution is polled, not streamed (contract 002's stream of the
		// run, the executor's log, still serves).
		s.writeError(c, models.Errorf(models.CodeStreamingDisabled, "execution %q was started with streaming off (execution_config.stream_events false, or its team's global_config.enable_streaming false); poll GET %s/executions/%s and read its results", run.PublicID, V1Prefix, run.PublicID))
		return
	}
	live := !models.IsTerminal(run.Status)
	if live && s.streams.querier == nil {
		s.writeError(c, models.Errorf(models.CodeUnavailable, "live runs are not streamed by this process"))
		return
	}
	sub := &subscriber{format: &format002{}}
	cursor := resume
	if format == streamSpec001 {
		// Spec 001's events depend on what came before: the log is read
		// from its start and sent after the resume point.
		sub.format = &formatV1{tr: newV1Translator(run.PublicID, run.HierarchyID, s.teamIDsByName(ctx, run)), resume: resume}
		cursor = 0
	}
	h := s.streams
	switch transport {
	case transportWebSocket:
		ws, wctx, err := h.openWS(c, s.access.CORSOrigins)
		if err != nil {
			return // Accept has answered
		}
		ctx, sub.conn = wctx, ws
	default:
		sub.conn = h.open(c)
	}
	defer func() { h.closeConn(sub.conn, sub.complete) }()
	ctx, stopWatching := s.watchCredential(c, ctx, run.ID)
	defer stopWatching()
	select {
	case <-h.closing:
		sub.conn.writeShutdown()
		return
	default:
	}
	if !live {
		// Every event of a finished run is stored: no worker is woken.
		s.streamStored(ctx, sub, run, cursor)
		return
	}
	s.streamLive(ctx, sub, run, cursor, resume)
}

// streamStored sends a finished run's events from the database.
func (s *Server) streamStored(ctx context.Context, conn *subscriber, run *store.Run, cursor int64) {
	runID := run.ID
	for {
		evs, err := s.store.ListEvents(ctx, runID, store.EventFilter{After: cursor, Limit: storePageSize})
		if err != nil {
			s.logStreamError(ctx, runID, err)
			return
		}
		frames := make([]frame, 0, len(evs))
		for _, e := range evs {
			fr, err := encodeFrame(e, run.PublicID)
			if err != nil {
				s.logStreamError(ctx, runID, err)
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
		case <-s.streams.closing:
			conn.writeShutdown()
			return
		default:
		}
	}
}

// streamLive sends a live run's events from the run's shared feed,
// reading what the feed no longer (or not yet) holds from the database.
// cursor is the last event the subscriber has read, resume the last one
// its client has (they differ for spec 001's events, read from the start).
func (s *Server) streamLive(ctx context.Context, conn *subscriber, run *store.Run, cursor, resume int64) {
	h := s.streams
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
					s.logStreamError(ctx, run.ID, err)
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

// watchCredential returns ctx cancelled once the request's credential
// (its credentialCheck) is found invalid: revoked, expired, or a stream
// token whose key was revoked. It checks every CredentialCheckInterval; a
// check that fails otherwise (the database is down) leaves the stream
// open, as an outage is no revocation. stop ends the watch.
func (s *Server) watchCredential(c *gin.Context, ctx context.Context, runID string) (_ context.Context, stop func()) {
	v, _ := c.Get(credentialCheckKey)
	check, _ := v.(credentialCheck)
	if check == nil {
		return ctx, func() {}
	}
	// Read now: gin reuses c once the handler returns.
	keyID := principal(c).KeyID
	ctx, cancel := context.WithCancel(ctx)
	every := s.streams.opts.CredentialCheckInterval
	go func() {
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			cctx, ccancel := context.WithTimeout(ctx, every)
			err := check(cctx)
			ccancel()
			if errors.Is(err, auth.ErrInvalidCredentials) {
				s.log.InfoContext(ctx, "event stream ended: its credential was revoked or expired", "run_id", runID, "key_id", keyID)
				cancel()
				return
			}
		}
	}()
	return ctx, cancel
}

func (s *Server) logStreamError(ctx context.Context, runID string, err error) {
	if ctx.Err() == nil {
		s.log.WarnContext(ctx, "event stream ended early", "run_id", runID, "error", err)
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

// CloseStreams makes every open event stream write a final comment with a
// retry hint and return promptly, and answers later stream requests the
// same way, so that http.Server.Shutdown need not wait for streams that
// would otherwise last as long as their runs. Clients then reconnect with
// Last-Event-ID (EventSource does so by itself), to this or another
// replica, and continue with no gap and no duplicate. Call it before
// http.Server.Shutdown; it does not wait for the handlers to return. It
// ends the MCP server's sessions as well (mcpserve.Handler.Close).
func (s *Server) CloseStreams() {
	h := s.streams
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		return
	}
	h.closed = true
	close(h.closing)
	if s.mcp != nil {
		// MCP sessions' streams too (their tool calls, which follow runs
		// through the hub, have just been told to stop).
		defer s.mcp.Close()
	}
	conns := make([]streamConn, 0, len(h.conns))
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

// streamConn is one open event stream's transport.
type streamConn interface {
	// write sends messages, which may wait in a buffer until flush.
	write(msgs []outMsg) error
	flush() error
	// deadline bounds the next writes.
	deadline()
	keepAlive() error
	// writeShutdown tells the client that the server is going away.
	writeShutdown()
	// shutdown makes a blocked write return soon (CloseStreams).
	shutdown()
	// finish releases the transport once the handler is done with it;
	// complete says the client has every event of the run.
	finish(complete bool)
}

// outMsg is one message to a client: its event name, its data (JSON) and
// its id, the sequence of the event it comes from (0: none, for all but the
// last message made from one event, so that an EventSource resumes after
// the whole event). sse, when set, is the whole SSE message, encoded once.
type outMsg struct {
	id   int64
	name string
	data []byte
	sse  []byte
}

// streamFormat turns frames of the run's log into messages.
type streamFormat interface {
	messages(fr frame) ([]outMsg, error)
}

// format002 sends the events as they are (contract 002). Its messages are
// valid until the next call: the transport has written them by then.
type format002 struct{ buf [1]outMsg }

func (f *format002) messages(fr frame) ([]outMsg, error) {
	f.buf[0] = outMsg{id: fr.seq, name: fr.name, data: fr.data, sse: fr.msg}
	return f.buf[:], nil
}

// formatV1 sends spec 001's events, translating the log from its start and
// sending what follows resume.
type formatV1 struct {
	tr     *v1Translator
	resume int64
}

func (f *formatV1) messages(fr frame) ([]outMsg, error) {
	var e models.Event
	if err := json.Unmarshal(fr.data, &e); err != nil {
		return nil, fmt.Errorf("decode event %d: %w", fr.seq, err)
	}
	evs := f.tr.translate(e)
	if fr.seq <= f.resume || len(evs) == 0 {
		return nil, nil
	}
	out := make([]outMsg, 0, len(evs))
	for i, ev := range evs {
		ev.Data["event_type"] = ev.Type
		data, err := json.Marshal(ev.Data)
		if err != nil {
			return nil, fmt.Errorf("encode event %d: %w", fr.seq, err)
		}
		m := outMsg{name: ev.Type, data: data}
		if i == len(evs)-1 {
			m.id = fr.seq
		}
		out = append(out, m)
	}
	return out, nil
}

// subscriber is one open stream: a format over a transport.
type subscriber struct {
	conn   streamConn
	format streamFormat
	// complete says the client has every event of the run: it ends the
	// stream normally.
	complete bool
}

// send writes the frames after cursor, stopping after a terminal event,
// and flushes: the messages sent together are those that were ready
// together, so none waits in a buffer. It returns the new cursor.
func (s *subscriber) send(frames []frame, cursor int64) (int64, bool, error) {
	s.conn.deadline()
	for _, fr := range frames {
		if fr.seq <= cursor {
			continue
		}
		msgs, err := s.format.messages(fr)
		if err != nil {
			return cursor, false, err
		}
		if err := s.conn.write(msgs); err != nil {
			return cursor, false, err
		}
		cursor = fr.seq
		if fr.terminal {
			s.complete = true
			return cursor, true, s.conn.flush()
		}
	}
	return cursor, false, s.conn.flush()
}

func (s *subscriber) writeShutdown() { s.conn.writeShutdown() }

// sseConn is one open event stream's response.
type sseConn struct {
	w  gin.ResponseWriter
	rc *http.ResponseController

	mu       sync.Mutex
	closing  bool // CloseStreams was called: writes get a short deadline
	finished bool // the handler has returned: the response must not be touched
}

// open starts the SSE response: headers, flushed at once so that clients
// see the stream open before the first event.
func (h *hub) open(c *gin.Context) *sseConn {
	hdr := c.Writer.Header()
	hdr.Set("Content-Type", "text/event-stream")
	hdr.Set("Cache-Control", "no-cache")
	hdr.Set("Connection", "keep-alive")
	hdr.Set("X-Accel-Buffering", "no")
	c.Status(http.StatusOK)
	conn := &sseConn{w: c.Writer, rc: http.NewResponseController(c.Writer)}
	h.subscribers.Add(1)
	h.mu.Lock()
	h.conns[conn] = struct{}{}
	conn.closing = h.closed // CloseStreams ran after this request began
	h.mu.Unlock()
	conn.deadline()
	c.Writer.WriteHeaderNow()
	_ = conn.rc.Flush()
	return conn
}

func (h *hub) closeConn(conn streamConn, complete bool) {
	h.mu.Lock()
	delete(h.conns, conn)
	h.mu.Unlock()
	conn.finish(complete)
	h.subscribers.Add(-1)
}

func (c *sseConn) finish(bool) {
	conn := c
	conn.mu.Lock()
	conn.finished = true
	// The connection may serve further requests: it must not keep our
	// deadline.
	_ = conn.rc.SetWriteDeadline(time.Time{})
	conn.mu.Unlock()
}

// deadline bounds the next writes: a client that stopped reading must not
// hold its handler forever.
func (c *sseConn) deadline() {
	c.mu.Lock()
	defer c.mu.Unlock()
	d := writeStallTimeout
	if c.closing {
		d = shutdownWriteGrace
	}
	_ = c.rc.SetWriteDeadline(time.Now().Add(d))
}

func (c *sseConn) shutdown() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.finished {
		return
	}
	c.closing = true
	_ = c.rc.SetWriteDeadline(time.Now().Add(shutdownWriteGrace))
}

func (c *sseConn) write(msgs []outMsg) error {
	for _, m := range msgs {
		msg := m.sse
		if msg == nil {
			msg = sseMessage(m)
		}
		if _, err := c.w.Write(msg); err != nil {
			return err
		}
	}
	return nil
}

// sseMessage encodes m as an SSE message.
func sseMessage(m outMsg) []byte {
	var b bytes.Buffer
	b.Grow(len(m.data) + 64)
	if m.id > 0 {
		b.WriteString("id: ")
		b.WriteString(strconv.FormatInt(m.id, 10))
		b.WriteString("\n")
	}
	b.WriteString("event: ")
	b.WriteString(lineBreaks.Replace(m.name))
	b.WriteString("\ndata: ")
	b.Write(m.data) // json.Marshal output holds no raw line breaks
	b.WriteString("\n\n")
	return b.Bytes()
}

func (c *sseConn) flush() error { return c.rc.Flush() }

func (c *sseConn) keepAlive() error { return c.writeRaw(keepAliveMessage) }

func (c *sseConn) writeRaw(msg string) error {
	c.deadline()
	if _, err := c.w.WriteString(msg); err != nil {
		return err
	}
	return c.rc.Flush()
}

func (c *sseConn) writeShutdown() { _ = c.writeRaw(shutdownMessage) }
