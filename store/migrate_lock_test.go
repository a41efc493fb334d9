package store_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/glebarez/sqlite"
	"gorm.io/driver/postgres"
	"gorm.io/gorm"
	"gorm.io/gorm/logger"

	"github.com/op-stack/executor/store"
	"github.com/op-stack/executor/store/storetest"
)

// concurrentMigrations is how many processes migrate one database at once
// in these tests (an API, a worker and replicas of each starting together).
const concurrentMigrations = 6

// TestConcurrentMigrationsPostgres runs six migrations at once, each on a
// store of its own (its own connection pool, as six processes would have),
// against a freshly created PostgreSQL database: every one must succeed and
// the database must end at the latest schema version, each migration
// applied once.
// The migrations run in six processes (this test binary again, see
// TestMigrateProcess), each waiting for a common start time once connected,
// as six `executor migrate` would; without a lock some of them fail creating
// a table another one just created. It runs on a few databases, since the
// race is not lost every time.
func TestConcurrentMigrationsPostgres(t *testing.T) {
	for round := range 3 {
		dbURL := freshPostgresDatabase(t)
		errs := migrateInProcesses(t, concurrentMigrations, dbURL, "")
		for i, err := range errs {
			if err != nil {
				t.Errorf("round %d, process %d: %v", round, i, err)
			}
		}
		checkVersions(t, dbURL, "")
	}
}

// TestConcurrentMigrationsInProcess: six stores of one process (six
// connection pools) migrating one fresh database at once.
func TestConcurrentMigrationsInProcess(t *testing.T) {
	dbURL := freshPostgresDatabase(t)
	errs := migrateConcurrently(t, concurrentMigrations, func() (*store.Store, error) { return store.Open(dbURL, "") })
	for i, err := range errs {
		if err != nil {
			t.Errorf("migration %d: %v", i, err)
		}
	}
	checkVersions(t, dbURL, "")
}

const (
	envMigrateChild = "EXECUTOR_TEST_MIGRATE_CHILD"
	envMigrateURL   = "EXECUTOR_TEST_MIGRATE_URL"
	envMigrateFile  = "EXECUTOR_TEST_MIGRATE_SQLITE"
	envMigrateAt    = "EXECUTOR_TEST_MIGRATE_AT"
)

// TestMigrateProcess is the child process of migrateInProcesses: it opens
// the store, waits for the start time and migrates once.
func TestMigrateProcess(t *testing.T) {
	if os.Getenv(envMigrateChild) != "1" {
		t.Skip("child process of the concurrent migration tests")
	}
	st, err := store.Open(os.Getenv(envMigrateURL), os.Getenv(envMigrateFile))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if err := st.Ping(context.Background()); err != nil {
		t.Fatal(err)
	}
	at, _ := strconv.ParseInt(os.Getenv(envMigrateAt), 10, 64)
	time.Sleep(time.Until(time.Unix(0, at)))
	if _, err := st.Migrate(context.Background(), nil); err != nil {
		t.Fatalf("MIGRATE FAILED: %v", err)
	}
}

// migrateInProcesses migrates the database in n processes at once.
func migrateInProcesses(t *testing.T, n int, dbURL, sqlitePath string) []error {
	t.Helper()
	at := time.Now().Add(2 * time.Second).UnixNano()
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			cmd := exec.Command(os.Args[0], "-test.run=^TestMigrateProcess$", "-test.count=1")
			cmd.Env = append(os.Environ(),
				envMigrateChild+"=1", envMigrateURL+"="+dbURL, envMigrateFile+"="+sqlitePath,
				envMigrateAt+"="+strconv.FormatInt(at, 10))
			if out, err := cmd.CombinedOutput(); err != nil {
				errs[i] = fmt.Errorf("%v:\n%s", err, out)
			}
		})
	}
	wg.Wait()
	return errs
}

// TestConcurrentMigrationsSQLite: the same on one SQLite file, each store
// with its own connection, as two processes sharing DATA_DIR would.
// Six processes first, then six stores of one process.
func TestConcurrentMigrationsSQLite(t *testing.T) {
	path := filepath.Join(t.TempDir(), "executor.db")
	for i, err := range migrateInProcesses(t, concurrentMigrations, "", path) {
		if err != nil {
			t.Errorf("process %d: %v", i, err)
		}
	}
	checkVersions(t, "", path)

	path = filepath.Join(t.TempDir(), "executor.db")
	errs := migrateConcurrently(t, concurrentMigrations, func() (*store.Store, error) { return store.Open("", path) })
	for i, err := range errs {
		if err != nil {
			t.Errorf("migration %d: %v", i, err)
		}
	}
	checkVersions(t, "", path)
}

