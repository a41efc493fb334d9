package api

import (
	"context"
	"io"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/gin-gonic/gin"
	"go.temporal.io/sdk/client"

	"github.com/op-stack/executor/agui"
	"github.com/op-stack/executor/models"
	"github.com/op-stack/executor/stream"
	"github.com/op-stack/executor/stream/spec001"
)

// EventQuerier reads a live run's events from its workflow: the page the
// workflow's events query (models.QueryEvents) answers for q.
type EventQuerier = stream.EventQuerier

// temporalQuerier is the EventQuerier of a real deployment.
type temporalQuerier struct{ c client.Client }

func (q temporalQuerier) QueryEvents(ctx context.Context, workflowID string, eq models.EventQuery) (models.EventPage, error) {
	var page models.EventPage
	resp, err := q.c.QueryWorkflow(ctx, workflowID, "", models.QueryEvents, eq)
	if err != nil {
		return page, err
	}
	return page, resp.Get(&page)
}

// StreamOptions tune the event streams. Zero fields take the defaults.
type StreamOptions struct {
	// PollInterval is how often a live run's poller queries its workflow
	// while events are flowing (default 50ms), when no Listener wakes it.
	// With a Listener it is only the first retry delay of a failed query.
	PollInterval time.Duration
	// IdlePollInterval is the longest interval the poller backs off to
	// while the run is quiet (default 500ms), when no Listener wakes it.
	IdlePollInterval time.Duration
	// QuietAfter is how long a run must send nothing before its poller
	// backs off (default 1s): streaming activities signal every flush
	// interval, so shorter gaps are part of a live answer. Without a
	// Listener only.
	QuietAfter time.Duration
	// SafetyPollInterval is how often a poller that a Listener wakes
	// queries anyway when it hears nothing (default 1s): it bounds the
	// delay of events nobody announced (a lost notification, events the
	// workflow appends itself between activities).
	SafetyPollInterval time.Duration
	// KeepAlive is the interval of the keep-alive comment on an idle stream
	// (default 15s), so proxies do not close a quiet connection.
	KeepAlive time.Duration
	// BufferEvents bounds the events of a run held in memory (default
	// 10000); a subscriber further behind reads the database.
	BufferEvents int
	// CredentialCheckInterval is how often an open event stream checks
	// that the credential it was opened with (an API key, or a stream
	// token and the key that issued it) is still valid (default
	// DefaultCredentialCheckInterval): the longest a stream outlives the
	// revocation of its key.
	CredentialCheckInterval time.Duration
}

// DefaultCredentialCheckInterval is StreamOptions.CredentialCheckInterval's
// default: every 5 s, one indexed query for all of a process's open
// streams (see credentialWatch).
const DefaultCredentialCheckInterval = 5 * time.Second

// bridge is the stream bridge's part of the options (stream.Options); the
// credential check is the API's.
func (o StreamOptions) bridge() stream.Options {
	return stream.Options{
		PollInterval: o.PollInterval, IdlePollInterval: o.IdlePollInterval, QuietAfter: o.QuietAfter,
		SafetyPollInterval: o.SafetyPollInterval, KeepAlive: o.KeepAlive, BufferEvents: o.BufferEvents,
	}
}

func (o StreamOptions) withDefaults() StreamOptions {
	if o.CredentialCheckInterval <= 0 {
		o.CredentialCheckInterval = DefaultCredentialCheckInterval
	}
	return o
}

// StreamStats counts the event streams' work, for metrics, tests and
// benchmarks.
type StreamStats = stream.Stats

// StreamStats returns the event streams' counters.
func (s *Server) StreamStats() StreamStats { return s.streams.Stats() }

// newHub builds the server's stream bridge.
func newHub(opts Options, log *slog.Logger) *stream.Hub {
	cfg := stream.Config{Store: opts.Store, Querier: opts.EventQuerier, Listener: opts.Listener, Options: opts.Stream.bridge(), Logger: log}
	if opts.Runs != nil {
		cfg.Reconciler = opts.Runs
	}
	if cfg.Querier == nil && opts.Runs != nil && opts.Runs.Temporal != nil {
		cfg.Querier = temporalQuerier{opts.Runs.Temporal}
	}
	return stream.New(cfg)
}

type streamInput struct {
	runIDInput
	After *int64 `json:"after"`
}

// streamRunPOST is runs/stream (contract 002): {"id","after"}.
func (s *Server) streamRunPOST(c *gin.Context) {
	in, id, valid := readIDBody[streamInput](s, c)
	if !valid {
		return
	}
	// Reading the body to its end lets net/http watch the connection, so
	// the request's context ends when the client goes away.
	_, _ = io.Copy(io.Discard, c.Request.Body)
	s.streamRun(c, id, in.After)
}

