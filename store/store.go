// Package store persists hierarchies, runs and events with gorm, on
// PostgreSQL in production and on an embedded SQLite file for local use.
package store

import (
	"context"
	"crypto/cipher"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"hash/crc64"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"

	"github.com/glebarez/sqlite"
	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/lock"
	"gorm.io/driver/postgres"
	"gorm.io/gorm"
	"gorm.io/gorm/logger"
)

//go:embed migrations/*.sql
var migrationFiles embed.FS

// Dialects the store runs on.
const (
	DialectPostgres = "postgres"
	DialectSQLite   = "sqlite"
)

// Store is the service's database.
type Store struct {
	// mcpAEAD seals MCP servers' inline secrets (SetMCPSecretKey); nil
	// refuses them.
	mcpAEAD    atomic.Pointer[cipher.AEAD]
	db         *gorm.DB
	dialect    string
	sqlitePath string
}

// Pool bounds a process's PostgreSQL connections (database/sql's pool).
// Every process opens its own pool, so the sum of MaxOpen over the
// replicas (plus one LISTEN connection per API process, see SSE_NOTIFY)
// must stay under the server's max_connections; a request that finds every
// connection busy waits for one (as long as its context allows) instead of
// failing.
type Pool struct {
	// MaxOpen is the most connections open at once (in use or idle).
	MaxOpen int
	// MaxIdle is the most idle connections kept for reuse.
	MaxIdle int
	// MaxLifetime closes a connection this long after it was opened, so
	// that connections move to a restarted or failed-over server and a
	// load balancer in front of PostgreSQL sees them spread.
	MaxLifetime time.Duration
}

// DefaultPool is the pool of a process that names none: 20 connections, of
// which 10 idle, each for 30 minutes at most. Two API and two worker
// processes then hold at most 80 (+2 LISTEN) of PostgreSQL's default
// max_connections of 100, leaving room for migrations, psql and the
// superuser's reserve.
var DefaultPool = Pool{MaxOpen: 20, MaxIdle: 10, MaxLifetime: 30 * time.Minute}

// Option configures Open.
type Option func(*openOptions)

type openOptions struct {
	pool   Pool
	logger logger.Interface
}

// WithSQLLogger hands every SQL statement the store runs to l (gorm's
// logger interface; its Trace method sees each statement), instead of
// discarding them: for tracing a deployment's queries, and for tests that
// count them.
func WithSQLLogger(l logger.Interface) Option {
	return func(o *openOptions) { o.logger = l }
}

// WithPool sets the PostgreSQL connection pool (DefaultPool otherwise).
// Zero fields keep DefaultPool's value. SQLite ignores it: it always uses
// one connection.
func WithPool(p Pool) Option {
	return func(o *openOptions) {
		if p.MaxOpen > 0 {
			o.pool.MaxOpen = p.MaxOpen
		}
		if p.MaxIdle > 0 {
			o.pool.MaxIdle = p.MaxIdle
		}
		if p.MaxLifetime > 0 {
			o.pool.MaxLifetime = p.MaxLifetime
		}
	}
}

