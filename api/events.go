package api

import (
	"strings"

	"github.com/gin-gonic/gin"

	"github.com/op-stack/executor/models"
	"github.com/op-stack/executor/store"
	"github.com/op-stack/executor/stream"
)

// Page sizes of runs/events.
const (
	defaultEventsLimit = 100
	maxEventsLimit     = 1000
)

type listEventsInput struct {
	runIDInput
	After   int64    `json:"after"`
	Limit   int      `json:"limit"`
	AgentID string   `json:"agent_id"`
	Types   []string `json:"types"`
}

// eventsPage is runs/events' answer. NextAfter is the after of the next
// page; HasMore says whether it holds anything yet.
type eventsPage struct {
	Events    []models.Event `json:"events"`
	NextAfter int64          `json:"next_after"`
	HasMore   bool           `json:"has_more"`
}

// listEvents is runs/events: one page of a run's stored events, for
// clients that poll or replay instead of streaming. Events of a live run
// appear here once the workflow has stored them.
func (s *Server) listEvents(c *gin.Context) {
	in, id, valid := readIDBody[listEventsInput](s, c)
	if !valid {
		return
	}
	f, err := in.filter()
	if err != nil {
		s.writeError(c, err)
		return
	}
	ctx := c.Request.Context()
	run, err := s.visibleRun(ctx, id)
	if err != nil {
		s.writeError(c, err)
		return
	}
	limit := f.Limit
	f.Limit++ // one more tells whether there is a next page
	evs, err := s.store.ListEvents(ctx, run.ID, f)
	if err != nil {
		s.writeError(c, err)
		return
	}
	stream.PublicEvents(evs, run.PublicID)
	page := eventsPage{Events: evs, NextAfter: in.After}
	if len(evs) > limit {
		page.Events, page.HasMore = evs[:limit], true
	}
	if n := len(page.Events); n > 0 {
		page.NextAfter = page.Events[n-1].Sequence
	}
	ok(c, page)
}

func (in listEventsInput) filter() (store.EventFilter, error) {
	f := store.EventFilter{After: in.After, Limit: in.Limit, AgentID: strings.TrimSpace(in.AgentID)}
	if in.After < 0 {
		return f, models.FieldError("after", "must not be negative, got %d", in.After)
	}
	switch {
	case in.Limit == 0:
		f.Limit = defaultEventsLimit
	case in.Limit < 0 || in.Limit > maxEventsLimit:
		return f, models.FieldError("limit", "must be between 1 and %d, got %d", maxEventsLimit, in.Limit)
	}
	for _, t := range in.Types {
		t = strings.TrimSpace(t)
		category, action, found := strings.Cut(t, ".")
		if !found || category == "" || action == "" || strings.Contains(action, ".") {
			return f, models.FieldError("types", "entries must be \"<category>.<action>\", e.g. \"llm.stream\"; got %q", t)
		}
		f.Types = append(f.Types, t)
	}
	return f, nil
}
