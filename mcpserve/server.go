// Package mcpserve publishes a tenant's hierarchies as MCP tools: an MCP
// server (Streamable HTTP, the official Go SDK) whose tools list is the
// caller's hierarchies and whose tool calls run them. A call starts a run,
// reports the run's steps as progress notifications while it works, and
// answers with the run's final answer; the client cancelling the call
// cancels the run.
//
// The package knows nothing of HTTP routing, the store or Temporal: the API
// mounts its Handler behind its access control and hands it a Backend that
// lists, starts, follows and cancels runs through the same paths as its
// REST routes, so validation, budgets, tenancy and concurrency limits are
// the same. (The mcp package is the other direction: the client through
// which agents call MCP servers' tools.)
package mcpserve

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	sdkauth "github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/op-stack/executor/auth"
	"github.com/op-stack/executor/models"
)

// Hierarchy is what the tools list shows of a hierarchy.
type Hierarchy struct {
	ID, Name, Description string
}

// Run is a run a tool call started.
type Run struct {
	// ID is the run's public id (runs/get's id).
	ID, ThreadID, Status string
}

// Backend is what the MCP server needs of the service. Every method acts
// as the principal in ctx (auth.PrincipalFrom), exactly as the API's
// routes do for their caller.
type Backend interface {
	// Hierarchies lists the hierarchies of the caller's own tenant.
	Hierarchies(ctx context.Context) ([]Hierarchy, error)
	// Start starts a run of the hierarchy as runs/start does, following up
	// previousRunID when it is not nil. Its errors are *models.Error.
	Start(ctx context.Context, hierarchyID, task string, previousRunID *string) (Run, error)
	// Follow calls fn with each event of the run, in order from its first,
	// and returns the run's terminal event (lifecycle.completed, failed or
	// cancelled). It returns early with an error when ctx ends or the run
	// cannot be followed.
	Follow(ctx context.Context, runID string, fn func(models.Event)) (models.Event, error)
	// Cancel cancels the run as runs/cancel does; a run that has already
	// ended is no error.
	Cancel(ctx context.Context, runID string) error
}

// Options configure a Handler.
type Options struct {
	// Version is the server's version in the MCP handshake; empty: the
	// module's version from the build.
	Version string
	// Logger logs the server's errors; nil discards them.
	Logger *slog.Logger
	// SessionTimeout closes a session that has sent no request for this
	// long (DefaultSessionTimeout when zero); a call still running in it
	// is cancelled, and so is its run.
	SessionTimeout time.Duration
	// LocalhostProtection refuses requests that reach a loopback address
	// with another Host header (DNS rebinding). The API turns it on when
	// access control is off: a web page in the developer's browser could
	// otherwise start runs on their machine. With API keys, a page cannot
	// send the key, so the check would only break reverse proxies.
	LocalhostProtection bool
}

// DefaultSessionTimeout is Options.SessionTimeout's default.
const DefaultSessionTimeout = 30 * time.Minute

// cancelTimeout bounds the cancellation of a run whose call was cancelled.
const cancelTimeout = 30 * time.Second

// principalKey holds, in TokenInfo.Extra, the caller's auth.Principal.
const principalKey = "executor.principal"

// Handler is the MCP endpoint: Streamable HTTP in stateful mode (see
// NewHandler).
type Handler struct {
	backend Backend
	log     *slog.Logger
	http    http.Handler
	server  *sdk.Server
	// closing is set by Close: calls that end then leave their runs be.
	closing atomic.Bool
	calls   calls
	posts   atomic.Uint64
}

