package store

import (
	"database/sql/driver"
	"errors"
	"net"
	"strings"
	"syscall"

	"github.com/jackc/pgx/v5/pgconn"
)

// IsUnavailable reports whether err says the database cannot be reached
// or is not accepting work right now (refused or dropped connections, a
// server shutting down or starting up), as opposed to a query the database
// rejected. The API answers those with 503 SERVICE_UNAVAILABLE: the request
// may succeed once the database is back.
func IsUnavailable(err error) bool {
	if err == nil {
		return false
	}
	var redacted *unavailableError
	if errors.As(err, &redacted) {
		return true
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		// Class 08: connection exception; 57P01–57P03: the server is
		// shutting down or not yet accepting connections; 53300: too many
		// connections.
		return strings.HasPrefix(pgErr.Code, "08") || pgErr.Code == "57P01" || pgErr.Code == "57P02" ||
			pgErr.Code == "57P03" || pgErr.Code == "53300"
	}
	var connectErr *pgconn.ConnectError
	var opErr *net.OpError
	// pgx reports a connection lost mid-query only in words.
	return errors.As(err, &connectErr) || errors.As(err, &opErr) ||
		errors.Is(err, driver.ErrBadConn) || errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) ||
		strings.Contains(err.Error(), "conn closed") || strings.Contains(err.Error(), "unexpected EOF")
}
