package api_test

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"fmt"
	"net/http"
	"net/url"
	"sync"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // the "pgx" database/sql driver, for the test's own admin connection

	"github.com/op-stack/executor/store"
	"github.com/op-stack/executor/store/storetest"
)

// TestConcurrentRequestsWaitForAConnection (issue 23 item 5): 200
// concurrent hierarchies/create requests on a PostgreSQL that lets the
// service's role open only 5 connections all succeed. The process's pool
// is bounded (4 connections here, DB_MAX_OPEN_CONNS), so requests wait for
// a free connection instead of opening one the server refuses with "too
// many connections", which the API would answer 503 "the database is
// unavailable" although the database is up.
func TestConcurrentRequestsWaitForAConnection(t *testing.T) {
	base := storetest.PostgresURL(t)
	ctx := context.Background()
	admin, err := sql.Open("pgx", base)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	migrator, err := store.Open(base, "")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := migrator.Migrate(ctx, nil); err != nil {
		t.Fatal(err)
	}
	migrator.Close()

	u, _ := url.Parse(base)
	schema := u.Query().Get("search_path")
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	role := "pool_" + hex.EncodeToString(b)
	const roleLimit = 5
	for _, q := range []string{
		fmt.Sprintf("CREATE ROLE %s LOGIN CONNECTION LIMIT %d", role, roleLimit),
		fmt.Sprintf("GRANT USAGE ON SCHEMA %s TO %s", schema, role),
		fmt.Sprintf("GRANT ALL ON ALL TABLES IN SCHEMA %s TO %s", schema, role),
		fmt.Sprintf("GRANT ALL ON ALL SEQUENCES IN SCHEMA %s TO %s", schema, role),
	} {
		if _, err := admin.ExecContext(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	t.Cleanup(func() {
		// After the store's connections are closed (cleanups run last in,
		// first out, and the store's is registered below).
		admin.Exec("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = $1", role)
		admin.Exec(fmt.Sprintf("DROP OWNED BY %s", role))
		admin.Exec(fmt.Sprintf("DROP ROLE %s", role))
	})
	u.User = url.User(role)
	st, err := store.Open(u.String(), "", store.WithPool(store.Pool{MaxOpen: roleLimit - 1}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	a := newTestAPI(t, st)

	const requests = 200
	statuses := make([]int, requests)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range requests {
		wg.Go(func() {
			body := contractBody()
			body["name"] = fmt.Sprintf("pool-%03d", i)
			<-start
			statuses[i], _ = a.post(pathCreate, body)
		})
	}
	began := time.Now()
	close(start)
	wg.Wait()
	counts := map[int]int{}
	for _, s := range statuses {
		counts[s]++
	}
	t.Logf("%d concurrent creates with a pool of %d on a role limited to %d connections: %v in %s", requests, roleLimit-1, roleLimit, counts, time.Since(began).Round(time.Millisecond))
	if counts[http.StatusOK] != requests {
		t.Fatalf("statuses %v, want all %d 200", counts, requests)
	}
	var n int
	if err := admin.QueryRowContext(ctx, fmt.Sprintf("SELECT count(*) FROM %s.hierarchy_team", schema)).Scan(&n); err != nil || n != requests {
		t.Fatalf("hierarchies stored: %d %v", n, err)
	}
}
