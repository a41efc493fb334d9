package store

import "database/sql"

// SQLDB returns the store's connection pool, for the PostgreSQL event
// notifications (notify.PostgresNotifier), which send NOTIFY through it
// rather than opening connections of their own.
func (s *Store) SQLDB() (*sql.DB, error) { return s.db.DB() }
