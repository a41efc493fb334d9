// Package a2aremote calls remote A2A agents (spec v1.0, through
// github.com/a2aproject/a2a-go/v2) for the workers of a hierarchy that
// name one (models.A2AAgent): it fetches the agent's card, sends the
// worker's instruction, follows the task's stream, and cancels the remote
// task when the call is cancelled. Every connection, the card's included,
// goes through the network guard http_get and MCP use
// (tools.GuardedDialer).
package a2aremote

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2aclient"
	"github.com/a2aproject/a2a-go/v2/a2aclient/agentcard"

	"github.com/op-stack/executor/models"
	"github.com/op-stack/executor/tools"
)

// Config is the operator's policy for remote A2A agents.
type Config struct {
	// AllowPrivate lets agents sit on loopback, private, link-local and
	// CGNAT addresses and this host's own (A2A_ALLOW_PRIVATE). Off, such
	// addresses are refused on every connection, after name resolution
	// and on redirects, as http_get's are.
	AllowPrivate bool
	// LookupEnv reads the worker's environment for headers_env
	// (os.LookupEnv when nil).
	LookupEnv func(string) (string, bool)
}

// maxCardBytes bounds an agent card.
const maxCardBytes = 1 << 20

// cardTimeout bounds the card's fetch.
const cardTimeout = 30 * time.Second

// cancelTimeout bounds the CancelTask sent when a call is cancelled.
const cancelTimeout = 10 * time.Second

// Client calls remote A2A agents under one Config; safe for concurrent use.
type Client struct {
	cfg       Config
	transport http.RoundTripper
}

// New returns a Client enforcing cfg.
func New(cfg Config) *Client {
	dialer := tools.GuardedDialer(cfg.AllowPrivate, 30*time.Second)
	return &Client{cfg: cfg, transport: &http.Transport{
		// No proxy: with one, the guarded dialer would judge the proxy's
		// address instead of the agent's.
		Proxy:                  nil,
		DialContext:            dialer.DialContext,
		ForceAttemptHTTP2:      true,
		TLSHandshakeTimeout:    15 * time.Second,
		MaxIdleConns:           32,
		IdleConnTimeout:        90 * time.Second,
		MaxResponseHeaderBytes: 64 << 10,
	}}
}

// Kinds of a call's failure (Error.Kind).
const (
	// KindRefused: the call cannot succeed as configured (the guard, a
	// bad card, a missing header variable, a 4xx, a protocol error);
	// retrying does not help.
	KindRefused = "refused"
	// KindTaskFailed: the remote agent ended the task failed, rejected or
	// cancelled, or asked for input or authentication a worker cannot
	// give.
	KindTaskFailed = "task_failed"
	// KindUnavailable: a transport failure (connection refused or reset,
	// 5xx, a stream cut short); another attempt may succeed.
	KindUnavailable = "unavailable"
)

// Error is a failed call.
type Error struct {
	Kind string
	// State is the remote task's last state, when there was a task.
	State   a2a.TaskState
	Message string
	Err     error
}

func (e *Error) Error() string { return e.Message }
func (e *Error) Unwrap() error { return e.Err }

// Request is one call: the text sent as the user's message, in the
// remote context ContextID.
type Request struct {
	Agent     models.A2AAgent
	ContextID string
	// MessageID identifies the sent message (a new one when empty).
	MessageID string
	Text      string
}

// Result is a completed call.
type Result struct {
	// Text is the agent's answer: its artifacts' text, or the text of its
	// final status message or reply when it produced no artifact.
	Text string
	// AgentName is the card's name.
	AgentName string
	TaskID    string
	ContextID string
	// Streamed says the answer came by SendStreamingMessage.
	Streamed bool
}

// Update is what a call sees while it runs: Text is more of the answer
// (artifact text, or a final reply), Progress is a status message of a
// working task (not part of the answer).
type Update struct {
	Text     string
	Progress string
}

// headerTransport adds the agent's headers to every request for one of
// hosts (the card's, then the interfaces' the card lists), never to
// another host a redirect leads to, and records the last response's
// status, by which failures are told apart.
type headerTransport struct {
	base    http.RoundTripper
	headers map[string]string
	hosts   map[string]bool
	status  int
}

func (t *headerTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	req = req.Clone(req.Context())
	if t.hosts[req.URL.Host] {
		for k, v := range t.headers {
			req.Header.Set(k, v)
		}
	}
	resp, err := t.base.RoundTrip(req)
	if resp != nil {
		t.status = resp.StatusCode
	}
	return resp, err
}

