// Package mcp connects agents to Model Context Protocol servers: it lists a
// server's tools and calls one, as a client built on the official Go SDK
// (github.com/modelcontextprotocol/go-sdk), and maps what comes back to
// the vocabulary of package tools (a text result, files, retryable or
// not).
//
// Every call opens its own session and closes it afterwards. Sessions are
// cheap next to a model call, and a session that outlives one activity is
// one a restarted server can break (the failure LangGraph's and ADK's users
// report); a fresh one per call lets Temporal's retry of a transport
// failure be a real reconnect.
package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"mime"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"slices"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/op-stack/executor/tools"
)

// Server is how to reach one MCP server: a URL (Streamable HTTP) or a
// command (stdio). Its secrets are already resolved: a Server lives only
// inside an activity and never enters a workflow's input or history.
type Server struct {
	// Name labels the server in errors and events, e.g. "docs".
	Name string
	// URL is the Streamable HTTP endpoint; empty when Command is set.
	URL string
	// Command is the program and arguments of a stdio server; allowed only
	// when Config.StdioCommands lists Command[0].
	Command []string
	// Env is added to a stdio server's environment, which otherwise holds
	// PATH and HOME only (never the worker's own variables and secrets).
	Env map[string]string
	// Headers are sent with every HTTP request (Authorization included).
	Headers map[string]string
	// Timeout bounds one call, connecting included (DefaultTimeout when
	// zero).
	Timeout time.Duration
}

// Config is the operator's policy for MCP connections.
type Config struct {
	// AllowPrivate lets servers sit on loopback, private and link-local
	// addresses (MCP_ALLOW_PRIVATE, or TOOLS_HTTP_ALLOW_PRIVATE which
	// opens http_get too). Off by default, for the reasons http_get's
	// guard is: a tenant must not point the worker at its own network.
	AllowPrivate bool
	// StdioCommands lists the programs a stdio server may run
	// (MCP_STDIO_COMMANDS), compared with Command[0] exactly. Empty: no
	// stdio server at all, since one runs a program on the worker's host.
	StdioCommands []string
}

// DefaultTimeout bounds a call when the server sets no timeout.
const DefaultTimeout = 60 * time.Second

// Client opens sessions to MCP servers under one Config. It is safe for
// concurrent use.
type Client struct {
	cfg  Config
	http *http.Client
}

// New returns a Client enforcing cfg.
func New(cfg Config) *Client {
	dialer := tools.GuardedDialer(cfg.AllowPrivate, 30*time.Second)
	transport := &http.Transport{
		// No proxy: with one, the guarded dialer would judge the proxy's
		// address instead of the server's.
		Proxy:                  nil,
		DialContext:            dialer.DialContext,
		ForceAttemptHTTP2:      true,
		TLSHandshakeTimeout:    15 * time.Second,
		MaxIdleConns:           32,
		IdleConnTimeout:        90 * time.Second,
		MaxResponseHeaderBytes: 64 << 10,
	}
	return &Client{cfg: cfg, http: &http.Client{
		Transport: transport,
		CheckRedirect: func(req *http.Request, via []*http.Request) error {
			if len(via) >= 5 {
				return &policyError{"stopped after 5 redirects"}
			}
			// The dialer guards the address of every hop; the scheme is
			// checked here.
			if req.URL.Scheme != "http" && req.URL.Scheme != "https" {
				return &policyError{fmt.Sprintf("refused a redirect to a %s URL", req.URL.Scheme)}
			}
			return nil
		},
	}}
}

// ToolInfo is one tool a server offers.
type ToolInfo struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	InputSchema json.RawMessage `json:"input_schema"`
	// ReadOnly and Destructive are the server's annotations readOnlyHint
	// and destructiveHint, with MCP's defaults: Destructive is true when
	// the tool says nothing, false when it is read-only. Hints, not
	// guarantees: the server's approval policy decides what to trust.
	ReadOnly    bool `json:"read_only,omitempty"`
	Destructive bool `json:"destructive,omitempty"`
}

// policyError is a connection the client refuses to make; retrying cannot
// help.
type policyError struct{ msg string }

func (e *policyError) Error() string { return e.msg }

// ToolError is a tool's own failure (a result with isError: true). It
// goes back to the model as the tool's result and is never retried: the
// server answered, and asking again would get the same answer.
type ToolError struct {
	// Text is the tool's message (its text content).
	Text string
}

func (e *ToolError) Error() string { return e.Text }

