package api

import (
	"context"

	"github.com/gin-gonic/gin"

	"github.com/op-stack/executor/store"
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
// list by the run's key, answered as {"run_id", field: list}; every
// "run_id" in the answer is the run's public id.
func (s *Server) serveRunList(c *gin.Context, field string, load func(ctx context.Context, runID string) (any, error)) {
	id, valid := readID[runIDInput](s, c)
	if !valid {
		return
	}
	ctx := c.Request.Context()
	run, err := s.visibleRun(ctx, id)
	if err != nil {
		s.writeError(c, err)
		return
	}
	list, err := load(ctx, run.ID)
	if err != nil {
		s.writeError(c, err)
		return
	}
	if tree, isTree := list.([]*store.Message); isTree {
		publicMessageRunIDs(tree, run.PublicID)
	}
	ok(c, gin.H{"run_id": run.PublicID, field: list})
}

// publicMessageRunIDs shows a run's messages under the run's public id.
func publicMessageRunIDs(tree []*store.Message, publicID string) {
	for _, m := range tree {
		m.RunID = publicID
		publicMessageRunIDs(m.Children, publicID)
	}
}
