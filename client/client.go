// Package client is a Go client of the executor's HTTP API (contract 002,
// the executor's own REST surface under /api/executor/v1): hierarchies;
// runs, their stored events and their live event stream, resumed by
// sequence after a dropped connection; steering (pause, resume, redirect,
// cancel a team), approval gates, forks, threads of follow-ups and
// deleting a run; MCP servers and webhooks. The executor binary's client
// commands are built on it.
//
// Every method takes a context that bounds the call (and, for Follow, the
// whole stream). An answer the API refuses is an *APIError carrying the
// HTTP status, the error code of docs/errors.md and the field at fault;
// Call and CallRaw reach any route the typed methods do not cover.
//
// The examples run under go test against an executor started in process
// (API and worker on a Temporal dev server, the offline model); see
// docs/go-client.md.
package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	sse "github.com/tmaxmax/go-sse"

	"github.com/op-stack/executor/models"
)

// Prefix is the path of contract 002's endpoints under the base URL.
const Prefix = "/api/executor/v1"

// Client calls one executor API. The zero value is not usable: use New.
type Client struct {
	base   string
	apiKey string
	http   *http.Client
}

// New returns a client of the API at baseURL (e.g. http://127.0.0.1:8080)
// that sends apiKey as a bearer token when it is not empty. httpClient nil
// uses a client without a timeout, since event streams last as long as a
// run; each call is bounded by its context.
func New(baseURL, apiKey string, httpClient *http.Client) (*Client, error) {
	u, err := url.Parse(strings.TrimSpace(baseURL))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("the API address must be an http or https URL such as http://127.0.0.1:8080, got %q", baseURL)
	}
	if httpClient == nil {
		httpClient = &http.Client{}
	}
	return &Client{base: strings.TrimSuffix(u.String(), "/"), apiKey: strings.TrimSpace(apiKey), http: httpClient}, nil
}

// BaseURL is the API's address as the client uses it.
func (c *Client) BaseURL() string { return c.base }

// APIError is an error answer of the API: its HTTP status and contract
// 002's envelope (numeric code, error code name, message, field).
type APIError struct {
	Status    int    `json:"-"`
	Code      int    `json:"code"`
	ErrorCode string `json:"error_code"`
	Message   string `json:"message"`
	Field     string `json:"field,omitempty"`
}

// Error says the status, the error code, the field at fault and the
// message, e.g. "HTTP 400 INVALID_PARAMETERS (field teams[0].name): is
// required".
func (e *APIError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "HTTP %d", e.Status)
	if e.ErrorCode != "" {
		fmt.Fprintf(&b, " %s", e.ErrorCode)
	}
	if e.Field != "" {
		fmt.Fprintf(&b, " (field %s)", e.Field)
	}
	if e.Message != "" {
		fmt.Fprintf(&b, ": %s", e.Message)
	}
	return b.String()
}

// Call posts body to path (under Prefix, e.g. "/runs/get") and decodes the
// envelope's data into out (when not nil). A non-2xx answer or a non-zero
// envelope code is an *APIError.
func (c *Client) Call(ctx context.Context, path string, body, out any) error {
	raw, err := c.CallRaw(ctx, path, body)
	if err != nil {
		return err
	}
	if out == nil {
		return nil
	}
	if err := json.Unmarshal(raw, out); err != nil {
		return fmt.Errorf("%s: decode answer: %w", path, err)
	}
	return nil
}

// CallRaw is Call returning the envelope's data as it came.
func (c *Client) CallRaw(ctx context.Context, path string, body any) (json.RawMessage, error) {
	var payload []byte
	switch b := body.(type) {
	case nil:
		payload = []byte("{}")
	case json.RawMessage:
		payload = b
	case []byte:
		payload = b
	default:
		var err error
		if payload, err = json.Marshal(body); err != nil {
			return nil, err
		}
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.base+Prefix+path, bytes.NewReader(payload))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	c.authorize(req)
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return nil, fmt.Errorf("%s: read answer: %w", path, err)
	}
	var env struct {
		APIError
		Data json.RawMessage `json:"data"`
	}
	if err := json.Unmarshal(raw, &env); err != nil {
		if resp.StatusCode/100 != 2 {
			return nil, &APIError{Status: resp.StatusCode, Message: strings.TrimSpace(string(raw))}
		}
		return nil, fmt.Errorf("%s: the answer is not JSON: %w", path, err)
	}
	if resp.StatusCode/100 != 2 || env.Code != 0 {
		e := env.APIError
		e.Status = resp.StatusCode
		return nil, &e
	}
	return env.Data, nil
}

