package api_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"
	"time"

	commonpb "go.temporal.io/api/common/v1"
	workflowpb "go.temporal.io/api/workflow/v1"
	"go.temporal.io/api/workflowservice/v1"
	"google.golang.org/grpc"

	"github.com/op-stack/executor/api"
	"github.com/op-stack/executor/models"
	"github.com/op-stack/executor/store"
	"github.com/op-stack/executor/store/storetest"
)

// deleteRecorder stands in for Temporal in runs/delete: it lists the
// children it was given (any query) and records the workflow deletions.
// Other calls are those of startRecorder.
type deleteRecorder struct {
	startRecorder
	children []string
	mu       sync.Mutex
	deleted  []string
}

// deleteService is deleteRecorder's WorkflowService: it answers
// DeleteWorkflowExecution only.
type deleteService struct {
	workflowservice.WorkflowServiceClient
	r *deleteRecorder
}

func (r *deleteRecorder) ListWorkflow(context.Context, *workflowservice.ListWorkflowExecutionsRequest) (*workflowservice.ListWorkflowExecutionsResponse, error) {
	out := &workflowservice.ListWorkflowExecutionsResponse{}
	for _, id := range r.children {
		out.Executions = append(out.Executions, &workflowpb.WorkflowExecutionInfo{Execution: &commonpb.WorkflowExecution{WorkflowId: id, RunId: "r1"}})
	}
	return out, nil
}

func (r *deleteRecorder) WorkflowService() workflowservice.WorkflowServiceClient {
	return deleteService{r: r}
}

func (s deleteService) DeleteWorkflowExecution(_ context.Context, req *workflowservice.DeleteWorkflowExecutionRequest, _ ...grpc.CallOption) (*workflowservice.DeleteWorkflowExecutionResponse, error) {
	s.r.mu.Lock()
	defer s.r.mu.Unlock()
	s.r.deleted = append(s.r.deleted, req.GetWorkflowExecution().GetWorkflowId()+"/"+req.GetWorkflowExecution().GetRunId())
	return &workflowservice.DeleteWorkflowExecutionResponse{}, nil
}

// TestRunsDelete: runs/delete deletes a finished run of the caller's
// tenant (runs/get then answers 404) and its workflows, the run's and its
// children's, each execution by its run id (a listed id that merely
// shares the prefix is left alone); a
// run of another tenant is 404 EXECUTION_NOT_FOUND, a live run 409
// EXECUTION_IN_PROGRESS, and both keep their data.
func TestRunsDelete(t *testing.T) {
	storetest.ForEachDialect(t, func(t *testing.T, st *store.Store) {
		ctx := context.Background()
		for _, r := range []struct{ key, tenant, status string }{
			{"done", "acme", models.RunCompleted}, {"live", "acme", models.RunRunning}, {"theirs", "globex", models.RunCompleted},
		} {
			if err := st.CreateRun(ctx, &store.Run{ID: r.key, TenantID: r.tenant, HierarchyID: "h", WorkflowID: models.RunWorkflowID(r.key), Task: "t"}); err != nil {
				t.Fatal(err)
			}
			if err := st.SetRunStatus(ctx, models.RunStatusUpdate{RunID: r.key, Status: r.status, Result: &models.RunResult{}}); err != nil {
				t.Fatal(err)
			}
		}
		rec := &deleteRecorder{children: []string{"run-done", "run-done-team-1", "run-done-team-1-sub-x", "run-donex"}}
		srv := httptest.NewServer(api.NewServer(api.Options{
			Store: st, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
			Access: api.Access{Mode: api.AuthRequired, Authenticator: tenantTokens{}},
			Runs:   &api.Runs{Store: st, Temporal: rec, TaskQueue: "test"},
		}).Handler())
		t.Cleanup(srv.Close)
		a := &tenantAPI{t: t, url: srv.URL, client: srv.Client()}
		const path = "/api/executor/v1/runs/delete"

		if status, env, raw := a.post("acme", path, map[string]any{"id": "theirs"}); status != http.StatusNotFound || env.ErrorCode != models.CodeExecutionNotFound.Name {
			t.Errorf("other tenant's run: %d %s", status, raw)
		}
		if status, env, raw := a.post("acme", path, map[string]any{"id": "live"}); status != http.StatusConflict || env.ErrorCode != models.CodeExecutionInProgress.Name {
			t.Errorf("live run: %d %s", status, raw)
		}
		if len(rec.deleted) != 0 {
			t.Fatalf("refused deletes deleted workflows %v", rec.deleted)
		}
		var got struct {
			ID      string `json:"id"`
			Deleted bool   `json:"deleted"`
		}
		a.mustPost("acme", path, map[string]any{"id": "done"}, &got)
		if got.ID != "done" || !got.Deleted {
			t.Errorf("answer %+v", got)
		}
		slices.Sort(rec.deleted)
		if want := []string{"run-done-team-1-sub-x/r1", "run-done-team-1/r1", "run-done/r1"}; !slices.Equal(rec.deleted, want) {
			t.Errorf("deleted workflows %v, want %v", rec.deleted, want)
		}
		if status, _, raw := a.post("acme", "/api/executor/v1/runs/get", map[string]any{"id": "done"}); status != http.StatusNotFound {
			t.Errorf("runs/get after delete: %d %s", status, raw)
		}
		if status, _, raw := a.post("acme", path, map[string]any{"id": "done"}); status != http.StatusNotFound {
			t.Errorf("second delete: %d %s", status, raw)
		}
		for _, key := range []string{"live", "theirs"} {
			if _, err := st.GetRun(ctx, key); err != nil {
				t.Errorf("run %s: %v", key, err)
			}
		}
	})
}