// Call runs one turn of the remote agent: the card, then the message
// (streamed when the card says the agent streams), each update given to
// onUpdate as it arrives. When ctx is cancelled after the remote task
// started, the task is cancelled (CancelTask) before Call returns
// ctx's error.
func (c *Client) Call(ctx context.Context, req Request, onUpdate func(Update)) (*Result, error) {
	lookup := c.cfg.LookupEnv
	if lookup == nil {
		lookup = lookupEnv
	}
	headers := map[string]string{}
	for h, env := range req.Agent.HeadersEnv {
		if !models.A2AHeaderEnvAllowed(env) {
			// Validation refuses such a hierarchy; checked here too, since
			// this is where the value would leave the process.
			return nil, &Error{Kind: KindRefused, Message: fmt.Sprintf("header %s: environment variable %s may not be sent to a remote agent (only %s<NAME>)", h, env, models.A2AHeaderEnvPrefix)}
		}
		v, ok := lookup(env)
		if !ok {
			return nil, &Error{Kind: KindRefused, Message: fmt.Sprintf("environment variable %s (header %s) is not set on this worker", env, h)}
		}
		headers[h] = v
	}
	ht := &headerTransport{base: c.transport, headers: headers, hosts: map[string]bool{}}
	if u, err := url.Parse(req.Agent.CardURL); err == nil {
		ht.hosts[u.Host] = true
	}
	hc := &http.Client{Transport: ht, CheckRedirect: checkRedirect}

	card, err := c.fetchCard(ctx, hc, ht, req.Agent.CardURL)
	if err != nil {
		return nil, err
	}
	for _, iface := range card.SupportedInterfaces {
		if iface == nil {
			continue
		}
		if !strings.HasPrefix(iface.URL, "http://") && !strings.HasPrefix(iface.URL, "https://") &&
			iface.ProtocolBinding != a2a.TransportProtocolGRPC {
			return nil, &Error{Kind: KindRefused, Message: fmt.Sprintf("agent card %s: interface URL %q is not http or https", req.Agent.CardURL, iface.URL)}
		}
		if u, err := url.Parse(iface.URL); err == nil {
			// The card names where the agent is: its endpoints get the
			// headers too.
			ht.hosts[u.Host] = true
		}
	}
	// JSON-RPC and HTTP+JSON only: both go through hc, so through the
	// guard; a gRPC-only agent is refused by the factory.
	client, err := a2aclient.NewFromCard(ctx, card, a2aclient.WithDefaultsDisabled(),
		a2aclient.WithJSONRPCTransport(hc), a2aclient.WithRESTTransport(hc))
	if err != nil {
		return nil, &Error{Kind: KindRefused, Message: fmt.Sprintf("agent card %s: no usable interface (JSON-RPC or HTTP+JSON over http/https): %v", req.Agent.CardURL, err), Err: err}
	}
	defer func() { _ = client.Destroy() }()

	msg := a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart(req.Text))
	if req.MessageID != "" {
		msg.ID = req.MessageID
	}
	msg.ContextID = req.ContextID
	send := &a2a.SendMessageRequest{Message: msg, Config: &a2a.SendMessageConfig{AcceptedOutputModes: []string{"text/plain"}}}
	f := &follower{onUpdate: onUpdate, res: &Result{AgentName: card.Name, ContextID: req.ContextID}}

	var callErr error
	if card.Capabilities.Streaming {
		f.res.Streamed = true
		for ev, err := range client.SendStreamingMessage(ctx, send) {
			if err != nil {
				callErr = err
				break
			}
			f.event(ev)
		}
	} else {
		var r a2a.SendMessageResult
		if r, callErr = client.SendMessage(ctx, send); callErr == nil {
			f.result(r)
		}
	}
	if ctx.Err() != nil {
		c.cancelRemote(ctx, client, a2a.TaskID(f.res.TaskID))
		return nil, ctx.Err()
	}
	if callErr != nil {
		return nil, classify(fmt.Sprintf("remote agent %q (%s)", card.Name, req.Agent.CardURL), callErr, ht.status)
	}
	return f.finish(card.Name)
}

// cancelRemote asks the agent to cancel its task, on a context of its own
// (the call's is cancelled); a failure is only reported by its absence on
// the remote side.
func (c *Client) cancelRemote(ctx context.Context, client *a2aclient.Client, taskID a2a.TaskID) {
	if taskID == "" {
		return
	}
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cancelTimeout)
	defer cancel()
	_, _ = client.CancelTask(cctx, &a2a.CancelTaskRequest{ID: taskID})
}