// Open connects to databaseURL (a postgres:// URL) or, when it is empty, to
// the SQLite file sqlitePath, creating its directory. It does not migrate.
func Open(databaseURL, sqlitePath string, opts ...Option) (*Store, error) {
	o := openOptions{pool: DefaultPool, logger: logger.Discard}
	for _, opt := range opts {
		opt(&o)
	}
	if o.pool.MaxIdle > o.pool.MaxOpen {
		o.pool.MaxIdle = o.pool.MaxOpen
	}
	cfg := &gorm.Config{
		Logger:         o.logger,
		NowFunc:        func() time.Time { return time.Now().UTC() },
		TranslateError: true,
	}
	var (
		db      *gorm.DB
		err     error
		dialect string
	)
	if databaseURL != "" {
		dialect = DialectPostgres
		var sqlDB *sql.DB
		if sqlDB, err = openPostgres(databaseURL, o.pool); err == nil {
			db, err = gorm.Open(postgres.New(postgres.Config{Conn: sqlDB}), cfg)
			if err != nil {
				sqlDB.Close()
			}
		}
	} else {
		dialect = DialectSQLite
		if dir := filepath.Dir(sqlitePath); dir != "" {
			if err := os.MkdirAll(dir, 0o755); err != nil {
				return nil, fmt.Errorf("create sqlite directory: %w", err)
			}
		}
		// WAL lets the API read while a worker writes; busy_timeout waits
		// out the other writer instead of failing with SQLITE_BUSY. The
		// pragmas apply in order, and switching to WAL takes a lock, so
		// busy_timeout comes first: a process opening the file while
		// another migrates it waits instead of failing at once.
		dsn := sqlitePath + "?_pragma=busy_timeout(10000)&_pragma=foreign_keys(1)&_pragma=journal_mode(WAL)&_pragma=synchronous(NORMAL)"
		db, err = gorm.Open(sqlite.Open(dsn), cfg)
	}
	if err != nil {
		return nil, fmt.Errorf("open %s database: %w", dialect, err)
	}
	if dialect == DialectSQLite {
		// SQLite allows one writer; one connection avoids lock contention
		// between connections of this process.
		sqlDB, err := db.DB()
		if err != nil {
			return nil, err
		}
		sqlDB.SetMaxOpenConns(1)
	}
	if err := registerRedaction(db); err != nil {
		return nil, err
	}
	st := &Store{db: db, dialect: dialect}
	if dialect == DialectSQLite {
		st.sqlitePath = sqlitePath
	}
	return st, nil
}

// Dialect reports which database the store runs on.
func (s *Store) Dialect() string { return s.dialect }

// Close closes the connection pool.
func (s *Store) Close() error {
	sqlDB, err := s.db.DB()
	if err != nil {
		return err
	}
	return sqlDB.Close()
}

// Ping checks that the database answers.
func (s *Store) Ping(ctx context.Context) error {
	sqlDB, err := s.db.DB()
	if err != nil {
		return err
	}
	return redactUnavailable(sqlDB.PingContext(ctx))
}

// Migrate applies every pending schema migration and returns the versions
// it applied.
func (s *Store) Migrate(ctx context.Context, log *slog.Logger) ([]int64, error) {
	return s.migrate(ctx, log, 0)
}

// migrate applies pending migrations up to version (0: all of them).
func (s *Store) migrate(ctx context.Context, log *slog.Logger, version int64) ([]int64, error) {
	sqlDB, err := s.db.DB()
	if err != nil {
		return nil, err
	}
	sub, err := fs.Sub(migrationFiles, "migrations")
	if err != nil {
		return nil, err
	}
	dialect := goose.DialectPostgres
	if s.dialect == DialectSQLite {
		dialect = goose.DialectSQLite3
		sub = sqliteMigrations{sub}
		// Processes sharing the file (an API and a worker started
		// together) migrate one after the other: goose has no locker for
		// SQLite, and busy_timeout alone lets two of them both find a
		// table missing and both create it.
		unlock, err := lockFile(ctx, s.sqlitePath+".migrate-lock")
		if err != nil {
			return nil, err
		}
		defer unlock()
	}
	var opts []goose.ProviderOption
	if s.dialect == DialectPostgres {
		// Several processes may start at once (an API and a worker, or
		// replicas each running `executor migrate`): a session-level
		// advisory lock lets one migrate while the others wait, then find
		// nothing left to do. The lock is per schema, so that processes on
		// different schemas of one database do not wait for each other.
		locker, err := s.migrationLocker(ctx)
		if err != nil {
			return nil, err
		}
		opts = append(opts, goose.WithSessionLocker(locker))
	}
	provider, err := goose.NewProvider(dialect, sqlDB, sub, opts...)
	if err != nil {
		return nil, fmt.Errorf("migrations: %w", err)
	}
	var results []*goose.MigrationResult
	if version > 0 {
		results, err = provider.UpTo(ctx, version)
	} else {
		results, err = provider.Up(ctx)
	}
	if err != nil {
		return nil, fmt.Errorf("apply migrations: %w", err)
	}
	var applied []int64
	for _, r := range results {
		applied = append(applied, r.Source.Version)
		if log != nil {
			log.Info("applied migration", "version", r.Source.Version, "file", filepath.Base(r.Source.Path), "duration", r.Duration)
		}
	}
	return applied, nil
}