// NewHandler builds the MCP endpoint. It must be served behind the API's
// authentication: each request's context must carry its auth.Principal.
//
// Sessions are stateful (Mcp-Session-Id), held in this process: a client's
// notifications/cancelled arrives as a request of its own, and only a
// session ties it to the call it cancels (in the SDK's stateless mode each
// request is a new session, and a cancellation would find nothing to
// cancel). A session belongs to the principal that opened it: another
// key presenting its id is refused (403).
func NewHandler(b Backend, opts Options) *Handler {
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if opts.SessionTimeout <= 0 {
		opts.SessionTimeout = DefaultSessionTimeout
	}
	if opts.Version == "" {
		opts.Version = "dev"
		if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" {
			opts.Version = bi.Main.Version
		}
	}
	h := &Handler{backend: b, log: log}
	server := sdk.NewServer(&sdk.Implementation{Name: "op-stack-executor", Title: "op-stack executor hierarchies", Version: opts.Version}, &sdk.ServerOptions{
		Instructions: "Each tool runs one of your hierarchies of agents on a task and answers with the run's final answer. " +
			"Runs take from seconds to many minutes: send a progressToken to follow the agents' steps, and cancel the request to cancel the run.",
		Logger: log,
		// Tools only: the tools list is the tenant's hierarchies, read
		// when asked, so it never goes stale and no listChanged is sent.
		Capabilities: &sdk.ServerCapabilities{Tools: &sdk.ToolCapabilities{}},
	})
	server.AddReceivingMiddleware(h.middleware)
	h.server = server
	streamable := sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return server }, &sdk.StreamableHTTPOptions{
		Logger:                     log,
		SessionTimeout:             opts.SessionTimeout,
		DisableLocalhostProtection: !opts.LocalhostProtection,
	})
	// The SDK hands a request's TokenInfo to its handlers (RequestExtra)
	// and binds each session to the TokenInfo's UserID; RequireBearerToken
	// is its only way in. The verifier does not check the token again: the
	// API has, and its principal is in the request's context.
	verify := sdkauth.RequireBearerToken(func(ctx context.Context, _ string, _ *http.Request) (*sdkauth.TokenInfo, error) {
		p, ok := auth.PrincipalFrom(ctx)
		if !ok {
			return nil, sdkauth.ErrInvalidToken
		}
		scopes := make([]string, len(p.Scopes))
		for i, s := range p.Scopes {
			scopes[i] = string(s)
		}
		return &sdkauth.TokenInfo{UserID: principalID(p), Scopes: scopes, Extra: map[string]any{principalKey: p}}, nil
	}, &sdkauth.RequireBearerTokenOptions{AllowMissingExpiration: true})(streamable)
	h.http = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r = r.Clone(r.Context())
		if r.Header.Get("Authorization") == "" {
			// Access control off: no bearer token, and the principal
			// (auth.Anonymous) comes from the context all the same.
			r.Header.Set("Authorization", "Bearer anonymous")
		}
		var post string
		switch r.Method {
		case http.MethodPost:
			// Names this POST to the calls it carries (RequestExtra.Header):
			// the SDK runs them apart from the request, on the session.
			post = strconv.FormatUint(h.posts.Add(1), 10)
			r.Header.Set(postHeader, post)
		case http.MethodDelete:
			// Ending a session cancels its calls, and their runs: the SDK
			// would otherwise wait for them to end before closing it.
			if sid := r.Header.Get("Mcp-Session-Id"); sid != "" {
				if p, ok := auth.PrincipalFrom(r.Context()); ok {
					owner := principalID(p)
					h.calls.cancel(func(c *call) bool { return c.session == sid && c.owner == owner }, errSessionDeleted)
				}
			}
		}
		verify.ServeHTTP(w, r)
		if post != "" && r.Context().Err() != nil {
			// The client went away before its answer: its calls would run
			// on for nobody. They are cancelled, with their runs.
			h.calls.cancel(func(c *call) bool { return c.post == post }, errClientGone)
		}
	})
	return h
}

// postHeader carries, inside this process only, the id of the POST a
// tool call came in (set by the handler, whatever the client sent).
const postHeader = "X-Executor-Mcp-Post"

// Why a call's context was cancelled by this package.
var (
	errSessionDeleted = errors.New("the client ended its MCP session")
	errClientGone     = errors.New("the client disconnected before the answer")
	errShutdown       = errors.New("the server is shutting down")
)

// call is a tool call in flight.
type call struct {
	session, post, owner string
	cancel               context.CancelCauseFunc
}

// calls are the tool calls in flight, for what the SDK does not cancel.
type calls struct {
	mu  sync.Mutex
	set map[*call]struct{}
}

func (cs *calls) add(c *call) (remove func()) {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	if cs.set == nil {
		cs.set = map[*call]struct{}{}
	}
	cs.set[c] = struct{}{}
	return func() {
		cs.mu.Lock()
		defer cs.mu.Unlock()
		delete(cs.set, c)
	}
}

func (cs *calls) cancel(match func(*call) bool, cause error) {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	for c := range cs.set {
		if match(c) {
			c.cancel(cause)
		}
	}
}

// Close ends every session, so that http.Server.Shutdown need not wait for
// their streams. Calls still running end with their sessions, but their
// runs go on: the process is going away, not the client (a call whose
// run's stream the API has closed first has answered a tool error naming
// the run).
func (h *Handler) Close() {
	h.closing.Store(true)
	// A session's Close waits for its calls: they are ended first.
	h.calls.cancel(func(*call) bool { return true }, errShutdown)
	for ss := range h.server.Sessions() {
		_ = ss.Close()
	}
}

