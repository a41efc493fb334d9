package notify

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
)

// DefaultChannel is the PostgreSQL LISTEN/NOTIFY channel whose payloads
// are run IDs.
const DefaultChannel = "executor_events"

// PostgresConfig tunes the PostgreSQL notifier and listener. Zero fields
// take the defaults.
type PostgresConfig struct {
	// Channel is the LISTEN/NOTIFY channel (DefaultChannel). Tests use
	// their own, so that they never hear a service sharing the database.
	Channel string
	// Log receives connection losses and failed notifications
	// (slog.Default when nil).
	Log *slog.Logger
	// MinBackoff and MaxBackoff bound the listener's wait between
	// reconnection attempts (100ms and 5s): it doubles per failed attempt.
	MinBackoff, MaxBackoff time.Duration
	// PingInterval is how long the listener waits without a notification
	// before it checks its connection (30s): a connection cut without a
	// reset (a dropped route, a NAT timeout) would otherwise wait forever.
	PingInterval time.Duration
}

func (c PostgresConfig) withDefaults() PostgresConfig {
	if c.Channel == "" {
		c.Channel = DefaultChannel
	}
	if c.Log == nil {
		c.Log = slog.Default()
	}
	if c.MinBackoff <= 0 {
		c.MinBackoff = 100 * time.Millisecond
	}
	if c.MaxBackoff < c.MinBackoff {
		c.MaxBackoff = max(5*time.Second, c.MinBackoff)
	}
	if c.PingInterval <= 0 {
		c.PingInterval = 30 * time.Second
	}
	return c
}

const (
	// notifyTimeout bounds one NOTIFY: the caller (an activity's event
	// publisher) must not stall on a slow database for a hint.
	notifyTimeout = 2 * time.Second
	// connectTimeout bounds one connection attempt of the listener,
	// LISTEN included, and its pings.
	connectTimeout = 10 * time.Second
	// warnEvery limits the warnings of failing notifications: at 100
	// streaming runs a database outage would fail hundreds per second.
	warnEvery = time.Minute
)

// PostgresNotifier notifies through PostgreSQL: NOTIFY on the channel with
// the run ID as payload, heard by every process's PostgresListener. It runs
// on the service's connection pool (store.Store.SQLDB).
type PostgresNotifier struct {
	db      *sql.DB
	channel string
	log     *slog.Logger

	lastWarn atomic.Int64 // unix nanoseconds of the last warning
	failures atomic.Int64
}

// NewPostgresNotifier returns a Notifier that sends NOTIFY through db, a
// PostgreSQL pool.
func NewPostgresNotifier(db *sql.DB, cfg PostgresConfig) *PostgresNotifier {
	cfg = cfg.withDefaults()
	return &PostgresNotifier{db: db, channel: cfg.Channel, log: cfg.Log}
}

// Notify implements Notifier. pg_notify outside a transaction is sent at
// once; a failure is logged (at most once a minute), never returned.
func (n *PostgresNotifier) Notify(ctx context.Context, runID string) { n.send(ctx, runID, nil) }

// Push implements Pusher: the payload travels in the NOTIFY after the run
// ID and a line break (run IDs have none), unless it would pass
// PostgreSQL's 8,000-byte limit, when the notification goes without it.
func (n *PostgresNotifier) Push(ctx context.Context, runID string, payload []byte) {
	n.send(ctx, runID, payload)
}

// maxNotifyPayload is PostgreSQL's limit on a NOTIFY payload, less room.
const maxNotifyPayload = 7900

// notifyText is what a NOTIFY carries: the run ID, and a payload if one
// fits.
func notifyText(runID string, payload []byte) string {
	if len(payload) == 0 || len(runID)+1+len(payload) > maxNotifyPayload {
		return runID
	}
	return runID + "\n" + string(payload)
}

// parseNotifyText splits what notifyText made.
func parseNotifyText(text string) (runID string, payload []byte) {
	runID, rest, ok := strings.Cut(text, "\n")
	if !ok || rest == "" {
		return runID, nil
	}
	return runID, []byte(rest)
}

// send is Push, reporting whether the NOTIFY was sent.
func (n *PostgresNotifier) send(ctx context.Context, runID string, payload []byte) bool {
	// The caller's context may be cancelled already (a cancelled activity
	// still flushes its events): the notification belongs with them.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), notifyTimeout)
	defer cancel()
	if _, err := n.db.ExecContext(ctx, "SELECT pg_notify($1, $2)", n.channel, notifyText(runID, payload)); err != nil {
		failures := n.failures.Add(1)
		now := time.Now().UnixNano()
		if last := n.lastWarn.Load(); now-last >= int64(warnEvery) && n.lastWarn.CompareAndSwap(last, now) {
			n.log.Warn("event notification failed; streams fall back to their safety poll", "run_id", runID, "failures", failures, "error", err)
		}
		return false
	}
	return true
}

