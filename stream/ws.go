package stream

import (
	"context"
	"net/http"
	"sync"
	"time"

	"github.com/coder/websocket"
)

// WebSocket event push: the same events as the SSE streams, one text
// message per event (its JSON, which carries its sequence), from the same
// shared feed of the run; the client resumes with ?after=<sequence> (or a
// Last-Event-ID header). The socket is push-only: a data message from the
// client closes it. After the run's terminal event the server closes it
// with status 1000 (normal closure); when the server shuts down, with 1001
// (going away); when the stream fails, with 1011; after either the client
// reconnects with ?after=.

// wsConn is one open WebSocket event stream.
type wsConn struct {
	c *websocket.Conn
	// ctx ends when the connection does (CloseRead) or, after shutdown,
	// once the grace has passed, so that a blocked write returns.
	ctx    context.Context
	cancel context.CancelFunc

	mu       sync.Mutex
	closing  bool
	finished bool
	timer    *time.Timer
	closed   bool // a close frame has been sent
}

// AcceptWebSocket upgrades the request to a WebSocket stream. On error,
// the upgrade has answered the request. origins are the CORS allow-list: a
// browser page of another origin than the API's own must be listed. The
// context it returns ends with the connection: Serve's must derive from it,
// as the request's no longer follows the hijacked connection.
func (h *Hub) AcceptWebSocket(w http.ResponseWriter, r *http.Request, origins []string) (Transport, context.Context, error) {
	ws, err := websocket.Accept(w, r, &websocket.AcceptOptions{OriginPatterns: origins})
	if err != nil {
		return nil, nil, err
	}
	// The request's context no longer follows the connection once it is
	// hijacked: CloseRead's does, and it reads (and answers) pings.
	ctx, cancel := context.WithCancel(ws.CloseRead(context.Background()))
	conn := &wsConn{c: ws, ctx: ctx, cancel: cancel}
	if h.track(conn) {
		// Close ran after this request began (once tracked, Close sets
		// closing itself).
		conn.mu.Lock()
		conn.closing = true
		conn.mu.Unlock()
	}
	return conn, ctx, nil
}

// writeCtx bounds one write: a client that stopped reading must not hold
// its handler forever.
func (w *wsConn) writeCtx() (context.Context, context.CancelFunc) {
	w.mu.Lock()
	d := writeStallTimeout
	if w.closing {
		d = shutdownWriteGrace
	}
	w.mu.Unlock()
	return context.WithTimeout(w.ctx, d)
}

func (w *wsConn) write(msgs []Message) error {
	for _, m := range msgs {
		ctx, cancel := w.writeCtx()
		err := w.c.Write(ctx, websocket.MessageText, m.Data)
		cancel()
		if err != nil {
			return err
		}
	}
	return nil
}

func (w *wsConn) flush() error { return nil }

func (w *wsConn) deadline() {}

func (w *wsConn) keepAlive() error {
	ctx, cancel := w.writeCtx()
	defer cancel()
	return w.c.Ping(ctx)
}

func (w *wsConn) writeShutdown() {
	w.close(websocket.StatusGoingAway, "server shutting down; reconnect with ?after=<last sequence>")
}

func (w *wsConn) close(code websocket.StatusCode, reason string) {
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		return
	}
	w.closed = true
	w.mu.Unlock()
	_ = w.c.Close(code, reason)
}

func (w *wsConn) shutdown() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.finished {
		return
	}
	w.closing = true
	w.timer = time.AfterFunc(shutdownWriteGrace, w.cancel)
}

// finish closes the socket: normally (1000) when the client has every
// event of the run, else (the stream failed) with 1011, and the client
// resumes with ?after=.
func (w *wsConn) finish(complete bool) {
	w.mu.Lock()
	w.finished = true
	if w.timer != nil {
		w.timer.Stop()
	}
	w.mu.Unlock()
	if complete {
		w.close(websocket.StatusNormalClosure, "run ended")
	} else {
		w.close(websocket.StatusInternalError, "stream interrupted; reconnect with ?after=<last sequence>")
	}
	w.cancel()
}
