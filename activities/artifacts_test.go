package activities

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/op-stack/executor/models"
	"github.com/op-stack/executor/store"
	"github.com/op-stack/executor/store/storetest"
	"github.com/op-stack/executor/tools"
)

// TestDeclaredFiles: the answer convention. A fenced block whose info
// string names a file declares it (quoted or bare, file= or filename=,
// ``` or ~~~, a longer fence holding a shorter one); blocks without a file
// and a block never closed declare nothing.
func TestDeclaredFiles(t *testing.T) {
	answer := "Here is the report.\n\n" +
		"```markdown file=\"AI report.md\"\n# Title\n\nBody with ``` inside? no: `code`\n```\n\n" +
		"```python\nprint('not a file')\n```\n" +
		"~~~~ filename=data.csv\na,b\n~~~\n1,2\n~~~~\n" +
		"```json file='empty.json' media_type=\"application/json\"\n```\n" +
		"```text file=cut.txt\nthe answer was cut off here"
	got := declaredFiles(answer)
	if len(got) != 3 {
		t.Fatalf("declared %d files: %+v", len(got), got)
	}
	if got[0].name != "AI report.md" || got[0].lang != "markdown" || got[0].content != "# Title\n\nBody with ``` inside? no: `code`\n" {
		t.Errorf("first = %+v", got[0])
	}
	if got[1].name != "data.csv" || got[1].content != "a,b\n~~~\n1,2\n" || answerMediaType(got[1]) != "text/csv; charset=utf-8" {
		t.Errorf("second = %+v (%s)", got[1], answerMediaType(got[1]))
	}
	if got[2].name != "empty.json" || got[2].content != "" || got[2].mediaType != "application/json" {
		t.Errorf("third = %+v", got[2])
	}
	if mt := answerMediaType(declaredFile{name: "notes", lang: "markdown"}); mt != "text/markdown; charset=utf-8" {
		t.Errorf("a name without extension in a markdown block: %s", mt)
	}
	if mt := answerMediaType(declaredFile{name: "blob.bin"}); mt != "text/plain; charset=utf-8" {
		t.Errorf("an answer's file is text: %s", mt)
	}
}

// TestRespondStoresDeclaredFiles: a worker's final answer that declares a
// file stores it (bytes in the database, tenant of the run), returns only
// its id and metadata, and announces it with llm.artifact; a file over
// the limit is not stored and a system.warning with ARTIFACT_TOO_LARGE
// says so, while the answer itself goes on.
func TestRespondStoresDeclaredFiles(t *testing.T) {
	st := storetest.SQLite(t)
	ctx := context.Background()
	if err := st.CreateRun(ctx, &store.Run{ID: "r1", TenantID: "acme", HierarchyID: "h", WorkflowID: "run-r1", Task: "t"}); err != nil {
		t.Fatal(err)
	}
	answer := "Done.\n```markdown file=report.md\n# Report\n```\n```text file=huge.txt\n" + strings.Repeat("x", 100) + "\n```\n"
	sink := &fakeSink{}
	acts := &Activities{LLM: &fakeLLM{answers: []string{answer}}, Events: sink, Store: st, ArtifactLimits: store.ArtifactLimits{MaxBytes: 50}}
	in := costInput("m")
	res, err := acts.Respond(ctx, in)
	if err != nil {
		t.Fatal(err)
	}
	if res.Output != answer {
		t.Errorf("the answer changed: %q", res.Output)
	}
	if len(res.Artifacts) != 1 || res.Artifacts[0].Name != "report.md" || res.Artifacts[0].Size != int64(len("# Report\n")) ||
		res.Artifacts[0].MediaType != "text/markdown; charset=utf-8" || res.Artifacts[0].Source != models.ArtifactSourceAnswer {
		t.Fatalf("artifacts = %+v", res.Artifacts)
	}
	// What goes back to the workflow names the file; its bytes stay in
	// the database.
	if raw, _ := json.Marshal(res.Artifacts); bytes.Contains(raw, []byte("# Report")) {
		t.Errorf("the result's artifacts carry the file's bytes: %s", raw)
	}
	stored, err := st.GetArtifact(ctx, res.Artifacts[0].ID, "acme", "r1")
	if err != nil || string(stored.Content) != "# Report\n" || stored.AgentID != "w-1" || stored.AgentName != "writer" {
		t.Fatalf("stored %+v, %v", stored, err)
	}
	arts := withAction(sink.events(models.CategoryLLM), models.ActionArtifact)
	if len(arts) != 1 || arts[0].Data["artifact_id"] != res.Artifacts[0].ID || arts[0].Data["url"] != "/api/v1/artifacts/"+res.Artifacts[0].ID ||
		arts[0].Data["agent_id"] != "w-1" || arts[0].Data["type"] != "markdown" {
		t.Errorf("llm.artifact events = %+v", arts)
	}
	warnings := withAction(sink.events(models.CategorySystem), models.ActionWarning)
	if len(warnings) != 1 || warnings[0].Data["error_code"] != "ARTIFACT_TOO_LARGE" ||
		!strings.Contains(warnings[0].Data["message"].(string), `file "huge.txt"`) || !strings.Contains(warnings[0].Data["message"].(string), "ARTIFACT_MAX_BYTES") {
		t.Errorf("warnings = %+v", warnings)
	}
	list, _ := st.ListArtifacts(ctx, "r1")
	if len(list) != 1 {
		t.Errorf("stored %d files, want 1", len(list))
	}
}