func (c *Client) fetchCard(ctx context.Context, hc *http.Client, ht *headerTransport, cardURL string) (*a2a.AgentCard, error) {
	cctx, cancel := context.WithTimeout(ctx, cardTimeout)
	defer cancel()
	hreq, err := http.NewRequestWithContext(cctx, http.MethodGet, cardURL, nil)
	if err != nil {
		return nil, &Error{Kind: KindRefused, Message: fmt.Sprintf("agent card %s: %v", cardURL, err), Err: err}
	}
	hreq.Header.Set("Accept", "application/json")
	resp, err := hc.Do(hreq)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, classify("agent card "+cardURL, err, 0)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, classify("agent card "+cardURL, fmt.Errorf("HTTP %s", resp.Status), resp.StatusCode)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxCardBytes+1))
	if err != nil {
		return nil, classify("agent card "+cardURL, err, 0)
	}
	if len(body) > maxCardBytes {
		return nil, &Error{Kind: KindRefused, Message: fmt.Sprintf("agent card %s: larger than %d bytes", cardURL, maxCardBytes)}
	}
	card, err := agentcard.DefaultCardParser(body)
	if err != nil {
		return nil, &Error{Kind: KindRefused, Message: fmt.Sprintf("agent card %s: not an A2A agent card: %v", cardURL, err), Err: err}
	}
	return card, nil
}

// refusedProtocolErrors are A2A errors that another attempt would meet
// again.
var refusedProtocolErrors = []error{
	a2a.ErrParseError, a2a.ErrInvalidRequest, a2a.ErrMethodNotFound, a2a.ErrInvalidParams,
	a2a.ErrTaskNotFound, a2a.ErrUnsupportedOperation, a2a.ErrUnsupportedContentType,
	a2a.ErrInvalidAgentResponse, a2a.ErrExtensionSupportRequired, a2a.ErrVersionNotSupported,
	a2a.ErrUnauthenticated, a2a.ErrUnauthorized,
}

// classify turns a failure into an Error: refused for the guard, a 4xx
// (but 408 and 429) and protocol errors; unavailable otherwise.
func classify(what string, err error, status int) *Error {
	msg := fmt.Sprintf("%s: %v", what, err)
	switch {
	case tools.IsBlocked(err):
		return &Error{Kind: KindRefused, Message: msg + " (A2A_ALLOW_PRIVATE opens private addresses)", Err: err}
	case status >= 400 && status < 500 && status != http.StatusRequestTimeout && status != http.StatusTooManyRequests:
		return &Error{Kind: KindRefused, Message: fmt.Sprintf("%s: HTTP %d: %v", what, status, err), Err: err}
	case slices.ContainsFunc(refusedProtocolErrors, func(p error) bool { return errors.Is(err, p) }):
		return &Error{Kind: KindRefused, Message: msg, Err: err}
	}
	var pe *redirectError
	if errors.As(err, &pe) {
		return &Error{Kind: KindRefused, Message: msg, Err: err}
	}
	return &Error{Kind: KindUnavailable, Message: msg, Err: err}
}

type redirectError struct{ msg string }

func (e *redirectError) Error() string { return e.msg }

func checkRedirect(req *http.Request, via []*http.Request) error {
	if len(via) >= 5 {
		return &redirectError{"stopped after 5 redirects"}
	}
	if req.URL.Scheme != "http" && req.URL.Scheme != "https" {
		return &redirectError{fmt.Sprintf("refused a redirect to a %s URL", req.URL.Scheme)}
	}
	return nil
}

// follower folds a task's events into the call's result.
type follower struct {
	onUpdate func(Update)
	res      *Result
	state    a2a.TaskState
	// artifacts holds each artifact's text, in the order they came.
	artifacts []string
	ids       []a2a.ArtifactID
	// reply is the text of a Message the agent answered with, or of the
	// task's final status message.
	reply string
	// statusText is the last status message's text (for failures).
	statusText string
}

func (f *follower) update(u Update) {
	if f.onUpdate != nil && (u.Text != "" || u.Progress != "") {
		f.onUpdate(u)
	}
}

