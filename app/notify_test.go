package app

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/op-stack/executor/config"
	"github.com/op-stack/executor/store"
	"github.com/op-stack/executor/store/storetest"
)

func woken(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	case <-time.After(5 * time.Second):
		return false
	}
}

func notifications(t *testing.T, cfg config.Config, st *store.Store, worker, api bool) *Notifications {
	t.Helper()
	n, err := NewNotifications(t.Context(), cfg, slog.New(slog.DiscardHandler), st, worker, api)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(n.Close)
	return n
}

// TestNotificationsOnSQLite: one process with both roles wakes its own
// pollers; split roles cannot reach each other, so the API polls.
func TestNotificationsOnSQLite(t *testing.T) {
	st := storetest.SQLite(t)
	cfg := config.Config{SSENotify: config.NotifyAuto}

	all := notifications(t, cfg, st, true, true)
	if all.Notifier == nil || all.Listener == nil {
		t.Fatalf("role all: notifier %v, listener %v; want both", all.Notifier, all.Listener)
	}
	ch, cancel := all.Listener.Subscribe("run")
	defer cancel()
	all.Notifier.Notify(context.Background(), "run")
	if !woken(ch) {
		t.Fatal("role all: the worker's notification did not wake the API's poller")
	}

	if api := notifications(t, cfg, st, false, true); api.Listener != nil || api.Notifier != nil {
		t.Fatalf("role api on SQLite: %+v; want nothing (the API polls)", api)
	}
	if w := notifications(t, cfg, st, true, false); w.Listener != nil || w.Notifier != nil {
		t.Fatalf("role worker on SQLite: %+v; want nothing", w)
	}
	cfg.SSENotify = config.NotifyOff
	if off := notifications(t, cfg, st, true, true); off.Listener != nil || off.Notifier != nil {
		t.Fatalf("SSE_NOTIFY=off: %+v; want nothing", off)
	}
}

// TestNotificationsOnPostgres: a worker process's notification reaches an
// API process through LISTEN/NOTIFY.
func TestNotificationsOnPostgres(t *testing.T) {
	url := storetest.PostgresURL(t)
	st, err := store.Open(url, "")
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	cfg := config.Config{SSENotify: config.NotifyAuto, DatabaseURL: url}

	worker := notifications(t, cfg, st, true, false)
	api := notifications(t, cfg, st, false, true)
	if worker.Notifier == nil || worker.Listener != nil || api.Listener == nil || api.Notifier != nil {
		t.Fatalf("worker %+v, api %+v; want a notifier in the worker, a listener in the API", worker, api)
	}
	ch, cancel := api.Listener.Subscribe("run-pg")
	defer cancel()
	worker.Notifier.Notify(context.Background(), "run-pg")
	if !woken(ch) {
		t.Fatal("the worker process's NOTIFY did not wake the API process's poller")
	}

	// Both roles in one process: woken in process and through PostgreSQL.
	all := notifications(t, cfg, st, true, true)
	ch2, cancel2 := all.Listener.Subscribe("run-pg")
	defer cancel2()
	all.Notifier.Notify(context.Background(), "run-pg")
	if !woken(ch2) || !woken(ch) {
		t.Fatal("role all on PostgreSQL must wake its own pollers and other API processes'")
	}
	// Its own NOTIFY comes back to its listener, which must not wake its
	// pollers a second time.
	select {
	case <-ch2:
		t.Fatal("role all on PostgreSQL woke its own poller twice for one notification")
	case <-time.After(300 * time.Millisecond):
	}

	// local: in process only.
	cfg.SSENotify = config.NotifyLocal
	if api := notifications(t, cfg, st, false, true); api.Listener != nil {
		t.Fatal("SSE_NOTIFY=local: an API-only process must not listen")
	}
}