func (c *Client) authorize(req *http.Request) {
	if c.apiKey != "" {
		req.Header.Set("Authorization", "Bearer "+c.apiKey)
	}
}

// HierarchySummary is a hierarchy as hierarchies/list returns it.
type HierarchySummary struct {
	ID                      string    `json:"hierarchy_id"`
	Name                    string    `json:"name"`
	Description             string    `json:"description"`
	ExecutionMode           string    `json:"execution_mode"`
	GlobalSupervisorAgentID string    `json:"global_supervisor_agent_id"`
	CreatedAt               time.Time `json:"created_at"`
}

// CreateHierarchy creates a hierarchy from its JSON body (contract 002's
// hierarchies/create) and returns its id.
func (c *Client) CreateHierarchy(ctx context.Context, body json.RawMessage) (string, error) {
	var out struct {
		ID string `json:"hierarchy_id"`
	}
	if err := c.Call(ctx, "/hierarchies/create", body, &out); err != nil {
		return "", err
	}
	return out.ID, nil
}

// GetHierarchy returns a hierarchy as the API does.
func (c *Client) GetHierarchy(ctx context.Context, id string) (json.RawMessage, error) {
	return c.CallRaw(ctx, "/hierarchies/get", map[string]string{"hierarchy_id": id})
}

// Page is one page of a list.
type Page[T any] struct {
	Items    []T `json:"items"`
	Total    int `json:"total"`
	Page     int `json:"page"`
	PageSize int `json:"page_size"`
}

// ListHierarchies lists hierarchies, newest first (page from 1; 0 takes
// the API's defaults).
func (c *Client) ListHierarchies(ctx context.Context, page, pageSize int) (Page[HierarchySummary], error) {
	var out Page[HierarchySummary]
	err := c.Call(ctx, "/hierarchies/list", map[string]int{"page": page, "page_size": pageSize}, &out)
	return out, err
}

// StartRequest is runs/start's body.
type StartRequest struct {
	HierarchyID   string `json:"hierarchy_id"`
	Task          string `json:"task"`
	ID            string `json:"id,omitempty"`
	PreviousRunID string `json:"previous_run_id,omitempty"`
	// OnLimit is what to do when the tenant's concurrent runs are at their
	// limit: "queue" (the API's default: the run waits, status queued) or
	// "reject" (429). MultitaskStrategy is what a follow-up does when its
	// thread's last run is still going: "reject", "enqueue" (the
	// default), "interrupt" or "rollback" (docs/queue.md). Empty: the
	// API's defaults.
	OnLimit           string `json:"on_limit,omitempty"`
	MultitaskStrategy string `json:"multitask_strategy,omitempty"`
}

// Started is runs/start's answer. Status is "pending", or "queued" with
// QueuePosition (1: next) when the run waits for admission.
type Started struct {
	ID            string `json:"id"`
	WorkflowID    string `json:"workflow_id"`
	Status        string `json:"status"`
	ThreadID      string `json:"thread_id"`
	QueuePosition int    `json:"queue_position,omitempty"`
}

// StartRun starts a run.
func (c *Client) StartRun(ctx context.Context, req StartRequest) (Started, error) {
	var out Started
	err := c.Call(ctx, "/runs/start", req, &out)
	return out, err
}

// Usage is a run's token usage and cost.
type Usage struct {
	PromptTokens     int     `json:"prompt_tokens"`
	CompletionTokens int     `json:"completion_tokens"`
	TotalTokens      int     `json:"total_tokens"`
	CostUSD          float64 `json:"cost_usd"`
	CostUnknown      bool    `json:"cost_unknown"`
}

// Run is the part of a run the client reads.
type Run struct {
	ID            string     `json:"id"`
	HierarchyID   string     `json:"hierarchy_id"`
	HierarchyName string     `json:"hierarchy_name"`
	Task          string     `json:"task"`
	Status        string     `json:"status"`
	FinalAnswer   string     `json:"final_answer"`
	Error         string     `json:"error"`
	CreatedAt     time.Time  `json:"created_at"`
	StartedAt     *time.Time `json:"started_at"`
	CompletedAt   *time.Time `json:"completed_at"`
	Usage         Usage      `json:"usage"`
	// ThreadID is the id of the first run of the run's thread (its own id
	// unless it is a follow-up); PreviousRunID the run it follows up.
	ThreadID      string `json:"thread_id"`
	PreviousRunID string `json:"previous_run_id,omitempty"`
	// ForkedFrom is set on forks: the run and event the fork started from.
	ForkedFrom *ForkedFrom `json:"forked_from,omitempty"`
}