// streamRunGET is GET runs/:id/stream?after=N, for browsers' EventSource,
// which can only GET and resumes by sending Last-Event-ID; with
// ?format=ag-ui, the same log as AG-UI events (docs/ag-ui.md).
func (s *Server) streamRunGET(c *gin.Context) {
	id, after, ok := s.streamGETParams(c)
	if !ok {
		return
	}
	format, ok := s.streamFormat(c)
	if ok {
		s.serveStream(c, id, after, format, transportSSE)
	}
}

// streamRunAGUI is POST runs/:id/stream?format=ag-ui: the run's AG-UI
// stream for @ag-ui/client's HttpAgent, which POSTs a RunAgentInput. The
// run is the one in the path, started by runs/start; the body is read and
// left aside (a client's messages and tools do not start or change a run).
func (s *Server) streamRunAGUI(c *gin.Context) {
	id, after, ok := s.streamGETParams(c)
	if !ok {
		return
	}
	if format, ok := s.streamFormat(c); !ok {
		return
	} else if format != streamAGUI {
		s.writeError(c, models.FieldError("format", "must be %q on POST runs/{id}/stream (the AG-UI route); contract 002's stream is POST runs/stream or GET runs/{id}/stream", formatAGUI))
		return
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(c.Request.Body, 1<<20))
	s.serveStream(c, id, after, streamAGUI, transportSSE)
}

// formatAGUI is ?format= of the AG-UI stream.
const formatAGUI = "ag-ui"

// streamFormat reads ?format= of runs/{id}/stream: absent for contract
// 002's events, "ag-ui" for AG-UI's.
func (s *Server) streamFormat(c *gin.Context) (int, bool) {
	switch v := c.Query("format"); v {
	case "":
		return streamContract002, true
	case formatAGUI:
		return streamAGUI, true
	default:
		s.writeError(c, models.FieldError("format", "must be %q or absent (contract 002's events), got %q", formatAGUI, v))
		return 0, false
	}
}

// streamGETParams reads a GET stream's :id and ?after=.
func (s *Server) streamGETParams(c *gin.Context) (string, *int64, bool) {
	id := strings.TrimSpace(c.Param("id"))
	if id == "" {
		s.writeError(c, models.FieldError("id", "is required"))
		return "", nil, false
	}
	var after *int64
	if v, present := c.GetQuery("after"); present && v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			s.writeError(c, models.FieldError("after", "must be an integer, got %q", v))
			return "", nil, false
		}
		after = &n
	}
	return id, after, true
}

// v1StreamGET is spec 001's GET /executions/:id/stream: the same log as
// spec 001's events (the encoder stream/spec001), with the same ids and resume.
func (s *Server) v1StreamGET(c *gin.Context) {
	if id, after, ok := s.streamGETParams(c); ok {
		s.serveStream(c, id, after, streamSpec001, transportSSE)
	}
}

// resumePoint is the sequence a stream continues after: Last-Event-ID
// (what a reconnecting EventSource sends), else after, else 0.
func resumePoint(c *gin.Context, after *int64) (int64, error) {
	if v := strings.TrimSpace(c.GetHeader("Last-Event-ID")); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			return 0, models.FieldError("Last-Event-ID", "must be an event's sequence number, got %q", v)
		}
		return n, nil
	}
	if after == nil {
		return 0, nil
	}
	if *after < 0 {
		return 0, models.FieldError("after", "must not be negative, got %d", *after)
	}
	return *after, nil
}

// Stream formats and transports.
const (
	streamContract002 = iota // the executor's events (contract 002)
	streamSpec001            // spec 001's events
	streamAGUI               // AG-UI's events (package agui)
)

const (
	transportSSE = iota
	transportWebSocket
)

// streamRun answers with the run's events after the resume point as
// Server-Sent Events, in contract 002's format.
func (s *Server) streamRun(c *gin.Context, id string, after *int64) {
	s.serveStream(c, id, after, streamContract002, transportSSE)
}

