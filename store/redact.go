package store

import (
	"context"
	"errors"
	"net"
	"syscall"

	"gorm.io/gorm"
)

// unavailableError stands for an error saying the database cannot be
// reached. pgx's connection errors name the host, port, user and database
// ("failed to connect to `user=… database=…`"); such text must not reach
// API answers, run errors, events or Temporal history, which tenants read.
// Error says only that the database is unavailable; the cause stays
// reachable with errors.As/Is (IsUnavailable still recognises it) for the
// operator's logs.
type unavailableError struct{ cause error }

func (e *unavailableError) Error() string {
	return "database unavailable: " + connectionFailure(e.cause)
}

func (e *unavailableError) Unwrap() error { return e.cause }

// connectionFailure names the kind of failure in words free of addresses
// and names.
func connectionFailure(err error) string {
	switch {
	case isRefused(err):
		return "connection refused"
	case isTimeout(err):
		return "no answer in time"
	}
	return "connection failed"
}

// redactUnavailable replaces err by an unavailableError when it says the
// database cannot be reached.
func redactUnavailable(err error) error {
	if err == nil {
		return nil
	}
	if _, done := err.(*unavailableError); done || !IsUnavailable(err) {
		return err
	}
	return &unavailableError{cause: err}
}

// registerRedaction makes every gorm operation's connection error an
// unavailableError, so that no store method can leak connection details,
// whichever way it reaches the database.
func registerRedaction(db *gorm.DB) error {
	redact := func(tx *gorm.DB) { tx.Error = redactUnavailable(tx.Error) }
	cb := db.Callback()
	for _, err := range []error{
		cb.Create().After("*").Register("executor:redact_create", redact),
		cb.Query().After("*").Register("executor:redact_query", redact),
		cb.Update().After("*").Register("executor:redact_update", redact),
		cb.Delete().After("*").Register("executor:redact_delete", redact),
		cb.Row().After("*").Register("executor:redact_row", redact),
		cb.Raw().After("*").Register("executor:redact_raw", redact),
	} {
		if err != nil {
			return err
		}
	}
	return nil
}

func isRefused(err error) bool { return errors.Is(err, syscall.ECONNREFUSED) }

func isTimeout(err error) bool {
	var ne net.Error
	return errors.Is(err, context.DeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout())
}
