// Package api is the service's HTTP interface, built on gin: the executor
// API of contract 002 under /api/executor/v1, and spec 001's REST surface
// under /api/v1, both served by the same engine.
package api

import (
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/gin-gonic/gin"
	"go.opentelemetry.io/otel/trace"

	"github.com/op-stack/executor/a2aserve"
	"github.com/op-stack/executor/console"
	"github.com/op-stack/executor/mcpserve"
	"github.com/op-stack/executor/memory"
	"github.com/op-stack/executor/models"
	"github.com/op-stack/executor/notify"
	"github.com/op-stack/executor/store"
	"github.com/op-stack/executor/stream"
	"github.com/op-stack/executor/telemetry"
	"github.com/op-stack/executor/webhooks"
)

// Options wires a Server.
type Options struct {
	Store        *store.Store
	Logger       *slog.Logger
	MaxBodyBytes int64
	// Runs starts and controls runs; nil serves the hierarchy API only.
	Runs *Runs
	// Stream tunes the event streams (runs/stream); zero fields take defaults.
	Stream StreamOptions
	// EventQuerier reads live runs' events from their workflows; nil uses
	// Runs.Temporal. Tests set a fake here.
	EventQuerier EventQuerier
	// Listener wakes a live run's poller when the run has news
	// (notify.Broker, fed by this process's activities or by a
	// notify.PostgresListener), so that it queries then and otherwise only
	// every Stream.SafetyPollInterval. Nil: pollers query on their timer
	// (Stream.PollInterval, backing off to Stream.IdlePollInterval).
	Listener notify.Listener
	// Tools validates the tool keys that sub-agents and workers list; nil
	// knows no tool, so any key is refused. The tools package's *Registry
	// fits here.
	Tools ToolCatalog
	// MCPStdioCommands lists the programs a stdio MCP server may run
	// (MCP_STDIO_COMMANDS); empty refuses every stdio server.
	MCPStdioCommands []string
	// MCPProbe tries to reach an MCP server on create and update; nil
	// does not try, and no warning is ever given.
	MCPProbe MCPProbe
	// MCPProbeTimeout bounds a probe (DefaultMCPProbeTimeout when zero).
	MCPProbeTimeout time.Duration
	// Webhooks queues redeliveries (webhooks/redeliver); nil answers
	// them 503.
	Webhooks *webhooks.Queue
	// Metrics counts requests by route and status and reads the event
	// streams' gauges; nil records nothing.
	Metrics *telemetry.Metrics
	// MetricsHandler is served at GET /metrics; nil serves no /metrics
	// (the process serves it on its own address, or not at all).
	MetricsHandler http.Handler
	// Health checks Temporal for GET /readyz (TemporalHealth wraps a
	// client); nil checks the database only. Tests set a fake here.
	Health HealthChecker
	// ReadinessInfo adds information to GET /readyz that never makes the
	// process unready (the LLM circuits); nil adds none.
	ReadinessInfo func() map[string]any
	// TracerProvider traces every request (otelgin) when not nil.
	TracerProvider trace.TracerProvider
	// Access is access control: who may call which route, and the
	// limits. The zero value serves everyone as auth.Anonymous.
	Access Access
	// Memory is the tenants' long-term memory (memory/ routes,
	// docs/memory.md); nil answers those routes 503.
	Memory *memory.Service
}

// Server serves the HTTP API.
type Server struct {
	store        *store.Store
	runs         *Runs
	log          *slog.Logger
	maxBodyBytes int64
	router       *gin.Engine
	streams      *stream.Hub
	streamOpts   StreamOptions
	// credWatch rechecks the open streams' credentials.
	credWatch *credentialWatch
	tools     ToolCatalog
	// mcpStdioCommands is Options.MCPStdioCommands.
	mcpStdioCommands []string
	mcpProbe         MCPProbe
	mcpProbeTimeout  time.Duration
	webhooks         *webhooks.Queue
	metrics          *telemetry.Metrics
	readiness        Readiness
	access           Access
	rules            map[string]rule
	// mcp is the MCP server (mountMCP).
	mcp *mcpserve.Handler
	// memory serves the memory/ routes (nil: 503).
	memory *memory.Service
	// a2a serves the hierarchies' A2A agents through the API itself.
	a2a *a2aserve.Server
}

// ExecutorPrefix is the path prefix of contract 002's endpoints.
const ExecutorPrefix = "/api/executor/v1"

