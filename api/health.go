package api

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"sync"
	"syscall"
	"time"

	"github.com/gin-gonic/gin"
	"go.temporal.io/sdk/client"

	"github.com/op-stack/executor/api/openapi"
	"github.com/op-stack/executor/store"
)

// HealthChecker tells whether a dependency answers: nil when it does.
type HealthChecker interface {
	CheckHealth(ctx context.Context) error
}

// HealthCheckFunc adapts a function, such as (*store.Store).Ping, to
// HealthChecker.
type HealthCheckFunc func(ctx context.Context) error

// CheckHealth implements HealthChecker.
func (f HealthCheckFunc) CheckHealth(ctx context.Context) error { return f(ctx) }

// TemporalHealth checks a Temporal client's connection with the frontend's
// gRPC health check.
func TemporalHealth(c client.Client) HealthChecker { return temporalHealth{c} }

type temporalHealth struct{ c client.Client }

func (h temporalHealth) CheckHealth(ctx context.Context) error {
	_, err := h.c.CheckHealth(ctx, &client.CheckHealthRequest{})
	return err
}

// DefaultReadinessTimeout bounds each dependency check of /readyz: a
// dependency that has not answered by then is reported as failing, so the
// probe gets an answer naming it rather than timing out itself (give the
// probe a timeout above this, e.g. Kubernetes' timeoutSeconds: 3).
const DefaultReadinessTimeout = 2 * time.Second

// Readiness checks the dependencies a process needs to do its work: the
// database and Temporal. A nil checker is not checked (a server built
// without Temporal serves the hierarchy API on the database alone).
type Readiness struct {
	Database HealthChecker
	Temporal HealthChecker
	// Timeout bounds each check; DefaultReadinessTimeout when zero.
	Timeout time.Duration
	// Info, when set, adds details under "info" that never make the
	// process unready (the LLM providers' circuits: provider -> closed,
	// half-open or open). It must name no hosts.
	Info func() map[string]any
}

// Check runs the checks at once and returns whether all passed, with "ok"
// or the error of each dependency checked.
func (r Readiness) Check(ctx context.Context) (ready bool, checks map[string]string) {
	timeout := r.Timeout
	if timeout <= 0 {
		timeout = DefaultReadinessTimeout
	}
	deps := map[string]HealthChecker{"database": r.Database, "temporal": r.Temporal}
	checks = map[string]string{}
	ready = true
	var (
		mu sync.Mutex
		wg sync.WaitGroup
	)
	for name, c := range deps {
		if c == nil {
			continue
		}
		wg.Go(func() {
			cctx, cancel := context.WithTimeout(ctx, timeout)
			defer cancel()
			result := "ok"
			if err := c.CheckHealth(cctx); err != nil {
				result = healthFailure(cctx, err)
			}
			mu.Lock()
			defer mu.Unlock()
			checks[name] = result
			if result != "ok" {
				ready = false
			}
		})
	}
	wg.Wait()
	return ready, checks
}

// answer is /readyz's status and body.
func (r Readiness) answer(ctx context.Context) (int, map[string]any) {
	ready, checks := r.Check(ctx)
	body := map[string]any{"status": "ok", "checks": checks}
	if r.Info != nil {
		if info := r.Info(); len(info) > 0 {
			body["info"] = info
		}
	}
	if !ready {
		body["status"] = "unavailable"
		return http.StatusServiceUnavailable, body
	}
	return http.StatusOK, body
}

// ServeHTTP answers /readyz: 200 {"status":"ok","checks":{…}} when every
// dependency answers, else 503 {"status":"unavailable","checks":{…}} naming
// the failure.
func (r Readiness) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	status, body := r.answer(req.Context())
	writeJSON(w, status, body)
}

// Liveness answers /healthz: 200 {"status":"ok"} whenever the process can
// answer at all. It checks no dependency, so an orchestrator never restarts
// a healthy process because the database or Temporal is down.
var Liveness http.Handler = http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, map[string]any{"status": "ok"})
})

func writeJSON(w http.ResponseWriter, status int, body any) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(body)
}

// OpsHandler serves /metrics (when metrics is not nil), /healthz and
// /readyz on their own, for the METRICS_ADDR listener of a process that
// runs no API or keeps them off the API's address.
func OpsHandler(metrics http.Handler, ready Readiness) http.Handler {
	mux := http.NewServeMux()
	if metrics != nil {
		mux.Handle("GET /metrics", metrics)
	}
	mux.Handle("GET /healthz", Liveness)
	mux.Handle("GET /readyz", ready)
	return mux
}

// routeOps registers /healthz, /readyz, /metrics and /openapi.json at the root, outside
// the API prefixes and without authentication, where probes and scrapers
// expect them.
func (s *Server) routeOps(r *gin.Engine, metrics http.Handler) {
	r.GET("/healthz", gin.WrapH(Liveness))
	r.GET("/readyz", gin.WrapH(s.readiness))
	r.GET("/openapi.json", gin.WrapF(serveOpenAPI))
	if metrics != nil {
		r.GET("/metrics", gin.WrapH(metrics))
	}
}

// healthFailure says why a dependency failed its check in words that name
// no host, user or database: /readyz is unauthenticated.
func healthFailure(ctx context.Context, err error) string {
	switch {
	case ctx.Err() != nil:
		return "unavailable: no answer in time"
	case errors.Is(err, syscall.ECONNREFUSED):
		return "unavailable: connection refused"
	case store.IsUnavailable(err):
		return "unavailable: connection failed"
	}
	return "unavailable"
}

// serveOpenAPI answers GET /openapi.json with the API's OpenAPI document.
func serveOpenAPI(w http.ResponseWriter, _ *http.Request) {
	doc, err := openapi.JSON()
	if err != nil {
		writeJSON(w, http.StatusInternalServerError, map[string]any{"status": "error", "error": err.Error()})
		return
	}
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.Header().Set("Cache-Control", "public, max-age=300")
	_, _ = w.Write(doc)
}
