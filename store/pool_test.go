package store

import (
	"context"
	"database/sql/driver"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
)

// fakeConnector fails its first `failures` connections with err.
type fakeConnector struct {
	failures int
	err      error
	calls    int
}

func (c *fakeConnector) Connect(context.Context) (driver.Conn, error) {
	c.calls++
	if c.calls <= c.failures {
		return nil, c.err
	}
	return nil, nil
}

func (c *fakeConnector) Driver() driver.Driver { return nil }

// TestPatientConnectorWaitsOutAFullServer: "too many connections" is
// retried until the server has room (a busy server is no outage); any
// other failure, and a caller's context that ends, are returned at once.
func TestPatientConnectorWaitsOutAFullServer(t *testing.T) {
	full := &pgconn.ConnectError{}
	tooMany := errors.Join(full, &pgconn.PgError{Code: "53300", Message: "too many connections for role"})
	c := &fakeConnector{failures: 3, err: tooMany}
	if _, err := (patientConnector{c}).Connect(context.Background()); err != nil || c.calls != 4 {
		t.Fatalf("full server: err %v after %d attempts, want success on the 4th", err, c.calls)
	}

	refused := &fakeConnector{failures: 3, err: errors.New("connection refused")}
	if _, err := (patientConnector{refused}).Connect(context.Background()); err == nil || refused.calls != 1 {
		t.Fatalf("refused: err %v after %d attempts, want the error at once", err, refused.calls)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	always := &fakeConnector{failures: 1 << 30, err: tooMany}
	began := time.Now()
	if _, err := (patientConnector{always}).Connect(ctx); !isTooManyConnections(err) || time.Since(began) > time.Second {
		t.Fatalf("ended context: err %v after %s", err, time.Since(began))
	}
	if !IsUnavailable(tooMany) || !IsBusy(tooMany) || IsBusy(errors.New("connection refused")) {
		t.Error("a server still full after the wait is not reported busy (and unavailable)")
	}
}
