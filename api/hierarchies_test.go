package api_test

import (
	"context"
	"net/http"
	"regexp"
	"strings"
	"testing"

	"github.com/op-stack/executor/models"
	"github.com/op-stack/executor/store"
	"github.com/op-stack/executor/store/storetest"
)

const (
	pathCreate = "/api/executor/v1/hierarchies/create"
	pathGet    = "/api/executor/v1/hierarchies/get"
	pathUpdate = "/api/executor/v1/hierarchies/update"
	pathDelete = "/api/executor/v1/hierarchies/delete"
	pathList   = "/api/executor/v1/hierarchies/list"
)

// specBody is spec 000's request body ("新 API 请求体结构") with two teams.
func specBody() map[string]any {
	return map[string]any{
		"name":        "研究团队",
		"description": "可选描述",
		"global_supervisor_agent": map[string]any{
			"agent_id": "gs-research-001", "prompt": "你是首席科学家...", "model_id": "gpt-4o", "temperature": 0.7, "max_tokens": 2048,
		},
		"execution_mode":         "sequential",
		"enable_context_sharing": true,
		"teams": []any{
			map[string]any{
				"name":                  "理论研究组",
				"team_supervisor_agent": map[string]any{"agent_id": "ts-theory-001", "prompt": "你是理论研究组负责人...", "temperature": 0.7, "max_tokens": 2048},
				"prevent_duplicate":     true,
				"share_context":         false,
				"workers": []any{
					map[string]any{"agent_id": "w-theory-expert-001", "name": "理论专家", "role": "理论研究员", "system_prompt": "你是理论专家...", "tools": []any{}, "temperature": 0.7, "max_tokens": 2048},
					map[string]any{"agent_id": "w-theory-critic-001", "name": "评审专家", "role": "评审", "system_prompt": "你是评审..."},
				},
			},
			map[string]any{
				"name":                  "实验组",
				"team_supervisor_agent": map[string]any{"agent_id": "ts-lab-001", "prompt": "你是实验组负责人..."},
				"workers": []any{
					map[string]any{"agent_id": "w-lab-001", "name": "实验员", "role": "实验", "system_prompt": "你做实验"},
				},
			},
		},
	}
}

// contractBody is contract 002's create body: system_prompt and model.
func contractBody() map[string]any {
	return map[string]any{
		"name":                    "topology_1735550000",
		"global_supervisor_agent": map[string]any{"agent_id": "101", "system_prompt": "You are Global Supervisor. Coordinate and oversee the work of all team supervisors."},
		"teams": []any{map[string]any{
			"name":                  "ops",
			"team_supervisor_agent": map[string]any{"agent_id": "102", "system_prompt": "You are the ops lead."},
			"workers": []any{map[string]any{
				"agent_id": "103", "name": "性能分析师", "role": "analyst", "system_prompt": "You are 性能分析师. 负责分析系统性能指标，识别性能瓶颈。", "model": "gemini-2.0-flash",
			}},
		}},
	}
}

func teams(body map[string]any) []any { return body["teams"].([]any) }
func team(body map[string]any, i int) map[string]any {
	return teams(body)[i].(map[string]any)
}
func worker(body map[string]any, i, j int) map[string]any {
	return team(body, i)["workers"].([]any)[j].(map[string]any)
}

func create(a *testAPI, body any) string {
	a.t.Helper()
	var out struct {
		HierarchyID string `json:"hierarchy_id"`
	}
	a.mustPost(pathCreate, body, &out)
	if out.HierarchyID == "" {
		a.t.Fatal("create returned no hierarchy_id")
	}
	return out.HierarchyID
}

func get(a *testAPI, id string) models.Hierarchy {
	a.t.Helper()
	var h models.Hierarchy
	a.mustPost(pathGet, map[string]any{"hierarchy_id": id}, &h)
	return h
}

func count(a *testAPI) int64 {
	a.t.Helper()
	var out struct {
		Total int64 `json:"total"`
	}
	a.mustPost(pathList, map[string]any{}, &out)
	return out.Total
}

