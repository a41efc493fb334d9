package api_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/op-stack/executor/api"
	"github.com/op-stack/executor/models"
	"github.com/op-stack/executor/store"
	"github.com/op-stack/executor/store/storetest"
)

const (
	pathSACreate = "/api/executor/v1/subagents/create"
	pathSAGet    = "/api/executor/v1/subagents/get"
	pathSAUpdate = "/api/executor/v1/subagents/update"
	pathSADelete = "/api/executor/v1/subagents/delete"
	pathSAList   = "/api/executor/v1/subagents/list"
)

// fakeToolCatalog stands in for the tools registry: it knows a fixed set of
// keys and answers like the registry does.
type fakeToolCatalog map[string]bool

func (f fakeToolCatalog) Validate(field string, keys []string) error {
	for _, k := range keys {
		if !f[k] {
			return models.FieldError(field, "unknown tool %q", k)
		}
	}
	return nil
}

// withFakeTools serves the API with a catalog of three tools.
func withFakeTools(o *api.Options) {
	o.Tools = fakeToolCatalog{"calculator": true, "http_get": true, "current_time": true}
}

func subAgentBody(name string) map[string]any {
	return map[string]any{
		"name":          name,
		"description":   "Finds sources.",
		"system_prompt": "You are a careful researcher.",
	}
}

func createSubAgent(a *testAPI, body map[string]any) models.SubAgent {
	a.t.Helper()
	var sa models.SubAgent
	a.mustPost(pathSACreate, body, &sa)
	return sa
}

func getSubAgent(a *testAPI, key map[string]any) models.SubAgent {
	a.t.Helper()
	var sa models.SubAgent
	a.mustPost(pathSAGet, key, &sa)
	return sa
}

func countSubAgents(a *testAPI) int64 {
	a.t.Helper()
	var out struct {
		Total int64 `json:"total"`
	}
	a.mustPost(pathSAList, map[string]any{}, &out)
	return out.Total
}