// TestDeleteExpired: the retention sweep deletes finished runs past their
// tenant's period (its own, else the default) and keeps live runs, runs
// of a tenant kept for ever, and runs still within their period.
func TestDeleteExpired(t *testing.T) {
	storetest.ForEachDialect(t, func(t *testing.T, st *store.Store) {
		ctx := context.Background()
		for _, r := range []struct{ key, tenant, status string }{
			{"acme-done", "acme", models.RunCompleted}, {"acme-live", "acme", models.RunRunning},
			{"forever-done", "forever", models.RunCompleted}, {"other-done", "other", models.RunFailed},
		} {
			if err := st.CreateRun(ctx, &store.Run{ID: r.key, TenantID: r.tenant, HierarchyID: "h", WorkflowID: models.RunWorkflowID(r.key), Task: "t"}); err != nil {
				t.Fatal(err)
			}
			if err := st.SetRunStatus(ctx, models.RunStatusUpdate{RunID: r.key, Status: r.status, Result: &models.RunResult{}, Error: "x"}); err != nil {
				t.Fatal(err)
			}
		}
		runs := &api.Runs{Store: st}
		// An hour from now: acme (1m) and the default (30m) have passed,
		// "forever" is kept; a day's default has not passed for other.
		later := time.Now().Add(time.Hour)
		n, err := runs.DeleteExpired(ctx, api.RetentionPolicy{Default: 24 * time.Hour, Tenants: map[string]time.Duration{"acme": time.Minute, "forever": 0}}, later, 10)
		if err != nil || n != 1 {
			t.Fatalf("first sweep: %d, %v; want 1 (acme-done)", n, err)
		}
		n, err = runs.DeleteExpired(ctx, api.RetentionPolicy{Default: 30 * time.Minute, Tenants: map[string]time.Duration{"acme": time.Minute, "forever": 0}}, later, 10)
		if err != nil || n != 1 {
			t.Fatalf("second sweep: %d, %v; want 1 (other-done)", n, err)
		}
		for key, kept := range map[string]bool{"acme-done": false, "acme-live": true, "forever-done": true, "other-done": false} {
			_, err := st.GetRun(ctx, key)
			if kept != (err == nil) {
				t.Errorf("run %s: kept %v, err %v", key, kept, err)
			}
		}
	})
}
