package api_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/op-stack/executor/api"
	"github.com/op-stack/executor/auth"
	"github.com/op-stack/executor/models"
	"github.com/op-stack/executor/store"
	"github.com/op-stack/executor/store/storetest"
)

// TestRevokingAKeyEndsItsStreams (issue 23 item 7): revoking an API key
// makes the stream tokens it issued invalid at once, and ends, within
// the credential check interval, the open streams opened with those
// tokens or with the key itself. Another key's token and stream go on.
func TestRevokingAKeyEndsItsStreams(t *testing.T) {
	storetest.ForEachDialect(t, func(t *testing.T, st *store.Store) {
		ctx := context.Background()
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
		revoked, revokedID := newKey()
		kept, _ := newKey()

		runID := models.NewID()
		if err := st.CreateRun(ctx, &store.Run{ID: runID, HierarchyID: "h", HierarchyName: "h", WorkflowID: models.RunWorkflowID(runID), Task: "t", TenantID: "acme"}); err != nil {
			t.Fatal(err)
		}
		if err := st.SetRunStatus(ctx, models.RunStatusUpdate{RunID: runID, Status: models.RunRunning}); err != nil {
			t.Fatal(err)
		}
		fake.emit(runID, 0, "lifecycle.started", "llm.stream")

		issue := func(key string) (int, string) {
			body, _ := json.Marshal(map[string]any{"id": runID})
			req, _ := http.NewRequest(http.MethodPost, hs.URL+"/api/executor/v1/runs/stream-token", bytes.NewReader(body))
			req.Header.Set("Authorization", "Bearer "+key)
			req.Header.Set("Content-Type", "application/json")
			resp, err := hs.Client().Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			var env struct {
				Data struct {
					Token string `json:"token"`
				} `json:"data"`
			}
			_ = json.NewDecoder(resp.Body).Decode(&env)
			return resp.StatusCode, env.Data.Token
		}
		connect := func(token, key string) *http.Response {
			u := hs.URL + pathStreamGET(runID)
			if token != "" {
				u += "?token=" + token
			}
			req, _ := http.NewRequest(http.MethodGet, u, nil)
			if key != "" {
				req.Header.Set("Authorization", "Bearer "+key)
			}
			resp, err := hs.Client().Do(req)
			if err != nil {
				t.Fatal(err)
			}
			return resp
		}
		// open connects and reads the stream in the background: lines go
		// to the channel, which is closed when the stream ends.
		open := func(token, key string) <-chan string {
			resp := connect(token, key)
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("stream (token %v, key %v): status %d", token != "", key != "", resp.StatusCode)
			}
			t.Cleanup(func() { resp.Body.Close() })
			lines := make(chan string, 1000)
			go func() {
				defer close(lines)
				sc := bufio.NewScanner(resp.Body)
				for sc.Scan() {
					lines <- sc.Text()
				}
			}()
			return lines
		}
		waitFor := func(lines <-chan string, want string) {
			t.Helper()
			deadline := time.After(5 * time.Second)
			for {
				select {
				case l, ok := <-lines:
					if !ok {
						t.Fatalf("stream ended before %q", want)
					}
					if l == want {
						return
					}
				case <-deadline:
					t.Fatalf("no %q within 5s", want)
				}
			}
		}

		status, tokRevoked := issue(revoked)
		if status != http.StatusOK || tokRevoked == "" {
			t.Fatalf("stream-token with the key to revoke: %d", status)
		}
		status, tokKept := issue(kept)
		if status != http.StatusOK || tokKept == "" {
			t.Fatalf("stream-token with the kept key: %d", status)
		}
		byToken, byKey, other := open(tokRevoked, ""), open("", revoked), open(tokKept, "")
		for _, s := range []<-chan string{byToken, byKey, other} {
			waitFor(s, "id: 2")
		}

		revokedAt := time.Now()
		if err := st.RevokeAPIKey(ctx, revokedID); err != nil {
			t.Fatal(err)
		}
		// The token is refused at once, and no new one is issued.
		if resp := connect(tokRevoked, ""); resp.StatusCode != http.StatusUnauthorized {
			resp.Body.Close()
			t.Errorf("reconnecting with the revoked key's token: %d, want 401", resp.StatusCode)
		} else {
			resp.Body.Close()
		}
		if status, _ := issue(revoked); status != http.StatusUnauthorized {
			t.Errorf("stream-token with the revoked key: %d, want 401", status)
		}
		// The open streams opened with the key or its token end.
		for name, s := range map[string]<-chan string{"token": byToken, "key": byKey} {
			timeout := time.After(10 * check)
		drain:
			for {
				select {
				case _, ok := <-s:
					if !ok {
						break drain
					}
				case <-timeout:
					t.Fatalf("the stream opened with the revoked key's %s is still open %s after the revocation", name, time.Since(revokedAt))
				}
			}
			t.Logf("stream opened with the %s ended %s after the revocation", name, time.Since(revokedAt).Round(time.Millisecond))
		}
		// The other key's stream goes on and its token still connects.
		fake.emit(runID, 0, "llm.stream")
		waitFor(other, "id: 3")
		resp := connect(tokKept, "")
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Errorf("the kept key's token: %d", resp.StatusCode)
		}
	})
}