// serveStream answers with the run's events after the resume point, in
// format over transport, and returns right after the run's terminal
// event. Errors found before the first byte (or before the WebSocket
// upgrade) are the usual JSON errors.
func (s *Server) serveStream(c *gin.Context, id string, after *int64, format, transport int) {
	resume, err := resumePoint(c, after)
	if err != nil {
		s.writeError(c, err)
		return
	}
	ctx := c.Request.Context()
	run, err := s.visibleRun(ctx, id)
	if err != nil {
		s.writeError(c, err)
		return
	}
	if format == streamSpec001 && !runStreams(run) {
		// Spec 001's enable_streaming / stream_events false: this
		// execution is polled, not streamed (contract 002's stream of the
		// run, the executor's log, still serves).
		s.writeError(c, models.Errorf(models.CodeStreamingDisabled, "execution %q was started with streaming off (execution_config.stream_events false, or its team's global_config.enable_streaming false); poll GET %s/executions/%s and read its results", run.PublicID, V1Prefix, run.PublicID))
		return
	}
	h := s.streams
	if !models.IsTerminal(run.Status) && !h.Live() {
		s.writeError(c, models.Errorf(models.CodeUnavailable, "live runs are not streamed by this process"))
		return
	}
	var enc stream.Encoder
	switch format {
	case streamSpec001:
		enc = spec001.New(spec001.Execution{
			ID: run.PublicID, HierarchyID: run.HierarchyID, TeamIDs: s.teamIDsByName(ctx, run),
			ResultURL: V1Prefix + "/executions/" + run.PublicID + "/results",
		})
	case streamAGUI:
		// A fork's log starts with its original's events: only the run
		// knows it is a fork (RUN_STARTED's parentRunId).
		var parent string
		if run.ForkedFrom != nil {
			parent = run.ForkedFrom.RunID
		}
		enc = agui.NewEncoder(agui.Options{RunID: run.PublicID, ThreadID: run.ThreadID, ParentRunID: parent, After: resume})
	default:
		enc = stream.Contract002()
	}
	var conn stream.Transport
	switch transport {
	case transportWebSocket:
		ws, wctx, err := h.AcceptWebSocket(c.Writer, c.Request, s.access.CORSOrigins)
		if err != nil {
			return // the upgrade has answered
		}
		ctx, conn = wctx, ws
	default:
		conn = h.OpenSSE(c.Writer)
	}
	ctx, stopWatching := s.watchCredential(c, ctx, run.ID)
	defer stopWatching()
	h.Serve(ctx, conn, run, enc, resume)
}

// watchCredential returns ctx cancelled once the request's credential
// (its streamCredential) is found invalid: revoked, expired, or a stream
// token whose key was revoked or that expired. The server's credential
// watch checks every open stream's credential together, every
// CredentialCheckInterval; a check that fails otherwise (the database is
// down) leaves the stream open, as an outage is no revocation. stop ends
// the watch.
func (s *Server) watchCredential(c *gin.Context, ctx context.Context, runID string) (_ context.Context, stop func()) {
	v, ok := c.Get(credentialCheckKey)
	cred, _ := v.(streamCredential)
	if !ok {
		return ctx, func() {}
	}
	ctx, cancel := context.WithCancel(ctx)
	// The key id is read now: gin reuses c once the handler returns.
	ws := &watchedStream{cred: cred, runID: runID, logKey: principal(c).KeyID, cancel: cancel}
	s.credWatch.add(ws)
	return ctx, func() {
		s.credWatch.remove(ws)
		cancel()
	}
}

// CloseStreams makes every open event stream write a final comment with a
// retry hint (a WebSocket: a going-away close) and return promptly, and
// answers later stream requests the same way, so that
// http.Server.Shutdown need not wait for streams that would otherwise last
// as long as their runs. Clients then reconnect with Last-Event-ID
// (EventSource does so by itself), to this or another replica, and
// continue with no gap and no duplicate. Call it before
// http.Server.Shutdown; it does not wait for the handlers to return. It
// ends the MCP server's sessions as well (mcpserve.Handler.Close): their
// tool calls, which follow runs through the bridge, have just been told to
// stop; their runs go on.
func (s *Server) CloseStreams() {
	s.streams.Close()
	if s.mcp != nil {
		s.mcp.Close()
	}
}

// runWSGET is GET runs/:id/ws (contract 002's events), the WebSocket push
// of stream.AcceptWebSocket.
func (s *Server) runWSGET(c *gin.Context) {
	if id, after, ok := s.streamGETParams(c); ok {
		s.serveStream(c, id, after, streamContract002, transportWebSocket)
	}
}

// v1WSGET is spec 001's GET executions/:id/ws (spec 001's events).
func (s *Server) v1WSGET(c *gin.Context) {
	if id, after, ok := s.streamGETParams(c); ok {
		s.serveStream(c, id, after, streamSpec001, transportWebSocket)
	}
}
