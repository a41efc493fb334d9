package api_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/op-stack/executor/store"
	"github.com/op-stack/executor/store/storetest"
)

// TestAgentIDsAndSubAgentIDsDiffer: a hierarchy may not use a sub-agent's
// id as an agent_id, nor a sub-agent an agent_id of a hierarchy, in the
// same tenant (spec 003: the stream and the cycle check name agents by id).
func TestAgentIDsAndSubAgentIDsDiffer(t *testing.T) {
	storetest.ForEachDialect(t, func(t *testing.T, st *store.Store) {
		a := newTestAPI(t, st, withFakeTools)
		sa := subAgentBody("checker")
		sa["id"] = "sa-checker"
		createSubAgent(a, sa)

		body := specBody()
		worker(body, 0, 1)["agent_id"] = "sa-checker"
		env := a.expectError(pathCreate, body, http.StatusBadRequest, 40001)
		if env.Field != "teams[0].workers[1].agent_id" || !strings.Contains(env.Message, `"sa-checker"`) {
			t.Errorf("create: field %q message %q", env.Field, env.Message)
		}
		body = specBody()
		team(body, 1)["team_supervisor_agent"].(map[string]any)["agent_id"] = "sa-checker"
		env = a.expectError(pathCreate, body, http.StatusBadRequest, 40001)
		if env.Field != "teams[1].team_supervisor_agent.agent_id" {
			t.Errorf("create: field %q message %q", env.Field, env.Message)
		}

		id := create(a, specBody())
		update := specBody()
		update["hierarchy_id"] = id
		update["global_supervisor_agent"].(map[string]any)["agent_id"] = "sa-checker"
		env = a.expectError("/api/executor/v1/hierarchies/update", update, http.StatusBadRequest, 40001)
		if env.Field != "global_supervisor_agent.agent_id" {
			t.Errorf("update: field %q message %q", env.Field, env.Message)
		}

		clash := subAgentBody("lab")
		clash["id"] = "w-lab-001" // the hierarchy's worker
		env = a.expectError(pathSACreate, clash, http.StatusBadRequest, 40001)
		if env.Field != "id" || !strings.Contains(env.Message, id) {
			t.Errorf("sub-agent create: field %q message %q", env.Field, env.Message)
		}
		clash["id"] = "sa-lab"
		createSubAgent(a, clash)
	})
}
