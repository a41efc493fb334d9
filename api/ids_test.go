package api_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"

	"github.com/op-stack/executor/api"
	"github.com/op-stack/executor/auth"
	"github.com/op-stack/executor/models"
	"github.com/op-stack/executor/store"
	"github.com/op-stack/executor/store/storetest"
)

// startRecorder stands in for Temporal in runs/start: it records the
// workflows started and starts nothing. Any other call it does not answer
// below panics (the
// embedded interface is nil): these tests make none.
type startRecorder struct {
	client.Client
	mu      sync.Mutex
	started []models.RunInput
}

func (r *startRecorder) ExecuteWorkflow(_ context.Context, _ client.StartWorkflowOptions, _ any, args ...any) (client.WorkflowRun, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.started = append(r.started, args[0].(models.RunInput))
	return nil, nil
}

// CheckHealth answers the API's Temporal gate (temporalgate.go): healthy.
func (r *startRecorder) CheckHealth(context.Context, *client.CheckHealthRequest) (*client.CheckHealthResponse, error) {
	return &client.CheckHealthResponse{}, nil
}

// DescribeWorkflowExecution and QueryWorkflow answer as for a workflow
// that has not started yet (runs/get asks both).
func (r *startRecorder) DescribeWorkflowExecution(context.Context, string, string) (*workflowservice.DescribeWorkflowExecutionResponse, error) {
	return nil, serviceerror.NewNotFound("not started")
}

func (r *startRecorder) QueryWorkflow(context.Context, string, string, string, ...any) (converter.EncodedValue, error) {
	return nil, serviceerror.NewNotFound("not started")
}

func (r *startRecorder) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.started)
}

// tenantTokens authenticates the bearer token "<tenant>" as a principal of
// that tenant with the read and write scopes (never admin).
type tenantTokens struct{}

func (tenantTokens) Authenticate(_ context.Context, credential string) (auth.Principal, error) {
	return auth.Principal{Tenant: credential, Method: auth.MethodAPIKey, KeyID: "key-" + credential,
		Scopes: []auth.Scope{auth.ScopeHierarchiesRead, auth.ScopeHierarchiesWrite, auth.ScopeRunsRead, auth.ScopeRunsWrite}}, nil
}

type tenantAPI struct {
	t        *testing.T
	url      string
	client   *http.Client
	temporal *startRecorder
}

func newTenantAPI(t *testing.T, st *store.Store) *tenantAPI {
	t.Helper()
	rec := &startRecorder{}
	srv := httptest.NewServer(api.NewServer(api.Options{
		Store: st, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Tools:  fakeToolCatalog{"calculator": true, "http_get": true, "current_time": true},
		Access: api.Access{Mode: api.AuthRequired, Authenticator: tenantTokens{}},
		Runs:   &api.Runs{Store: st, Temporal: rec, TaskQueue: "test"},
	}).Handler())
	t.Cleanup(srv.Close)
	return &tenantAPI{t: t, url: srv.URL, client: srv.Client(), temporal: rec}
}

// post sends body as tenant and returns the status and the raw envelope.
func (a *tenantAPI) post(tenant, path string, body any) (int, envelope, string) {
	raw, err := json.Marshal(body)
	if err != nil {
		a.t.Error(err)
		return 0, envelope{}, ""
	}
	req, _ := http.NewRequest(http.MethodPost, a.url+path, bytes.NewReader(raw))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+tenant)
	resp, err := a.client.Do(req)
	if err != nil {
		a.t.Error(err)
		return 0, envelope{}, ""
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	var env envelope
	if err := json.Unmarshal(out, &env); err != nil {
		a.t.Errorf("POST %s: %d, not JSON: %s", path, resp.StatusCode, out)
	}
	return resp.StatusCode, env, string(out)
}

func (a *tenantAPI) mustPost(tenant, path string, body any, out any) {
	a.t.Helper()
	status, env, raw := a.post(tenant, path, body)
	if status != http.StatusOK || env.Code != 0 {
		a.t.Fatalf("POST %s as %s: %d %s", path, tenant, status, raw)
	}
	if out != nil {
		if err := json.Unmarshal(env.Data, out); err != nil {
			a.t.Fatal(err)
		}
	}
}

const pathRunsStart = "/api/executor/v1/runs/start"