// NewServer builds the router with every route.
func NewServer(opts Options) *Server {
	gin.SetMode(gin.ReleaseMode)
	s := &Server{
		store:            opts.Store,
		runs:             opts.Runs,
		log:              opts.Logger,
		maxBodyBytes:     opts.MaxBodyBytes,
		router:           gin.New(),
		tools:            opts.Tools,
		mcpStdioCommands: opts.MCPStdioCommands,
		mcpProbe:         opts.MCPProbe,
		mcpProbeTimeout:  opts.MCPProbeTimeout,
		webhooks:         opts.Webhooks,
		memory:           opts.Memory,
		metrics:          opts.Metrics,
		access:           opts.Access,
		rules:            routeRules(),
	}
	if s.tools == nil {
		s.tools = noToolCatalog{}
	}
	if s.maxBodyBytes <= 0 {
		s.maxBodyBytes = 1 << 20
	}
	if opts.Runs != nil && opts.Runs.Temporal != nil {
		// The event streams' pollers keep the plain client: an open stream
		// waits out an outage (its poller backs off and retries), and must
		// not give up sooner because its queries now fail fast.
		if opts.EventQuerier == nil {
			opts.EventQuerier = temporalQuerier{opts.Runs.Temporal}
		}
		// Requests' Temporal calls fail fast, with 503 and Retry-After,
		// while the frontend is unreachable (see temporalGate), instead of
		// after the SDK's 10 s. The worker of the same process keeps the
		// plain client too.
		opts.Runs.Temporal = gateTemporal(opts.Runs.Temporal)
	}
	s.streams = newHub(opts, s.log)
	s.streamOpts = opts.Stream.withDefaults()
	s.credWatch = &credentialWatch{every: s.streamOpts.CredentialCheckInterval, log: s.log}
	if opts.Store != nil {
		s.credWatch.invalid = opts.Store.InvalidAPIKeys
	}
	s.readiness = Readiness{Temporal: opts.Health, Info: opts.ReadinessInfo}
	if opts.Store != nil {
		s.readiness.Database = HealthCheckFunc(opts.Store.Ping)
	}
	opts.Metrics.ObserveStreams(func() telemetry.StreamCounts {
		st := s.StreamStats()
		return telemetry.StreamCounts{Subscribers: st.Subscribers, Pollers: st.Pollers, Queries: st.Queries, Wakeups: st.Wakeups}
	})
	r := s.router
	r.HandleMethodNotAllowed = true
	// Tracing first, so its span covers the whole request and the request
	// log can name the trace; then the metrics, so they see the status
	// that recoverPanics writes.
	if opts.TracerProvider != nil {
		r.Use(tracing(opts.TracerProvider))
	}
	if s.metrics != nil {
		r.Use(s.observeRequests)
	}
	// Access control comes after the request log (which then records
	// refusals too) and before anything reads the body.
	r.Use(markDialect, s.recoverPanics, s.logRequests)
	r.Use(s.accessMiddleware()...)
	r.Use(s.limitBody, s.rejectNULParams)
	s.routeOps(r, opts.MetricsHandler)
	r.NoRoute(func(c *gin.Context) {
		s.writeError(c, models.Errorf(models.CodeRouteNotFound, "no route for %s %s", c.Request.Method, c.Request.URL.Path))
	})
	r.NoMethod(func(c *gin.Context) {
		s.writeError(c, models.Errorf(codeMethodNotAllowed, "method %s is not allowed on %s", c.Request.Method, c.Request.URL.Path))
	})

	v1 := r.Group(ExecutorPrefix)
	h := v1.Group("/hierarchies")
	h.POST("/create", s.idempotentCreate("hierarchies/create"), s.createHierarchy)
	h.POST("/get", s.getHierarchy)
	h.POST("/update", s.updateHierarchy)
	h.POST("/delete", s.deleteHierarchy)
	h.POST("/list", s.listHierarchies)

	sa := v1.Group("/subagents")
	sa.POST("/create", s.createSubAgent)
	sa.POST("/get", s.getSubAgent)
	sa.POST("/update", s.updateSubAgent)
	sa.POST("/delete", s.deleteSubAgent)
	sa.POST("/list", s.listSubAgents)

	v1.POST("/tools/list", s.listTools)

	runs := v1.Group("/runs", s.requireRuns)
	runs.POST("/start", s.idempotentCreate("runs/start"), s.startRun)
	runs.POST("/fork", s.idempotentCreate("runs/fork"), s.forkRun)
	runs.POST("/fork-points", s.forkPoints)
	runs.POST("/get", s.getRun)
	runs.POST("/list", s.listRuns)
	runs.POST("/cancel", s.cancelRun)
	runs.POST("/delete", s.deleteRun)
	runs.POST("/pause", s.pauseRun)
	runs.POST("/resume", s.resumeRun)
	runs.POST("/teams/cancel", s.cancelTeam)
	runs.POST("/redirect", s.redirectAgent)
	runs.POST("/approvals", s.listApprovals)
	runs.POST("/approve", s.approveRun)
	runs.POST("/reject", s.rejectRun)
	runs.POST("/events", s.listEvents)
	runs.POST("/messages", s.listMessages)
	runs.POST("/stream", s.streamRunPOST)
	runs.POST("/stream-token", s.createStreamToken)
	runs.GET("/:id/stream", s.streamRunGET)
	runs.POST("/:id/stream", s.streamRunAGUI)
	runs.GET("/:id/ws", s.runWSGET)
	// Results read the stored run (and query a live one when Temporal is
	// there), so they are served without Temporal too.
	v1.POST("/runs/results", s.runResults)
	v1.POST("/runs/results/format", s.requireRuns, s.formatRunResults)

	v1.POST("/artifacts/list", s.listArtifacts)

	sch := v1.Group("/schedules", s.requireRuns)
	sch.POST("/create", s.idempotentCreate("schedules/create"), s.createSchedule)
	sch.POST("/list", s.listSchedules)
	sch.POST("/get", s.getSchedule)
	sch.POST("/pause", s.pauseSchedule)
	sch.POST("/unpause", s.unpauseSchedule)
	sch.POST("/trigger", s.triggerSchedule)
	sch.POST("/update", s.updateSchedule)
	sch.POST("/delete", s.deleteSchedule)

	mcp := v1.Group("/mcp-servers")
	mcp.POST("/create", s.idempotentCreate("mcp-servers/create"), s.createMCPServer)
	mcp.POST("/get", s.getMCPServer)
	mcp.POST("/list", s.listMCPServers)
	mcp.POST("/update", s.updateMCPServer)
	mcp.POST("/delete", s.deleteMCPServer)

	wh := v1.Group("/webhooks")
	// No Idempotency-Key on create: a replayed answer would have to keep
	// the secret it shows once.
	wh.POST("/create", s.createWebhook)
	wh.POST("/get", s.getWebhook)
	wh.POST("/list", s.listWebhooks)
	wh.POST("/update", s.updateWebhook)
	wh.POST("/delete", s.deleteWebhook)
	wh.POST("/deliveries", s.listWebhookDeliveries)
	wh.POST("/redeliver", s.redeliverWebhook)

	mem := v1.Group("/memory", s.requireMemory)
	mem.POST("/put", s.putMemory)
	mem.POST("/get", s.getMemory)
	mem.POST("/search", s.searchMemory)
	mem.POST("/list-namespaces", s.listMemoryNamespaces)
	mem.POST("/delete", s.deleteMemory)
	mem.POST("/export", s.exportMemory)
	mem.POST("/import", s.importMemory)

	// The caller's hierarchies as MCP tools (docs/mcp-server.md).
	s.mountMCP(v1)

	s.routeV1(r.Group(V1Prefix))

	// Each hierarchy's A2A agent (issue 25): a protocol bridge that calls
	// the routes above in-process with the caller's credential.
	s.a2a = a2aserve.New(s.InProcessTransport(), s.log)
	agent := r.Group(A2APrefix + "/:hierarchy_id")
	agent.POST("", s.requireRuns, s.a2aJSONRPC)
	agent.GET("/.well-known/agent-card.json", s.a2aCard)

	keys := v1.Group("/apikeys")
	keys.POST("/create", s.createAPIKey)
	keys.POST("/list", s.listAPIKeys)
	keys.POST("/revoke", s.revokeAPIKey)

	// The web console's pages and assets (GET /, /runs, /runs/:id,
	// /console/*): outside /api, so they shadow no API route.
	console.Register(r)

	checkRouteRules(r.Routes(), s.rules)
	return s
}

