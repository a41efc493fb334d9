package store

import (
	"context"
	"io/fs"

	"github.com/pressly/goose/v3"

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

// MigrateDownTo rolls migrations back to version.
func (s *Store) MigrateDownTo(ctx context.Context, version int64) error {
	sqlDB, err := s.db.DB()
	if err != nil {
		return err
	}
	sub, err := fs.Sub(migrationFiles, "migrations")
	if err != nil {
		return err
	}
	dialect := goose.DialectPostgres
	if s.dialect == DialectSQLite {
		dialect, sub = goose.DialectSQLite3, sqliteMigrations{sub}
	}
	provider, err := goose.NewProvider(dialect, sqlDB, sub)
	if err != nil {
		return err
	}
	_, err = provider.DownTo(ctx, version)
	return err
}
