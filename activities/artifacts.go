package activities

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"go.temporal.io/sdk/activity"

	"github.com/op-stack/executor/models"
	"github.com/op-stack/executor/store"
	"github.com/op-stack/executor/tools"
)

// Artifacts: an agent's files are stored here, in the activity that
// received them, so that their bytes never travel through the workflow's
// history; the activity's result carries their ids only.

// artifactStoreWait bounds how long storing a file waits out a database
// outage. The answer it came with was paid for: failing the activity would
// ask the model again, so after this the file is given up with a warning
// and the answer goes on.
const artifactStoreWait = 30 * time.Second

// declaredFile is a file an answer declares.
type declaredFile struct {
	name, mediaType, lang string
	content               string
}

// declaredFiles finds the files an answer declares: fenced code blocks
// (``` or ~~~, three or more) whose info string has a file= (or filename=)
// attribute, quoted or not, and optionally media_type=:
//
//	```markdown file="report.md"
//	# Report
//	```
//
// The block's lines are the file, with a final newline. A block that is
// never closed declares nothing (a cut-off answer must not store half a
// file as if it were whole). The answer itself is left as it is: the
// stream has carried it already.
func declaredFiles(answer string) []declaredFile {
	var out []declaredFile
	lines := strings.Split(answer, "\n")
	for i := 0; i < len(lines); i++ {
		fence, info, ok := openingFence(lines[i])
		if !ok {
			continue
		}
		end := -1
		for j := i + 1; j < len(lines); j++ {
			if closesFence(lines[j], fence) {
				end = j
				break
			}
		}
		if end < 0 {
			break
		}
		attrs, lang := fenceAttributes(info)
		name := attrs["file"]
		if name == "" {
			name = attrs["filename"]
		}
		if name != "" {
			body := strings.Join(lines[i+1:end], "\n")
			if end > i+1 {
				body += "\n"
			}
			out = append(out, declaredFile{name: name, mediaType: attrs["media_type"], lang: lang, content: body})
		}
		i = end
	}
	return out
}

// openingFence reports whether line opens a fenced block (at most three
// spaces of indent), with its fence and info string.
func openingFence(line string) (fence, info string, ok bool) {
	t := strings.TrimRight(line, "\r")
	trimmed := strings.TrimLeft(t, " ")
	if len(t)-len(trimmed) > 3 || len(trimmed) < 3 {
		return "", "", false
	}
	c := trimmed[0]
	if c != '`' && c != '~' {
		return "", "", false
	}
	n := 0
	for n < len(trimmed) && trimmed[n] == c {
		n++
	}
	if n < 3 {
		return "", "", false
	}
	info = strings.TrimSpace(trimmed[n:])
	if c == '`' && strings.Contains(info, "`") {
		return "", "", false
	}
	return trimmed[:n], info, true
}

// closesFence reports whether line closes a block opened with fence.
func closesFence(line, fence string) bool {
	t := strings.TrimSpace(strings.TrimRight(line, "\r"))
	if len(t) < len(fence) || t[0] != fence[0] {
		return false
	}
	return strings.Trim(t, string(fence[0])) == ""
}

// fenceAttributes parses an info string: its first word (the language,
// unless it is an attribute) and key=value attributes, values quoted with
// " or ' or bare.
func fenceAttributes(info string) (map[string]string, string) {
	attrs := map[string]string{}
	lang := ""
	for i := 0; i < len(info); {
		for i < len(info) && (info[i] == ' ' || info[i] == '\t') {
			i++
		}
		start := i
		for i < len(info) && info[i] != ' ' && info[i] != '\t' && info[i] != '=' {
			i++
		}
		key := info[start:i]
		if i < len(info) && info[i] == '=' {
			i++
			var val string
			if i < len(info) && (info[i] == '"' || info[i] == '\'') {
				q := info[i]
				i++
				vs := i
				for i < len(info) && info[i] != q {
					i++
				}
				val = info[vs:i]
				if i < len(info) {
					i++
				}
			} else {
				vs := i
				for i < len(info) && info[i] != ' ' && info[i] != '\t' {
					i++
				}
				val = info[vs:i]
			}
			attrs[strings.ToLower(key)] = val
		} else if key != "" && lang == "" && start == strings.IndexFunc(info, func(r rune) bool { return r != ' ' && r != '\t' }) {
			lang = key
		}
		if i == start {
			i++
		}
	}
	return attrs, lang
}

// answerMediaType is the media type of a file an answer declares: the one
// it names, or its name's extension's, or its block's language's; text in
// any case.
func answerMediaType(f declaredFile) string {
	if mt := tools.MediaTypeOf(f.name, f.mediaType); mt != "application/octet-stream" {
		return mt
	}
	switch strings.ToLower(f.lang) {
	case "markdown", "md":
		return "text/markdown; charset=utf-8"
	case "json":
		return "application/json"
	case "csv":
		return "text/csv; charset=utf-8"
	case "html":
		return "text/html; charset=utf-8"
	}
	return "text/plain; charset=utf-8"
}

