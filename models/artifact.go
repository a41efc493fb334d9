package models

// Artifacts (spec 001 §4's artifacts): files an agent produced, stored by
// the activity that received them (bytes never travel through a workflow's
// history, only an ArtifactRef does), listed on a run's results and served
// at /api/v1/artifacts/{id}.

// ActionArtifact (llm.artifact) announces a file an agent produced, once it
// is stored: its ArtifactRef fields, url, source and agent_id.
const ActionArtifact = "artifact"

// Sources of an artifact.
const (
	// ArtifactSourceAnswer: a fenced block of an agent's answer whose info
	// string names a file (```markdown file="report.md").
	ArtifactSourceAnswer = "answer"
	// ArtifactSourceTool: a file a tool returned with its result (an MCP
	// tool's embedded resource, the built-in save_file).
	ArtifactSourceTool = "tool"
)

// ArtifactURLPrefix is where an artifact is downloaded: the prefix plus its
// id.
const ArtifactURLPrefix = "/api/v1/artifacts/"

// ArtifactRef describes a stored artifact without its bytes: what an
// activity's result and the results' listings carry.
type ArtifactRef struct {
	ID        string `json:"id"`
	Name      string `json:"name"`
	MediaType string `json:"media_type"`
	Size      int64  `json:"size"`
	SHA256    string `json:"sha256"`
	Source    string `json:"source"`
	// ToolName names the tool that returned the file (Source "tool").
	ToolName string `json:"tool_name,omitempty"`
}

// URL is where the artifact is downloaded.
func (r ArtifactRef) URL() string { return ArtifactURLPrefix + r.ID }

// ArtifactKind is spec 001's short artifact type for a media type:
// markdown, text, json, csv, html, image, pdf, or document for anything
// else.
func ArtifactKind(mediaType string) string {
	mt := mediaType
	for i := 0; i < len(mt); i++ {
		if mt[i] == ';' {
			mt = mt[:i]
			break
		}
	}
	switch {
	case mt == "text/markdown":
		return "markdown"
	case mt == "text/plain":
		return "text"
	case mt == "application/json":
		return "json"
	case mt == "text/csv":
		return "csv"
	case mt == "text/html":
		return "html"
	case mt == "application/pdf":
		return "pdf"
	case len(mt) > 6 && mt[:6] == "image/":
		return "image"
	}
	return "document"
}

// ArtifactEventData is the data of an llm.artifact event.
func ArtifactEventData(r ArtifactRef, agentID string) map[string]any {
	d := map[string]any{
		"artifact_id": r.ID, "name": r.Name, "media_type": r.MediaType, "type": ArtifactKind(r.MediaType),
		"size": r.Size, "sha256": r.SHA256, "url": r.URL(), "source": r.Source, "agent_id": agentID,
	}
	if r.ToolName != "" {
		d["tool_name"] = r.ToolName
	}
	return d
}

// MaxArtifactNameLen bounds an artifact's file name, in bytes.
const MaxArtifactNameLen = 255

// CleanArtifactName is name fit to be a stored file's name: its last path
// element, trimmed, without control characters or quotes, at most
// MaxArtifactNameLen bytes. ok is false when nothing usable is left (the
// file is then not stored). Names come from models and tools: a name is
// only a label, never a path the service opens.
func CleanArtifactName(name string) (clean string, ok bool) {
	for i := len(name) - 1; i >= 0; i-- {
		if name[i] == '/' || name[i] == '\\' {
			name = name[i+1:]
			break
		}
	}
	b := make([]rune, 0, len(name))
	for _, r := range name {
		if r < 0x20 || r == 0x7f || r == '"' {
			continue
		}
		b = append(b, r)
	}
	clean = string(b)
	for len(clean) > 0 && (clean[0] == ' ' || clean[len(clean)-1] == ' ') {
		if clean[0] == ' ' {
			clean = clean[1:]
		} else {
			clean = clean[:len(clean)-1]
		}
	}
	for len(clean) > MaxArtifactNameLen {
		r := []rune(clean)
		clean = string(r[:len(r)-1])
	}
	if clean == "" || clean == "." || clean == ".." {
		return "", false
	}
	return clean, true
}
