package api_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/op-stack/executor/api"
	"github.com/op-stack/executor/store"
	"github.com/op-stack/executor/store/storetest"
)

const nul = "\x00"

// withNUL returns body with the string at path (keys and indexes) set to a
// value holding a NUL character.
func withNUL(body map[string]any, path ...any) map[string]any {
	set(body, "a"+nul+"b", path...)
	return body
}

// set sets the value at path (map keys and slice indexes) of v.
func set(v any, value any, path ...any) {
	for i, p := range path {
		last := i == len(path)-1
		switch k := p.(type) {
		case string:
			m := v.(map[string]any)
			if last {
				m[k] = value
				return
			}
			v = m[k]
		case int:
			s := v.([]any)
			if last {
				s[k] = value
				return
			}
			v = s[k]
		}
	}
}

// rawGet posts to a get endpoint and returns the data as canonical JSON.
func rawGet(a *testAPI, path string, body any) string {
	a.t.Helper()
	status, env := a.post(path, body)
	if status != http.StatusOK {
		a.t.Fatalf("POST %s: %d %s", path, status, env.Message)
	}
	return string(env.Data)
}

// TestNULRejected: a NUL character (\u0000) in any string of a body, at any
// depth, in a key, or in a path parameter, is a 400 INVALID_PARAMETERS
// naming the field by its JSON path on both surfaces and both databases
// (PostgreSQL cannot store one, which used to make these 500s), and nothing
// stored changes. A literal backslash-u0000 in a string is kept as it is.
func TestNULRejected(t *testing.T) {
	storetest.ForEachDialect(t, func(t *testing.T, st *store.Store) {
		a := newTestAPI(t, st, withFakeTools, func(o *api.Options) { o.Runs = &api.Runs{Store: st} })
		id := create(a, contractBody())
		before := rawGet(a, pathGet, map[string]any{"hierarchy_id": id})
		var v1Created teamSummary
		a.mustDo(http.MethodPost, pathTeams, specRequest(t), api.CodeTeamCreated, &v1Created)
		v1Before := rawGet(a, pathGet, map[string]any{"hierarchy_id": v1Created.TeamID})

		for _, c := range []struct {
			name, path string
			body       any
			field      string
		}{
			{"create nested", pathCreate, withNUL(contractBody(), "teams", 0, "workers", 0, "role"), "teams[0].workers[0].role"},
			{"create top", pathCreate, withNUL(contractBody(), "name"), "name"},
			{"create in array", pathCreate, func() map[string]any {
				b := contractBody()
				set(b, []any{"web_search", "x" + nul}, "teams", 0, "workers", 0, "tools")
				return b
			}(), "teams[0].workers[0].tools[1]"},
			{"create key", pathCreate, func() map[string]any { b := contractBody(); b["x"+nul] = 1; return b }(), `x\u0000`},
			{"update", pathUpdate, func() map[string]any {
				b := withNUL(contractBody(), "teams", 0, "workers", 0, "system_prompt")
				b["hierarchy_id"] = id
				return b
			}(), "teams[0].workers[0].system_prompt"},
			{"get", pathGet, map[string]any{"hierarchy_id": id + nul}, "hierarchy_id"},
			{"delete", pathDelete, map[string]any{"hierarchy_id": id + nul}, "hierarchy_id"},
			{"runs/start", "/api/executor/v1/runs/start", map[string]any{"hierarchy_id": id, "task": "t" + nul}, "task"},
			{"runs/list", "/api/executor/v1/runs/list", map[string]any{"hierarchy_id": nul}, "hierarchy_id"},
			{"runs/events", pathEvents, map[string]any{"run_id": "r", "types": []any{"x" + nul}}, "types[0]"},
			{"runs/get", "/api/executor/v1/runs/get", map[string]any{"run_id": nul}, "run_id"},
			{"subagents/create", pathSACreate, map[string]any{"name": "n", "system_prompt": "p" + nul}, "system_prompt"},
			{"subagents/get", pathSAGet, map[string]any{"name": nul}, "name"},
		} {
			t.Run(c.name, func(t *testing.T) {
				env := a.expectError(c.path, c.body, http.StatusBadRequest, 40001)
				if env.ErrorCode != "INVALID_PARAMETERS" || env.Field != c.field || !strings.Contains(env.Message, c.field) {
					t.Errorf("got %s field %q message %q, want INVALID_PARAMETERS naming %q", env.ErrorCode, env.Field, env.Message, c.field)
				}
			})
		}

		// spec 001's surface names the field in its own terms.
		v1Team := withNUL(specRequest(t), "sub_teams", 0, "agent_configs", 1, "agent_name")
		for _, c := range []struct {
			method, path string
			body         any
			field        string
		}{
			{http.MethodPost, pathTeams, v1Team, "sub_teams[0].agent_configs[1].agent_name"},
			{http.MethodPut, pathTeams + "/" + v1Created.TeamID, v1Team, "sub_teams[0].agent_configs[1].agent_name"},
			{http.MethodPost, pathTeams, withNUL(specRequest(t), "top_supervisor_config", "llm_config", "model"), "top_supervisor_config.llm_config.model"},
			{http.MethodGet, pathTeams + "/" + v1Created.TeamID + "%00", nil, "id"},
			{http.MethodPost, "/api/v1/hierarchical-teams/" + v1Created.TeamID + "/execute", map[string]any{"task": "t" + nul}, "task"},
		} {
			t.Run("v1 "+c.method+" "+c.field, func(t *testing.T) {
				env := a.expectV1Error(c.method, c.path, c.body, http.StatusBadRequest, "INVALID_PARAMETERS")
				if got := env.Error.Details["field"]; got != c.field || !strings.Contains(env.Error.Message, c.field) {
					t.Errorf("field %v, message %q: want %q", got, env.Error.Message, c.field)
				}
			})
		}

		// Nothing stored changed: the hierarchies are as they were, no other
		// was created, no run was started.
		if after := rawGet(a, pathGet, map[string]any{"hierarchy_id": id}); after != before {
			t.Errorf("hierarchy changed by a refused update:\nbefore %s\nafter  %s", before, after)
		}
		if after := rawGet(a, pathGet, map[string]any{"hierarchy_id": v1Created.TeamID}); after != v1Before {
			t.Errorf("spec 001 team changed by a refused update:\nbefore %s\nafter  %s", v1Before, after)
		}
		var list struct {
			Total int `json:"total"`
		}
		a.mustPost(pathList, map[string]any{}, &list)
		if list.Total != 2 {
			t.Errorf("%d hierarchies stored, want the 2 created", list.Total)
		}
		var runs struct {
			Total int `json:"total"`
		}
		a.mustPost("/api/executor/v1/runs/list", map[string]any{}, &runs)
		if runs.Total != 0 {
			t.Errorf("%d runs stored, want none", runs.Total)
		}
		var sas struct {
			Total int `json:"total"`
		}
		a.mustPost(pathSAList, map[string]any{}, &sas)
		if sas.Total != 0 {
			t.Errorf("%d sub-agents stored, want none", sas.Total)
		}

		// A backslash followed by u0000 is ordinary text.
		body := contractBody()
		set(body, `a\u0000b`, "teams", 0, "workers", 0, "role")
		literal := create(a, body)
		var got struct {
			Teams []struct {
				Workers []struct {
					Role string `json:"role"`
				} `json:"workers"`
			} `json:"teams"`
		}
		a.mustPost(pathGet, map[string]any{"hierarchy_id": literal}, &got)
		if r := got.Teams[0].Workers[0].Role; r != `a\u0000b` {
			t.Errorf("role with a literal backslash-u0000 stored as %q", r)
		}
	})
}