// ServeHTTP serves the MCP endpoint.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) { h.http.ServeHTTP(w, r) }

// principalID names a principal for the session binding: a session opened
// with one key is refused to every other.
func principalID(p auth.Principal) string {
	return string(p.Method) + ":" + p.Tenant + ":" + p.KeyID
}

// callerContext puts the request's principal in ctx, for the Backend.
func callerContext(ctx context.Context, extra *sdk.RequestExtra) (context.Context, auth.Principal, bool) {
	if extra == nil || extra.TokenInfo == nil {
		return ctx, auth.Principal{}, false
	}
	p, ok := extra.TokenInfo.Extra[principalKey].(auth.Principal)
	if !ok {
		return ctx, auth.Principal{}, false
	}
	return auth.WithPrincipal(ctx, p), p, true
}

// middleware answers tools/list and tools/call itself: the tools are the
// caller's hierarchies, not a fixed set registered on the server.
func (h *Handler) middleware(next sdk.MethodHandler) sdk.MethodHandler {
	return func(ctx context.Context, method string, req sdk.Request) (sdk.Result, error) {
		switch r := req.(type) {
		case *sdk.ListToolsRequest:
			return h.listTools(ctx, r)
		case *sdk.CallToolRequest:
			return h.callTool(ctx, r)
		}
		return next(ctx, method, req)
	}
}

func (h *Handler) listTools(ctx context.Context, req *sdk.ListToolsRequest) (*sdk.ListToolsResult, error) {
	ctx, p, ok := callerContext(ctx, req.Extra)
	if !ok {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidRequest, Message: "no caller: the MCP endpoint is served behind the API's authentication"}
	}
	if !p.Has(auth.ScopeHierarchiesRead) {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidRequest, Message: fmt.Sprintf("%s: listing the tools needs the %s scope", models.CodePermissionDenied.Name, auth.ScopeHierarchiesRead)}
	}
	tools, err := h.tools(ctx)
	if err != nil {
		h.log.ErrorContext(ctx, "mcp tools/list", "error", err)
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "could not list the hierarchies: " + errorText(err)}
	}
	out := &sdk.ListToolsResult{Tools: make([]*sdk.Tool, len(tools))}
	for i, t := range tools {
		out.Tools[i] = t.tool()
	}
	return out, nil
}

// tools are the caller's hierarchies as tools, in a stable order.
func (h *Handler) tools(ctx context.Context) ([]tool, error) {
	hs, err := h.backend.Hierarchies(ctx)
	if err != nil {
		return nil, err
	}
	return toolsOf(hs), nil
}

// callInput is a tool call's arguments (inputSchema).
type callInput struct {
	Task          string  `json:"task"`
	PreviousRunID *string `json:"previous_run_id"`
}

func (h *Handler) callTool(ctx context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
	ctx, p, ok := callerContext(ctx, req.Extra)
	if !ok {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidRequest, Message: "no caller: the MCP endpoint is served behind the API's authentication"}
	}
	tools, err := h.tools(ctx)
	if err != nil {
		h.log.ErrorContext(ctx, "mcp tools/call", "error", err)
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "could not list the hierarchies: " + errorText(err)}
	}
	var t *tool
	for i := range tools {
		if tools[i].name == req.Params.Name {
			t = &tools[i]
			break
		}
	}
	if t == nil {
		// The protocol's answer to an unknown tool (the same for another
		// tenant's hierarchy: its existence is never revealed).
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf("unknown tool %q", req.Params.Name)}
	}
	if !p.Has(auth.ScopeRunsWrite) {
		return errorResult(models.Errorf(models.CodePermissionDenied, "running a hierarchy needs the %s scope", auth.ScopeRunsWrite), nil), nil
	}
	in, err := parseInput(req.Params.Arguments)
	if err != nil {
		return errorResult(err, nil), nil
	}
	ctx, cancelCall := context.WithCancelCause(ctx)
	defer cancelCall(nil)
	c := &call{owner: principalID(p), post: req.Extra.Header.Get(postHeader), cancel: cancelCall}
	if req.Session != nil {
		c.session = req.Session.ID()
	}
	defer h.calls.add(c)()
	run, err := h.backend.Start(ctx, t.hierarchy.ID, in.Task, in.PreviousRunID)
	if err != nil {
		return errorResult(err, nil), nil
	}
	progress := newProgress(ctx, req)
	progress.send(fmt.Sprintf("run %s of %s started", run.ID, t.hierarchy.Name))
	end, err := h.backend.Follow(ctx, run.ID, func(e models.Event) {
		if msg := stepMessage(e); msg != "" {
			progress.send(msg)
		}
	})
	if ctx.Err() != nil && (h.closing.Load() || errors.Is(context.Cause(ctx), errShutdown)) {
		h.log.InfoContext(ctx, "mcp: call ended by shutdown; its run goes on", "run_id", run.ID)
		return nil, ctx.Err()
	}
	if ctx.Err() != nil {
		// The client cancelled the call (notifications/cancelled), ended
		// its session or went away: the run is cancelled too, as
		// runs/cancel does.
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cancelTimeout)
		defer cancel()
		if cerr := h.backend.Cancel(cctx, run.ID); cerr != nil {
			h.log.ErrorContext(cctx, "mcp: cancel the run of a cancelled call", "run_id", run.ID, "error", cerr)
		} else {
			h.log.InfoContext(cctx, "mcp: call cancelled, run cancelled", "run_id", run.ID, "why", context.Cause(ctx))
		}
		return nil, ctx.Err()
	}
	if err != nil {
		h.log.ErrorContext(ctx, "mcp: follow a run", "run_id", run.ID, "error", err)
		return errorResult(err, &outcome{RunID: run.ID, ThreadID: run.ThreadID, Status: models.RunRunning}), nil
	}
	return result(run, end), nil
}

