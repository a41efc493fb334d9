package api_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/op-stack/executor/api"
	"github.com/op-stack/executor/auth"
	"github.com/op-stack/executor/models"
	"github.com/op-stack/executor/store"
	"github.com/op-stack/executor/store/storetest"
)

// artifactAPI serves the router with access control on, keys from st.
func artifactAPI(t *testing.T, st *store.Store) string {
	t.Helper()
	srv := httptest.NewServer(api.NewServer(api.Options{
		Store: st, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Access: api.Access{Mode: api.AuthRequired, Authenticator: auth.Keys{Lookup: st.KeyLookup()}},
	}).Handler())
	t.Cleanup(srv.Close)
	return srv.URL
}

func artifactCall(t *testing.T, method, url, key string, body string) (*http.Response, []byte) {
	t.Helper()
	var r io.Reader
	if body != "" {
		r = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, url, r)
	if err != nil {
		t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	return resp, raw
}

// TestArtifactDownloadAndTenants: GET /api/v1/artifacts/{id} serves the
// stored bytes with their media type, as an attachment named after the
// file, never sniffed; another tenant's id is a 404 ARTIFACT_NOT_FOUND
// that reads exactly like an unknown id's (body and headers alike, the id
// aside); artifacts/list lists a run's files for its tenant only; a key
// without runs:read is refused. On both dialects.
func TestArtifactDownloadAndTenants(t *testing.T) {
	storetest.ForEachDialect(t, func(t *testing.T, st *store.Store) {
		ctx := context.Background()
		url := artifactAPI(t, st)
		keyA, _, err := st.IssueAPIKey(ctx, "tenant-a", []auth.Scope{auth.ScopeRunsRead}, 0, "a")
		if err != nil {
			t.Fatal(err)
		}
		keyB, _, _ := st.IssueAPIKey(ctx, "tenant-b", []auth.Scope{auth.ScopeRunsRead}, 0, "b")
		keyNoScope, _, _ := st.IssueAPIKey(ctx, "tenant-a", []auth.Scope{auth.ScopeHierarchiesRead}, 0, "a-hier")
		if err := st.CreateRun(ctx, &store.Run{ID: "run-art", TenantID: "tenant-a", HierarchyID: "h", WorkflowID: "run-run-art", Task: "t"}); err != nil {
			t.Fatal(err)
		}
		content := []byte("<html><script>alert(1)</script></html>\n")
		art := &store.Artifact{RunID: "run-art", AgentID: "w-1", AgentName: "writer", TeamName: "docs", Source: models.ArtifactSourceAnswer,
			Name: "AI 医疗报告.html", MediaType: "text/html; charset=utf-8", Content: content, Producer: "p", Attempt: 1}
		if err := st.SaveArtifact(ctx, art, 0, store.ArtifactLimits{}); err != nil {
			t.Fatal(err)
		}

		resp, raw := artifactCall(t, http.MethodGet, url+"/api/v1/artifacts/"+art.ID, keyA, "")
		if resp.StatusCode != http.StatusOK || string(raw) != string(content) {
			t.Fatalf("download: %d %q", resp.StatusCode, raw)
		}
		h := resp.Header
		if h.Get("Content-Type") != "text/html; charset=utf-8" || h.Get("X-Content-Type-Options") != "nosniff" ||
			!strings.Contains(h.Get("Content-Security-Policy"), "sandbox") || h.Get("ETag") != `"`+art.SHA256+`"` ||
			!strings.HasPrefix(h.Get("Content-Disposition"), "attachment; filename*=utf-8''AI%20") {
			t.Errorf("download headers: %v", h)
		}

		// Another tenant's id and an unknown id: the same answer.
		respB, rawB := artifactCall(t, http.MethodGet, url+"/api/v1/artifacts/"+art.ID, keyB, "")
		unknownID := "art_000000000000000000000000"
		respU, rawU := artifactCall(t, http.MethodGet, url+"/api/v1/artifacts/"+unknownID, keyB, "")
		if respB.StatusCode != http.StatusNotFound || respU.StatusCode != http.StatusNotFound {
			t.Fatalf("tenant B: %d %s; unknown: %d %s", respB.StatusCode, rawB, respU.StatusCode, rawU)
		}
		stamp := regexp.MustCompile(`"timestamp":"[^"]*"`)
		same := func(raw []byte, id string) string {
			return stamp.ReplaceAllString(strings.ReplaceAll(string(raw), id, "ID"), "")
		}
		if same(rawB, art.ID) != same(rawU, unknownID) {
			t.Errorf("another tenant's id reads differently from an unknown one:\n%s\n%s", rawB, rawU)
		}
		var v1err struct {
			Success bool   `json:"success"`
			Code    string `json:"code"`
		}
		if err := json.Unmarshal(rawB, &v1err); err != nil || v1err.Success || v1err.Code != "ARTIFACT_NOT_FOUND" {
			t.Errorf("not found body: %s", rawB)
		}
		for _, k := range []string{"Content-Type", "Content-Disposition", "ETag"} {
			if respB.Header.Get(k) != respU.Header.Get(k) {
				t.Errorf("header %s differs: %q vs %q", k, respB.Header.Get(k), respU.Header.Get(k))
			}
		}
		if resp, raw := artifactCall(t, http.MethodGet, url+"/api/v1/artifacts/"+art.ID, keyNoScope, ""); resp.StatusCode != http.StatusForbidden {
			t.Errorf("without runs:read: %d %s", resp.StatusCode, raw)
		}
		if resp, _ := artifactCall(t, http.MethodGet, url+"/api/v1/artifacts/"+art.ID, "osk_nope", ""); resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("a bad key: %d", resp.StatusCode)
		}

		resp, raw = artifactCall(t, http.MethodPost, url+"/api/executor/v1/artifacts/list", keyA, `{"run_id":"run-art"}`)
		var list struct {
			Code int `json:"code"`
			Data struct {
				RunID     string             `json:"run_id"`
				Artifacts []api.ArtifactInfo `json:"artifacts"`
			} `json:"data"`
		}
		if err := json.Unmarshal(raw, &list); err != nil || resp.StatusCode != http.StatusOK || len(list.Data.Artifacts) != 1 {
			t.Fatalf("list: %d %s", resp.StatusCode, raw)
		}
		if got := list.Data.Artifacts[0]; got.ID != art.ID || got.URL != "/api/v1/artifacts/"+art.ID || got.Type != "html" || got.Size != int64(len(content)) ||
			got.AgentID != "w-1" || got.TeamName != "docs" || got.SHA256 != art.SHA256 {
			t.Errorf("listed %+v", got)
		}
		if strings.Contains(string(raw), "alert(1)") {
			t.Errorf("the list carries the file's bytes: %s", raw)
		}
		if resp, raw := artifactCall(t, http.MethodPost, url+"/api/executor/v1/artifacts/list", keyB, `{"run_id":"run-art"}`); resp.StatusCode != http.StatusNotFound || strings.Contains(string(raw), art.ID) {
			t.Errorf("tenant B's list: %d %s", resp.StatusCode, raw)
		}
		if resp, raw := artifactCall(t, http.MethodPost, url+"/api/executor/v1/artifacts/list", keyA, `{}`); resp.StatusCode != http.StatusBadRequest {
			t.Errorf("list without a run: %d %s", resp.StatusCode, raw)
		}
	})
}

