package api_test

import (
	"bufio"
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"gorm.io/gorm/logger"

	"github.com/op-stack/executor/api"
	"github.com/op-stack/executor/auth"
	"github.com/op-stack/executor/models"
	"github.com/op-stack/executor/store"
	"github.com/op-stack/executor/store/storetest"
)

// keyQueries is a gorm logger that counts the SELECTs on api_key.
type keyQueries struct {
	logger.Interface
	n atomic.Int64
}

func (k *keyQueries) Trace(_ context.Context, _ time.Time, fc func() (string, int64), _ error) {
	if sql, _ := fc(); strings.HasPrefix(sql, "SELECT") && strings.Contains(sql, "api_key") {
		k.n.Add(1)
	}
}

// TestStreamCredentialsRecheckedTogether (issue 28 review): the open event
// streams' API keys are rechecked with one query per check interval for
// all of them, not one per stream; revoking one key still ends its streams
// within a few intervals and leaves the other key's open.
func TestStreamCredentialsRecheckedTogether(t *testing.T) {
	dialects := map[string]func(t *testing.T) (string, string){
		store.DialectSQLite:   func(t *testing.T) (string, string) { return "", filepath.Join(t.TempDir(), "executor.db") },
		store.DialectPostgres: func(t *testing.T) (string, string) { return storetest.PostgresURL(t), "" },
	}
	for name, where := range dialects {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			counter := &keyQueries{Interface: logger.Discard}
			url, path := where(t)
			st, err := store.Open(url, path, store.WithSQLLogger(counter))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { st.Close() })
			if _, err := st.Migrate(ctx, nil); err != nil {
				t.Fatal(err)
			}
			const check = 100 * time.Millisecond
			fake := newFakeWorkflows()
			srv := api.NewServer(api.Options{
				Store: st, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
				Runs: &api.Runs{Store: st}, EventQuerier: fake,
				Stream: api.StreamOptions{PollInterval: 2 * time.Millisecond, IdlePollInterval: 20 * time.Millisecond, CredentialCheckInterval: check},
				Access: api.Access{Mode: api.AuthRequired, Authenticator: auth.Chain{Keys: auth.Keys{Lookup: st.KeyLookup()}}},
			})
			hs := httptest.NewServer(srv.Handler())
			t.Cleanup(hs.Close)
			t.Cleanup(srv.CloseStreams)

			newKey := func() (string, string) {
				key, hash, err := auth.NewAPIKey()
				if err != nil {
					t.Fatal(err)
				}
				k := &store.APIKey{Hash: hash, Prefix: key[:store.APIKeyPrefixLen], Tenant: "acme", Scopes: []string{string(auth.ScopeRunsRead)}}
				if err := st.CreateAPIKey(ctx, k); err != nil {
					t.Fatal(err)
				}
				return key, k.ID
			}
			keyA, idA := newKey()
			keyB, _ := newKey()
			runID := models.NewID()
			if err := st.CreateRun(ctx, &store.Run{ID: runID, HierarchyID: "h", HierarchyName: "h", WorkflowID: models.RunWorkflowID(runID), Task: "t", TenantID: "acme"}); err != nil {
				t.Fatal(err)
			}
			if err := st.SetRunStatus(ctx, models.RunStatusUpdate{RunID: runID, Status: models.RunRunning}); err != nil {
				t.Fatal(err)
			}
			fake.emit(runID, 0, "lifecycle.started", "llm.stream")

			// open reads a stream in the background; the channel is closed
			// when the stream ends.
			open := func(key string) <-chan struct{} {
				req, _ := http.NewRequest(http.MethodGet, hs.URL+pathStreamGET(runID), nil)
				req.Header.Set("Authorization", "Bearer "+key)
				resp, err := hs.Client().Do(req)
				if err != nil {
					t.Fatal(err)
				}
				if resp.StatusCode != http.StatusOK {
					t.Fatalf("stream: status %d", resp.StatusCode)
				}
				t.Cleanup(func() { resp.Body.Close() })
				ended := make(chan struct{})
				go func() {
					defer close(ended)
					sc := bufio.NewScanner(resp.Body)
					for sc.Scan() {
					}
				}()
				return ended
			}
			const perKey = 10
			var streamsA, streamsB []<-chan struct{}
			for range perKey {
				streamsA = append(streamsA, open(keyA))
				streamsB = append(streamsB, open(keyB))
			}
			time.Sleep(check) // every stream under the watch

			before, start := counter.n.Load(), time.Now()
			time.Sleep(10 * check)
			queries, ticks := counter.n.Load()-before, float64(time.Since(start))/float64(check)
			t.Logf("%d api_key queries in %.1f check intervals for %d open streams", queries, ticks, 2*perKey)
			if queries == 0 {
				t.Fatal("no credential recheck ran")
			}
			// One per interval (a tick may fall either side of the window);
			// one per stream would be 20 per interval.
			if float64(queries) > ticks+2 {
				t.Errorf("%d api_key queries in %.1f check intervals: want one per interval for all %d streams", queries, ticks, 2*perKey)
			}

			revokedAt := time.Now()
			if err := st.RevokeAPIKey(ctx, idA); err != nil {
				t.Fatal(err)
			}
			for i, s := range streamsA {
				select {
				case <-s:
				case <-time.After(10 * check):
					t.Fatalf("stream %d of the revoked key still open %s after the revocation", i, time.Since(revokedAt))
				}
			}
			for i, s := range streamsB {
				select {
				case <-s:
					t.Fatalf("stream %d of the kept key ended", i)
				default:
				}
			}
		})
	}
}
