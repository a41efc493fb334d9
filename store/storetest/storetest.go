// Package storetest gives tests a migrated, empty database on each dialect
// the service supports: a temporary SQLite file, and a private schema in the
// PostgreSQL at TEST_DATABASE_URL.
package storetest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/url"
	"os"
	"path/filepath"
	"testing"
	"time"

	"gorm.io/driver/postgres"
	"gorm.io/gorm"
	"gorm.io/gorm/logger"

	"github.com/op-stack/executor/store"
)

// EnvDatabaseURL names the variable holding the test PostgreSQL's URL.
const EnvDatabaseURL = "TEST_DATABASE_URL"

// ForEachDialect runs fn as a subtest once per dialect, each with its own
// migrated, empty database. Without TEST_DATABASE_URL the PostgreSQL subtest
// is skipped, except in CI (CI=true), where it fails: CI must exercise it.
func ForEachDialect(t *testing.T, fn func(t *testing.T, st *store.Store)) {
	t.Helper()
	t.Run(store.DialectSQLite, func(t *testing.T) { fn(t, SQLite(t)) })
	t.Run(store.DialectPostgres, func(t *testing.T) { fn(t, Postgres(t)) })
}

// SQLite opens a migrated store on a new file in t's temporary directory.
func SQLite(t testing.TB) *store.Store {
	t.Helper()
	st, err := store.Open("", filepath.Join(t.TempDir(), "executor.db"))
	if err != nil {
		t.Fatalf("open sqlite: %v", err)
	}
	t.Cleanup(func() { st.Close() })
	migrate(t, st)
	return st
}

// PostgresURL returns a URL to a new, empty schema of the test PostgreSQL
// that is dropped when t ends. It skips or fails t as ForEachDialect says.
func PostgresURL(t testing.TB) string {
	t.Helper()
	base := os.Getenv(EnvDatabaseURL)
	if base == "" {
		if os.Getenv("CI") == "true" {
			t.Fatalf("%s is not set; CI must run the PostgreSQL tests", EnvDatabaseURL)
		}
		t.Skipf("%s not set; skipping PostgreSQL", EnvDatabaseURL)
	}
	admin, err := gorm.Open(postgres.Open(base), &gorm.Config{Logger: logger.Discard})
	if err != nil {
		t.Fatalf("connect to %s: %v", EnvDatabaseURL, err)
	}
	adminDB, _ := admin.DB()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := adminDB.PingContext(ctx); err != nil {
		t.Fatalf("PostgreSQL at %s is unreachable: %v", EnvDatabaseURL, err)
	}
	schema := "t_" + randomHex(8)
	if err := admin.Exec("CREATE SCHEMA " + schema).Error; err != nil {
		t.Fatalf("create schema: %v", err)
	}
	t.Cleanup(func() {
		admin.Exec("DROP SCHEMA " + schema + " CASCADE")
		adminDB.Close()
	})
	u, err := url.Parse(base)
	if err != nil {
		t.Fatalf("parse %s: %v", EnvDatabaseURL, err)
	}
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	return u.String()
}

// Postgres opens a migrated store on a new schema of the test PostgreSQL.
func Postgres(t testing.TB) *store.Store {
	t.Helper()
	st, err := store.Open(PostgresURL(t), "")
	if err != nil {
		t.Fatalf("open postgres: %v", err)
	}
	t.Cleanup(func() { st.Close() })
	migrate(t, st)
	return st
}

func migrate(t testing.TB, st *store.Store) {
	t.Helper()
	if _, err := st.Migrate(context.Background(), nil); err != nil {
		t.Fatalf("migrate %s: %v", st.Dialect(), err)
	}
}

func randomHex(n int) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		panic(err)
	}
	return hex.EncodeToString(b)
}