// GetRun returns a run as the API does (decode it into Run for its main
// fields).
func (c *Client) GetRun(ctx context.Context, id string) (json.RawMessage, error) {
	return c.CallRaw(ctx, "/runs/get", map[string]string{"id": id})
}

// RunFilter narrows ListRuns; zero fields do not filter.
type RunFilter struct {
	HierarchyID string `json:"hierarchy_id,omitempty"`
	Status      string `json:"status,omitempty"`
	ThreadID    string `json:"thread_id,omitempty"`
	// ForkedFrom lists one run's forks; ScheduleID the runs a schedule
	// started.
	ForkedFrom string `json:"forked_from,omitempty"`
	ScheduleID string `json:"schedule_id,omitempty"`
	Page       int    `json:"page,omitempty"`
	PageSize   int    `json:"page_size,omitempty"`
}

// ListRuns lists runs, newest first.
func (c *Client) ListRuns(ctx context.Context, f RunFilter) (Page[Run], error) {
	var out Page[Run]
	err := c.Call(ctx, "/runs/list", f, &out)
	return out, err
}

// CancelRun asks a run to cancel and returns the status the API answered
// (cancelling, or the run's status when it had already been cancelled).
func (c *Client) CancelRun(ctx context.Context, id string) (string, error) {
	var out struct {
		Status string `json:"status"`
	}
	err := c.Call(ctx, "/runs/cancel", map[string]string{"id": id}, &out)
	return out.Status, err
}

// EventFilter is runs/events' body besides the run id.
type EventFilter struct {
	After   int64    `json:"after,omitempty"`
	Limit   int      `json:"limit,omitempty"`
	AgentID string   `json:"agent_id,omitempty"`
	Types   []string `json:"types,omitempty"`
}

// EventsPage is one page of a run's stored events.
type EventsPage struct {
	Events    []models.Event `json:"events"`
	NextAfter int64          `json:"next_after"`
	HasMore   bool           `json:"has_more"`
}

// Events returns one page of a run's stored events.
func (c *Client) Events(ctx context.Context, id string, f EventFilter) (EventsPage, error) {
	body := struct {
		ID string `json:"id"`
		EventFilter
	}{id, f}
	var out EventsPage
	err := c.Call(ctx, "/runs/events", body, &out)
	return out, err
}

// FollowOptions tune Follow.
type FollowOptions struct {
	// After is the sequence to continue after (0: from the first event).
	After int64
	// Reconnect is how long Follow keeps trying to reconnect after the
	// connection drops without the run having ended (0: 2 minutes).
	Reconnect time.Duration
	// OnReconnect, when not nil, is told each time Follow reconnects.
	OnReconnect func(after int64, cause error)
}

// ErrStreamEnded is what Follow returns when the stream ended without the
// run's terminal event and could not be resumed in time.
var ErrStreamEnded = errors.New("the event stream ended before the run did")

// Follow streams a run's events (GET runs/{id}/stream) to fn in sequence
// order until the run's terminal lifecycle event, which it returns. When
// the connection drops it reconnects with Last-Event-ID, so fn sees every
// event once, without gap or duplicate. An error from fn stops it.
func (c *Client) Follow(ctx context.Context, id string, opts FollowOptions, fn func(models.Event) error) (models.Event, error) {
	if opts.Reconnect <= 0 {
		opts.Reconnect = 2 * time.Minute
	}
	last := opts.After
	var lastErr error
	giveUp := time.Time{}
	backoff := 200 * time.Millisecond
	for {
		terminal, progressed, err := c.followOnce(ctx, id, &last, fn)
		if terminal != nil {
			return *terminal, nil
		}
		if ctx.Err() != nil {
			return models.Event{}, ctx.Err()
		}
		var apiErr *APIError
		if errors.As(err, &apiErr) && apiErr.Status/100 == 4 && apiErr.Status != http.StatusTooManyRequests {
			return models.Event{}, err
		}
		var cbErr callbackError
		if errors.As(err, &cbErr) {
			return models.Event{}, cbErr.err
		}
		if err == nil {
			err = ErrStreamEnded
		}
		lastErr = err
		if progressed || giveUp.IsZero() {
			giveUp = time.Now().Add(opts.Reconnect)
			backoff = 200 * time.Millisecond
		}
		if time.Now().After(giveUp) {
			return models.Event{}, fmt.Errorf("follow run %s: %w (after event %d)", id, lastErr, last)
		}
		if opts.OnReconnect != nil {
			opts.OnReconnect(last, err)
		}
		select {
		case <-ctx.Done():
			return models.Event{}, ctx.Err()
		case <-time.After(backoff):
		}
		backoff = min(backoff*2, 5*time.Second)
	}
}