// TestMessageIDReservedAtStart (issue 23, item 3): a message_id taken by a
// run in flight is refused. Two concurrent starts with one message_id give
// one 200 and one 409 TEAM_ALREADY_EXISTS naming message_id, and only one
// workflow starts; three sequential starts give 200, 409, 409. Before, the
// id was only checked against answers already stored, so every start was
// accepted and the runs fought over one message row. Another tenant may
// use the same message id (item 8), and user_message_id stores the task
// as the user's message under the client's id (item 20).
func TestMessageIDReservedAtStart(t *testing.T) {
	storetest.ForEachDialect(t, func(t *testing.T, st *store.Store) {
		a := newTenantAPI(t, st)
		hierarchy := map[string]string{}
		for _, tenant := range []string{"acme", "globex"} {
			var h struct {
				ID string `json:"hierarchy_id"`
			}
			a.mustPost(tenant, pathCreate, contractBody(), &h)
			hierarchy[tenant] = h.ID
		}
		start := func(tenant, messageID string) (int, envelope) {
			status, env, _ := a.post(tenant, pathRunsStart, map[string]any{"hierarchy_id": hierarchy[tenant], "task": "t", "message_id": messageID})
			return status, env
		}
		isTaken := func(status int, env envelope) bool {
			return status == http.StatusConflict && env.Code == 40902 && env.ErrorCode == "TEAM_ALREADY_EXISTS" && env.Field == "message_id" &&
				env.Message == `message_id "`+strings.Split(env.Message, `"`)[1]+`" is taken`
		}

		var wg sync.WaitGroup
		statuses := make([]int, 2)
		envs := make([]envelope, 2)
		for i := range statuses {
			wg.Add(1)
			go func() {
				defer wg.Done()
				statuses[i], envs[i] = start("acme", "msg-concurrent")
			}()
		}
		wg.Wait()
		ok, taken := 0, 0
		for i := range statuses {
			switch {
			case statuses[i] == http.StatusOK:
				ok++
			case isTaken(statuses[i], envs[i]):
				taken++
			default:
				t.Errorf("concurrent start %d: %d %+v", i, statuses[i], envs[i])
			}
		}
		if ok != 1 || taken != 1 || a.temporal.count() != 1 {
			t.Fatalf("concurrent starts: %d accepted, %d refused as taken, %d workflows started; want 1, 1, 1", ok, taken, a.temporal.count())
		}

		for i := range 3 {
			status, env := start("acme", "msg-sequential")
			if (i == 0) != (status == http.StatusOK) || (i > 0 && !isTaken(status, env)) {
				t.Fatalf("sequential start %d: %d %+v", i+1, status, env)
			}
		}
		if got := a.temporal.count(); got != 2 {
			t.Fatalf("%d workflows started, want 2", got)
		}

		// Another tenant's caller-chosen message id is free in this one.
		var run struct {
			ID string `json:"id"`
		}
		a.mustPost("globex", pathRunsStart, map[string]any{"hierarchy_id": hierarchy["globex"], "task": "globex's question",
			"message_id": "msg-sequential", "user_message_id": "msg-user-1"}, &run)
		if in := a.temporal.started[2]; in.AnswerMessageID != "msg-sequential" || in.RunID != run.ID {
			t.Fatalf("workflow input %+v", in)
		}
		var msgs struct {
			Messages []store.Message `json:"messages"`
		}
		a.mustPost("globex", "/api/executor/v1/runs/messages", map[string]any{"id": run.ID}, &msgs)
		tree := msgs.Messages
		if len(tree) != 1 || tree[0].ID != "msg-user-1" || tree[0].AgentType != models.AgentTypeUser || tree[0].Content != "globex's question" {
			t.Fatalf("messages = %+v", tree)
		}
		// The user's message id is claimed like the answer's.
		status, env, _ := a.post("globex", pathRunsStart, map[string]any{"hierarchy_id": hierarchy["globex"], "task": "t", "user_message_id": "msg-user-1"})
		if status != http.StatusConflict || env.Field != "user_message_id" {
			t.Fatalf("a taken user_message_id: %d %+v", status, env)
		}
	})
}