// pngTool is a FileTool test double: an MCP-like tool that returns an
// embedded binary resource next to its text.
type pngTool struct{}

var pngBytes = []byte{0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n', 0, 0, 0, 0xd}

func (pngTool) Key() string                 { return "chart" }
func (pngTool) Description() string         { return "draws a chart" }
func (pngTool) Parameters() json.RawMessage { return json.RawMessage(`{"type":"object"}`) }
func (pngTool) Run(context.Context, json.RawMessage) (string, error) {
	return "", nil
}
func (pngTool) RunFiles(context.Context, json.RawMessage) (tools.Result, error) {
	return tools.Result{Content: "a chart of the data", Files: []tools.File{{Name: "charts/sales.png", Data: pngBytes}}}, nil
}

// TestRunToolStoresToolFiles: files a tool returns (the FileTool hook MCP
// tools use for embedded resources) are stored with the tool's name; the
// model's result names them instead of carrying the bytes, and so does
// the llm.tool_result event (artifact_ids). The built-in save_file goes
// the same way and keeps its JSON result JSON.
func TestRunToolStoresToolFiles(t *testing.T) {
	st := storetest.SQLite(t)
	ctx := context.Background()
	if err := st.CreateRun(ctx, &store.Run{ID: "r1", HierarchyID: "h", WorkflowID: "run-r1", Task: "t"}); err != nil {
		t.Fatal(err)
	}
	reg, err := tools.NewRegistry(pngTool{}, tools.SaveFile())
	if err != nil {
		t.Fatal(err)
	}
	sink := &fakeSink{}
	acts := &Activities{Tools: reg, Events: sink, Store: st}
	src := models.Source{AgentID: "w-1", AgentType: models.AgentTypeWorker, AgentName: "analyst"}
	out, err := acts.RunTool(ctx, models.ToolInput{RunID: "r1", Source: src, ExecutionID: "exec_1", Call: models.ToolCall{ID: "c1", Name: "chart", Arguments: "{}"}})
	if err != nil {
		t.Fatal(err)
	}
	if len(out.Artifacts) != 1 || out.Artifacts[0].Name != "sales.png" || out.Artifacts[0].MediaType != "image/png" || out.Artifacts[0].ToolName != "chart" {
		t.Fatalf("artifacts = %+v", out.Artifacts)
	}
	if !strings.HasPrefix(out.Content, "a chart of the data\n[file \"sales.png\" stored as artifact "+out.Artifacts[0].ID) || strings.Contains(out.Content, "PNG") {
		t.Errorf("content = %q", out.Content)
	}
	a, err := st.GetArtifact(ctx, out.Artifacts[0].ID, "", "")
	if err != nil || !bytes.Equal(a.Content, pngBytes) || a.Source != models.ArtifactSourceTool {
		t.Fatalf("stored %+v, %v", a, err)
	}
	results := withAction(sink.events(models.CategoryLLM), models.ActionToolResult)
	if len(results) != 1 || len(results[0].Data["artifact_ids"].([]string)) != 1 {
		t.Errorf("tool_result = %+v", results)
	}

	out, err = acts.RunTool(ctx, models.ToolInput{RunID: "r1", Source: src, ExecutionID: "exec_2",
		Call: models.ToolCall{ID: "c2", Name: "save_file", Arguments: `{"name":"notes.md","content":"# Notes\n"}`}})
	if err != nil {
		t.Fatal(err)
	}
	var res struct {
		Saved     string `json:"saved"`
		Artifacts []struct {
			ArtifactID string `json:"artifact_id"`
			Size       int    `json:"size"`
		} `json:"artifacts"`
	}
	if err := json.Unmarshal([]byte(out.Content), &res); err != nil || res.Saved != "notes.md" || len(res.Artifacts) != 1 || res.Artifacts[0].Size != 8 || res.Artifacts[0].ArtifactID != out.Artifacts[0].ID {
		t.Errorf("save_file result %q (%v)", out.Content, err)
	}
	list, _ := st.ListArtifacts(ctx, "r1")
	if len(list) != 2 {
		t.Errorf("stored %d files, want 2", len(list))
	}
}

// TestCleanArtifactName: names are labels: directories, control
// characters and quotes go; nothing left is no name.
func TestCleanArtifactName(t *testing.T) {
	for in, want := range map[string]string{"../../etc/passwd": "passwd", `a\b "c".txt`: "b c.txt", " r\x00e\nport.md ": "report.md"} {
		if got, ok := models.CleanArtifactName(in); !ok || got != want {
			t.Errorf("%q: %q, %v; want %q", in, got, ok, want)
		}
	}
	for _, bad := range []string{"", "dir/", "..", " \x01 "} {
		if got, ok := models.CleanArtifactName(bad); ok {
			t.Errorf("%q gave %q", bad, got)
		}
	}
	if got, _ := models.CleanArtifactName(strings.Repeat("é", 300)); len(got) > models.MaxArtifactNameLen {
		t.Errorf("a long name keeps %d bytes", len(got))
	}
}