// PostgresListener holds one dedicated connection that LISTENs on the
// channel and turns each notification into a wake-up of the run's
// subscribers in a Broker. When the connection drops it reconnects with
// backoff and then wakes every subscriber, since notifications sent while
// it was away are lost.
type PostgresListener struct {
	cfg    PostgresConfig
	conn   *pgx.ConnConfig
	broker *Broker
	listen string // the LISTEN statement

	cancel context.CancelFunc
	done   chan struct{}
	once   sync.Once

	pid        atomic.Uint32 // backend PID of the current connection, 0 when none
	reconnects atomic.Int64
}

// ListenPostgres connects to the PostgreSQL at dsn (a URL or key=value
// string, as DATABASE_URL), LISTENs on the channel and delivers the
// notifications to broker until Close. The first connection is made before
// it returns, so a wrong DSN or a database that refuses LISTEN is an error
// at start rather than a stream that is slow forever.
func ListenPostgres(ctx context.Context, dsn string, broker *Broker, cfg PostgresConfig) (*PostgresListener, error) {
	cfg = cfg.withDefaults()
	connCfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("notify: parse database URL: %w", err)
	}
	if connCfg.RuntimeParams == nil {
		connCfg.RuntimeParams = map[string]string{}
	}
	if connCfg.RuntimeParams["application_name"] == "" {
		// Names the connection in pg_stat_activity.
		connCfg.RuntimeParams["application_name"] = "executor-notify-listener"
	}
	l := &PostgresListener{
		cfg: cfg, conn: connCfg, broker: broker,
		listen: "LISTEN " + pgx.Identifier{cfg.Channel}.Sanitize(),
		done:   make(chan struct{}),
	}
	conn, err := l.connect(ctx)
	if err != nil {
		return nil, err
	}
	runCtx, cancel := context.WithCancel(context.Background())
	l.cancel = cancel
	go l.run(runCtx, conn)
	return l, nil
}

// Close stops listening and closes the connection; it returns once the
// listener's goroutine has ended. It is idempotent.
func (l *PostgresListener) Close() error {
	l.once.Do(l.cancel)
	<-l.done
	return nil
}

// Reconnects counts the connections made after the first one.
func (l *PostgresListener) Reconnects() int64 { return l.reconnects.Load() }

func (l *PostgresListener) connect(ctx context.Context) (*pgx.Conn, error) {
	ctx, cancel := context.WithTimeout(ctx, connectTimeout)
	defer cancel()
	conn, err := pgx.ConnectConfig(ctx, l.conn.Copy())
	if err != nil {
		return nil, fmt.Errorf("notify: connect to PostgreSQL: %w", err)
	}
	if _, err := conn.Exec(ctx, l.listen); err != nil {
		closeConn(conn)
		return nil, fmt.Errorf("notify: %s: %w", l.listen, err)
	}
	l.pid.Store(conn.PgConn().PID())
	return conn, nil
}

func (l *PostgresListener) run(ctx context.Context, conn *pgx.Conn) {
	defer close(l.done)
	for {
		err := l.receive(ctx, conn)
		l.pid.Store(0)
		closeConn(conn)
		if ctx.Err() != nil {
			return
		}
		l.cfg.Log.Warn("event notifications: lost the PostgreSQL connection; reconnecting", "error", err)
		if conn = l.reconnect(ctx); conn == nil {
			return
		}
		l.reconnects.Add(1)
		l.cfg.Log.Info("event notifications: listening again")
		// LISTEN is in place again, so anything sent from now on arrives;
		// what was sent while the connection was down is lost, and one
		// query per subscribed run finds it.
		l.broker.reconnected()
	}
}

// reconnect connects again, backing off between attempts; nil once ctx is
// done.
func (l *PostgresListener) reconnect(ctx context.Context) *pgx.Conn {
	backoff := l.cfg.MinBackoff
	for attempt := 1; ; attempt++ {
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-t.C:
		}
		conn, err := l.connect(ctx)
		if err == nil {
			return conn
		}
		if ctx.Err() != nil {
			return nil
		}
		level := slog.LevelDebug
		if attempt%10 == 0 {
			level = slog.LevelWarn
		}
		l.cfg.Log.Log(ctx, level, "event notifications: reconnect failed", "attempt", attempt, "error", err)
		backoff = min(2*backoff, l.cfg.MaxBackoff)
	}
}

// receive delivers notifications until the connection fails or ctx is
// done.
func (l *PostgresListener) receive(ctx context.Context, conn *pgx.Conn) error {
	for {
		wctx, cancel := context.WithTimeout(ctx, l.cfg.PingInterval)
		n, err := conn.WaitForNotification(wctx)
		timedOut := wctx.Err() != nil
		cancel()
		if n != nil {
			l.broker.notifyHeard(parseNotifyText(n.Payload))
		}
		switch {
		case err == nil:
			continue
		case ctx.Err() != nil:
			return ctx.Err()
		case timedOut && !conn.IsClosed():
			// Silence: make sure the connection is still there.
			pctx, cancel := context.WithTimeout(ctx, connectTimeout)
			err = conn.Ping(pctx)
			cancel()
			if err != nil {
				return fmt.Errorf("ping: %w", err)
			}
			continue
		}
		return err
	}
}

func closeConn(conn *pgx.Conn) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_ = conn.Close(ctx)
}
