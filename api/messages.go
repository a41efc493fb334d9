package api

import "github.com/gin-gonic/gin"

// listMessages is runs/messages {"id"}: the run's stored messages (each
// agent turn's final output, under its application-set id) as a tree:
// sub-agents' messages under the message of the turn that called them.
func (s *Server) listMessages(c *gin.Context) {
	id, valid := readID[runIDInput](s, c)
	if !valid {
		return
	}
	ctx := c.Request.Context()
	if _, err := s.visibleRun(ctx, id); err != nil {
		s.writeError(c, err)
		return
	}
	tree, err := s.store.MessageTree(ctx, id)
	if err != nil {
		s.writeError(c, err)
		return
	}
	ok(c, gin.H{"run_id": id, "messages": tree})
}