// TestOverlongFields: values longer than their column (a worker's role,
// 255 characters; a model, 200; an agent's name, 255, also the team
// supervisor's default "<team> Supervisor") are a 400 naming the field on
// both databases, rather than a 500 on PostgreSQL and kept on SQLite. Values
// at the limit, counted in characters, are stored.
func TestOverlongFields(t *testing.T) {
	storetest.ForEachDialect(t, func(t *testing.T, st *store.Store) {
		a := newTestAPI(t, st, withFakeTools)
		long := func(n int) string { return strings.Repeat("研", n) }
		for _, c := range []struct {
			name  string
			path  []any
			value string
			field string
		}{
			{"role", []any{"teams", 0, "workers", 0, "role"}, long(256), "teams[0].workers[0].role"},
			{"model", []any{"teams", 0, "workers", 0, "model"}, long(201), "teams[0].workers[0].model"},
			{"supervisor model", []any{"global_supervisor_agent", "model"}, long(201), "global_supervisor_agent.model"},
			{"team supervisor name", []any{"teams", 0, "team_supervisor_agent", "name"}, long(256), "teams[0].team_supervisor_agent.name"},
			{"default supervisor name", []any{"teams", 0, "name"}, long(250), "teams[0].team_supervisor_agent.name"},
		} {
			t.Run(c.name, func(t *testing.T) {
				body := contractBody()
				set(body, c.value, c.path...)
				env := a.expectError(pathCreate, body, http.StatusBadRequest, 40001)
				if env.Field != c.field {
					t.Errorf("field %q, want %q (%s)", env.Field, c.field, env.Message)
				}
			})
		}
		t.Run("at the limits", func(t *testing.T) {
			body := contractBody()
			set(body, long(255), "teams", 0, "workers", 0, "role")
			set(body, long(200), "teams", 0, "workers", 0, "model")
			set(body, long(200), "global_supervisor_agent", "model")
			id := create(a, body)
			var got struct {
				Teams []struct {
					Workers []struct {
						Role  string `json:"role"`
						Model string `json:"model"`
					} `json:"workers"`
				} `json:"teams"`
			}
			a.mustPost(pathGet, map[string]any{"hierarchy_id": id}, &got)
			if w := got.Teams[0].Workers[0]; w.Role != long(255) || w.Model != long(200) {
				t.Errorf("stored role %d and model %d characters", len([]rune(w.Role)), len([]rune(w.Model)))
			}
		})
		t.Run("subagent model", func(t *testing.T) {
			env := a.expectError(pathSACreate, map[string]any{"name": "n", "system_prompt": "p", "model": long(201)}, http.StatusBadRequest, 40001)
			if env.Field != "model" {
				t.Errorf("field %q (%s)", env.Field, env.Message)
			}
		})
		t.Run("v1 model", func(t *testing.T) {
			body := specRequest(t)
			set(body, long(201), "sub_teams", 0, "agent_configs", 0, "llm_config", "model")
			env := a.expectV1Error(http.MethodPost, pathTeams, body, http.StatusBadRequest, "INVALID_PARAMETERS")
			if got := env.Error.Details["field"]; got != "sub_teams[0].agent_configs[0].llm_config.model" {
				t.Errorf("field %v (%s)", got, env.Error.Message)
			}
		})
	})
}

