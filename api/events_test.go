package api_test

import (
	"net/http"
	"testing"

	"github.com/op-stack/executor/api"
	"github.com/op-stack/executor/models"
	"github.com/op-stack/executor/store"
	"github.com/op-stack/executor/store/storetest"
)

type eventsPage struct {
	Events    []models.Event `json:"events"`
	NextAfter int64          `json:"next_after"`
	HasMore   bool           `json:"has_more"`
}

func TestRunEvents(t *testing.T) {
	storetest.ForEachDialect(t, func(t *testing.T, st *store.Store) {
		e := newStreamEnv(t, st, api.StreamOptions{})
		// 30 events: 1 lifecycle.started, 2..29 llm.stream, 30
		// lifecycle.completed; agent-<seq%3>.
		id, _ := e.storedRun(30)
		list := func(body map[string]any) eventsPage {
			t.Helper()
			body["id"] = id
			var p eventsPage
			e.api.mustPost(pathEvents, body, &p)
			return p
		}
		seqs := func(p eventsPage) []int64 {
			out := []int64{}
			for _, ev := range p.Events {
				out = append(out, ev.Sequence)
			}
			return out
		}
		same := func(what string, got, want []int64) {
			t.Helper()
			if len(got) != len(want) {
				t.Fatalf("%s: got %v, want %v", what, got, want)
			}
			for i := range got {
				if got[i] != want[i] {
					t.Fatalf("%s: got %v, want %v", what, got, want)
				}
			}
		}

		p := list(map[string]any{})
		if len(p.Events) != 30 || p.HasMore || p.NextAfter != 30 || p.Events[0].RunID != id || p.Events[0].Event.String() != "lifecycle.started" {
			t.Fatalf("all events: %d, has_more %v, next_after %d", len(p.Events), p.HasMore, p.NextAfter)
		}

		// Paging by after and limit walks the log with no gap or overlap.
		var walked []int64
		after, pages := int64(0), 0
		for {
			p := list(map[string]any{"after": after, "limit": 7})
			walked = append(walked, seqs(p)...)
			after, pages = p.NextAfter, pages+1
			if !p.HasMore {
				break
			}
		}
		if pages != 5 || len(walked) != 30 || walked[29] != 30 || after != 30 {
			t.Fatalf("walked %d pages: %v (next_after %d)", pages, walked, after)
		}
		p = list(map[string]any{"after": 30})
		if len(p.Events) != 0 || p.HasMore || p.NextAfter != 30 {
			t.Fatalf("after the end: %+v", p)
		}

		same("agent_id", seqs(list(map[string]any{"agent_id": "agent-1", "after": 20})), []int64{22, 25, 28})
		same("types", seqs(list(map[string]any{"types": []string{"lifecycle.started", "lifecycle.completed"}})), []int64{1, 30})
		same("types and agent", seqs(list(map[string]any{"types": []string{"lifecycle.completed"}, "agent_id": "agent-0"})), []int64{30})
		p = list(map[string]any{"types": []string{"llm.stream"}, "limit": 2, "after": 10})
		same("types with limit", seqs(p), []int64{11, 12})
		if !p.HasMore || p.NextAfter != 12 {
			t.Fatalf("has_more %v next_after %d", p.HasMore, p.NextAfter)
		}
		// Events come from the database: no workflow is asked.
		if e.fake.queries.Load() != 0 {
			t.Fatal("runs/events queried a workflow")
		}

		for _, c := range []struct {
			body  map[string]any
			field string
		}{
			{map[string]any{"id": id, "limit": 1001}, "limit"},
			{map[string]any{"id": id, "limit": -1}, "limit"},
			{map[string]any{"id": id, "after": -1}, "after"},
			{map[string]any{"id": id, "types": []string{"llm"}}, "types"},
			{map[string]any{"id": id, "types": []string{"llm.stream", ".stream"}}, "types"},
			{map[string]any{"id": id, "types": "llm.stream"}, "types"},
			{map[string]any{"limit": 10}, "id"},
		} {
			env := e.api.expectError(pathEvents, c.body, http.StatusBadRequest, 40001)
			if env.Field != c.field {
				t.Fatalf("%v: field %q, want %q", c.body, env.Field, c.field)
			}
		}
		p = list(map[string]any{"limit": 1000})
		if len(p.Events) != 30 {
			t.Fatalf("limit 1000: %d events", len(p.Events))
		}
		e.api.expectError(pathEvents, map[string]any{"id": "no-such-run"}, http.StatusNotFound, 40402)
	})
}