// callbackError carries an error of Follow's callback, which stops it.
type callbackError struct{ err error }

func (e callbackError) Error() string { return e.err.Error() }

// followOnce reads one connection of a run's stream; progressed says it
// delivered at least one event.
func (c *Client) followOnce(ctx context.Context, id string, last *int64, fn func(models.Event) error) (terminal *models.Event, progressed bool, err error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.base+Prefix+"/runs/"+url.PathEscape(id)+"/stream", nil)
	if err != nil {
		return nil, false, err
	}
	req.Header.Set("Accept", "text/event-stream")
	if *last > 0 {
		req.Header.Set("Last-Event-ID", strconv.FormatInt(*last, 10))
	}
	c.authorize(req)
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, false, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		raw, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		e := &APIError{Status: resp.StatusCode}
		if json.Unmarshal(raw, e) != nil || e.Message == "" {
			e.Message = strings.TrimSpace(string(raw))
		}
		return nil, false, e
	}
	for msg, rerr := range sse.Read(resp.Body, &sse.ReadConfig{MaxEventSize: 16 << 20}) {
		if rerr != nil {
			return nil, progressed, rerr
		}
		if msg.Data == "" {
			continue
		}
		var ev models.Event
		if err := json.Unmarshal([]byte(msg.Data), &ev); err != nil {
			return nil, progressed, fmt.Errorf("event %s: %w", msg.LastEventID, err)
		}
		if ev.Sequence <= *last {
			continue // already delivered before a reconnect
		}
		if err := fn(ev); err != nil {
			return nil, progressed, callbackError{err}
		}
		*last, progressed = ev.Sequence, true
		if IsTerminal(ev) {
			return &ev, true, nil
		}
	}
	return nil, progressed, nil
}

// IsTerminal reports whether ev is a run's last event: lifecycle.completed,
// failed (which a run that timed out ends with too) or cancelled.
func IsTerminal(ev models.Event) bool {
	if ev.Event.Category != models.CategoryLifecycle {
		return false
	}
	switch ev.Event.Action {
	case models.ActionCompleted, models.ActionFailed, models.ActionCancelled:
		return true
	}
	return false
}

// The mcp-servers routes' wire types live in package models, which the
// API writes them from; these names keep the client's callers unchanged.
type (
	// MCPServer is a tenant's MCP server as the routes answer it.
	MCPServer = models.MCPServer
	// MCPServerWarning is create's or update's note on a saved server.
	MCPServerWarning = models.MCPServerWarning
	// MCPServerInput is the body of mcp-servers/create and update.
	MCPServerInput = models.MCPServerInput
	// MCPServerRef names one MCP server by id or name.
	MCPServerRef = models.MCPServerRef
	// MCPServerList is mcp-servers/list's answer.
	MCPServerList = models.MCPServerList
	// MCPServerDeleted is mcp-servers/delete's answer.
	MCPServerDeleted = models.MCPServerDeleted
)

// CreateMCPServer adds an MCP server to the caller's tenant and returns it
// as stored (without its secrets).
func (c *Client) CreateMCPServer(ctx context.Context, in MCPServerInput) (MCPServer, error) {
	var out MCPServer
	err := c.Call(ctx, "/mcp-servers/create", in, &out)
	return out, err
}

// GetMCPServer returns one of the caller's tenant's MCP servers, by id or
// name; an unknown one is an *APIError with status 404.
func (c *Client) GetMCPServer(ctx context.Context, ref MCPServerRef) (MCPServer, error) {
	var out MCPServer
	err := c.Call(ctx, "/mcp-servers/get", ref, &out)
	return out, err
}

