package store

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/stdlib"
)

// tooManyConnectionsWait bounds how long opening one connection retries a
// server that answers "too many connections" (53300), within the
// caller's context: the server is up but full (other processes' pools,
// an operator's sessions), which a moment usually mends.
const tooManyConnectionsWait = 10 * time.Second

// openPostgres opens a bounded pool on databaseURL whose connections are
// opened by patientConnector.
func openPostgres(databaseURL string, pool Pool) (*sql.DB, error) {
	cfg, err := pgx.ParseConfig(databaseURL)
	if err != nil {
		return nil, err
	}
	db := sql.OpenDB(patientConnector{stdlib.GetConnector(*cfg)})
	db.SetMaxOpenConns(pool.MaxOpen)
	db.SetMaxIdleConns(pool.MaxIdle)
	db.SetConnMaxLifetime(pool.MaxLifetime)
	return db, nil
}

// patientConnector opens connections like pgx's, but waits out a server
// that refuses a new connection because it has too many (SQLSTATE 53300),
// retrying with backoff for up to tooManyConnectionsWait or until ctx
// ends. A full server is busy, not down: the request waits, as it waits
// for a connection of its own pool, instead of answering 503.
type patientConnector struct{ driver.Connector }

func (c patientConnector) Connect(ctx context.Context) (driver.Conn, error) {
	deadline := time.Now().Add(tooManyConnectionsWait)
	delay := 10 * time.Millisecond
	for {
		conn, err := c.Connector.Connect(ctx)
		if err == nil || !isTooManyConnections(err) || time.Now().Add(delay).After(deadline) {
			return conn, err
		}
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, err
		case <-t.C:
		}
		delay = min(2*delay, 250*time.Millisecond)
	}
}

// IsBusy reports whether err says the database server is up but has no
// connection to spare (SQLSTATE 53300), still so after the wait of
// patientConnector: a request that gets it may be retried, and the
// database is not down. IsUnavailable is true of it too.
func IsBusy(err error) bool { return isTooManyConnections(err) }

// isTooManyConnections reports whether err is PostgreSQL's "too many
// connections" (for the server, the database or the role).
func isTooManyConnections(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == "53300"
}