// migrateConcurrently opens n stores and migrates them all at once.
func migrateConcurrently(t *testing.T, n int, open func() (*store.Store, error)) []error {
	t.Helper()
	stores := make([]*store.Store, n)
	for i := range stores {
		st, err := open()
		if err != nil {
			t.Fatalf("open store %d: %v", i, err)
		}
		t.Cleanup(func() { st.Close() })
		stores[i] = st
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	errs := make([]error, n)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i, st := range stores {
		wg.Go(func() {
			<-start
			_, errs[i] = st.Migrate(ctx, nil)
		})
	}
	close(start)
	wg.Wait()
	return errs
}

// checkVersions checks that the database holds every migration of
// store/migrations exactly once.
func checkVersions(t *testing.T, dbURL, sqlitePath string) {
	t.Helper()
	want := migrationVersions(t)
	st, err := store.Open(dbURL, sqlitePath)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	// A further migration finds nothing to do.
	applied, err := st.Migrate(context.Background(), nil)
	if err != nil {
		t.Fatalf("migrate again: %v", err)
	}
	if len(applied) != 0 {
		t.Errorf("a later migration applied %v again", applied)
	}
	var db *gorm.DB
	if dbURL != "" {
		db, err = gorm.Open(postgres.Open(dbURL), &gorm.Config{Logger: logger.Discard})
	} else {
		db, err = gorm.Open(sqlite.Open(sqlitePath), &gorm.Config{Logger: logger.Discard})
	}
	if err != nil {
		t.Fatal(err)
	}
	sqlDB, _ := db.DB()
	defer sqlDB.Close()
	var got []int64
	if err := db.Raw("SELECT version_id FROM goose_db_version WHERE version_id > 0 AND is_applied ORDER BY id").Scan(&got).Error; err != nil {
		t.Fatalf("read goose_db_version: %v", err)
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("applied versions %v, want each of %v once", got, want)
	}
}

// migrationVersions lists the versions of store/migrations, ascending.
func migrationVersions(t *testing.T) []int64 {
	t.Helper()
	files, err := fs.Glob(os.DirFS("migrations"), "*.sql")
	if err != nil || len(files) == 0 {
		t.Fatalf("list migrations: %v %v", files, err)
	}
	var versions []int64
	for _, f := range files {
		n, err := strconv.ParseInt(strings.SplitN(f, "_", 2)[0], 10, 64)
		if err != nil {
			t.Fatalf("migration %s: %v", f, err)
		}
		versions = append(versions, n)
	}
	sort.Slice(versions, func(i, j int) bool { return versions[i] < versions[j] })
	return versions
}

// freshPostgresDatabase creates a new database on the server of
// TEST_DATABASE_URL (through its maintenance database, postgres), returns
// its URL and drops it when t ends. Without the variable it skips, except in
// CI (CI=true), where it fails.
func freshPostgresDatabase(t *testing.T) string {
	t.Helper()
	base := os.Getenv(storetest.EnvDatabaseURL)
	if base == "" {
		if os.Getenv("CI") == "true" {
			t.Fatalf("%s is not set; CI must run the PostgreSQL tests", storetest.EnvDatabaseURL)
		}
		t.Skipf("%s not set; skipping PostgreSQL", storetest.EnvDatabaseURL)
	}
	u, err := url.Parse(base)
	if err != nil {
		t.Fatalf("parse %s: %v", storetest.EnvDatabaseURL, err)
	}
	maintenance := *u
	maintenance.Path = "/postgres"
	admin, err := gorm.Open(postgres.Open(maintenance.String()), &gorm.Config{Logger: logger.Discard})
	if err != nil {
		t.Fatalf("connect to PostgreSQL: %v", err)
	}
	adminDB, _ := admin.DB()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := adminDB.PingContext(ctx); err != nil {
		adminDB.Close()
		t.Fatalf("PostgreSQL at %s is unreachable: %v", storetest.EnvDatabaseURL, err)
	}
	b := make([]byte, 8)
	rand.Read(b)
	name := "executor_migrate_" + hex.EncodeToString(b)
	if err := admin.Exec("CREATE DATABASE " + name).Error; err != nil {
		adminDB.Close()
		t.Fatalf("create database: %v", err)
	}
	t.Cleanup(func() {
		// Registered before the stores' cleanups, so it runs after them.
		if err := admin.Exec("DROP DATABASE IF EXISTS " + name + " WITH (FORCE)").Error; err != nil {
			t.Logf("drop database %s: %v", name, err)
		}
		adminDB.Close()
	})
	fresh := *u
	fresh.Path = "/" + name
	q := fresh.Query()
	q.Del("search_path")
	fresh.RawQuery = q.Encode()
	return fresh.String()
}