// Validate checks that srv can be connected to under the policy, without
// connecting: a URL with an http or https scheme and no credentials, or an
// allowed stdio command.
func (c *Client) Validate(srv Server) error {
	switch {
	case srv.URL != "" && len(srv.Command) > 0:
		return errors.New("give either url or command, not both")
	case srv.URL != "":
		u, err := url.Parse(srv.URL)
		if err != nil || u.Host == "" {
			return fmt.Errorf("url %q is not an absolute URL", srv.URL)
		}
		if u.Scheme != "http" && u.Scheme != "https" {
			return fmt.Errorf("url must be http or https, not %q", u.Scheme)
		}
		if u.User != nil {
			return errors.New("url must not carry credentials; use a header or a bearer token")
		}
		return nil
	case len(srv.Command) > 0:
		if !slices.Contains(c.cfg.StdioCommands, srv.Command[0]) {
			return fmt.Errorf("stdio command %q is not allowed on this deployment (MCP_STDIO_COMMANDS)", srv.Command[0])
		}
		return nil
	}
	return errors.New("a server needs a url")
}

// connect opens a session to srv.
func (c *Client) connect(ctx context.Context, srv Server) (*sdk.ClientSession, error) {
	if err := c.Validate(srv); err != nil {
		return nil, &policyError{err.Error()}
	}
	var transport sdk.Transport
	if srv.URL != "" {
		hc := *c.http
		hc.Transport = headerTransport{base: c.http.Transport, headers: srv.Headers}
		transport = &sdk.StreamableClientTransport{
			Endpoint:   srv.URL,
			HTTPClient: &hc,
			// One request per session: server-initiated messages have
			// nobody to go to.
			DisableStandaloneSSE: true,
		}
	} else {
		cmd := exec.Command(srv.Command[0], srv.Command[1:]...)
		cmd.Env = stdioEnv(srv.Env)
		transport = &sdk.CommandTransport{Command: cmd, TerminateDuration: 2 * time.Second}
	}
	client := sdk.NewClient(&sdk.Implementation{Name: "op-stack-executor", Version: "1"}, nil)
	return client.Connect(ctx, transport, nil)
}

// stdioEnv is a stdio server's environment: the worker's PATH and HOME
// only, so that the worker's credentials (database URL, provider keys)
// never reach a program a tenant configured, plus the server's own env.
func stdioEnv(extra map[string]string) []string {
	env := []string{}
	for _, k := range []string{"PATH", "HOME"} {
		if v, ok := os.LookupEnv(k); ok {
			env = append(env, k+"="+v)
		}
	}
	keys := make([]string, 0, len(extra))
	for k := range extra {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		env = append(env, k+"="+extra[k])
	}
	return env
}

// headerTransport adds a server's headers to every request.
type headerTransport struct {
	base    http.RoundTripper
	headers map[string]string
}

func (t headerTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if len(t.headers) > 0 {
		req = req.Clone(req.Context())
		for k, v := range t.headers {
			req.Header.Set(k, v)
		}
	}
	return t.base.RoundTrip(req)
}

// withTimeout bounds ctx by srv's timeout.
func withTimeout(ctx context.Context, srv Server) (context.Context, context.CancelFunc, time.Duration) {
	d := srv.Timeout
	if d <= 0 {
		d = DefaultTimeout
	}
	ctx, cancel := context.WithTimeoutCause(ctx, d, errCallTimeout)
	return ctx, cancel, d
}

var errCallTimeout = errors.New("mcp call timed out")

// ListTools lists the tools srv offers, following pagination.
func (c *Client) ListTools(ctx context.Context, srv Server) ([]ToolInfo, error) {
	ctx, cancel, d := withTimeout(ctx, srv)
	defer cancel()
	cs, err := c.connect(ctx, srv)
	if err != nil {
		return nil, classify(ctx, srv, d, "connect", err)
	}
	defer closeSession(ctx, cs)
	var out []ToolInfo
	for t, err := range cs.Tools(ctx, nil) {
		if err != nil {
			return nil, classify(ctx, srv, d, "list tools", err)
		}
		schema, err := json.Marshal(t.InputSchema)
		if err != nil || string(schema) == "null" {
			schema = json.RawMessage(`{"type":"object"}`)
		}
		// MCP's defaults: a tool without annotations is not read-only and
		// may be destructive; destructiveHint means something only when
		// readOnlyHint is false. An approval policy fails closed.
		info := ToolInfo{Name: t.Name, Description: t.Description, InputSchema: schema, Destructive: true}
		if a := t.Annotations; a != nil {
			info.ReadOnly = a.ReadOnlyHint
			info.Destructive = !a.ReadOnlyHint && (a.DestructiveHint == nil || *a.DestructiveHint)
		}
		out = append(out, info)
	}
	return out, nil
}

