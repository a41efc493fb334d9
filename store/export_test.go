package store

import (
	"context"

	"gorm.io/gorm"
)

// MigrateTo applies the migrations up to version only, so that a test can
// store data as an older release did before migrating the rest.
func (s *Store) MigrateTo(ctx context.Context, version int64) error {
	_, err := s.migrate(ctx, nil, version)
	return err
}

// Exec runs a statement directly, as an older release's code would have.
func (s *Store) Exec(ctx context.Context, sql string, args ...any) error {
	return s.db.WithContext(ctx).Exec(sql, args...).Error
}

// DB is the store's gorm handle, for tests that look at rows directly.
func (s *Store) DB() *gorm.DB { return s.db }
