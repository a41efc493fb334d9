package e2e

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/op-stack/executor/config"
	"github.com/op-stack/executor/llm/llmfake"
	"github.com/op-stack/executor/models"
)

// artifactView is an artifact as results and artifacts/list show it.
type artifactView struct {
	ID        string `json:"id"`
	Name      string `json:"name"`
	Type      string `json:"type"`
	MediaType string `json:"media_type"`
	Size      int64  `json:"size"`
	URL       string `json:"url"`
	Source    string `json:"source"`
	ToolName  string `json:"tool_name"`
	AgentID   string `json:"agent_id"`
}

// TestArtifacts runs the reference hierarchy through the real API, worker
// and fake model server: the writer's answer declares a file (a fenced
// block with file=), the searcher saves one with the save_file tool. Both
// are stored, announced on the stream (llm.artifact), listed on the
// results of both surfaces (agents.<agent>.artifacts, final_output.artifacts)
// and by artifacts/list, and served byte for byte at their url. The
// analyst declares a file over ARTIFACT_MAX_BYTES: it is not stored, a
// system.warning with ARTIFACT_TOO_LARGE names it and the limit, and the
// run completes.
func TestArtifacts(t *testing.T) {
	report := "# Tunnelling\n\nParticles cross barriers they could not climb.\n"
	table := "paper,year\nGamow,1928\n"
	e := newEnv(t, referenceRules(map[string][]llmfake.Response{
		"W-SEARCHER": {
			{ToolCalls: []llmfake.ToolCall{toolCall("save_file", `{"name":"sources.csv","content":"paper,year\nGamow,1928\n"}`)}},
			{Content: "searcher saved the sources"},
		},
		"W-WRITER":  {{Content: "Here is the report.\n\n```markdown file=\"tunnelling report.md\"\n" + report + "```\n"}},
		"W-ANALYST": {{Content: "Analysis attached.\n```text file=huge.txt\n" + strings.Repeat("x", 300) + "\n```\n"}},
	}), withConfig(func(c *config.Config) { c.ArtifactMaxBytes = 200 }))
	body := referenceHierarchy()
	searcher := body["teams"].([]any)[0].(map[string]any)["workers"].([]any)[0].(map[string]any)
	searcher["tools"] = []string{"save_file"}
	hid := e.createHierarchy(body)
	var h models.Hierarchy
	e.mustPost("/hierarchies/get", map[string]any{"hierarchy_id": hid}, &h)
	id := e.startRun(hid, "Explain quantum tunnelling")
	if v := e.waitRun(id, time.Minute); v.Status != models.RunCompleted {
		t.Fatalf("run ended %s: %s", v.Status, v.Error)
	}

	var r struct {
		TeamResults map[string]struct {
			Agents map[string]struct {
				Artifacts []artifactView `json:"artifacts"`
			} `json:"agents"`
		} `json:"team_results"`
		FinalOutput struct {
			Artifacts []artifactView `json:"artifacts"`
		} `json:"final_output"`
	}
	e.mustPost("/runs/results", map[string]any{"id": id}, &r)
	writer := r.TeamResults[h.Teams[1].ID].Agents["w-writer"].Artifacts
	if len(writer) != 1 || writer[0].Name != "tunnelling report.md" || writer[0].Type != "markdown" || writer[0].Source != "answer" ||
		writer[0].Size != int64(len(report)) || writer[0].URL != "/api/v1/artifacts/"+writer[0].ID {
		t.Fatalf("writer's artifacts = %+v", writer)
	}
	saved := r.TeamResults[h.Teams[0].ID].Agents["w-searcher"].Artifacts
	if len(saved) != 1 || saved[0].Name != "sources.csv" || saved[0].Source != "tool" || saved[0].ToolName != "save_file" || saved[0].Type != "csv" {
		t.Fatalf("searcher's artifacts = %+v", saved)
	}
	if a := r.TeamResults[h.Teams[0].ID].Agents["w-analyst"].Artifacts; len(a) != 0 {
		t.Errorf("analyst's too large file was stored: %+v", a)
	}
	if fo := r.FinalOutput.Artifacts; len(fo) != 2 || fo[0].ID != saved[0].ID || fo[1].ID != writer[0].ID {
		t.Errorf("final_output.artifacts = %+v", fo)
	}

	// Downloads, byte for byte, with the file's type and name.
	for want, a := range map[string]artifactView{report: writer[0], table: saved[0]} {
		req, _ := http.NewRequest(http.MethodGet, e.rootURL()+a.URL, nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		got, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || string(got) != want || resp.Header.Get("Content-Type") != a.MediaType ||
			!strings.Contains(resp.Header.Get("Content-Disposition"), "attachment") {
			t.Errorf("GET %s: %d %q %v", a.URL, resp.StatusCode, got, resp.Header)
		}
	}
	if status, raw := e.call(http.MethodGet, "/api/v1/artifacts/art_000000000000000000000000", "", nil); status != http.StatusNotFound || !strings.Contains(string(raw), "ARTIFACT_NOT_FOUND") {
		t.Errorf("unknown artifact: %d %s", status, raw)
	}

	var list struct {
		Artifacts []artifactView `json:"artifacts"`
	}
	e.mustPost("/artifacts/list", map[string]any{"run_id": id}, &list)
	if len(list.Artifacts) != 2 || list.Artifacts[1].AgentID != "w-writer" {
		t.Errorf("artifacts/list = %+v", list.Artifacts)
	}

	// Spec 001's surface lists them the same way.
	status, raw := e.call(http.MethodGet, "/api/v1/executions/"+id+"/results", "", nil)
	var v1 struct {
		Data struct {
			FinalOutput struct {
				Artifacts []artifactView `json:"artifacts"`
			} `json:"final_output"`
		} `json:"data"`
	}
	if err := json.Unmarshal(raw, &v1); err != nil || status != http.StatusOK || len(v1.Data.FinalOutput.Artifacts) != 2 {
		t.Errorf("/api/v1 results: %d %s", status, raw)
	}

	// The stream announced each file once, from its agent, and the one
	// not stored with a warning that says why.
	var announced, refused []string
	for _, ev := range e.storedEvents(id) {
		if ev.Event.Category == models.CategoryLLM && ev.Event.Action == models.ActionArtifact {
			announced = append(announced, ev.Source.AgentID+":"+ev.Data["name"].(string)+":"+ev.Data["url"].(string))
		}
		if ev.Event.Category == models.CategorySystem && ev.Event.Action == models.ActionWarning && ev.Data["error_code"] == "ARTIFACT_TOO_LARGE" {
			refused = append(refused, ev.Source.AgentID+": "+ev.Data["message"].(string))
		}
	}
	if len(refused) != 1 || !strings.HasPrefix(refused[0], `w-analyst: file "huge.txt" from worker "analyst" was not stored: file "huge.txt" is 301 bytes, over the limit of 200 bytes per file (ARTIFACT_MAX_BYTES)`) {
		t.Errorf("ARTIFACT_TOO_LARGE warnings = %q", refused)
	}
	want := []string{"w-searcher:sources.csv:" + saved[0].URL, "w-writer:tunnelling report.md:" + writer[0].URL}
	if strings.Join(announced, "|") != strings.Join(want, "|") {
		t.Errorf("llm.artifact events = %v, want %v", announced, want)
	}
}
