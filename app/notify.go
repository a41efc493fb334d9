package app

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/op-stack/executor/config"
	"github.com/op-stack/executor/notify"
	"github.com/op-stack/executor/store"
)

// Notifications is one process's event-notification wiring (SSE_NOTIFY):
// the Notifier its worker's activities call when a run has news, and the
// Listener its API's stream pollers wait on. A nil Listener leaves the
// pollers polling on their timer (SSE_POLL_INTERVAL); a nil Notifier
// notifies nobody.
type Notifications struct {
	Notifier notify.Notifier
	Listener notify.Listener
	mode     string
	pg       *notify.PostgresListener
}

// NewNotifications builds the wiring of a process that runs the worker,
// the API or both:
//
//   - both, in one process: an in-process notify.Broker, which the
//     activities notify and the pollers listen to;
//   - on PostgreSQL (SSE_NOTIFY=auto): besides, a worker sends NOTIFY
//     through the store's pool and an API LISTENs on a connection of its
//     own, delivering to its Broker, so that processes with split roles
//     (or several replicas) notify each other. With both roles the
//     process hears its own NOTIFYs too: notify.Loopback drops them;
//   - split roles on SQLite, or SSE_NOTIFY=off: nothing; the API polls.
//
// The PostgreSQL listener connects before NewNotifications returns; Close
// stops it.
func NewNotifications(ctx context.Context, cfg config.Config, log *slog.Logger, st *store.Store, worker, api bool) (*Notifications, error) {
	n := &Notifications{mode: "off (the API polls)"}
	if cfg.SSENotify == config.NotifyOff {
		return n, nil
	}
	broker := notify.NewBroker()
	// Interfaces left nil when unused: a nil pointer in an interface would
	// not be nil to notify.Combine or to the API.
	var local, remote notify.Notifier
	var pgNotifier *notify.PostgresNotifier
	if worker && api {
		local, n.Listener, n.mode = broker, broker, "in process"
	}
	if cfg.SSENotify == config.NotifyAuto && st != nil && st.Dialect() == store.DialectPostgres {
		pgCfg := notify.PostgresConfig{Log: log.With("component", "notify")}
		if worker {
			db, err := st.SQLDB()
			if err != nil {
				return nil, err
			}
			pgNotifier = notify.NewPostgresNotifier(db, pgCfg)
			remote = pgNotifier
		}
		if api {
			pg, err := notify.ListenPostgres(ctx, cfg.DatabaseURL, broker, pgCfg)
			if err != nil {
				return nil, fmt.Errorf("%w (LISTEN needs a session connection: not a transaction-pooling proxy; SSE_NOTIFY=local or off goes without)", err)
			}
			n.pg, n.Listener = pg, broker
		}
		n.mode = "postgres LISTEN/NOTIFY"
		if worker && api {
			n.mode = "in process and postgres LISTEN/NOTIFY"
		}
	}
	if local != nil && pgNotifier != nil {
		// Both roles on PostgreSQL: the listener hears this process's own
		// NOTIFYs as well.
		n.Notifier = notify.Loopback(broker, pgNotifier)
	} else {
		n.Notifier = notify.Combine(local, remote)
	}
	if n.Notifier == nil && n.Listener == nil {
		n.mode = "off (the API polls)"
	}
	return n, nil
}

// Mode describes the wiring, for the start-up log.
func (n *Notifications) Mode() string { return n.mode }

// Close stops the PostgreSQL listener, if any.
func (n *Notifications) Close() {
	if n != nil && n.pg != nil {
		n.pg.Close()
	}
}

// WithNotifications makes NewWorker's activities notify through n and
// NewAPI's stream pollers wait on n; without it the activities notify
// nobody and the API polls.
func WithNotifications(n *Notifications) Option {
	return func(o *options) { o.notifications = n }
}
