//go:build cluster

package clustertest

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/op-stack/executor/llm/llmfake"
	"github.com/op-stack/executor/models"
)

// clusterScript runs one of cluster/'s scripts (stop.sh, setup.sh) with the
// test's environment (CLUSTER_DIR, CLUSTER_PORT, BIN... as make cluster
// had them).
func clusterScript(t *testing.T, name string) {
	t.Helper()
	cmd := exec.Command(filepath.Join("..", "cluster", name))
	cmd.Env = os.Environ()
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("cluster/%s: %v\n%s", name, err, out)
	}
}

// TestTemporalOutageKeepsAnswers: the Temporal server is stopped for 20 s
// while 30 runs stream on 2 workers (at least 7 calls streaming at that
// moment), then started again. Answers received
// while it was down cannot be reported; their activities are retried when
// it is back, and the retries use the kept answers. Every call's request
// count at the fake is 1 (the model never fails here), the provider's
// requests equal the usage rows, every repeated attempt is announced by an
// llm.retry before its text with no earlier attempt's text after it, and
// every call's llm.usage is in the log once.
//
// It stops the server `make cluster` started (the pid file under
// CLUSTER_DIR, default ../.data/cluster) with cluster/stop.sh and starts it
// again with cluster/setup.sh.
func TestTemporalOutageKeepsAnswers(t *testing.T) {
	if testing.Short() {
		t.Skip("the cluster layer needs `make cluster`")
	}
	dir := env("CLUSTER_DIR", filepath.Join("..", ".data", "cluster"))
	if _, err := os.Stat(filepath.Join(dir, "server.pid")); err != nil {
		t.Skipf("no server started by make cluster under %s (CLUSTER_DIR): %v", dir, err)
	}
	c := newCluster(t)
	const n = 30
	var rules []llmfake.Rule
	for i := 0; i < n; i++ {
		rules = append(rules, referenceRules(fmt.Sprintf("o%02d", i), slowWorkers(40))...)
	}
	c.fake.SetRules(rules...)
	ids := startReferenceRuns(t, c, n, "o%02d", "outage ")
	if t.Failed() {
		return
	}
	// Stop the server while most runs stream.
	deadline := time.Now().Add(2 * time.Minute)
	for {
		streaming := 0
		for _, call := range c.fake.Calls() {
			if len(call.ChunkTimes) > 0 && call.FinishedAt.IsZero() {
				streaming++
			}
		}
		if streaming >= n/4 {
			logf("outage: %d calls streaming; stopping the Temporal server", streaming)
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("only %d calls streaming at once", streaming)
		}
		time.Sleep(50 * time.Millisecond)
	}
	stopped := time.Now()
	clusterScript(t, "stop.sh")
	logf("outage: server stopped in %v", time.Since(stopped).Round(time.Millisecond))
	time.Sleep(time.Until(stopped.Add(20 * time.Second)))
	restarted := time.Now()
	clusterScript(t, "setup.sh")
	logf("outage: server answering again %v after the stop (setup took %v)", time.Since(stopped).Round(time.Second), time.Since(restarted).Round(time.Millisecond))

	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			checkCompleted(t, waitRun(t, c.apis[i%2], ids[i], 5*time.Minute), fmt.Sprintf("o%02d", i))
		}()
	}
	wg.Wait()

	// One request per call: each rule's scripted answers were taken once.
	calls := c.fake.Calls()
	perRule := map[string]int{}
	for _, call := range calls {
		perRule[call.RuleName]++
	}
	want := map[string]int{"global decisions": 3, "final answer": 1, "research decisions": 2, "writing decisions": 2, "W-SEARCHER": 1, "W-ANALYST": 1, "W-WRITER": 1}
	for i := 0; i < n; i++ {
		for name, w := range want {
			rule := fmt.Sprintf("%s-o%02d-", name, i)
			if perRule[rule] != w {
				t.Errorf("%s: %d requests, want %d", rule, perRule[rule], w)
			}
		}
	}
	// The provider's requests equal the usage rows.
	db, err := sql.Open("pgx", c.dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var rows int
	if err := db.QueryRowContext(context.Background(), "SELECT count(*) FROM llm_call").Scan(&rows); err != nil {
		t.Fatal(err)
	}
	if rows != len(calls) {
		t.Errorf("%d usage rows for %d provider requests", rows, len(calls))
	}

	// Attempts apart (per call: an agent's calls follow each other, each
	// ended by its llm.usage), usage once.
	repeats, kept := 0, 0
	for _, id := range ids {
		latest := map[string]float64{}
		usage := map[string]int{}
		for _, ev := range storedEvents(t, c.apis[0], id) {
			if ev.Event.Category != models.CategoryLLM {
				continue
			}
			agent := ev.Source.AgentID
			attempt, _ := ev.Data["attempt"].(float64)
			switch ev.Event.Action {
			case models.ActionRetry:
				repeats++
				latest[agent] = attempt
			case models.ActionStream, models.ActionReasoning:
				if attempt > 1 && latest[agent] < attempt {
					t.Errorf("run %s: %s's attempt %v streamed before its llm.retry (sequence %d)", id, agent, attempt, ev.Sequence)
				}
				if attempt < latest[agent] {
					t.Errorf("run %s: %s's attempt %v streamed after attempt %v's llm.retry (sequence %d)", id, agent, attempt, latest[agent], ev.Sequence)
				}
			case models.ActionUsage:
				// The call is complete: the agent's next text is another
				// call's, whose attempts count from 1.
				delete(latest, agent)
				callID, _ := ev.Data["llm_call_id"].(string)
				usage[callID]++
				if k, _ := ev.Data["kept"].(bool); k {
					kept++
				}
			}
		}
		for callID, k := range usage {
			if k != 1 {
				t.Errorf("run %s: llm.usage of %q logged %d times", id, callID, k)
			}
		}
	}
	logf("outage: %d provider requests, %d usage rows, %d repeated attempts, %d answered from kept answers, runs done %v after the restart",
		len(calls), rows, repeats, kept, time.Since(restarted).Round(time.Second))
	if repeats == 0 {
		t.Log("no attempt was repeated: the outage met no call in flight")
	}
}