// ListMCPServers lists the caller's tenant's MCP servers.
func (c *Client) ListMCPServers(ctx context.Context) (MCPServerList, error) {
	var out MCPServerList
	err := c.Call(ctx, "/mcp-servers/list", nil, &out)
	return out, err
}

// UpdateMCPServer replaces the MCP server in.ID (see MCPServerInput for
// what is kept) and returns it as stored.
func (c *Client) UpdateMCPServer(ctx context.Context, in MCPServerInput) (MCPServer, error) {
	var out MCPServer
	err := c.Call(ctx, "/mcp-servers/update", in, &out)
	return out, err
}

// DeleteMCPServer deletes one of the caller's tenant's MCP servers, by id
// or name.
func (c *Client) DeleteMCPServer(ctx context.Context, ref MCPServerRef) (MCPServerDeleted, error) {
	var out MCPServerDeleted
	err := c.Call(ctx, "/mcp-servers/delete", ref, &out)
	return out, err
}

// Webhooks (docs/webhooks.md).
type (
	// WebhookEndpointInput is the body of webhooks/create and update.
	WebhookEndpointInput = models.WebhookEndpointInput
	// WebhookEndpoint is an endpoint; Secret is set by create (and update
	// with RotateSecret) only.
	WebhookEndpoint = models.WebhookEndpoint
	// WebhookEndpointList is webhooks/list's answer.
	WebhookEndpointList = models.WebhookEndpointList
	// WebhookDelivery is one delivery of an event to an endpoint.
	WebhookDelivery = models.WebhookDelivery
	// WebhookDeliveryList is webhooks/deliveries' answer.
	WebhookDeliveryList = models.WebhookDeliveryList
)

// WebhookDeliveryFilter selects webhooks/deliveries; empty fields select
// all, Limit 0 is 100.
type WebhookDeliveryFilter struct {
	EndpointID string `json:"endpoint_id,omitempty"`
	RunID      string `json:"run_id,omitempty"`
	Status     string `json:"status,omitempty"`
	Limit      int    `json:"limit,omitempty"`
}

// CreateWebhook registers an endpoint in the caller's tenant; the answer
// holds its signing secret, shown this once.
func (c *Client) CreateWebhook(ctx context.Context, in WebhookEndpointInput) (WebhookEndpoint, error) {
	var out WebhookEndpoint
	err := c.Call(ctx, "/webhooks/create", in, &out)
	return out, err
}

// GetWebhook returns one endpoint by id.
func (c *Client) GetWebhook(ctx context.Context, id string) (WebhookEndpoint, error) {
	var out WebhookEndpoint
	err := c.Call(ctx, "/webhooks/get", map[string]string{"id": id}, &out)
	return out, err
}

// ListWebhooks lists the caller's tenant's endpoints.
func (c *Client) ListWebhooks(ctx context.Context) (WebhookEndpointList, error) {
	var out WebhookEndpointList
	err := c.Call(ctx, "/webhooks/list", nil, &out)
	return out, err
}

// UpdateWebhook replaces endpoint in.ID's url, description, events and
// (when set) enabled flag; RotateSecret answers a new secret.
func (c *Client) UpdateWebhook(ctx context.Context, in WebhookEndpointInput) (WebhookEndpoint, error) {
	var out WebhookEndpoint
	err := c.Call(ctx, "/webhooks/update", in, &out)
	return out, err
}

// DeleteWebhook deletes an endpoint and its deliveries.
func (c *Client) DeleteWebhook(ctx context.Context, id string) error {
	return c.Call(ctx, "/webhooks/delete", map[string]string{"id": id}, nil)
}

// WebhookDeliveries lists deliveries, newest first.
func (c *Client) WebhookDeliveries(ctx context.Context, f WebhookDeliveryFilter) (WebhookDeliveryList, error) {
	var out WebhookDeliveryList
	err := c.Call(ctx, "/webhooks/deliveries", f, &out)
	return out, err
}

// RedeliverWebhook sends a delivery again, with the same webhook-id.
func (c *Client) RedeliverWebhook(ctx context.Context, id string) (WebhookDelivery, error) {
	var out WebhookDelivery
	err := c.Call(ctx, "/webhooks/redeliver", map[string]string{"id": id}, &out)
	return out, err
}