// artifactProducer names the activity storing files, without its attempt:
// a later attempt of the same activity replaces the earlier one's files.
// Outside an activity (tests) each call is a producer of its own.
func artifactProducer(ctx context.Context, runID string) (string, int) {
	if activity.IsActivity(ctx) {
		info := activity.GetInfo(ctx)
		return fmt.Sprintf("%s/%s/%s", info.WorkflowExecution.ID, info.WorkflowExecution.RunID, info.ActivityID), int(info.Attempt)
	}
	var b [8]byte
	_, _ = rand.Read(b[:])
	return "local/" + runID + "/" + hex.EncodeToString(b[:]), 1
}

// storeFiles stores files of the agent source as artifacts of pub's run
// and announces each: llm.artifact when stored, system.warning (with
// error_code) when it was not (too large, a name that is no name, the
// database away for longer than artifactStoreWait). A file that is not
// stored never fails the activity.
func (a *Activities) storeFiles(ctx context.Context, pub *publisher, source models.Source, kind, toolName string, files []tools.File) []models.ArtifactRef {
	if len(files) == 0 {
		return nil
	}
	log := a.runLogger(ctx, pub.runID, source)
	warn := func(code models.Code, msg string) {
		log.Warn("file not stored", "error_code", code.Name, "message", msg)
		pub.emitLast(pub.event(source, models.CategorySystem, models.ActionWarning, map[string]any{
			"message": msg, "error_code": code.Name, "agent_id": source.AgentID,
		}))
	}
	if a.Store == nil {
		warn(models.CodeSystemError, fmt.Sprintf("%d file(s) from %s %q were not stored: this worker has no database", len(files), source.AgentType, source.AgentName))
		return nil
	}
	producer, attempt := artifactProducer(ctx, pub.runID)
	var refs []models.ArtifactRef
	for i, f := range files {
		name, ok := models.CleanArtifactName(f.Name)
		if !ok {
			warn(models.CodeInvalidParameters, fmt.Sprintf("a file from %s %q was not stored: its name %q is not a file name", source.AgentType, source.AgentName, f.Name))
			continue
		}
		art := &store.Artifact{
			RunID: pub.runID, AgentID: source.AgentID, AgentName: source.AgentName, TeamName: teamOf(source),
			Source: kind, ToolName: toolName, Name: name, MediaType: tools.MediaTypeOf(name, f.MediaType), Content: f.Data,
			Producer: producer, Attempt: attempt,
		}
		if err := a.saveArtifact(ctx, art, i); err != nil {
			code := models.ErrorCode(err)
			msg := fmt.Sprintf("file %q from %s %q was not stored: %v", name, source.AgentType, source.AgentName, err)
			var me *models.Error
			if errors.As(err, &me) {
				msg = fmt.Sprintf("file %q from %s %q was not stored: %s", name, source.AgentType, source.AgentName, me.Message)
			}
			warn(code, msg)
			continue
		}
		ref := art.Ref()
		refs = append(refs, ref)
		pub.emitLast(pub.event(source, models.CategoryLLM, models.ActionArtifact, models.ArtifactEventData(ref, source.AgentID)))
	}
	return refs
}

// saveArtifact stores one file, waiting out a database outage for up to
// artifactStoreWait while the activity heartbeats.
func (a *Activities) saveArtifact(ctx context.Context, art *store.Artifact, index int) error {
	wctx, stop := a.heartbeat(ctx)
	defer stop()
	deadline := time.Now().Add(artifactStoreWait)
	for delay := 200 * time.Millisecond; ; delay = min(2*delay, 5*time.Second) {
		err := a.Store.SaveArtifact(wctx, art, index, a.ArtifactLimits)
		if err == nil || !store.IsUnavailable(err) || time.Now().Add(delay).After(deadline) {
			return err
		}
		select {
		case <-wctx.Done():
			return err
		case <-time.After(delay):
		}
	}
}

// answerFiles are the files an answer declares, as tool files.
func answerFiles(answer string) []tools.File {
	var files []tools.File
	for _, f := range declaredFiles(answer) {
		files = append(files, tools.File{Name: f.name, MediaType: answerMediaType(f), Data: []byte(f.content)})
	}
	return files
}

// withFileNote tells the model what became of a tool's files, in place of
// their bytes: a JSON object result gets an "artifacts" member (it stays
// JSON), any other result a line per file.
func withFileNote(content string, refs []models.ArtifactRef, returned int) string {
	if returned == 0 {
		return content
	}
	var obj map[string]any
	if json.Unmarshal([]byte(content), &obj) == nil && obj != nil {
		list := make([]map[string]any, 0, len(refs))
		for _, r := range refs {
			list = append(list, map[string]any{"artifact_id": r.ID, "name": r.Name, "media_type": r.MediaType, "size": r.Size})
		}
		obj["artifacts"] = list
		if n := returned - len(refs); n > 0 {
			obj["artifacts_not_stored"] = n
		}
		if raw, err := json.Marshal(obj); err == nil {
			return string(raw)
		}
	}
	b := strings.Builder{}
	b.WriteString(content)
	for _, r := range refs {
		fmt.Fprintf(&b, "\n[file %q stored as artifact %s (%s, %d bytes)]", r.Name, r.ID, r.MediaType, r.Size)
	}
	if n := returned - len(refs); n > 0 {
		fmt.Fprintf(&b, "\n[%d file(s) returned by the tool could not be stored]", n)
	}
	return b.String()
}
