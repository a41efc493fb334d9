package api

import (
	"net/http"
	"time"

	"github.com/gin-gonic/gin"
	"go.opentelemetry.io/contrib/instrumentation/github.com/gin-gonic/gin/otelgin"
	"go.opentelemetry.io/otel/trace"

	"github.com/op-stack/executor/telemetry"
)

// unmatchedRoute is the route label of requests that matched no route:
// the raw path of a scanner's probe must not become a label value.
const unmatchedRoute = "unmatched"

// routeOf is a request's route pattern (gin's FullPath, e.g.
// /api/executor/v1/runs/:id/stream), never its raw path.
func routeOf(c *gin.Context) string {
	if r := c.FullPath(); r != "" {
		return r
	}
	return unmatchedRoute
}

// methodOf bounds the method label to the standard methods.
func methodOf(c *gin.Context) string {
	switch m := c.Request.Method; m {
	case http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch,
		http.MethodDelete, http.MethodOptions, http.MethodConnect, http.MethodTrace:
		return m
	}
	return "OTHER"
}

// observeRequests counts every request by route and status and times it.
func (s *Server) observeRequests(c *gin.Context) {
	start := time.Now()
	c.Next()
	s.metrics.ObserveHTTP(methodOf(c), routeOf(c), c.Writer.Status(), time.Since(start))
}

// isOpsRoute tells the probe and scrape routes apart, which are neither
// traced nor logged at info: they come every few seconds and say nothing
// about the API's use.
func isOpsRoute(c *gin.Context) bool {
	switch c.FullPath() {
	case "/healthz", "/readyz", "/metrics":
		return true
	}
	return false
}

// tracing is otelgin's middleware on tp: one server span per request,
// named by method and route, continuing the caller's W3C trace context.
// Runs started by the request continue the trace into Temporal through the
// client's tracing interceptor.
func tracing(tp trace.TracerProvider) gin.HandlerFunc {
	return otelgin.Middleware("",
		otelgin.WithTracerProvider(tp),
		otelgin.WithPropagators(telemetry.Propagator),
		otelgin.WithGinFilter(func(c *gin.Context) bool { return !isOpsRoute(c) }),
	)
}
