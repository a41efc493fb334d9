package e2e

import (
	"context"
	"database/sql"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // database/sql driver "pgx", to create the private database

	"github.com/op-stack/executor/llm/llmfake"
	"github.com/op-stack/executor/models"
)

// privatePostgres is a PostgreSQL server of the test's own (initdb and
// pg_ctl from the Debian package, on a port of its own), which the test may
// stop and start: the shared server on 5432 is never touched.
type privatePostgres struct {
	t       testing.TB
	bin     string
	dataDir string
	sockDir string
	port    int
}

// startPrivatePostgres initialises and starts a server, or skips the test
// outside CI when the PostgreSQL binaries are not installed.
func startPrivatePostgres(t testing.TB) *privatePostgres {
	t.Helper()
	bins, _ := filepath.Glob("/usr/lib/postgresql/*/bin/pg_ctl")
	if len(bins) == 0 {
		if os.Getenv("CI") == "true" {
			t.Fatal("pg_ctl not found under /usr/lib/postgresql: install the postgresql package")
		}
		t.Skip("pg_ctl not found under /usr/lib/postgresql")
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	root, err := os.MkdirTemp("", "executor-pg-")
	if err != nil {
		t.Fatal(err)
	}
	pg := &privatePostgres{t: t, bin: filepath.Dir(bins[len(bins)-1]), dataDir: filepath.Join(root, "data"), sockDir: filepath.Join(root, "sock"), port: port}
	for _, dir := range []string{pg.dataDir, pg.sockDir} {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	// PostgreSQL refuses to run as root: as root, the server runs as the
	// postgres user, which must own its directories.
	if os.Geteuid() == 0 {
		if out, err := exec.Command("chown", "-R", "postgres:postgres", root).CombinedOutput(); err != nil {
			t.Fatalf("chown %s: %v\n%s", root, err, out)
		}
	}
	t.Cleanup(func() {
		pg.run("pg_ctl", "-D", pg.dataDir, "-m", "immediate", "stop")
		os.RemoveAll(root)
	})
	if out, err := pg.run("initdb", "-D", pg.dataDir, "-U", "postgres", "--auth=trust", "--no-sync"); err != nil {
		t.Fatalf("initdb: %v\n%s", err, out)
	}
	pg.start()
	db, err := sql.Open("pgx", pg.url("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec("CREATE DATABASE executor"); err != nil {
		t.Fatal(err)
	}
	return pg
}

func (pg *privatePostgres) run(name string, args ...string) ([]byte, error) {
	cmd := exec.Command(filepath.Join(pg.bin, name), args...)
	if os.Geteuid() == 0 {
		cmd = exec.Command("runuser", append([]string{"-u", "postgres", "--", filepath.Join(pg.bin, name)}, args...)...)
	}
	return cmd.CombinedOutput()
}

func (pg *privatePostgres) start() {
	pg.t.Helper()
	opts := fmt.Sprintf("-p %d -k %s -c listen_addresses=127.0.0.1 -c fsync=off", pg.port, pg.sockDir)
	if out, err := pg.run("pg_ctl", "-D", pg.dataDir, "-o", opts, "-l", filepath.Join(pg.dataDir, "server.log"), "-w", "start"); err != nil {
		pg.t.Fatalf("pg_ctl start: %v\n%s", err, out)
	}
}

func (pg *privatePostgres) stop() {
	pg.t.Helper()
	if out, err := pg.run("pg_ctl", "-D", pg.dataDir, "-m", "fast", "-w", "stop"); err != nil {
		pg.t.Fatalf("pg_ctl stop: %v\n%s", err, out)
	}
}

func (pg *privatePostgres) url(database string) string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/%s?sslmode=disable", pg.port, database)
}

// TestDatabaseOutageMidRun stops the run's PostgreSQL for 30 s while a
// worker is streaming its answer. The run completes once the database is
// back; every LLM call ran once (the fake server's log); no event and no
// usage row is lost or stored twice; and while the database is down the API
// answers 503 SERVICE_UNAVAILABLE and /readyz names the database without
// naming its host, port or user.
func TestDatabaseOutageMidRun(t *testing.T) {
	if testing.Short() {
		t.Skip("stops a database for 30 s")
	}
	pg := startPrivatePostgres(t)
	// Long answers, so that later agents read the searcher's by reference
	// (a database read) after the outage.
	long := strings.Repeat("finding ", 300)
	e := newEnv(t, referenceRules(map[string][]llmfake.Response{
		"W-SEARCHER": {{Content: long, ChunkSize: 40, TokenDelay: 50 * time.Millisecond}},
	}), withDatabase(pg.url("executor")))
	id := e.startRun(e.createHierarchy(referenceHierarchy()), "outage")
	waitFor(t, 30*time.Second, "the searcher's call", func() bool { return len(callsMatching(e.fake.Calls(), "W-SEARCHER")) > 0 })

	pg.stop()
	down := time.Now()
	waitFor(t, 10*time.Second, "503 from runs/get", func() bool {
		status, env := e.post("/runs/get", map[string]any{"id": id})
		return status == http.StatusServiceUnavailable && env.ErrorCode == models.CodeUnavailable.Name
	})
	resp, err := http.Get(strings.TrimSuffix(e.apiURL, "/api/executor/v1") + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(string(body), `"database":"unavailable`) {
		t.Errorf("readyz during the outage = %d %s", resp.StatusCode, body)
	}
	for _, secret := range []string{fmt.Sprint(pg.port), "127.0.0.1", "postgres", "executor"} {
		if strings.Contains(string(body), secret) {
			t.Errorf("readyz names %q: %s", secret, body)
		}
	}
	time.Sleep(30*time.Second - time.Since(down))
	pg.start()

	ctx := context.Background()
	if err := e.temporal.GetWorkflow(ctx, models.RunWorkflowID(id), "").Get(ctx, nil); err != nil {
		t.Fatalf("run after the outage: %v", err)
	}
	v := e.waitRun(id, time.Minute)
	if v.Status != models.RunCompleted {
		t.Fatalf("run status %s", v.Status)
	}
	if n := len(e.fake.Calls()); n != 11 {
		t.Errorf("the fake model served %d calls, want 11: a call was repeated or lost", n)
	}
	calls, err := e.store.LLMCalls(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	ok := 0
	for _, c := range calls {
		if c.Status == "ok" {
			ok++
		}
	}
	if ok != 11 {
		t.Errorf("%d successful llm_call rows, want one per call: 11", ok)
	}
	events := e.storedEvents(id)
	searcher := 0
	for i, ev := range events {
		if ev.Sequence != int64(i+1) {
			t.Fatalf("stored event %d has sequence %d: a gap or a duplicate", i, ev.Sequence)
		}
		if ev.Event.String() == "llm.stream" && ev.Source.AgentID == "w-searcher" {
			searcher += len(ev.Data["content"].(string))
		}
	}
	if len(events) == 0 || events[len(events)-1].Event.String() != "lifecycle.completed" {
		t.Errorf("stored log ends without lifecycle.completed (%d events)", len(events))
	}
	if searcher != len(long) {
		t.Errorf("the searcher's streamed text is %d characters in the log, want %d", searcher, len(long))
	}
	// The analyst read the searcher's whole answer by reference.
	analyst := callsMatching(e.fake.Calls(), "W-ANALYST")
	if len(analyst) != 1 || !strings.Contains(lastUser(analyst[0]), long) {
		t.Errorf("the analyst's prompt lacks the searcher's whole answer")
	}
	t.Logf("outage of %s; %d events, %d llm_call rows", 30*time.Second, len(events), len(calls))
}