// Handler returns the HTTP handler.
func (s *Server) Handler() http.Handler { return s.router }

// ok writes contract 002's success envelope.
func ok(c *gin.Context, data any) {
	c.JSON(http.StatusOK, okBody{Code: 0, Message: "success", Data: data})
}

// okBody is contract 002's success envelope.
type okBody struct {
	Code    int    `json:"code"`
	Data    any    `json:"data"`
	Message string `json:"message"`
}

// requireRuns answers 503 on run endpoints of a server built without
// Temporal.
func (s *Server) requireRuns(c *gin.Context) {
	if s.runs == nil {
		s.writeError(c, models.Errorf(models.CodeUnavailable, "runs are not served by this process"))
		return
	}
	c.Next()
}

func (s *Server) limitBody(c *gin.Context) {
	if c.Request.Body != nil {
		c.Request.Body = http.MaxBytesReader(c.Writer, c.Request.Body, s.maxBodyBytes)
	}
	c.Next()
}

func (s *Server) recoverPanics(c *gin.Context) {
	defer func() {
		if p := recover(); p != nil {
			s.writeError(c, fmt.Errorf("panic: %v", p))
		}
	}()
	c.Next()
}

// logRequests logs every request once it is served: method, route, path,
// status and duration. Nothing from headers, query string or body is
// logged, so neither credentials nor run content reach the log; a run's id
// in a path is not secret. Probes and scrapes are logged at debug only.
// With tracing on, the binary's log handler (telemetry.LogHandler) adds
// the request's trace_id from the context.
func (s *Server) logRequests(c *gin.Context) {
	start := time.Now()
	c.Next()
	level := slog.LevelInfo
	if isOpsRoute(c) || isInProcess(c.Request.Context()) {
		// A protocol bridge's calls to the API (InProcessTransport) are
		// logged at debug: the protocol request is logged already.
		level = slog.LevelDebug
	}
	attrs := []slog.Attr{
		slog.String("method", c.Request.Method),
		slog.String("route", routeOf(c)),
		slog.String("path", c.Request.URL.Path),
		slog.Int("status", c.Writer.Status()),
		slog.Duration("duration", time.Since(start)),
	}
	s.log.LogAttrs(c.Request.Context(), level, "http request", attrs...)
}
