package api

import (
	"context"
	"mime"
	"net/http"
	"strconv"

	"github.com/gin-gonic/gin"

	"github.com/op-stack/executor/auth"
	"github.com/op-stack/executor/models"
	"github.com/op-stack/executor/store"
)

// ArtifactInfo is an artifact in listings and results (spec 001 §4's
// artifacts entries): its name, spec 001's short type, size and url, plus
// its id, media type, SHA-256, source, and the agent that produced it.
type ArtifactInfo struct {
	ID        string `json:"id"`
	Name      string `json:"name"`
	Type      string `json:"type"`
	MediaType string `json:"media_type"`
	Size      int64  `json:"size"`
	SHA256    string `json:"sha256"`
	URL       string `json:"url"`
	Source    string `json:"source"`
	ToolName  string `json:"tool_name,omitempty"`
	AgentID   string `json:"agent_id"`
	AgentName string `json:"agent_name"`
	TeamName  string `json:"team_name,omitempty"`
	CreatedAt string `json:"created_at"`
}

func artifactInfo(a store.Artifact) ArtifactInfo {
	ref := a.Ref()
	return ArtifactInfo{
		ID: a.ID, Name: a.Name, Type: models.ArtifactKind(a.MediaType), MediaType: a.MediaType, Size: a.Size, SHA256: a.SHA256,
		URL: ref.URL(), Source: a.Source, ToolName: a.ToolName, AgentID: a.AgentID, AgentName: a.AgentName, TeamName: a.TeamName,
		CreatedAt: models.FormatTimestamp(a.CreatedAt),
	}
}

func artifactInfos(list []store.Artifact) []ArtifactInfo {
	out := make([]ArtifactInfo, 0, len(list))
	for _, a := range list {
		out = append(out, artifactInfo(a))
	}
	return out
}

// listArtifacts is artifacts/list: {"run_id"} → the run's artifacts, in
// the order they were stored, without their bytes.
func (s *Server) listArtifacts(c *gin.Context) {
	s.serveRunList(c, "artifacts", func(ctx context.Context, runID string) (any, error) {
		list, err := s.store.ListArtifacts(ctx, runID)
		if err != nil {
			return nil, err
		}
		return artifactInfos(list), nil
	})
}

// downloadArtifact is GET /api/v1/artifacts/{id}: the file itself. The
// tenant (and a run-scoped principal's run) is part of the one lookup, so
// another tenant's id is answered exactly as an unknown one, after the
// same work. The file is served as an attachment, never sniffed and
// sandboxed: an HTML file a model wrote must not run as this origin.
func (s *Server) downloadArtifact(c *gin.Context) {
	id, err := pathID(c, "artifact_id")
	if err != nil {
		s.writeError(c, err)
		return
	}
	ctx := c.Request.Context()
	// A run-scoped principal (a stream token) names its run by public id;
	// artifacts are stored under the run's key.
	var runKey string
	if p, _ := auth.PrincipalFrom(ctx); p.RunID != "" {
		run, err := s.visibleRun(ctx, p.RunID)
		if err != nil {
			s.writeError(c, models.Errorf(models.CodeArtifactNotFound, "artifact %q not found", id))
			return
		}
		runKey = run.ID
	}
	a, err := s.store.GetArtifact(ctx, id, tenantFilter(ctx), runKey)
	if err != nil {
		s.writeError(c, err)
		return
	}
	h := c.Writer.Header()
	h.Set("Content-Length", strconv.FormatInt(int64(len(a.Content)), 10))
	h.Set("Content-Disposition", mime.FormatMediaType("attachment", map[string]string{"filename": a.Name}))
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Content-Security-Policy", "default-src 'none'; sandbox")
	h.Set("Cache-Control", "private, max-age=0")
	h.Set("ETag", `"`+a.SHA256+`"`)
	if match := c.GetHeader("If-None-Match"); match == `"`+a.SHA256+`"` {
		c.Status(http.StatusNotModified)
		return
	}
	c.Data(http.StatusOK, a.MediaType, a.Content)
}
