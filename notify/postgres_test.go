package notify

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"io"
	"log/slog"
	"os"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // database/sql driver "pgx", as gorm's postgres driver uses
)

// testDatabaseURL is the PostgreSQL of the tests (store/storetest's
// variable). Without it the test is skipped, except in CI, where it fails:
// CI must exercise LISTEN/NOTIFY.
func testDatabaseURL(t *testing.T) string {
	t.Helper()
	u := os.Getenv("TEST_DATABASE_URL")
	if u == "" {
		if os.Getenv("CI") != "" {
			t.Fatal("TEST_DATABASE_URL is not set; CI must run the PostgreSQL tests")
		}
		t.Skip("TEST_DATABASE_URL not set; skipping PostgreSQL")
	}
	return u
}

// pgEnv is a listener and a notifier on a channel of the test's own, so
// that tests running at once, or a service on the same database, are not
// heard.
type pgEnv struct {
	db       *sql.DB
	broker   *Broker
	listener *PostgresListener
	notifier *PostgresNotifier
}

func newPGEnv(t *testing.T) *pgEnv {
	t.Helper()
	dsn := testDatabaseURL(t)
	db, err := sql.Open("pgx", dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	cfg := PostgresConfig{
		Channel:    "executor_events_test_" + hex.EncodeToString(b),
		Log:        slog.New(slog.NewTextHandler(io.Discard, nil)),
		MinBackoff: 10 * time.Millisecond, MaxBackoff: 200 * time.Millisecond,
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	broker := NewBroker()
	l, err := ListenPostgres(ctx, dsn, broker, cfg)
	if err != nil {
		t.Fatalf("ListenPostgres: %v", err)
	}
	t.Cleanup(func() { l.Close() })
	return &pgEnv{db: db, broker: broker, listener: l, notifier: NewPostgresNotifier(db, cfg)}
}

func TestPostgresNotifyWakesListeners(t *testing.T) {
	e := newPGEnv(t)
	ch, cancel := e.broker.Subscribe("run-1")
	defer cancel()
	other, cancelOther := e.broker.Subscribe("run-2")
	defer cancelOther()

	e.notifier.Notify(context.Background(), "run-1")
	if !woken(ch, 5*time.Second) {
		t.Fatal("NOTIFY did not reach the run's subscriber")
	}
	if woken(other, 100*time.Millisecond) {
		t.Fatal("another run's subscriber was woken")
	}

	// A second listener (another API process) hears the same notification.
	b2 := NewBroker()
	ctx, cancelCtx := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancelCtx()
	l2, err := ListenPostgres(ctx, testDatabaseURL(t), b2, PostgresConfig{Channel: e.listener.cfg.Channel, Log: e.listener.cfg.Log})
	if err != nil {
		t.Fatal(err)
	}
	defer l2.Close()
	ch2, cancel2 := b2.Subscribe("run-1")
	defer cancel2()
	e.notifier.Notify(context.Background(), "run-1")
	if !woken(ch, 5*time.Second) || !woken(ch2, 5*time.Second) {
		t.Fatal("a NOTIFY must reach every listening process")
	}
}

// TestPostgresListenerReconnects: when its connection is killed, the
// listener connects again, wakes every subscriber (what was sent meanwhile
// is lost) and hears later notifications.
func TestPostgresListenerReconnects(t *testing.T) {
	e := newPGEnv(t)
	ch, cancel := e.broker.Subscribe("run-1")
	defer cancel()
	quiet, cancelQuiet := e.broker.Subscribe("run-quiet")
	defer cancelQuiet()

	pid := e.listener.pid.Load()
	if pid == 0 {
		t.Fatal("the listener has no connection after ListenPostgres")
	}
	var terminated bool
	if err := e.db.QueryRow("SELECT pg_terminate_backend($1)", int64(pid)).Scan(&terminated); err != nil || !terminated {
		t.Fatalf("pg_terminate_backend(%d) = %v, %v", pid, terminated, err)
	}

	// The reconnection wakes every subscriber, notified or not.
	if !woken(ch, 10*time.Second) || !woken(quiet, 10*time.Second) {
		t.Fatal("no wake-up after the listener's connection was terminated")
	}
	if n := e.listener.Reconnects(); n != 1 {
		t.Fatalf("reconnects = %d, want 1", n)
	}
	if now := e.listener.pid.Load(); now == 0 || now == pid {
		t.Fatalf("listener backend pid = %d after reconnecting (was %d)", now, pid)
	}
	e.notifier.Notify(context.Background(), "run-1")
	if !woken(ch, 5*time.Second) {
		t.Fatal("a NOTIFY after the reconnection was not heard")
	}
	if woken(quiet, 100*time.Millisecond) {
		t.Fatal("after the reconnection, another run's notification woke run-quiet")
	}
}

// TestPostgresListenerClose: Close ends the goroutine and the connection.
func TestPostgresListenerClose(t *testing.T) {
	e := newPGEnv(t)
	pid := e.listener.pid.Load()
	done := make(chan struct{})
	go func() { e.listener.Close(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Close did not return")
	}
	e.listener.Close() // idempotent
	deadline := time.Now().Add(5 * time.Second)
	for {
		var n int
		if err := e.db.QueryRow("SELECT count(*) FROM pg_stat_activity WHERE pid = $1", int64(pid)).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the listener's backend %d is still connected after Close", pid)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestListenPostgresBadURL(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := ListenPostgres(ctx, "postgres://nobody@127.0.0.1:1/none?connect_timeout=1", NewBroker(), PostgresConfig{}); err == nil {
		t.Fatal("ListenPostgres succeeded without a database")
	}
}

// TestPostgresNotifierSurvivesFailures: a failing NOTIFY is logged, not
// returned, and does not hang.
func TestPostgresNotifierSurvivesFailures(t *testing.T) {
	db, err := sql.Open("pgx", "postgres://nobody@127.0.0.1:1/none?connect_timeout=1")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	n := NewPostgresNotifier(db, PostgresConfig{Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	start := time.Now()
	n.Notify(context.Background(), "run")
	if d := time.Since(start); d > notifyTimeout+time.Second {
		t.Fatalf("a failing notification took %v", d)
	}
	if n.failures.Load() != 1 {
		t.Fatalf("failures = %d, want 1", n.failures.Load())
	}
}

// TestPostgresListenerPingsWhenQuiet: waits that time out for a ping leave
// the connection usable: no reconnection, notifications still heard.
func TestPostgresListenerPingsWhenQuiet(t *testing.T) {
	e := newPGEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	b := NewBroker()
	cfg := e.listener.cfg
	cfg.PingInterval = 10 * time.Millisecond
	l, err := ListenPostgres(ctx, testDatabaseURL(t), b, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	ch, unsubscribe := b.Subscribe("run")
	defer unsubscribe()
	time.Sleep(300 * time.Millisecond) // about 30 timed-out waits and pings
	if n := l.Reconnects(); n != 0 {
		t.Fatalf("a quiet listener reconnected %d times; its pings should keep the connection", n)
	}
	if woken(ch, 0) {
		t.Fatal("a ping woke a subscriber")
	}
	e.notifier.Notify(context.Background(), "run")
	if !woken(ch, 5*time.Second) {
		t.Fatal("a notification after the pings was not heard")
	}
}

// TestLoopback: a process that is both worker and API wakes its own
// pollers at once and once, and still wakes other processes and hears
// them.
func TestLoopback(t *testing.T) {
	e := newPGEnv(t)
	own := Loopback(e.broker, e.notifier)
	ch, cancel := e.broker.Subscribe("run")
	defer cancel()

	// Another API process, listening on the same channel.
	other := NewBroker()
	ctx, cancelCtx := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancelCtx()
	l2, err := ListenPostgres(ctx, testDatabaseURL(t), other, e.listener.cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer l2.Close()
	otherCh, cancelOther := other.Subscribe("run")
	defer cancelOther()

	own.Notify(context.Background(), "run")
	if !woken(ch, 0) {
		t.Fatal("Loopback did not wake this process's subscriber at once")
	}
	if !woken(otherCh, 5*time.Second) {
		t.Fatal("Loopback's NOTIFY did not reach the other process")
	}
	// The echo reaches this process's listener too (the other process has
	// heard the NOTIFY, so it has been sent), and is dropped.
	waitEchoes := time.Now().Add(5 * time.Second)
	for {
		e.broker.mu.Lock()
		pending := e.broker.echoes["run"]
		e.broker.mu.Unlock()
		if pending == 0 {
			break
		}
		if time.Now().After(waitEchoes) {
			t.Fatal("the echo of this process's NOTIFY never arrived")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if woken(ch, 100*time.Millisecond) {
		t.Fatal("the echo of this process's own NOTIFY woke its subscriber a second time")
	}

	// Another process's notification wakes this one.
	NewPostgresNotifier(e.db, e.listener.cfg).Notify(context.Background(), "run")
	if !woken(ch, 5*time.Second) {
		t.Fatal("another process's NOTIFY did not reach this process")
	}
}

// TestLoopbackWithoutPostgres: a failed NOTIFY still wakes this process's
// subscriber and leaves no expected echo behind to swallow a later
// notification.
func TestLoopbackWithoutPostgres(t *testing.T) {
	db, err := sql.Open("pgx", "postgres://nobody@127.0.0.1:1/none?connect_timeout=1")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	b := NewBroker()
	ch, cancel := b.Subscribe("run")
	defer cancel()
	Loopback(b, NewPostgresNotifier(db, PostgresConfig{Log: slog.New(slog.NewTextHandler(io.Discard, nil))})).Notify(context.Background(), "run")
	if !woken(ch, 0) {
		t.Fatal("no in-process wake-up")
	}
	b.notifyHeard("run", nil)
	if !woken(ch, time.Second) {
		t.Fatal("a failed NOTIFY left an expected echo that swallowed the next notification")
	}
}

// TestPostgresPushCarriesPayloads: a push through PostgreSQL reaches
// another process's push subscriber with its payload; one too big for a
// NOTIFY arrives as a plain wake-up, which tells the subscriber to query.
func TestPostgresPushCarriesPayloads(t *testing.T) {
	e := newPGEnv(t)
	wake, take, cancel := e.broker.SubscribePushes("run-1")
	defer cancel()

	e.notifier.Push(context.Background(), "run-1", []byte(`[{"sequence":7}]`))
	if !woken(wake, 5*time.Second) {
		t.Fatal("the push did not reach the run's subscriber")
	}
	if payloads, plain := take(); plain || len(payloads) != 1 || string(payloads[0]) != `[{"sequence":7}]` {
		t.Fatalf("take = %q, plain %v; want the payload", payloads, plain)
	}

	e.notifier.Push(context.Background(), "run-1", make([]byte, 2*maxNotifyPayload))
	if !woken(wake, 5*time.Second) {
		t.Fatal("the oversized push did not wake the subscriber")
	}
	if payloads, plain := take(); !plain || len(payloads) != 0 {
		t.Fatalf("take = %d payloads, plain %v; want a plain wake-up", len(payloads), plain)
	}
}
