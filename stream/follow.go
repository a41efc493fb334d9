package stream

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/op-stack/executor/models"
	"github.com/op-stack/executor/store"
)

// Follow reads a run's log in this process, as its event streams do (a
// finished run's from the store, a live run's from its shared feed: one
// poller per run, whatever the number of streams and followers), handing
// each event, with the run's public id, to fn in order. It returns the
// run's terminal event once fn has had it; an error when the log could not
// be read to its end (ctx ended, the hub closed, the events could not be
// read). The MCP server's tool calls follow their runs with it.
func (h *Hub) Follow(ctx context.Context, run *store.Run, fn func(models.Event)) (models.Event, error) {
	if !models.IsTerminal(run.Status) && !h.Live() {
		return models.Event{}, models.Errorf(models.CodeUnavailable, "live runs are not followed by this process")
	}
	conn := &funcConn{fn: fn}
	h.track(conn)
	h.Serve(ctx, conn, run, Contract002(), 0)
	switch {
	case conn.err != nil:
		return models.Event{}, conn.err
	case conn.end != nil:
		return *conn.end, nil
	case ctx.Err() != nil:
		return models.Event{}, ctx.Err()
	}
	return models.Event{}, models.Errorf(models.CodeUnavailable, "run %q could not be followed to its end (the server is shutting down, or its events could not be read); read it with runs/get", run.PublicID)
}

// funcConn is the Transport of Follow: it hands each event to a function
// and keeps the run's terminal event.
type funcConn struct {
	fn  func(models.Event)
	end *models.Event
	err error
}

func (c *funcConn) write(msgs []Message) error {
	for _, m := range msgs {
		var e models.Event
		if err := json.Unmarshal(m.Data, &e); err != nil {
			c.err = fmt.Errorf("decode event %d: %w", m.ID, err)
			return c.err
		}
		c.fn(e)
		if isTerminalEvent(e.Event) {
			c.end = &e
		}
	}
	return nil
}

func (*funcConn) flush() error     { return nil }
func (*funcConn) deadline()        {}
func (*funcConn) keepAlive() error { return nil }
func (*funcConn) writeShutdown()   {}
func (*funcConn) shutdown()        {}
func (*funcConn) finish(bool)      {}
