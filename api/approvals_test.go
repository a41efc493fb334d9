package api_test

import (
	"net/http"
	"slices"
	"testing"

	"github.com/op-stack/executor/api"
	"github.com/op-stack/executor/store"
	"github.com/op-stack/executor/store/storetest"
)

// TestApprovalSettingsRoundTrip: requires_approval, approval_tools,
// approval_timeout and approval_default are stored and read back on both
// surfaces, and refused when they make no sense.
func TestApprovalSettingsRoundTrip(t *testing.T) {
	storetest.ForEachDialect(t, func(t *testing.T, st *store.Store) {
		a := newTestAPI(t, st, withFakeTools)
		body := contractBody()
		team(body, 0)["team_supervisor_agent"].(map[string]any)["requires_approval"] = true
		w := worker(body, 0, 0)
		w["tools"] = []any{"calculator"}
		w["requires_approval"], w["approval_tools"], w["approval_timeout"], w["approval_default"] = true, []any{"calculator"}, 3600, "approve"
		h := get(a, create(a, body))
		sup, wk := h.Teams[0].Supervisor, h.Teams[0].Workers[0]
		if !sup.RequiresApproval || !wk.RequiresApproval || !slices.Equal(wk.ApprovalTools, []string{"calculator"}) || wk.ApprovalTimeout != 3600 || wk.ApprovalDefault != "approve" {
			t.Errorf("stored: supervisor %+v, worker %+v", sup, wk)
		}

		for _, bad := range []map[string]any{
			{"approval_tools": []any{"http_get"}}, // not one of its tools
			{"approval_default": "maybe"},
			{"approval_timeout": -1},
		} {
			body := contractBody()
			w := worker(body, 0, 0)
			w["tools"] = []any{"calculator"}
			for k, v := range bad {
				w[k] = v
			}
			a.expectError(pathCreate, body, http.StatusBadRequest, 40001)
		}
		gated := contractBody()
		gated["global_supervisor_agent"].(map[string]any)["requires_approval"] = true
		a.expectError(pathCreate, gated, http.StatusBadRequest, 40001)

		// Spec 001.
		req := specRequest(t)
		sub := req["sub_teams"].([]any)[0].(map[string]any)
		sub["supervisor_config"].(map[string]any)["requires_approval"] = true
		ac := sub["agent_configs"].([]any)[0].(map[string]any)
		ac["requires_approval"], ac["approval_timeout"] = true, 60
		var created struct {
			TeamID string `json:"team_id"`
		}
		a.mustDo(http.MethodPost, pathTeams, req, api.CodeTeamCreated, &created)
		var got struct {
			SubTeams []struct {
				SupervisorConfig map[string]any   `json:"supervisor_config"`
				AgentConfigs     []map[string]any `json:"agent_configs"`
			} `json:"sub_teams"`
		}
		a.mustDo(http.MethodGet, pathTeams+"/"+created.TeamID, nil, api.CodeTeamInfoRetrieved, &got)
		if got.SubTeams[0].SupervisorConfig["requires_approval"] != true || got.SubTeams[0].AgentConfigs[0]["requires_approval"] != true ||
			got.SubTeams[0].AgentConfigs[0]["approval_timeout"] != 60.0 {
			t.Errorf("spec 001 read back: %+v", got.SubTeams[0])
		}
	})
}
