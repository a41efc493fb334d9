package api

import (
	"context"

	"github.com/gin-gonic/gin"
)

// listMessages is runs/messages {"id"}: the run's stored messages (each
// agent turn's final output, under its application-set id) as a tree:
// sub-agents' messages under the message of the turn that called them.
func (s *Server) listMessages(c *gin.Context) {
	s.serveRunList(c, "messages", func(ctx context.Context, runID string) (any, error) {
		return s.store.MessageTree(ctx, runID)
	})
}

// serveRunList answers a list route of one run's stored things ({"id"} or
// {"run_id"}): the run must be visible to the caller, then load reads the
// list, answered as {"run_id", field: list}.
func (s *Server) serveRunList(c *gin.Context, field string, load func(ctx context.Context, runID string) (any, error)) {
	id, valid := readID[runIDInput](s, c)
	if !valid {
		return
	}
	ctx := c.Request.Context()
	if _, err := s.visibleRun(ctx, id); err != nil {
		s.writeError(c, err)
		return
	}
	list, err := load(ctx, id)
	if err != nil {
		s.writeError(c, err)
		return
	}
	ok(c, gin.H{"run_id": id, field: list})
}
