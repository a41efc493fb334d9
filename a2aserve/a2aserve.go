// Package a2aserve publishes each hierarchy as an A2A agent (protocol 1.0,
// github.com/a2aproject/a2a-go/v2): an agent card and a JSON-RPC endpoint
// whose tasks are the hierarchy's runs and whose contexts are its threads.
//
// The package speaks to the service only through its own executor API
// (package client), sent in-process with the A2A caller's credentials
// (api.Server.InProcessTransport). So access control is the API's own:
// the same keys, tenants and scopes decide what an A2A caller may see and
// do, and another tenant's runs and hierarchies are not found.
//
// The mapping (docs/a2a.md):
//
//   - SendMessage starts a run of the hierarchy with the message's text as
//     its task. A message with the contextId of an earlier task starts a
//     follow-up run (previous_run_id: the thread's latest run). A message
//     with the taskId of an input-required task answers its pending
//     approval ("approve …" or "reject …").
//   - Task states: pending→submitted, running and paused→working,
//     waiting_approval→input-required, completed→completed (the final
//     answer as the artifact "final_answer"), failed and timed_out→failed,
//     cancelled→canceled.
//   - SendStreamingMessage and SubscribeToTask stream the run's event log
//     as status-update and artifact-update events (each agent's answer an
//     artifact of its own, streamed in chunks, with agent_id in its
//     metadata). Every streamed event carries the run's event sequence in
//     metadata.sequence; SubscribeToTask with the HTTP header
//     Last-Event-ID: <sequence> resumes after that event, without it it
//     replays the task's stream from its start.
//   - Push notification configs are refused: the service has no webhooks.
package a2aserve

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"strings"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2asrv"

	"github.com/op-stack/executor/client"
	"github.com/op-stack/executor/models"
)

// ResumeHeader is the HTTP header a SubscribeToTask request names the
// event sequence to resume after with, as SSE clients do.
const ResumeHeader = "Last-Event-ID"

// internalBase is the address the in-process client's requests carry; they
// never leave the process (Server's transport serves them).
const internalBase = "http://executor.in-process"

// Server serves the A2A agents of the hierarchies.
type Server struct {
	transport http.RoundTripper
	log       *slog.Logger
}

// New returns a Server whose calls to the executor API go through
// transport (api.Server.InProcessTransport in the service).
func New(transport http.RoundTripper, log *slog.Logger) *Server {
	if log == nil {
		log = slog.Default()
	}
	return &Server{transport: transport, log: log}
}

// ServeJSONRPC serves the JSON-RPC endpoint of the hierarchy's agent.
func (s *Server) ServeJSONRPC(w http.ResponseWriter, r *http.Request, hierarchyID string) {
	h := &handler{api: s.client(r), hierarchyID: hierarchyID, resumeAfter: r.Header.Get(ResumeHeader), log: s.log}
	a2asrv.NewJSONRPCHandler(h).ServeHTTP(w, r)
}

// ServeCard serves the hierarchy's agent card; endpoint is the absolute URL
// of its JSON-RPC endpoint.
func (s *Server) ServeCard(w http.ResponseWriter, r *http.Request, hierarchyID, endpoint string) {
	var h struct {
		ID            string `json:"hierarchy_id"`
		Name          string `json:"name"`
		Description   string `json:"description"`
		ExecutionMode string `json:"execution_mode"`
	}
	if err := s.client(r).Call(r.Context(), "/hierarchies/get", map[string]string{"hierarchy_id": hierarchyID}, &h); err != nil {
		writeAPIError(w, err)
		return
	}
	a2asrv.NewStaticAgentCardHandler(Card(h.ID, h.Name, h.Description, h.ExecutionMode, endpoint)).ServeHTTP(w, r)
}