func TestSubAgentAPI(t *testing.T) {
	storetest.ForEachDialect(t, func(t *testing.T, st *store.Store) {
		a := newTestAPI(t, st, withFakeTools)

		t.Run("create get update delete", func(t *testing.T) {
			created := createSubAgent(a, subAgentBody("researcher"))
			if !uuidPattern.MatchString(created.ID) {
				t.Errorf("generated id %q is not a UUID", created.ID)
			}
			// Defaults of everything the body left out.
			if !created.Enabled || created.MaxDepth != models.DefaultSubAgentMaxDepth || created.MaxIterations != models.DefaultAgentIterations {
				t.Errorf("defaults: enabled %v max_depth %d max_iterations %d", created.Enabled, created.MaxDepth, created.MaxIterations)
			}
			if created.Tools == nil || len(created.Tools) != 0 || created.SubAgents == nil || len(created.SubAgents) != 0 {
				t.Errorf("tools %#v sub_agents %#v; want empty arrays", created.Tools, created.SubAgents)
			}
			if created.CreatedAt.IsZero() || !created.UpdatedAt.Equal(created.CreatedAt) {
				t.Errorf("timestamps %v %v", created.CreatedAt, created.UpdatedAt)
			}
			byID := getSubAgent(a, map[string]any{"id": created.ID})
			byName := getSubAgent(a, map[string]any{"name": "researcher"})
			for _, got := range []models.SubAgent{byID, byName} {
				if !sameSubAgent(got, created) {
					t.Errorf("get = %+v\nwant %+v", got, created)
				}
			}

			update := subAgentBody("senior researcher")
			update["id"] = created.ID
			update["model"] = "gpt-4o"
			update["temperature"] = 0.2
			update["max_tokens"] = 512
			update["tools"] = []any{"http_get", "calculator"}
			update["max_depth"] = 5
			update["max_iterations"] = 20
			update["enabled"] = false
			var updated models.SubAgent
			a.mustPost(pathSAUpdate, update, &updated)
			got := getSubAgent(a, map[string]any{"id": created.ID})
			if !sameSubAgent(got, updated) {
				t.Errorf("get after update = %+v\nupdate answered %+v", got, updated)
			}
			if got.Name != "senior researcher" || got.Model != "gpt-4o" || got.Temperature == nil || *got.Temperature != 0.2 ||
				got.MaxTokens == nil || *got.MaxTokens != 512 || strings.Join(got.Tools, ",") != "http_get,calculator" ||
				got.MaxDepth != 5 || got.MaxIterations != 20 || got.Enabled {
				t.Errorf("update not applied: %+v", got)
			}
			if !got.CreatedAt.Equal(created.CreatedAt) || !got.UpdatedAt.After(created.UpdatedAt) {
				t.Errorf("timestamps: created %v -> %v, updated %v -> %v", created.CreatedAt, got.CreatedAt, created.UpdatedAt, got.UpdatedAt)
			}
			a.expectError(pathSAGet, map[string]any{"name": "researcher"}, http.StatusNotFound, 40403)

			// Update is a full replace: what the body leaves out returns to
			// its default.
			a.mustPost(pathSAUpdate, map[string]any{"id": created.ID, "name": "senior researcher", "system_prompt": "p"}, &updated)
			got = getSubAgent(a, map[string]any{"id": created.ID})
			if got.Model != "" || got.Temperature != nil || got.MaxTokens != nil || len(got.Tools) != 0 || !got.Enabled || got.MaxDepth != models.DefaultSubAgentMaxDepth || got.Description != "" {
				t.Errorf("full replace kept old values: %+v", got)
			}

			var deleted struct {
				ID      string `json:"id"`
				Deleted bool   `json:"deleted"`
			}
			a.mustPost(pathSADelete, map[string]any{"id": created.ID}, &deleted)
			if !deleted.Deleted || deleted.ID != created.ID {
				t.Errorf("delete answered %+v", deleted)
			}
			env := a.expectError(pathSAGet, map[string]any{"id": created.ID}, http.StatusNotFound, 40403)
			if env.ErrorCode != "SUBAGENT_NOT_FOUND" || !strings.Contains(env.Message, created.ID) {
				t.Errorf("not-found error = %+v", env)
			}
			a.expectError(pathSADelete, map[string]any{"id": created.ID}, http.StatusNotFound, 40403)
			a.expectError(pathSAUpdate, update, http.StatusNotFound, 40403)
		})

		t.Run("delete by name", func(t *testing.T) {
			sa := createSubAgent(a, subAgentBody("to delete"))
			a.mustPost(pathSADelete, map[string]any{"name": "to delete"}, nil)
			a.expectError(pathSAGet, map[string]any{"id": sa.ID}, http.StatusNotFound, 40403)
			a.expectError(pathSADelete, map[string]any{"name": "to delete"}, http.StatusNotFound, 40403)
		})

		t.Run("caller-set id is kept", func(t *testing.T) {
			body := subAgentBody("with id")
			body["id"] = "sa-writer-001"
			if sa := createSubAgent(a, body); sa.ID != "sa-writer-001" {
				t.Errorf("id = %q", sa.ID)
			}
			if sa := getSubAgent(a, map[string]any{"id": "sa-writer-001"}); sa.Name != "with id" {
				t.Errorf("get by caller id = %+v", sa)
			}
			body = subAgentBody("long id")
			body["id"] = strings.Repeat("x", 100)
			createSubAgent(a, body)
		})

		t.Run("duplicate name or id is a conflict", func(t *testing.T) {
			first := createSubAgent(a, subAgentBody("unique"))
			before := countSubAgents(a)
			env := a.expectError(pathSACreate, subAgentBody("unique"), http.StatusConflict, 40902)
			if env.Field != "name" || !strings.Contains(env.Message, `"unique"`) {
				t.Errorf("duplicate name error = %+v", env)
			}
			body := subAgentBody("another")
			body["id"] = first.ID
			env = a.expectError(pathSACreate, body, http.StatusConflict, 40902)
			if env.Field != "id" || !strings.Contains(env.Message, first.ID) {
				t.Errorf("duplicate id error = %+v", env)
			}
			if after := countSubAgents(a); after != before {
				t.Errorf("a rejected create stored something: %d -> %d", before, after)
			}
			// Renaming onto a taken name conflicts too and changes nothing.
			other := createSubAgent(a, subAgentBody("other"))
			rename := subAgentBody("unique")
			rename["id"] = other.ID
			a.expectError(pathSAUpdate, rename, http.StatusConflict, 40902)
			if got := getSubAgent(a, map[string]any{"id": other.ID}); got.Name != "other" {
				t.Errorf("a rejected update renamed to %q", got.Name)
			}
		})

		t.Run("tools must be known", func(t *testing.T) {
			body := subAgentBody("tool user")
			body["tools"] = []any{"calculator", "current_time"}
			if sa := createSubAgent(a, body); strings.Join(sa.Tools, ",") != "calculator,current_time" {
				t.Errorf("tools = %v", sa.Tools)
			}
			before := countSubAgents(a)
			body = subAgentBody("bad tool user")
			body["tools"] = []any{"calculator", "rm_rf"}
			env := a.expectError(pathSACreate, body, http.StatusBadRequest, 40001)
			if env.Field != "tools" || !strings.Contains(env.Message, `"rm_rf"`) {
				t.Errorf("unknown tool error = %+v", env)
			}
			if after := countSubAgents(a); after != before {
				t.Errorf("a rejected create stored something: %d -> %d", before, after)
			}
		})

		t.Run("sub_agents must exist", func(t *testing.T) {
			helper := createSubAgent(a, subAgentBody("helper"))
			body := subAgentBody("manager")
			body["sub_agents"] = []any{"helper"}
			manager := createSubAgent(a, body)
			if strings.Join(manager.SubAgents, ",") != "helper" {
				t.Errorf("sub_agents = %v", manager.SubAgents)
			}
			before := countSubAgents(a)
			body = subAgentBody("lost manager")
			body["sub_agents"] = []any{"helper", "nobody"}
			env := a.expectError(pathSACreate, body, http.StatusBadRequest, 40001)
			if env.Field != "sub_agents" || !strings.Contains(env.Message, `"nobody"`) {
				t.Errorf("unknown sub-agent error = %+v", env)
			}
			if after := countSubAgents(a); after != before {
				t.Errorf("a rejected create stored something: %d -> %d", before, after)
			}
			// On update, a sub-agent's own old name no longer counts as an
			// existing sub-agent: after the rename nothing would carry it.
			rename := subAgentBody("helper v2")
			rename["id"] = helper.ID
			rename["sub_agents"] = []any{"helper"}
			env = a.expectError(pathSAUpdate, rename, http.StatusBadRequest, 40001)
			if env.Field != "sub_agents" || !strings.Contains(env.Message, `"helper"`) {
				t.Errorf("old-name reference error = %+v", env)
			}
		})

		t.Run("self reference is allowed", func(t *testing.T) {
			body := subAgentBody("recursive")
			body["sub_agents"] = []any{"recursive"}
			sa := createSubAgent(a, body)
			if got := getSubAgent(a, map[string]any{"id": sa.ID}); strings.Join(got.SubAgents, ",") != "recursive" {
				t.Errorf("sub_agents = %v", got.SubAgents)
			}
			// A rename may refer to the new name at once.
			body = subAgentBody("recursive v2")
			body["id"] = sa.ID
			body["sub_agents"] = []any{"recursive v2"}
			a.mustPost(pathSAUpdate, body, nil)
		})

		t.Run("explicit values are kept", func(t *testing.T) {
			body := subAgentBody("  spaced  ")
			body["enabled"] = false
			body["max_depth"] = 10
			body["max_iterations"] = models.MaxAgentIterations
			body["temperature"] = 0
			sa := getSubAgent(a, map[string]any{"id": createSubAgent(a, body).ID})
			if sa.Name != "spaced" || sa.Enabled || sa.MaxDepth != 10 || sa.MaxIterations != models.MaxAgentIterations || sa.Temperature == nil || *sa.Temperature != 0 {
				t.Errorf("got %+v", sa)
			}
		})

		t.Run("invalid input", func(t *testing.T) {
			cases := []struct {
				name   string
				mutate func(map[string]any)
				field  string
			}{
				{"empty name", func(b map[string]any) { b["name"] = "   " }, "name"},
				{"missing name", func(b map[string]any) { delete(b, "name") }, "name"},
				{"name too long", func(b map[string]any) { b["name"] = strings.Repeat("n", 256) }, "name"},
				{"missing system_prompt", func(b map[string]any) { delete(b, "system_prompt") }, "system_prompt"},
				{"blank system_prompt", func(b map[string]any) { b["system_prompt"] = " \n" }, "system_prompt"},
				{"temperature above 2", func(b map[string]any) { b["temperature"] = 2.5 }, "temperature"},
				{"negative temperature", func(b map[string]any) { b["temperature"] = -0.1 }, "temperature"},
				{"max_tokens zero", func(b map[string]any) { b["max_tokens"] = 0 }, "max_tokens"},
				{"max_depth zero", func(b map[string]any) { b["max_depth"] = 0 }, "max_depth"},
				{"max_depth 11", func(b map[string]any) { b["max_depth"] = 11 }, "max_depth"},
				{"max_iterations zero", func(b map[string]any) { b["max_iterations"] = 0 }, "max_iterations"},
				{"max_iterations too high", func(b map[string]any) { b["max_iterations"] = models.MaxAgentIterations + 1 }, "max_iterations"},
				{"empty id", func(b map[string]any) { b["id"] = " " }, "id"},
				{"id too long", func(b map[string]any) { b["id"] = strings.Repeat("x", 101) }, "id"},
				{"duplicate tool", func(b map[string]any) { b["tools"] = []any{"calculator", "calculator"} }, "tools"},
				{"empty tool key", func(b map[string]any) { b["tools"] = []any{""} }, "tools"},
				{"duplicate sub-agent", func(b map[string]any) { b["sub_agents"] = []any{"x", "x"} }, "sub_agents"},
				{"wrong type for tools", func(b map[string]any) { b["tools"] = "calculator" }, "tools"},
				{"wrong type for enabled", func(b map[string]any) { b["enabled"] = "yes" }, "enabled"},
			}
			before := countSubAgents(a)
			for _, tc := range cases {
				t.Run(tc.name, func(t *testing.T) {
					body := subAgentBody("invalid")
					tc.mutate(body)
					env := a.expectError(pathSACreate, body, http.StatusBadRequest, 40001)
					if env.Field != tc.field || !strings.Contains(env.Message, tc.field) || env.ErrorCode != "INVALID_PARAMETERS" {
						t.Errorf("want field %q, got field %q error_code %q message %q", tc.field, env.Field, env.ErrorCode, env.Message)
					}
				})
			}
			if after := countSubAgents(a); after != before {
				t.Errorf("rejected creates stored something: %d -> %d", before, after)
			}
			a.expectError(pathSACreate, []byte(`{"name": `), http.StatusBadRequest, 40001)
			env := a.expectError(pathSAUpdate, subAgentBody("no id"), http.StatusBadRequest, 40001)
			if env.Field != "id" {
				t.Errorf("update without id: field %q", env.Field)
			}
			a.expectError(pathSAGet, map[string]any{}, http.StatusBadRequest, 40001)
			a.expectError(pathSAGet, map[string]any{"id": "a", "name": "b"}, http.StatusBadRequest, 40001)
			a.expectError(pathSADelete, map[string]any{}, http.StatusBadRequest, 40001)
			a.expectError(pathSAGet, map[string]any{"name": "nobody"}, http.StatusNotFound, 40403)
		})

		t.Run("list pages newest first", func(t *testing.T) {
			fresh := newTestAPI(t, freshStore(t, st), withFakeTools)
			var ids []string
			for _, name := range []string{"one", "two", "three"} {
				ids = append(ids, createSubAgent(fresh, subAgentBody(name)).ID)
			}
			var page struct {
				Items    []models.SubAgent `json:"items"`
				Total    int               `json:"total"`
				Page     int               `json:"page"`
				PageSize int               `json:"page_size"`
			}
			fresh.mustPost(pathSAList, map[string]any{"page": 1, "page_size": 2}, &page)
			if page.Total != 3 || len(page.Items) != 2 || page.Items[0].ID != ids[2] || page.Items[1].ID != ids[1] || page.Page != 1 || page.PageSize != 2 {
				t.Errorf("page 1 = %+v", page)
			}
			if page.Items[0].Name != "three" || page.Items[0].SystemPrompt == "" {
				t.Errorf("list items are not whole sub-agents: %+v", page.Items[0])
			}
			fresh.mustPost(pathSAList, map[string]any{"page": 2, "page_size": 2}, &page)
			if len(page.Items) != 1 || page.Items[0].ID != ids[0] {
				t.Errorf("page 2 = %+v", page)
			}
			status, env := fresh.postRaw(pathSAList, nil)
			if status != http.StatusOK || env.Code != 0 {
				t.Errorf("list with an empty body: %d %+v", status, env)
			}
			fresh.expectError(pathSAList, map[string]any{"page_size": 1000}, http.StatusBadRequest, 40001)
		})

		// A server without a tool catalog knows no tool, but sub-agents
		// without tools still work.
		t.Run("no tool catalog", func(t *testing.T) {
			bare := newTestAPI(t, st)
			body := subAgentBody("bare tool user")
			body["tools"] = []any{"calculator"}
			env := bare.expectError(pathSACreate, body, http.StatusBadRequest, 40001)
			if env.Field != "tools" || !strings.Contains(env.Message, `unknown tool "calculator"`) {
				t.Errorf("error = %+v", env)
			}
			body["tools"] = []any{}
			createSubAgent(bare, body)
		})
	})
}

// sameSubAgent compares two sub-agents field by field, times by instant.
func sameSubAgent(a, b models.SubAgent) bool {
	ptrEq := func(x, y *float64) bool { return (x == nil) == (y == nil) && (x == nil || *x == *y) }
	intPtrEq := func(x, y *int) bool { return (x == nil) == (y == nil) && (x == nil || *x == *y) }
	return a.ID == b.ID && a.Name == b.Name && a.Description == b.Description && a.SystemPrompt == b.SystemPrompt &&
		a.Model == b.Model && ptrEq(a.Temperature, b.Temperature) && intPtrEq(a.MaxTokens, b.MaxTokens) &&
		strings.Join(a.Tools, ",") == strings.Join(b.Tools, ",") && strings.Join(a.SubAgents, ",") == strings.Join(b.SubAgents, ",") &&
		a.MaxDepth == b.MaxDepth && a.MaxIterations == b.MaxIterations && a.Enabled == b.Enabled &&
		a.CreatedAt.Equal(b.CreatedAt) && a.UpdatedAt.Equal(b.UpdatedAt)
}