func (f *follower) event(ev a2a.Event) {
	switch e := ev.(type) {
	case *a2a.Task:
		f.task(e, true)
	case *a2a.Message:
		f.message(e)
	case *a2a.TaskStatusUpdateEvent:
		f.res.TaskID = string(e.TaskID)
		f.status(e.Status)
	case *a2a.TaskArtifactUpdateEvent:
		f.res.TaskID = string(e.TaskID)
		if e.Artifact != nil {
			f.artifact(e.Artifact, e.Append)
		}
	}
}

func (f *follower) result(r a2a.SendMessageResult) {
	switch e := r.(type) {
	case *a2a.Task:
		f.task(e, false)
	case *a2a.Message:
		f.message(e)
	}
}

// task takes a task snapshot: the first event of a stream (its artifacts
// are none yet, or those of an earlier turn), or SendMessage's result.
func (f *follower) task(t *a2a.Task, streaming bool) {
	f.res.TaskID = string(t.ID)
	if t.ContextID != "" {
		f.res.ContextID = t.ContextID
	}
	if !streaming || t.Status.State.Terminal() || t.Status.State == a2a.TaskStateInputRequired {
		for _, a := range t.Artifacts {
			if a != nil && !slices.Contains(f.ids, a.ID) {
				f.artifact(a, false)
			}
		}
	}
	f.status(t.Status)
}

func (f *follower) message(m *a2a.Message) {
	text := partsText(m.Parts)
	f.reply += text
	f.state = a2a.TaskStateCompleted
	f.update(Update{Text: text})
}

func (f *follower) status(s a2a.TaskStatus) {
	if s.State != "" {
		f.state = s.State
	}
	if s.Message == nil {
		return
	}
	text := partsText(s.Message.Parts)
	if text == "" {
		return
	}
	f.statusText = text
	switch {
	case s.State == a2a.TaskStateCompleted && len(f.artifacts) == 0:
		// The answer is the final status message.
		f.reply += text
		f.update(Update{Text: text})
	case !s.State.Terminal() && s.State != a2a.TaskStateInputRequired && s.State != a2a.TaskStateAuthRequired:
		f.update(Update{Progress: text})
	}
}

func (f *follower) artifact(a *a2a.Artifact, appendTo bool) {
	text := partsText(a.Parts)
	i := slices.Index(f.ids, a.ID)
	switch {
	case i < 0:
		f.ids, f.artifacts = append(f.ids, a.ID), append(f.artifacts, text)
	case appendTo:
		f.artifacts[i] += text
	default:
		f.artifacts[i] = text // replaced; what streamed before stays streamed
	}
	f.update(Update{Text: text})
}

func (f *follower) finish(agent string) (*Result, error) {
	fail := func(format string, args ...any) (*Result, error) {
		msg := fmt.Sprintf("remote agent %q: ", agent) + fmt.Sprintf(format, args...)
		if f.statusText != "" {
			msg += ": " + f.statusText
		}
		return nil, &Error{Kind: KindTaskFailed, State: f.state, Message: msg}
	}
	switch f.state {
	case a2a.TaskStateCompleted:
	case a2a.TaskStateFailed:
		return fail("task %s failed", f.res.TaskID)
	case a2a.TaskStateRejected:
		return fail("task %s was rejected", f.res.TaskID)
	case a2a.TaskStateCanceled:
		return fail("task %s was cancelled by the remote agent", f.res.TaskID)
	case a2a.TaskStateInputRequired:
		return fail("task %s asked for input (input-required), which a worker cannot give", f.res.TaskID)
	case a2a.TaskStateAuthRequired:
		return fail("task %s asked for authentication (auth-required), which a worker cannot give", f.res.TaskID)
	default:
		// The stream ended before the task did: a transport failure.
		return nil, &Error{Kind: KindUnavailable, State: f.state,
			Message: fmt.Sprintf("remote agent %q: the stream of task %s ended in state %q, before the task did", agent, f.res.TaskID, f.state)}
	}
	text := strings.Join(f.artifacts, "")
	if text == "" {
		text = f.reply
	}
	f.res.Text = text
	return f.res, nil
}

// partsText is the text of a message's or an artifact's parts; data parts
// are given as JSON, file parts by their URL.
func partsText(parts a2a.ContentParts) string {
	var b strings.Builder
	for _, p := range parts {
		if p == nil {
			continue
		}
		switch c := p.Content.(type) {
		case a2a.Text:
			b.WriteString(string(c))
		case a2a.URL:
			b.WriteString(string(c))
		case a2a.Data:
			if raw, err := jsonText(c.Value); err == nil {
				b.WriteString(raw)
			}
		}
	}
	return b.String()
}
