package api_test

import (
	"bytes"
	"encoding/json"
	"net"
	"net/http"
	"testing"
	"time"

	"go.temporal.io/sdk/client"

	"github.com/op-stack/executor/api"
	"github.com/op-stack/executor/store/storetest"
)

// TestTemporalOutageAnswers503Fast (issue 23 item 10): with a Temporal
// frontend that does not answer (a port nobody listens on, and one that
// accepts connections and says nothing), runs/start answers 503
// SERVICE_UNAVAILABLE with Retry-After well within the SDK's 10 s RPC
// deadline, every time, and stores no run.
func TestTemporalOutageAnswers503Fast(t *testing.T) {
	refused := func(t *testing.T) string {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := ln.Addr().String()
		ln.Close()
		return addr
	}
	silent := func(t *testing.T) string {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ln.Close() })
		go func() {
			var held []net.Conn
			defer func() {
				for _, c := range held {
					c.Close()
				}
			}()
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				held = append(held, c) // never read, never answered
			}
		}()
		return ln.Addr().String()
	}
	for name, frontend := range map[string]func(*testing.T) string{"refused": refused, "silent": silent} {
		t.Run(name, func(t *testing.T) {
			tc, err := client.NewLazyClient(client.Options{HostPort: frontend(t)})
			if err != nil {
				t.Fatal(err)
			}
			defer tc.Close()
			st := storetest.SQLite(t)
			a := newTestAPI(t, st, withFakeTools, func(o *api.Options) { o.Runs = &api.Runs{Store: st, Temporal: tc} })
			id := create(a, contractBody())
			for i := range 3 {
				raw, _ := json.Marshal(map[string]any{"hierarchy_id": id, "task": "t"})
				began := time.Now()
				resp, err := a.client.Post(a.url+"/api/executor/v1/runs/start", "application/json", bytes.NewReader(raw))
				if err != nil {
					t.Fatal(err)
				}
				took := time.Since(began)
				var env envelope
				_ = json.NewDecoder(resp.Body).Decode(&env)
				resp.Body.Close()
				t.Logf("runs/start %d: %d %s Retry-After=%q in %s", i+1, resp.StatusCode, env.ErrorCode, resp.Header.Get("Retry-After"), took.Round(time.Millisecond))
				if resp.StatusCode != http.StatusServiceUnavailable || env.ErrorCode != "SERVICE_UNAVAILABLE" {
					t.Errorf("runs/start %d: %d %s, want 503 SERVICE_UNAVAILABLE", i+1, resp.StatusCode, env.ErrorCode)
				}
				if resp.Header.Get("Retry-After") == "" {
					t.Errorf("runs/start %d: no Retry-After", i+1)
				}
				if took > 3*time.Second {
					t.Errorf("runs/start %d took %s, want well under the SDK's 10 s", i+1, took)
				}
			}
			var list struct {
				Runs []json.RawMessage `json:"runs"`
			}
			a.mustPost("/api/executor/v1/runs/list", map[string]any{"hierarchy_id": id}, &list)
			if len(list.Runs) != 0 {
				t.Errorf("%d runs stored, want none", len(list.Runs))
			}
		})
	}
}