// TestLongIDsNotFound: ids far longer than their columns, and ids of odd
// characters, on every lookup of both surfaces are a 404 (or 400), never a
// 500, on both databases.
func TestLongIDsNotFound(t *testing.T) {
	storetest.ForEachDialect(t, func(t *testing.T, st *store.Store) {
		a := newTestAPI(t, st, withFakeTools, func(o *api.Options) { o.Runs = &api.Runs{Store: st} })
		for _, id := range []string{strings.Repeat("x", 1000), strings.Repeat("研", 300), "%", "'; --", "\xff\xfe"} {
			for _, path := range []string{pathGet, pathDelete, "/api/executor/v1/runs/get", "/api/executor/v1/runs/events", "/api/executor/v1/runs/messages", "/api/executor/v1/runs/results", pathSAGet, pathSADelete} {
				status, env := a.post(path, map[string]any{"hierarchy_id": id, "run_id": id, "id": id})
				if status >= 500 || status == http.StatusOK {
					t.Errorf("POST %s with id of %d bytes: %d %s %s", path, len(id), status, env.ErrorCode, env.Message)
				}
			}
			status, env := a.post(pathSAGet, map[string]any{"name": id})
			if status != http.StatusNotFound {
				t.Errorf("sub-agent by name of %d bytes: %d %s", len(id), status, env.Message)
			}
			if len(id) < 100 {
				continue // the URL forms below use only the long ones
			}
			for _, req := range []struct{ method, path string }{
				{http.MethodGet, pathTeams + "/" + id},
				{http.MethodDelete, pathTeams + "/" + id},
				{http.MethodPut, pathTeams + "/" + id},
				{http.MethodGet, "/api/v1/executions/" + id},
				{http.MethodGet, "/api/v1/executions/" + id + "/results"},
			} {
				var body any
				if req.method == http.MethodPut {
					body = specRequest(t)
				}
				status, env := a.do(req.method, req.path, body)
				if status >= 500 || status == http.StatusOK {
					t.Errorf("%s %s…: %d %s %+v", req.method, req.path[:40], status, env.Code, env.Error)
				}
			}
		}
	})
}