// TestCallerChosenIDsAreTenantScoped (issue 23, item 8): a sub-agent id
// or run id another tenant uses is free in this one (it used to be "is
// taken"), each tenant reads its own, and asking for another tenant's run,
// hierarchy or sub-agent answers exactly what an unknown id of the same
// length answers.
func TestCallerChosenIDsAreTenantScoped(t *testing.T) {
	storetest.ForEachDialect(t, func(t *testing.T, st *store.Store) {
		a := newTenantAPI(t, st)
		for _, tenant := range []string{"acme", "globex"} {
			body := subAgentBody("helper of " + tenant)
			body["id"] = "sa-chosen"
			var sa models.SubAgent
			a.mustPost(tenant, pathSACreate, body, &sa)
			if sa.ID != "sa-chosen" || sa.Version != 1 {
				t.Fatalf("%s created %+v", tenant, sa)
			}
		}
		for _, tenant := range []string{"acme", "globex"} {
			var sa models.SubAgent
			a.mustPost(tenant, pathSAGet, map[string]any{"id": "sa-chosen"}, &sa)
			if sa.Name != "helper of "+tenant {
				t.Fatalf("%s reads %+v", tenant, sa)
			}
		}
		body := subAgentBody("helper of acme")
		body["id"] = "sa-chosen"
		var updated models.SubAgent
		a.mustPost("acme", "/api/executor/v1/subagents/update", body, &updated)
		if updated.Version != 2 {
			t.Fatalf("version after an update = %d, want 2", updated.Version)
		}

		var h struct {
			ID string `json:"hierarchy_id"`
		}
		a.mustPost("acme", pathCreate, contractBody(), &h)
		var run struct {
			ID string `json:"id"`
		}
		a.mustPost("acme", pathRunsStart, map[string]any{"hierarchy_id": h.ID, "task": "t", "id": "run-acme-only"}, &run)
		a.mustPost("acme", pathSACreate, map[string]any{"id": "sa-acme-only", "name": "only", "system_prompt": "p"}, nil)

		// A run id is the tenant's own: both tenants start "run-chosen",
		// each reads its own under it, and the workflows differ. The same
		// tenant's second start is still a 409 naming the field.
		starts := map[string]struct {
			ID         string `json:"id"`
			WorkflowID string `json:"workflow_id"`
			ThreadID   string `json:"thread_id"`
		}{}
		for _, tenant := range []string{"acme", "globex"} {
			var hid struct {
				ID string `json:"hierarchy_id"`
			}
			a.mustPost(tenant, pathCreate, contractBody(), &hid)
			var st struct {
				ID         string `json:"id"`
				WorkflowID string `json:"workflow_id"`
				ThreadID   string `json:"thread_id"`
			}
			a.mustPost(tenant, pathRunsStart, map[string]any{"hierarchy_id": hid.ID, "task": "the task of " + tenant, "id": "run-chosen"}, &st)
			if st.ID != "run-chosen" || st.ThreadID != "run-chosen" {
				t.Fatalf("%s started %+v; want id and thread_id run-chosen", tenant, st)
			}
			starts[tenant] = st
		}
		if starts["acme"].WorkflowID == starts["globex"].WorkflowID || strings.Contains(starts["acme"].WorkflowID, "run-chosen") {
			t.Fatalf("workflow ids %q and %q: want two distinct generated keys", starts["acme"].WorkflowID, starts["globex"].WorkflowID)
		}
		for _, tenant := range []string{"acme", "globex"} {
			var got struct {
				ID         string `json:"id"`
				Task       string `json:"task"`
				WorkflowID string `json:"workflow_id"`
			}
			a.mustPost(tenant, "/api/executor/v1/runs/get", map[string]any{"id": "run-chosen"}, &got)
			if got.ID != "run-chosen" || got.Task != "the task of "+tenant || got.WorkflowID != starts[tenant].WorkflowID {
				t.Fatalf("%s reads %+v", tenant, got)
			}
			var list struct {
				Items []struct {
					ID string `json:"id"`
				} `json:"items"`
			}
			a.mustPost(tenant, "/api/executor/v1/runs/list", map[string]any{"thread_id": "run-chosen"}, &list)
			if len(list.Items) != 1 || list.Items[0].ID != "run-chosen" {
				t.Fatalf("%s lists the thread as %+v", tenant, list.Items)
			}
			var tok struct {
				StreamURL string `json:"stream_url"`
			}
			a.mustPost(tenant, "/api/executor/v1/runs/stream-token", map[string]any{"id": "run-chosen"}, &tok)
			if !strings.HasPrefix(tok.StreamURL, "/api/executor/v1/runs/run-chosen/stream?token=") {
				t.Fatalf("%s's stream url = %q", tenant, tok.StreamURL)
			}
		}
		if len(a.temporal.started) < 2 || a.temporal.started[len(a.temporal.started)-1].RunID == "run-chosen" {
			t.Fatalf("the workflow's run id is the caller's id, not the run's key: %+v", a.temporal.started)
		}
		status, env, raw := a.post("acme", pathRunsStart, map[string]any{"hierarchy_id": h.ID, "task": "again", "id": "run-chosen"})
		if status != http.StatusConflict || env.Code != 40902 || env.Field != "id" || !strings.Contains(raw, `run-chosen`) {
			t.Fatalf("acme reusing its own run id: %d %s", status, raw)
		}

		for _, c := range []struct{ path, field, owned, unknown string }{
			{"/api/executor/v1/runs/get", "id", "run-acme-only", "run-unknown-a"},
			{pathGet, "hierarchy_id", h.ID, "00000000-0000-0000-0000-000000000000"},
			{pathSAGet, "id", "sa-acme-only", "sa-unknown-"},
		} {
			s1, _, other := a.post("globex", c.path, map[string]any{c.field: c.owned})
			s2, _, unknown := a.post("globex", c.path, map[string]any{c.field: c.unknown})
			if s1 != http.StatusNotFound || s1 != s2 || other != strings.ReplaceAll(unknown, c.unknown, c.owned) {
				t.Errorf("%s: another tenant's id answers %d %s\nan unknown id answers %d %s", c.path, s1, other, s2, unknown)
			}
		}
	})
}
