package e2e

import (
	"strings"
	"testing"
	"time"

	"github.com/op-stack/executor/llm/llmfake"
	"github.com/op-stack/executor/models"
)

// TestPartialResultsOfAFailedTeam: the research team's second worker is
// refused by its provider (HTTP 400, not retried) after the first has
// finished; the run fails and both surfaces' results keep the first
// worker's output, the team marked failed and partial.
func TestPartialResultsOfAFailedTeam(t *testing.T) {
	e := newEnv(t, referenceRules(map[string][]llmfake.Response{
		"W-ANALYST": {{Status: 400, ErrorMessage: "invalid request"}},
	}))
	id := e.startRun(e.createHierarchy(referenceHierarchy()), "partial")
	v := e.waitRun(id, time.Minute)
	if v.Status != models.RunFailed {
		t.Fatalf("run ended %s", v.Status)
	}
	if r := v.Result; r == nil || len(r.Teams) == 0 || !r.Teams[0].Partial || len(r.Teams[0].Workers) != 1 || r.Teams[0].Workers[0].Output != "output of W-SEARCHER" {
		t.Fatalf("runs/get result = %+v", v.Result)
	}

	type teamResult struct {
		TeamName string `json:"team_name"`
		Status   string `json:"status"`
		Partial  bool   `json:"partial"`
		Error    string `json:"error"`
		Agents   map[string]struct {
			Status string `json:"status"`
			Output string `json:"output"`
		} `json:"agents"`
	}
	type resultsBody struct {
		Partial          bool `json:"partial"`
		ExecutionSummary struct {
			Status string `json:"status"`
		} `json:"execution_summary"`
		TeamResults map[string]teamResult `json:"team_results"`
	}
	check := func(surface string, r resultsBody) {
		t.Helper()
		if !r.Partial || r.ExecutionSummary.Status != models.RunFailed || len(r.TeamResults) != 2 {
			t.Fatalf("%s results = %+v", surface, r)
		}
		for _, tr := range r.TeamResults {
			if tr.TeamName != "research" {
				continue // writing does not depend on research: it ran
			}
			s, ok := tr.Agents["w-searcher"]
			if tr.Status != models.TeamFailed || !tr.Partial || !strings.Contains(tr.Error, "400") || !ok || s.Output != "output of W-SEARCHER" || s.Status != "completed" {
				t.Errorf("%s research team = %+v", surface, tr)
			}
			if _, ok := tr.Agents["w-analyst"]; ok {
				t.Errorf("%s: the failed analyst has an output: %+v", surface, tr.Agents)
			}
		}
	}
	var r resultsBody
	e.mustPost("/runs/results", map[string]any{"id": id}, &r)
	check("runs/results", r)
	var v1 resultsBody
	e.mustV1("GET", "/executions/"+id+"/results", nil, "RESULTS_RETRIEVED", &v1)
	check("/api/v1", v1)

	var md struct {
		Content string `json:"content"`
	}
	e.mustPost("/runs/results", map[string]any{"id": id, "format": "markdown"}, &md)
	if !strings.Contains(md.Content, "partial") || !strings.Contains(md.Content, "output of W-SEARCHER") {
		t.Errorf("markdown report:\n%s", md.Content)
	}
}