// Card is the agent card of a hierarchy served at endpoint: one skill (the
// hierarchy), streaming, no push notifications, bearer authentication.
func Card(id, name, description, executionMode, endpoint string) *a2a.AgentCard {
	if strings.TrimSpace(description) == "" {
		description = "The hierarchy " + name + " of op-stack-executor: a team of LLM agents."
	}
	tags := []string{"hierarchy"}
	if executionMode != "" {
		tags = append(tags, executionMode)
	}
	return &a2a.AgentCard{
		Name:                name,
		Description:         description,
		Version:             "1",
		SupportedInterfaces: []*a2a.AgentInterface{a2a.NewAgentInterface(endpoint, a2a.TransportProtocolJSONRPC)},
		Capabilities:        a2a.AgentCapabilities{Streaming: true},
		DefaultInputModes:   []string{"text/plain"},
		DefaultOutputModes:  []string{"text/plain"},
		Skills: []a2a.AgentSkill{{
			ID: id, Name: name, Description: description, Tags: tags,
			InputModes: []string{"text/plain"}, OutputModes: []string{"text/plain"},
		}},
		SecuritySchemes: a2a.NamedSecuritySchemes{
			"bearer": a2a.HTTPAuthSecurityScheme{Scheme: "Bearer", Description: "an API key of the service (Authorization: Bearer <key>); reading needs runs:read, sending and cancelling runs:write"},
		},
		SecurityRequirements: a2a.SecurityRequirementsOptions{{"bearer": a2a.SecuritySchemeScopes{}}},
	}
}

// client is an executor API client with the A2A caller's credential.
func (s *Server) client(r *http.Request) *client.Client {
	key := ""
	if scheme, cred, ok := strings.Cut(r.Header.Get("Authorization"), " "); ok && strings.EqualFold(scheme, "Bearer") {
		key = strings.TrimSpace(cred)
	}
	c, err := client.New(internalBase, key, &http.Client{Transport: s.transport})
	if err != nil {
		panic(err) // internalBase is a valid URL
	}
	return c
}

// writeAPIError answers a card request the API refused as the API did:
// its status and contract 002's error body.
func writeAPIError(w http.ResponseWriter, err error) {
	var apiErr *client.APIError
	if !errors.As(err, &apiErr) || apiErr.Status == 0 {
		c := models.CodeSystemError
		apiErr = &client.APIError{Status: c.HTTPStatus, Code: c.Numeric, ErrorCode: c.Name, Message: err.Error()}
	}
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(apiErr.Status)
	_ = json.NewEncoder(w).Encode(apiErr)
}

// a2aError maps an executor API error onto A2A's: not found (another
// tenant's object too) is task not found, 401 unauthenticated, 403
// unauthorized, 400 invalid params; the API's message is kept.
func a2aError(err error) error {
	var apiErr *client.APIError
	if !errors.As(err, &apiErr) {
		if errors.Is(err, context.Canceled) {
			return err
		}
		return a2a.NewError(a2a.ErrInternalError, err.Error())
	}
	msg := apiErr.Message
	if apiErr.Field != "" {
		msg = apiErr.Field + ": " + msg
	}
	switch apiErr.Status {
	case http.StatusNotFound:
		return a2a.NewError(a2a.ErrTaskNotFound, msg)
	case http.StatusUnauthorized:
		return a2a.NewError(a2a.ErrUnauthenticated, msg)
	case http.StatusForbidden:
		return a2a.NewError(a2a.ErrUnauthorized, msg)
	case http.StatusBadRequest, http.StatusConflict, http.StatusUnprocessableEntity:
		return a2a.NewError(a2a.ErrInvalidParams, msg)
	}
	return a2a.NewError(a2a.ErrInternalError, fmt.Sprintf("%s (%s)", msg, apiErr.ErrorCode))
}

// pageToken reads ListTasks' page token: the page number, from 1.
func pageToken(tok string) (int, error) {
	if tok == "" {
		return 1, nil
	}
	n, err := strconv.Atoi(tok)
	if err != nil || n < 1 {
		return 0, a2a.NewError(a2a.ErrInvalidParams, "pageToken must be a token from an earlier ListTasks answer")
	}
	return n, nil
}