var uuidPattern = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`)

func TestHierarchyAPI(t *testing.T) {
	storetest.ForEachDialect(t, func(t *testing.T, st *store.Store) {
		a := newTestAPI(t, st)

		// Spec 000 US1 (scenarios 1–3) and US3 (scenarios 1–3): the agent_ids
		// given at every level are stored and returned by get.
		t.Run("agent ids at every level are saved and returned", func(t *testing.T) {
			id := create(a, specBody())
			if !uuidPattern.MatchString(id) {
				t.Errorf("hierarchy_id %q is not a UUID", id)
			}
			h := get(a, id)
			if h.ID != id || h.Name != "研究团队" || h.Description != "可选描述" {
				t.Errorf("get returned id %q name %q description %q", h.ID, h.Name, h.Description)
			}
			if got := h.GlobalSupervisor.AgentID; got != "gs-research-001" {
				t.Errorf("global_supervisor_agent.agent_id = %q", got)
			}
			if got := h.GlobalSupervisor.SystemPrompt; got != "你是首席科学家..." {
				t.Errorf("global supervisor prompt = %q", got)
			}
			if got := h.GlobalSupervisor.Model; got != "gpt-4o" {
				t.Errorf("global supervisor model_id = %q", got)
			}
			if h.GlobalSupervisor.Temperature == nil || *h.GlobalSupervisor.Temperature != 0.7 || h.GlobalSupervisor.MaxTokens == nil || *h.GlobalSupervisor.MaxTokens != 2048 {
				t.Errorf("global supervisor sampling = %v %v", h.GlobalSupervisor.Temperature, h.GlobalSupervisor.MaxTokens)
			}
			if !h.EnableContextSharing || h.ExecutionMode != "sequential" || h.MaxIterations != models.DefaultMaxIterations {
				t.Errorf("settings: context sharing %v mode %q max_iterations %d", h.EnableContextSharing, h.ExecutionMode, h.MaxIterations)
			}
			if len(h.Teams) != 2 {
				t.Fatalf("want 2 teams, got %d", len(h.Teams))
			}
			want := [][]string{
				{"ts-theory-001", "w-theory-expert-001", "w-theory-critic-001"},
				{"ts-lab-001", "w-lab-001"},
			}
			for i, tm := range h.Teams {
				if tm.Supervisor.AgentID != want[i][0] {
					t.Errorf("team %d supervisor agent_id = %q, want %q", i, tm.Supervisor.AgentID, want[i][0])
				}
				if len(tm.Workers) != len(want[i])-1 {
					t.Fatalf("team %d: want %d workers, got %d", i, len(want[i])-1, len(tm.Workers))
				}
				for j, w := range tm.Workers {
					if w.AgentID != want[i][j+1] {
						t.Errorf("team %d worker %d agent_id = %q, want %q", i, j, w.AgentID, want[i][j+1])
					}
				}
			}
			if tm := h.Teams[0]; !tm.PreventDuplicate || tm.ShareContext || tm.Name != "理论研究组" {
				t.Errorf("team 0 = %+v", tm)
			}
			if w := h.Teams[0].Workers[0]; w.Name != "理论专家" || w.Role != "理论研究员" || w.SystemPrompt != "你是理论专家..." {
				t.Errorf("worker 0 = %+v", w)
			}
		})

		// Contract 002's spelling (system_prompt, model) and its numeric
		// agent_ids as strings.
		t.Run("contract 002 body", func(t *testing.T) {
			h := get(a, create(a, contractBody()))
			if h.GlobalSupervisor.AgentID != "101" || h.Teams[0].Supervisor.AgentID != "102" || h.Teams[0].Workers[0].AgentID != "103" {
				t.Errorf("agent ids = %v", h.AgentIDs())
			}
			if got := h.Teams[0].Workers[0].Model; got != "gemini-2.0-flash" {
				t.Errorf("worker model = %q", got)
			}
			if got := h.Teams[0].Supervisor.SystemPrompt; got != "You are the ops lead." {
				t.Errorf("team supervisor system_prompt = %q", got)
			}
		})

		// Edge case and FR-016/SC-003: without agent_ids, UUIDs are generated
		// at every level, and get returns them.
		t.Run("missing agent ids are generated", func(t *testing.T) {
			body := specBody()
			delete(body["global_supervisor_agent"].(map[string]any), "agent_id")
			delete(team(body, 0)["team_supervisor_agent"].(map[string]any), "agent_id")
			delete(team(body, 1), "team_supervisor_agent")
			delete(worker(body, 0, 0), "agent_id")
			worker(body, 0, 1)["agent_id"] = nil
			delete(worker(body, 1, 0), "agent_id")
			h := get(a, create(a, body))
			ids := h.AgentIDs()
			if len(ids) != 6 {
				t.Fatalf("want 6 agent ids, got %v", ids)
			}
			seen := map[string]bool{}
			for _, id := range ids {
				if !uuidPattern.MatchString(id) {
					t.Errorf("generated agent_id %q is not a UUID", id)
				}
				if seen[id] {
					t.Errorf("generated agent_id %q twice", id)
				}
				seen[id] = true
			}
			if h.Teams[1].Supervisor.SystemPrompt == "" {
				t.Error("a team without team_supervisor_agent got no default prompt")
			}
		})

		// FR-016: the older flat form, with global_prompt and no agent_ids.
		t.Run("legacy flat form", func(t *testing.T) {
			body := map[string]any{
				"name":          "legacy",
				"global_prompt": "You coordinate.",
				"teams": []any{map[string]any{
					"name":              "writers",
					"supervisor_prompt": "You lead the writers.",
					"workers":           []any{map[string]any{"name": "writer", "role": "writer", "system_prompt": "You write."}},
				}},
			}
			h := get(a, create(a, body))
			if h.GlobalSupervisor.SystemPrompt != "You coordinate." || h.Teams[0].Supervisor.SystemPrompt != "You lead the writers." {
				t.Errorf("legacy prompts not kept: %q / %q", h.GlobalSupervisor.SystemPrompt, h.Teams[0].Supervisor.SystemPrompt)
			}
			for _, id := range h.AgentIDs() {
				if !uuidPattern.MatchString(id) {
					t.Errorf("agent_id %q not generated", id)
				}
			}
		})

		// Edge case: the same agent_id may be used in two hierarchies.
		t.Run("same agent id in two hierarchies", func(t *testing.T) {
			first, second := create(a, specBody()), create(a, specBody())
			if first == second {
				t.Fatal("two creates returned the same hierarchy_id")
			}
			if get(a, first).GlobalSupervisor.AgentID != get(a, second).GlobalSupervisor.AgentID {
				t.Error("agent ids differ")
			}
		})

		// Edge case and FR-008a/b: a duplicate agent_id anywhere in the
		// hierarchy is a 400 naming it, and nothing is stored.
		t.Run("duplicate agent id", func(t *testing.T) {
			cases := map[string]func(map[string]any){
				"worker repeats global supervisor": func(b map[string]any) { worker(b, 1, 0)["agent_id"] = "gs-research-001" },
				"two workers in one team":          func(b map[string]any) { worker(b, 0, 1)["agent_id"] = "w-theory-expert-001" },
				"workers in different teams":       func(b map[string]any) { worker(b, 1, 0)["agent_id"] = "w-theory-critic-001" },
				"two team supervisors": func(b map[string]any) {
					team(b, 1)["team_supervisor_agent"].(map[string]any)["agent_id"] = "ts-theory-001"
				},
				"team supervisor and worker": func(b map[string]any) { worker(b, 0, 0)["agent_id"] = "ts-lab-001" },
			}
			for name, mutate := range cases {
				t.Run(name, func(t *testing.T) {
					before := count(a)
					body := specBody()
					mutate(body)
					env := a.expectError(pathCreate, body, http.StatusBadRequest, 40001)
					if !strings.Contains(env.Message, "duplicate agent_id") || !regexp.MustCompile(`"(gs-research-001|w-theory-expert-001|w-theory-critic-001|ts-theory-001|ts-lab-001)"`).MatchString(env.Message) {
						t.Errorf("message does not name the conflicting agent_id: %q", env.Message)
					}
					if after := count(a); after != before {
						t.Errorf("a rejected create stored something: %d -> %d hierarchies", before, after)
					}
				})
			}
		})

		t.Run("agent id length and emptiness", func(t *testing.T) {
			body := specBody()
			worker(body, 0, 0)["agent_id"] = strings.Repeat("a", 100)
			h := get(a, create(a, body))
			if got := h.Teams[0].Workers[0].AgentID; len(got) != 100 {
				t.Errorf("100-character agent_id not kept: %d characters", len(got))
			}
			body = specBody()
			worker(body, 0, 0)["agent_id"] = strings.Repeat("a", 101)
			env := a.expectError(pathCreate, body, http.StatusBadRequest, 40001)
			if env.Field != "teams[0].workers[0].agent_id" {
				t.Errorf("field = %q", env.Field)
			}
			body = specBody()
			body["global_supervisor_agent"].(map[string]any)["agent_id"] = ""
			env = a.expectError(pathCreate, body, http.StatusBadRequest, 40001)
			if env.Field != "global_supervisor_agent.agent_id" {
				t.Errorf("field = %q", env.Field)
			}
		})

		// Edge case: update may change agent_ids, still unique within the
		// hierarchy; a rejected update changes nothing.
		t.Run("update changes agent ids", func(t *testing.T) {
			id := create(a, specBody())
			before := get(a, id)
			body := specBody()
			body["hierarchy_id"] = id
			body["name"] = "renamed"
			body["global_supervisor_agent"].(map[string]any)["agent_id"] = "gs-new"
			worker(body, 0, 0)["agent_id"] = "w-new"
			var updated models.Hierarchy
			a.mustPost(pathUpdate, body, &updated)
			after := get(a, id)
			if after.Name != "renamed" || after.GlobalSupervisor.AgentID != "gs-new" || after.Teams[0].Workers[0].AgentID != "w-new" {
				t.Errorf("update not applied: %q %v", after.Name, after.AgentIDs())
			}
			if !after.CreatedAt.Equal(before.CreatedAt) || !after.UpdatedAt.After(before.UpdatedAt) {
				t.Errorf("timestamps: created %v -> %v, updated %v -> %v", before.CreatedAt, after.CreatedAt, before.UpdatedAt, after.UpdatedAt)
			}
			if strings.Join(updated.AgentIDs(), ",") != strings.Join(after.AgentIDs(), ",") {
				t.Errorf("update response %v differs from get %v", updated.AgentIDs(), after.AgentIDs())
			}

			bad := specBody()
			bad["hierarchy_id"] = id
			bad["name"] = "should not stick"
			worker(bad, 1, 0)["agent_id"] = "ts-theory-001"
			env := a.expectError(pathUpdate, bad, http.StatusBadRequest, 40001)
			if !strings.Contains(env.Message, `"ts-theory-001"`) {
				t.Errorf("message does not name the agent_id: %q", env.Message)
			}
			if again := get(a, id); again.Name != "renamed" || strings.Join(again.AgentIDs(), ",") != strings.Join(after.AgentIDs(), ",") {
				t.Errorf("a rejected update changed the hierarchy: %q %v", again.Name, again.AgentIDs())
			}
		})

		t.Run("delete", func(t *testing.T) {
			id := create(a, specBody())
			var out struct {
				Deleted bool `json:"deleted"`
			}
			a.mustPost(pathDelete, map[string]any{"hierarchy_id": id}, &out)
			if !out.Deleted {
				t.Error("delete did not report deleted")
			}
			a.expectError(pathGet, map[string]any{"hierarchy_id": id}, http.StatusNotFound, 40401)
			a.expectError(pathDelete, map[string]any{"hierarchy_id": id}, http.StatusNotFound, 40401)
		})

		t.Run("list pages newest first", func(t *testing.T) {
			fresh := newTestAPI(t, freshStore(t, st))
			var ids []string
			for i := 0; i < 3; i++ {
				ids = append(ids, create(fresh, specBody()))
			}
			var page struct {
				Items []struct {
					ID      string `json:"hierarchy_id"`
					AgentID string `json:"global_supervisor_agent_id"`
				} `json:"items"`
				Total    int `json:"total"`
				Page     int `json:"page"`
				PageSize int `json:"page_size"`
			}
			fresh.mustPost(pathList, map[string]any{"page": 1, "page_size": 2}, &page)
			if page.Total != 3 || len(page.Items) != 2 || page.Items[0].ID != ids[2] || page.Items[1].ID != ids[1] || page.Items[0].AgentID != "gs-research-001" {
				t.Errorf("page 1 = %+v", page)
			}
			fresh.mustPost(pathList, map[string]any{"page": 2, "page_size": 2}, &page)
			if len(page.Items) != 1 || page.Items[0].ID != ids[0] {
				t.Errorf("page 2 = %+v", page)
			}
			fresh.expectError(pathList, map[string]any{"page_size": 1000}, http.StatusBadRequest, 40001)
		})

		t.Run("invalid input", func(t *testing.T) {
			cases := []struct {
				name   string
				mutate func(map[string]any)
				field  string
			}{
				{"empty hierarchy name", func(b map[string]any) { b["name"] = "  " }, "name"},
				{"no teams", func(b map[string]any) { b["teams"] = []any{} }, "teams"},
				{"teams missing", func(b map[string]any) { delete(b, "teams") }, "teams"},
				{"empty team name", func(b map[string]any) { team(b, 1)["name"] = "" }, "teams[1].name"},
				{"team without workers", func(b map[string]any) { team(b, 1)["workers"] = []any{} }, "teams[1].workers"},
				{"duplicate team names", func(b map[string]any) { team(b, 1)["name"] = "理论研究组" }, "teams[1].name"},
				{"empty worker name", func(b map[string]any) { worker(b, 0, 1)["name"] = "" }, "teams[0].workers[1].name"},
				{"duplicate worker names", func(b map[string]any) { worker(b, 0, 1)["name"] = "理论专家" }, "teams[0].workers[1].name"},
				{"temperature above 2", func(b map[string]any) { worker(b, 0, 0)["temperature"] = 2.5 }, "teams[0].workers[0].temperature"},
				{"negative temperature", func(b map[string]any) { b["global_supervisor_agent"].(map[string]any)["temperature"] = -0.1 }, "global_supervisor_agent.temperature"},
				{"max_tokens zero", func(b map[string]any) { worker(b, 1, 0)["max_tokens"] = 0 }, "teams[1].workers[0].max_tokens"},
				{"negative max_tokens", func(b map[string]any) {
					team(b, 0)["team_supervisor_agent"].(map[string]any)["max_tokens"] = -5
				}, "teams[0].team_supervisor_agent.max_tokens"},
				{"unknown execution mode", func(b map[string]any) { b["execution_mode"] = "random" }, "execution_mode"},
				{"wrong type for temperature", func(b map[string]any) { worker(b, 0, 0)["temperature"] = "hot" }, "teams.workers.temperature"},
				{"wrong type for teams", func(b map[string]any) { b["teams"] = "many" }, "teams"},
				{"wrong type for agent_id", func(b map[string]any) { worker(b, 0, 0)["agent_id"] = 42 }, "teams.workers.agent_id"},
				{"wrong type for name", func(b map[string]any) { b["name"] = true }, "name"},
			}
			for _, tc := range cases {
				t.Run(tc.name, func(t *testing.T) {
					before := count(a)
					body := specBody()
					tc.mutate(body)
					env := a.expectError(pathCreate, body, http.StatusBadRequest, 40001)
					if env.Field != tc.field || !strings.Contains(env.Message, tc.field) {
						t.Errorf("want the message to name field %q, got field %q message %q", tc.field, env.Field, env.Message)
					}
					if env.ErrorCode != "INVALID_PARAMETERS" {
						t.Errorf("error_code = %q", env.ErrorCode)
					}
					if after := count(a); after != before {
						t.Errorf("a rejected create stored something: %d -> %d", before, after)
					}
				})
			}
			for name, raw := range map[string]string{
				"malformed JSON":  `{"name": "x", "teams": [`,
				"not an object":   `[1, 2]`,
				"empty body":      ``,
				"trailing object": `{"name":"x"} {"name":"y"}`,
				"syntax error":    `{"name": x}`,
			} {
				t.Run(name, func(t *testing.T) {
					a.expectError(pathCreate, []byte(raw), http.StatusBadRequest, 40001)
				})
			}
			a.expectError(pathGet, map[string]any{}, http.StatusBadRequest, 40001)
			a.expectError(pathUpdate, specBody(), http.StatusBadRequest, 40001) // no hierarchy_id
		})

		t.Run("unknown hierarchy", func(t *testing.T) {
			env := a.expectError(pathGet, map[string]any{"hierarchy_id": "nope"}, http.StatusNotFound, 40401)
			if env.ErrorCode != "TEAM_NOT_FOUND" || !strings.Contains(env.Message, `"nope"`) {
				t.Errorf("not-found error = %+v", env)
			}
			body := specBody()
			body["hierarchy_id"] = "nope"
			a.expectError(pathUpdate, body, http.StatusNotFound, 40401)
			a.expectError(pathDelete, map[string]any{"id": "nope"}, http.StatusNotFound, 40401)
		})

		t.Run("oversize body", func(t *testing.T) {
			before := count(a)
			body := specBody()
			body["description"] = strings.Repeat("x", 2<<20)
			a.expectError(pathCreate, body, http.StatusRequestEntityTooLarge, 41301)
			if count(a) != before {
				t.Error("an oversize create stored something")
			}
		})

		t.Run("unknown route", func(t *testing.T) {
			a.expectError("/api/executor/v1/nothing", map[string]any{}, http.StatusNotFound, 40404)
		})
	})
}

// freshStore gives list tests an empty database of the same dialect.
func freshStore(t *testing.T, like *store.Store) *store.Store {
	if like.Dialect() == store.DialectPostgres {
		return storetest.Postgres(t)
	}
	return storetest.SQLite(t)
}

// TestInternalErrorsDoNotLeak closes the database under the API: the
// response must be 500/50001 with a generic message.
func TestInternalErrorsDoNotLeak(t *testing.T) {
	storetest.ForEachDialect(t, func(t *testing.T, st *store.Store) {
		a := newTestAPI(t, st)
		if err := st.Close(); err != nil {
			t.Fatal(err)
		}
		env := a.expectError(pathCreate, specBody(), http.StatusInternalServerError, 50001)
		if env.Message != "internal server error" || env.ErrorCode != "SYSTEM_ERROR" {
			t.Errorf("500 response leaks or mislabels: %+v", env)
		}
	})
}

// TestTeamIDs: callers may set team ids; they are unique within a
// hierarchy, and two hierarchies may use the same ones.
func TestTeamIDs(t *testing.T) {
	storetest.ForEachDialect(t, func(t *testing.T, st *store.Store) {
		a := newTestAPI(t, st)
		body := specBody()
		team(body, 0)["id"] = "team_theory"
		team(body, 1)["id"] = "team_lab"
		first, second := create(a, body), create(a, body)
		if get(a, first).Teams[0].ID != "team_theory" || get(a, second).Teams[1].ID != "team_lab" {
			t.Error("caller-set team ids not kept")
		}
		team(body, 1)["id"] = "team_theory"
		env := a.expectError(pathCreate, body, http.StatusBadRequest, 40001)
		if env.Field != "teams[1].id" {
			t.Errorf("duplicate team id: %+v", env)
		}
	})
}

// TestCreateIsAtomic makes the team insert fail after the hierarchy row was
// written (two teams with one id): the transaction must leave nothing.
func TestCreateIsAtomic(t *testing.T) {
	storetest.ForEachDialect(t, func(t *testing.T, st *store.Store) {
		h := &models.Hierarchy{
			ID:   models.NewID(),
			Name: "atomic",
			Teams: []models.Team{
				{ID: "same", Name: "a", Workers: []models.Agent{{Name: "w1"}}},
				{ID: "same", Name: "b", Workers: []models.Agent{{Name: "w2"}}},
			},
		}
		// Validation would refuse the duplicate id; the store is called
		// directly to see the database refuse it mid-transaction.
		h.Normalize()
		ctx := context.Background()
		if err := st.CreateHierarchy(ctx, h); err == nil {
			t.Fatal("create with a duplicate team id succeeded")
		}
		if _, err := st.GetHierarchy(ctx, h.ID); models.ErrorCode(err) != models.CodeHierarchyNotFound {
			t.Fatalf("after a failed create, get returned %v; want not found", err)
		}
		_, total, err := st.ListHierarchies(ctx, store.ListFilter{Page: 1, PageSize: 10})
		if err != nil || total != 0 {
			t.Fatalf("after a failed create: total %d, err %v", total, err)
		}
	})
}

// TestHierarchyToolsAndSubAgents covers workers' tools, sub_agents and
// max_iterations (spec 003): known ones round-trip through get, unknown ones
// are a 400 naming the field and the key, and a rejected write stores
// nothing.
func TestHierarchyToolsAndSubAgents(t *testing.T) {
	storetest.ForEachDialect(t, func(t *testing.T, st *store.Store) {
		a := newTestAPI(t, st, withFakeTools)
		createSubAgent(a, subAgentBody("researcher"))
		createSubAgent(a, subAgentBody("fact checker"))

		withRefs := func() map[string]any {
			body := specBody()
			worker(body, 0, 0)["tools"] = []any{"calculator", "http_get"}
			worker(body, 0, 0)["sub_agents"] = []any{"researcher", "fact checker"}
			worker(body, 0, 0)["max_iterations"] = 20
			worker(body, 1, 0)["sub_agents"] = []any{"researcher"}
			// Supervisors accept the fields but do not keep them.
			body["global_supervisor_agent"].(map[string]any)["sub_agents"] = []any{"researcher"}
			team(body, 0)["team_supervisor_agent"].(map[string]any)["max_iterations"] = 7
			return body
		}

		t.Run("round trip through get and update", func(t *testing.T) {
			id := create(a, withRefs())
			h := get(a, id)
			w := h.Teams[0].Workers[0]
			if strings.Join(w.Tools, ",") != "calculator,http_get" || strings.Join(w.SubAgents, ",") != "researcher,fact checker" || w.MaxIterations != 20 {
				t.Errorf("worker 0 = tools %v sub_agents %v max_iterations %d", w.Tools, w.SubAgents, w.MaxIterations)
			}
			if w := h.Teams[0].Workers[1]; len(w.Tools) != 0 || len(w.SubAgents) != 0 || w.MaxIterations != 0 {
				t.Errorf("worker without refs = %+v", w)
			}
			if w := h.Teams[1].Workers[0]; strings.Join(w.SubAgents, ",") != "researcher" {
				t.Errorf("team 1 worker sub_agents = %v", w.SubAgents)
			}
			// A supervisor's max_iterations bounds its routing loop (spec 001's
			// supervisor_config.max_iterations); sub-agents are workers' only.
			if len(h.GlobalSupervisor.SubAgents) != 0 || h.Teams[0].Supervisor.MaxIterations != 7 {
				t.Errorf("supervisors: %+v / %+v", h.GlobalSupervisor, h.Teams[0].Supervisor)
			}

			body := withRefs()
			body["hierarchy_id"] = id
			worker(body, 0, 0)["tools"] = []any{"current_time"}
			worker(body, 0, 0)["sub_agents"] = []any{}
			worker(body, 0, 0)["max_iterations"] = models.MaxAgentIterations
			var updated models.Hierarchy
			a.mustPost(pathUpdate, body, &updated)
			w = get(a, id).Teams[0].Workers[0]
			if strings.Join(w.Tools, ",") != "current_time" || len(w.SubAgents) != 0 || w.MaxIterations != models.MaxAgentIterations {
				t.Errorf("after update worker 0 = tools %v sub_agents %v max_iterations %d", w.Tools, w.SubAgents, w.MaxIterations)
			}
			if len(updated.GlobalSupervisor.SubAgents) != 0 || updated.Teams[0].Supervisor.MaxIterations != 7 {
				t.Error("the update response differs from what get returns for supervisors")
			}
		})

		t.Run("unknown or invalid refs", func(t *testing.T) {
			cases := []struct {
				name   string
				mutate func(map[string]any)
				field  string
				want   string // in the message
			}{
				{"unknown tool", func(b map[string]any) { worker(b, 0, 1)["tools"] = []any{"calculator", "rm_rf"} }, "teams[0].workers[1].tools", `"rm_rf"`},
				{"unknown sub-agent", func(b map[string]any) { worker(b, 1, 0)["sub_agents"] = []any{"researcher", "nobody"} }, "teams[1].workers[0].sub_agents", `"nobody"`},
				{"duplicate sub-agent", func(b map[string]any) { worker(b, 1, 0)["sub_agents"] = []any{"researcher", "researcher"} }, "teams[1].workers[0].sub_agents", `"researcher"`},
				{"duplicate tool", func(b map[string]any) { worker(b, 0, 1)["tools"] = []any{"http_get", "http_get"} }, "teams[0].workers[1].tools", `"http_get"`},
				{"max_iterations too high", func(b map[string]any) { worker(b, 0, 1)["max_iterations"] = models.MaxAgentIterations + 1 }, "teams[0].workers[1].max_iterations", "51"},
				{"negative max_iterations", func(b map[string]any) { worker(b, 0, 1)["max_iterations"] = -1 }, "teams[0].workers[1].max_iterations", "-1"},
				// 0 is outside the documented range: it used to pass as
				// "the default", which only an absent field means.
				{"zero max_iterations", func(b map[string]any) { worker(b, 0, 1)["max_iterations"] = 0 }, "teams[0].workers[1].max_iterations", "got 0"},
				{"zero supervisor max_iterations", func(b map[string]any) {
					team(b, 1)["team_supervisor_agent"].(map[string]any)["max_iterations"] = 0
				}, "teams[1].team_supervisor_agent.max_iterations", "got 0"},
				{"zero hierarchy max_iterations", func(b map[string]any) { b["max_iterations"] = 0 }, "max_iterations", "between 1 and 100"},
				{"hierarchy max_iterations too high", func(b map[string]any) { b["max_iterations"] = 101 }, "max_iterations", "got 101"},
				{"wrong type for sub_agents", func(b map[string]any) { worker(b, 0, 1)["sub_agents"] = "researcher" }, "teams.workers.sub_agents", "array"},
			}
			for _, tc := range cases {
				t.Run(tc.name, func(t *testing.T) {
					before := count(a)
					body := withRefs()
					tc.mutate(body)
					env := a.expectError(pathCreate, body, http.StatusBadRequest, 40001)
					if env.Field != tc.field || !strings.Contains(env.Message, tc.field) || !strings.Contains(env.Message, tc.want) {
						t.Errorf("want field %q and %s in the message, got field %q message %q", tc.field, tc.want, env.Field, env.Message)
					}
					if after := count(a); after != before {
						t.Errorf("a rejected create stored something: %d -> %d", before, after)
					}
				})
			}
		})

		t.Run("rejected update changes nothing", func(t *testing.T) {
			id := create(a, withRefs())
			body := withRefs()
			body["hierarchy_id"] = id
			body["name"] = "should not stick"
			worker(body, 0, 0)["tools"] = []any{"teleport"}
			env := a.expectError(pathUpdate, body, http.StatusBadRequest, 40001)
			if env.Field != "teams[0].workers[0].tools" || !strings.Contains(env.Message, `"teleport"`) {
				t.Errorf("error = %+v", env)
			}
			body = withRefs()
			body["hierarchy_id"] = id
			body["name"] = "should not stick"
			worker(body, 1, 0)["sub_agents"] = []any{"ghost"}
			a.expectError(pathUpdate, body, http.StatusBadRequest, 40001)
			h := get(a, id)
			if h.Name == "should not stick" || strings.Join(h.Teams[0].Workers[0].Tools, ",") != "calculator,http_get" {
				t.Errorf("a rejected update changed the hierarchy: %q %v", h.Name, h.Teams[0].Workers[0].Tools)
			}
		})

		// Without a tool catalog every tool key is unknown; empty lists pass.
		t.Run("no tool catalog", func(t *testing.T) {
			bare := newTestAPI(t, st)
			body := specBody()
			worker(body, 0, 0)["tools"] = []any{"calculator"}
			env := bare.expectError(pathCreate, body, http.StatusBadRequest, 40001)
			if env.Field != "teams[0].workers[0].tools" || !strings.Contains(env.Message, `"calculator"`) {
				t.Errorf("error = %+v", env)
			}
			create(bare, specBody())
		})
	})
}
