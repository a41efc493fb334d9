package stream

import (
	"bytes"
	"io"
	"net/http"
	"strconv"
	"sync"
	"time"
)

// shutdownMessage tells an EventSource to reconnect after a second; it
// resumes with Last-Event-ID, on this or another replica.
const shutdownMessage = ": server shutting down; reconnect with Last-Event-ID\nretry: 1000\n\n"

// keepAliveMessage is an SSE comment: clients ignore it, proxies see
// traffic.
const keepAliveMessage = ": keep-alive\n\n"

// sseConn is one open event stream's response, as Server-Sent Events.
type sseConn struct {
	w  http.ResponseWriter
	rc *http.ResponseController

	mu       sync.Mutex
	closing  bool // Close was called: writes get a short deadline
	finished bool // the handler has returned: the response must not be touched
}

// OpenSSE starts an SSE response on w: headers and status 200, flushed at
// once so that clients see the stream open before the first event. The
// caller has answered any error before; from here on the stream is Serve's.
func (h *Hub) OpenSSE(w http.ResponseWriter) Transport {
	hdr := w.Header()
	hdr.Set("Content-Type", "text/event-stream")
	hdr.Set("Cache-Control", "no-cache")
	hdr.Set("Connection", "keep-alive")
	hdr.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	conn := &sseConn{w: w, rc: http.NewResponseController(w)}
	if h.track(conn) {
		// Close ran after this request began. (Close, once tracked, sets
		// closing itself: this must only ever set it.)
		conn.mu.Lock()
		conn.closing = true
		conn.mu.Unlock()
	}
	conn.deadline()
	_ = conn.rc.Flush()
	return conn
}

func (c *sseConn) finish(bool) {
	c.mu.Lock()
	c.finished = true
	// The connection may serve further requests: it must not keep our
	// deadline.
	_ = c.rc.SetWriteDeadline(time.Time{})
	c.mu.Unlock()
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

func (c *sseConn) write(msgs []Message) error {
	for _, m := range msgs {
		msg := m.SSE
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
func sseMessage(m Message) []byte {
	var b bytes.Buffer
	b.Grow(len(m.Data) + 64)
	if m.ID > 0 {
		b.WriteString("id: ")
		b.WriteString(strconv.FormatInt(m.ID, 10))
		b.WriteString("\n")
	}
	b.WriteString("event: ")
	b.WriteString(lineBreaks.Replace(m.Name))
	b.WriteString("\ndata: ")
	b.Write(m.Data) // json.Marshal output holds no raw line breaks
	b.WriteString("\n\n")
	return b.Bytes()
}

func (c *sseConn) flush() error { return c.rc.Flush() }

func (c *sseConn) keepAlive() error { return c.writeRaw(keepAliveMessage) }

func (c *sseConn) writeRaw(msg string) error {
	c.deadline()
	if _, err := io.WriteString(c.w, msg); err != nil {
		return err
	}
	return c.rc.Flush()
}

func (c *sseConn) writeShutdown() { _ = c.writeRaw(shutdownMessage) }
