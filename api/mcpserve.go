package api

import (
	"context"

	"github.com/gin-gonic/gin"

	"github.com/op-stack/executor/auth"
	"github.com/op-stack/executor/mcpserve"
	"github.com/op-stack/executor/models"
	"github.com/op-stack/executor/store"
)

// MCPPath is where the MCP server (the caller's hierarchies as tools,
// docs/mcp-server.md) is served, under ExecutorPrefix.
const MCPPath = "/mcp"

// maxMCPTools bounds the tools one tenant's list shows (its newest
// hierarchies): a list is read on every tools/list and tools/call.
const maxMCPTools = 1000

// mountMCP serves the MCP endpoint on POST (messages), GET (the session's
// stream) and DELETE (end a session). Access control has run before it:
// the route needs hierarchies:read, and a tool call also runs:write.
func (s *Server) mountMCP(v1 *gin.RouterGroup) {
	s.mcp = mcpserve.NewHandler(mcpBackend{s}, mcpserve.Options{
		Logger:              s.log,
		LocalhostProtection: s.access.Mode != AuthRequired,
	})
	serve := func(c *gin.Context) { s.mcp.ServeHTTP(c.Writer, c.Request) }
	v1.POST(MCPPath, serve)
	v1.GET(MCPPath, serve)
	v1.DELETE(MCPPath, serve)
}

// mcpBackend is the MCP server's way to the service: the same checks and
// paths as the REST routes, for the principal in the context.
type mcpBackend struct{ s *Server }

var _ mcpserve.Backend = mcpBackend{}

func (b mcpBackend) Hierarchies(ctx context.Context) ([]mcpserve.Hierarchy, error) {
	p, ok := auth.PrincipalFrom(ctx)
	if !ok || p.Tenant == "" || p.RunID != "" {
		return nil, nil
	}
	// The caller's own tenant only, even for an admin who sees every
	// tenant: a tools list is one tenant's, and names must not clash.
	const pageSize = 100
	var out []mcpserve.Hierarchy
	for page := 1; len(out) < maxMCPTools; page++ {
		items, total, err := b.s.store.ListHierarchies(ctx, store.ListFilter{Page: page, PageSize: pageSize, Tenant: p.Tenant})
		if err != nil {
			return nil, err
		}
		for _, h := range items {
			out = append(out, mcpserve.Hierarchy{ID: h.ID, Name: h.Name, Description: h.Description})
		}
		if len(items) < pageSize || int64(page*pageSize) >= total {
			break
		}
	}
	return out[:min(len(out), maxMCPTools)], nil
}

func (b mcpBackend) Start(ctx context.Context, hierarchyID, task string, previousRunID *string) (mcpserve.Run, error) {
	s := b.s
	if s.runs == nil {
		return mcpserve.Run{}, models.Errorf(models.CodeUnavailable, "runs are not served by this process")
	}
	h, err := s.visibleHierarchy(ctx, hierarchyID)
	if err != nil {
		return mcpserve.Run{}, err
	}
	opts := StartOptions{runField: "id"}
	if opts.Previous, err = s.previousRun(ctx, "previous_run_id", previousRunID, h); err != nil {
		return mcpserve.Run{}, err
	}
	run, err := s.runs.Start(ctx, h, task, opts)
	if err != nil {
		return mcpserve.Run{}, err
	}
	return mcpserve.Run{ID: run.PublicID, ThreadID: run.ThreadID, Status: run.Status}, nil
}

func (b mcpBackend) Cancel(ctx context.Context, runID string) error {
	if b.s.runs == nil {
		return models.Errorf(models.CodeUnavailable, "runs are not served by this process")
	}
	_, err := b.s.cancel(ctx, runID)
	if models.ErrorCode(err) == models.CodeExecutionFinished {
		return nil
	}
	return err
}

// Follow reads the run's log as its event streams do (stream.Hub.Follow):
// a finished run's from the store, a live run's from its shared feed.
func (b mcpBackend) Follow(ctx context.Context, runID string, fn func(models.Event)) (models.Event, error) {
	run, err := b.s.visibleRun(ctx, runID)
	if err != nil {
		return models.Event{}, err
	}
	return b.s.streams.Follow(ctx, run, fn)
}