// parseInput reads and checks a call's arguments.
func parseInput(raw json.RawMessage) (callInput, error) {
	var in callInput
	if len(raw) == 0 || string(raw) == "null" {
		return in, models.FieldError("task", "is required")
	}
	dec := json.NewDecoder(strings.NewReader(string(raw)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&in); err != nil {
		return in, models.Errorf(models.CodeInvalidParameters, "the arguments must be {\"task\": string, \"previous_run_id\"?: string}: %v", err)
	}
	if strings.TrimSpace(in.Task) == "" {
		return in, models.FieldError("task", "must not be empty")
	}
	return in, nil
}

// outcome is a call's structuredContent: the run and how it ended.
type outcome struct {
	RunID       string         `json:"run_id"`
	ThreadID    string         `json:"thread_id,omitempty"`
	Status      string         `json:"status"`
	FinalAnswer string         `json:"final_answer,omitempty"`
	Error       string         `json:"error,omitempty"`
	ErrorCode   string         `json:"error_code,omitempty"`
	Usage       map[string]any `json:"usage,omitempty"`
}

// result answers a call with its run's terminal event: the final answer as
// text, or isError with the run's error.
func result(run Run, end models.Event) *sdk.CallToolResult {
	o := &outcome{RunID: run.ID, ThreadID: run.ThreadID}
	str := func(k string) string { s, _ := end.Data[k].(string); return s }
	if u, ok := end.Data["usage"].(map[string]any); ok {
		o.Usage = u
	}
	switch end.Event.Action {
	case models.ActionCompleted:
		o.Status, o.FinalAnswer = models.RunCompleted, str("final_answer")
		return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: o.FinalAnswer}}, StructuredContent: o}
	case models.ActionCancelled:
		o.Status, o.Error = models.RunCancelled, "the run was cancelled"
		if r := str("reason"); r != "" {
			o.Error += ": " + r
		}
	default:
		o.Status, o.Error, o.ErrorCode = models.RunFailed, str("error"), str("error_code")
		if o.ErrorCode == "" {
			o.ErrorCode = models.CodeExecutionFailed.Name
		}
		if o.ErrorCode == models.CodeExecutionTimeout.Name {
			o.Status = models.RunTimedOut
		}
	}
	text := o.Error
	if o.ErrorCode != "" {
		text = o.ErrorCode + ": " + text
	}
	return &sdk.CallToolResult{IsError: true, Content: []sdk.Content{&sdk.TextContent{Text: fmt.Sprintf("run %s %s. %s", run.ID, o.Status, text)}}, StructuredContent: o}
}

// errorResult answers a call that could not start or follow its run: a
// tool error (isError), which the model that called the tool reads, with
// the error's code from the API's vocabulary.
func errorResult(err error, o *outcome) *sdk.CallToolResult {
	r := &sdk.CallToolResult{IsError: true, Content: []sdk.Content{&sdk.TextContent{Text: errorText(err)}}}
	if o != nil {
		o.Error, o.ErrorCode = models.ErrorMessage(err), models.ErrorCode(err).Name
		r.StructuredContent = o
	}
	return r
}

// errorText is an error as the client sees it: "CODE: message" for the
// API's errors.
func errorText(err error) string {
	return models.ErrorCode(err).Name + ": " + models.ErrorMessage(err)
}