// migrationLocker is the advisory lock migrations run under on PostgreSQL:
// its id is derived from the database and schema migrated, it is tried every
// second, for up to ten minutes.
func (s *Store) migrationLocker(ctx context.Context) (lock.SessionLocker, error) {
	var where string
	if err := s.db.WithContext(ctx).Raw("SELECT current_database() || '.' || coalesce(current_schema(), '')").Scan(&where).Error; err != nil {
		return nil, fmt.Errorf("migrations: find the schema: %w", err)
	}
	id := int64(crc64.Checksum([]byte("executor-migrations:"+where), crc64.MakeTable(crc64.ECMA)))
	locker, err := lock.NewPostgresSessionLocker(lock.WithLockID(id), lock.WithLockTimeout(1, 600))
	if err != nil {
		return nil, fmt.Errorf("migrations: %w", err)
	}
	return locker, nil
}

// sqliteMigrations serves the migrations written for PostgreSQL to SQLite.
// The differences the schema needs are the timestamp type (SQLite's driver
// returns time.Time only for columns declared TIMESTAMP) and the byte type
// (BYTEA would get SQLite's NUMERIC affinity; BLOB keeps bytes as given).
type sqliteMigrations struct{ fs.FS }

func (m sqliteMigrations) Open(name string) (fs.File, error) {
	f, err := m.FS.Open(name)
	if err != nil || !strings.HasSuffix(name, ".sql") {
		return f, err
	}
	defer f.Close()
	body, err := io.ReadAll(f)
	if err != nil {
		return nil, err
	}
	info, err := f.Stat()
	if err != nil {
		return nil, err
	}
	return &memFile{Reader: strings.NewReader(sqliteDialect(sqliteTypes.Replace(string(body)))), info: info}, nil
}

// sqliteDialect keeps a migration's dialect-specific parts for SQLite: it
// drops the lines between "-- postgres-only begin" and "-- postgres-only
// end" and uncomments those starting "-- sqlite: " (which PostgreSQL reads
// as comments; "--statement-begin" and "--statement-end" there are goose's
// StatementBegin and StatementEnd). Full-text search needs it: a tsvector column and GIN index
// on PostgreSQL, an FTS5 table kept by triggers on SQLite.
func sqliteDialect(body string) string {
	if !strings.Contains(body, "-- postgres-only begin") && !strings.Contains(body, "-- sqlite: ") {
		return body
	}
	var b strings.Builder
	skip := false
	for _, line := range strings.SplitAfter(body, "\n") {
		trimmed := strings.TrimSpace(line)
		switch {
		case trimmed == "-- postgres-only begin":
			skip = true
			continue
		case trimmed == "-- postgres-only end":
			skip = false
			continue
		case skip:
			continue
		case strings.HasPrefix(line, "-- sqlite: "):
			line = strings.TrimPrefix(line, "-- sqlite: ")
			// goose reads any comment naming its annotations, so the
			// SQLite-only ones are spelled apart.
			switch strings.TrimSpace(line) {
			case "--statement-begin":
				line = "-- +goose StatementBegin\n"
			case "--statement-end":
				line = "-- +goose StatementEnd\n"
			}
		}
		b.WriteString(line)
	}
	return b.String()
}

var sqliteTypes = strings.NewReplacer("TIMESTAMPTZ", "TIMESTAMP", "BYTEA", "BLOB")

type memFile struct {
	*strings.Reader
	info fs.FileInfo
}

func (f *memFile) Stat() (fs.FileInfo, error) { return f.info, nil }
func (f *memFile) Close() error               { return nil }

// notFound reports whether err is gorm's record-not-found.
func notFound(err error) bool { return errors.Is(err, gorm.ErrRecordNotFound) }