// CallTool calls tool on srv with arguments (a JSON object). A tool's own
// failure is a *ToolError; a transport failure (refused connection, 5xx,
// a dead session) is marked tools.Retryable; a timeout, a refused address
// or a protocol error (unknown tool, invalid arguments) is neither, and
// goes back to the model as the tool's result.
func (c *Client) CallTool(ctx context.Context, srv Server, tool string, arguments json.RawMessage) (tools.Result, error) {
	var args map[string]any
	if len(arguments) > 0 {
		if err := json.Unmarshal(arguments, &args); err != nil {
			return tools.Result{}, fmt.Errorf("invalid arguments: %v", err)
		}
	}
	ctx, cancel, d := withTimeout(ctx, srv)
	defer cancel()
	cs, err := c.connect(ctx, srv)
	if err != nil {
		return tools.Result{}, classify(ctx, srv, d, "connect", err)
	}
	defer closeSession(ctx, cs)
	res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: tool, Arguments: args})
	if err != nil {
		return tools.Result{}, classify(ctx, srv, d, "call "+tool, err)
	}
	out, err := mapResult(tool, res)
	if err != nil {
		return tools.Result{}, err
	}
	out = truncate(tool, out)
	if res.IsError {
		return out, &ToolError{Text: out.Content}
	}
	return out, nil
}

// closeSession ends a session. After a timeout or a cancellation it does
// so in the background: closing waits for the server to let go of the
// session, which a hanging server may take seconds to do, and the
// activity has already given up on it.
func closeSession(ctx context.Context, cs *sdk.ClientSession) {
	if ctx.Err() != nil {
		go cs.Close()
		return
	}
	cs.Close()
}

// JSON-RPC codes the SDK uses for its own transport failures: the
// connection closing under the client or the server, and a request the
// transport rejected (a 5xx or 429 among them).
const (
	codeClientClosing = -32003
	codeServerClosing = -32004
	codeRejected      = -32005
)

// classify turns an SDK error into the error a tool returns.
func classify(ctx context.Context, srv Server, d time.Duration, op string, err error) error {
	if errors.Is(context.Cause(ctx), errCallTimeout) {
		return fmt.Errorf("mcp server %s: %s: no answer within %s", srv.Name, op, d)
	}
	if ctx.Err() != nil { // cancelled from outside: the activity ends
		return ctx.Err()
	}
	var pe *policyError
	if errors.As(err, &pe) || tools.IsBlocked(err) {
		return fmt.Errorf("mcp server %s: %w", srv.Name, err)
	}
	wrapped := fmt.Errorf("mcp server %s: %s: %w", srv.Name, op, err)
	if errors.Is(err, sdk.ErrSessionMissing) || errors.Is(err, sdk.ErrConnectionClosed) {
		return tools.Retryable(wrapped)
	}
	codes := wireCodes(err)
	transport := true
	for _, code := range codes {
		switch code {
		case codeClientClosing, codeServerClosing, codeRejected:
		default:
			// The server answered with a JSON-RPC error of its own
			// (unknown tool, invalid params): asking again gets the same.
			transport = false
		}
	}
	if transport {
		return tools.Retryable(wrapped)
	}
	return wrapped
}

// wireCodes lists the codes of the JSON-RPC errors in err's tree.
func wireCodes(err error) []int64 {
	var out []int64
	var walk func(error)
	walk = func(e error) {
		if e == nil {
			return
		}
		if w, ok := e.(*jsonrpc.Error); ok && w != nil {
			out = append(out, w.Code)
		}
		switch u := e.(type) {
		case interface{ Unwrap() []error }:
			for _, x := range u.Unwrap() {
				walk(x)
			}
		case interface{ Unwrap() error }:
			walk(u.Unwrap())
		}
	}
	walk(err)
	return out
}

// fileName is the name a returned file gets: the last segment of its URI,
// or kind-n.ext.
func fileName(uri, kind string, n int, mediaType string) string {
	if uri != "" {
		if u, err := url.Parse(uri); err == nil {
			p := u.Path
			if p == "" {
				p = u.Opaque
			}
			if i := strings.LastIndexAny(p, "/:"); i >= 0 {
				p = p[i+1:]
			}
			if p != "" {
				return p
			}
		}
	}
	ext := ""
	if exts, _ := mime.ExtensionsByType(mediaType); len(exts) > 0 {
		ext = exts[0]
	}
	return fmt.Sprintf("%s-%d%s", kind, n, ext)
}
