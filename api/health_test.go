package api_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"syscall"
	"testing"
	"time"

	"github.com/op-stack/executor/api"
	"github.com/op-stack/executor/store/storetest"
)

// fakeTemporal is a HealthChecker answering err.
type fakeTemporal struct{ err error }

func (f fakeTemporal) CheckHealth(context.Context) error { return f.err }

type healthBody struct {
	Status string            `json:"status"`
	Checks map[string]string `json:"checks"`
}

func getHealth(t *testing.T, url string) (int, healthBody) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body healthBody
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	return resp.StatusCode, body
}

func TestHealthz(t *testing.T) {
	st := storetest.SQLite(t)
	a := newTestAPI(t, st, func(o *api.Options) { o.Health = fakeTemporal{errors.New("down")} })
	// Liveness checks no dependency: Temporal being down does not matter.
	status, body := getHealth(t, a.url+"/healthz")
	if status != http.StatusOK || body.Status != "ok" || body.Checks != nil {
		t.Fatalf("healthz = %d %+v", status, body)
	}
}

func TestReadyz(t *testing.T) {
	st := storetest.SQLite(t)
	a := newTestAPI(t, st, func(o *api.Options) { o.Health = fakeTemporal{} })
	status, body := getHealth(t, a.url+"/readyz")
	if status != http.StatusOK || body.Status != "ok" || body.Checks["database"] != "ok" || body.Checks["temporal"] != "ok" {
		t.Fatalf("readyz = %d %+v", status, body)
	}
}

func TestReadyzWithoutTemporalChecksTheDatabase(t *testing.T) {
	a := newTestAPI(t, storetest.SQLite(t))
	status, body := getHealth(t, a.url+"/readyz")
	if status != http.StatusOK || len(body.Checks) != 1 || body.Checks["database"] != "ok" {
		t.Fatalf("readyz = %d %+v", status, body)
	}
}

func TestReadyzNamesTheFailingDependency(t *testing.T) {
	t.Run("database closed", func(t *testing.T) {
		st := storetest.SQLite(t)
		a := newTestAPI(t, st, func(o *api.Options) { o.Health = fakeTemporal{} })
		st.Close()
		status, body := getHealth(t, a.url+"/readyz")
		if status != http.StatusServiceUnavailable || body.Status != "unavailable" ||
			body.Checks["database"] == "ok" || body.Checks["database"] == "" || body.Checks["temporal"] != "ok" {
			t.Fatalf("readyz = %d %+v", status, body)
		}
	})
	t.Run("temporal down", func(t *testing.T) {
		// The unauthenticated probe names the dependency and the kind of
		// failure, never the host (nor a user or database name).
		refused := &net.OpError{Op: "dial", Net: "tcp", Addr: &net.TCPAddr{IP: net.IPv4(10, 1, 2, 3), Port: 7233}, Err: syscall.ECONNREFUSED}
		a := newTestAPI(t, storetest.SQLite(t), func(o *api.Options) {
			o.Health = fakeTemporal{fmt.Errorf("dial temporal.internal.example: %w", refused)}
		})
		status, body := getHealth(t, a.url+"/readyz")
		if status != http.StatusServiceUnavailable || body.Checks["database"] != "ok" || body.Checks["temporal"] != "unavailable: connection refused" {
			t.Fatalf("readyz = %d %+v", status, body)
		}
	})
}

// hangingChecker answers only when its context ends.
type hangingChecker struct{}

func (hangingChecker) CheckHealth(ctx context.Context) error { <-ctx.Done(); return ctx.Err() }

func TestReadinessTimesOut(t *testing.T) {
	r := api.Readiness{Temporal: hangingChecker{}, Timeout: 50 * time.Millisecond}
	start := time.Now()
	ready, checks := r.Check(context.Background())
	if ready || checks["temporal"] != "unavailable: no answer in time" || time.Since(start) > 2*time.Second {
		t.Fatalf("ready %v, checks %v after %v", ready, checks, time.Since(start))
	}
}

// TestOpsHandler is what a worker-only process serves on METRICS_ADDR.
func TestOpsHandler(t *testing.T) {
	metrics := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.Write([]byte("# metrics\n")) })
	srv := httptest.NewServer(api.OpsHandler(metrics, api.Readiness{Temporal: fakeTemporal{errors.New("down")}}))
	defer srv.Close()
	if status, body := getHealth(t, srv.URL+"/healthz"); status != http.StatusOK || body.Status != "ok" {
		t.Errorf("healthz = %d %+v", status, body)
	}
	if status, body := getHealth(t, srv.URL+"/readyz"); status != http.StatusServiceUnavailable || body.Checks["temporal"] != "unavailable" {
		t.Errorf("readyz = %d %+v", status, body)
	}
	resp, err := http.Get(srv.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("metrics = %d", resp.StatusCode)
	}
}

// TestReadyzInfoNeverMakesUnready: the LLM circuits are information only.
func TestReadyzInfoNeverMakesUnready(t *testing.T) {
	st := storetest.SQLite(t)
	a := newTestAPI(t, st, func(o *api.Options) {
		o.Health = fakeTemporal{}
		o.ReadinessInfo = func() map[string]any {
			return map[string]any{"llm_circuits": map[string]string{"openai": "open"}}
		}
	})
	resp, err := http.Get(a.url + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body struct {
		Status string `json:"status"`
		Info   struct {
			Circuits map[string]string `json:"llm_circuits"`
		} `json:"info"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK || body.Status != "ok" || body.Info.Circuits["openai"] != "open" {
		t.Fatalf("readyz = %d %+v", resp.StatusCode, body)
	}
}