// TestArtifactsInResults: results list each worker's files under
// team_results.<team>.agents.<agent_id>.artifacts and all of the run's
// under final_output.artifacts; the Markdown report links them.
func TestArtifactsInResults(t *testing.T) {
	ts := time.Date(2026, 1, 1, 10, 0, 0, 0, time.UTC)
	run := &store.Run{ID: "r1", HierarchyID: "h1", HierarchyName: "docs", Status: models.RunCompleted, StartedAt: &ts, CompletedAt: &ts}
	result := &models.RunResult{FinalAnswer: "done", Teams: []models.TeamOutput{{TeamID: "t1", TeamName: "writers", Status: models.TeamCompleted,
		Workers: []models.WorkerOutput{{AgentID: "w-1", Name: "writer", Output: "wrote it"}, {AgentID: "w-2", Name: "editor", Output: "read it"}}}}}
	arts := []store.Artifact{
		{ID: "art_1", RunID: "r1", AgentID: "w-1", AgentName: "writer", Name: "report.md", MediaType: "text/markdown; charset=utf-8", Size: 9, SHA256: "ab", Source: "answer"},
		{ID: "art_2", RunID: "r1", AgentID: "sa-1", AgentName: "helper", Name: "chart.png", MediaType: "image/png", Size: 4, SHA256: "cd", Source: "tool", ToolName: "chart"},
	}
	r := api.BuildResults(api.ResultsInput{Run: run, Result: result, Now: ts, Artifacts: arts})
	raw, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		TeamResults map[string]struct {
			Agents map[string]struct {
				Artifacts []api.ArtifactInfo `json:"artifacts"`
			} `json:"agents"`
		} `json:"team_results"`
		FinalOutput struct {
			Artifacts []api.ArtifactInfo `json:"artifacts"`
		} `json:"final_output"`
	}
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	agents := doc.TeamResults["t1"].Agents
	if got := agents["w-1"].Artifacts; len(got) != 1 || got[0].Name != "report.md" || got[0].Type != "markdown" || got[0].URL != "/api/v1/artifacts/art_1" || got[0].Size != 9 {
		t.Errorf("writer's artifacts = %+v", got)
	}
	if got := agents["w-2"].Artifacts; len(got) != 0 {
		t.Errorf("editor's artifacts = %+v", got)
	}
	if got := doc.FinalOutput.Artifacts; len(got) != 2 || got[1].ID != "art_2" || got[1].Type != "image" || got[1].ToolName != "chart" {
		t.Errorf("final_output.artifacts = %+v", got)
	}
	if md := r.Markdown(); !strings.Contains(md, "[report.md](/api/v1/artifacts/art_1)") || !strings.Contains(md, "[chart.png](/api/v1/artifacts/art_2)") {
		t.Errorf("markdown:\n%s", md)
	}
}
