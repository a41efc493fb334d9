package api

import (
	"strings"

	"github.com/op-stack/executor/models"
	"github.com/op-stack/executor/store"
)

// Spec 001's GlobalConfig.output_format values (detailed|summary|minimal):
// how much of the results an execution's results request answers.
const (
	OutputDetailed = "detailed"
	OutputSummary  = "summary"
	OutputMinimal  = "minimal"
)

// outputFormat checks an output_format; empty means "the execution's own"
// (see runOutputFormat).
func outputFormat(field, f string) (string, error) {
	switch v := strings.ToLower(strings.TrimSpace(f)); v {
	case "", OutputDetailed, OutputSummary, OutputMinimal:
		return v, nil
	}
	return "", models.FieldError(field, "must be %q, %q or %q, got %q", OutputDetailed, OutputSummary, OutputMinimal, f)
}

// runOutputFormat is the output_format an execution's results answer by
// default: its team's global_config.output_format as the execution started
// (the hierarchy snapshot it ran), else spec 001's default, detailed. A
// stored value that is none of the three (teams stored before they were
// checked) reads as detailed.
func runOutputFormat(run *store.Run) string {
	if run.Hierarchy != nil && run.Hierarchy.GlobalConfig != nil {
		if f, err := outputFormat("", run.Hierarchy.GlobalConfig.OutputFormat); err == nil && f != "" {
			return f
		}
	}
	return OutputDetailed
}

// runStreams tells whether spec 001's event stream serves an execution:
// its execution_config.stream_events when given, else its team's
// global_config.enable_streaming as it started, else yes (spec 001's
// defaults are true).
func runStreams(run *store.Run) bool {
	if ec := run.ExecutionConfig; ec != nil && ec.StreamEvents != nil {
		return *ec.StreamEvents
	}
	if h := run.Hierarchy; h != nil && h.GlobalConfig != nil && h.GlobalConfig.EnableStreaming != nil {
		return *h.GlobalConfig.EnableStreaming
	}
	return true
}

// keepsIntermediate tells whether an execution keeps its intermediate
// results (execution_config.save_intermediate_results, default true).
func keepsIntermediate(run *store.Run) bool {
	ec := run.ExecutionConfig
	return ec == nil || ec.SaveIntermediateResults == nil || *ec.SaveIntermediateResults
}

// shapeRunResults cuts an execution's results (as loadResults built them;
// Markdown passes unchanged) to the output_format asked, else the
// execution's own.
func shapeRunResults(run *store.Run, data any, asked string) any {
	r, ok := data.(*Results)
	if !ok {
		return data
	}
	if asked == "" {
		asked = runOutputFormat(run)
	}
	return shapeResults(r, asked)
}

// dropIntermediate empties every agent's output: an execution started
// with save_intermediate_results false answers only its final output.
func dropIntermediate(r *Results) {
	for _, id := range r.TeamResults.Keys() {
		t, _ := r.TeamResults.Get(id)
		for _, aid := range t.Agents.Keys() {
			a, _ := t.Agents.Get(aid)
			a.Output = ""
		}
	}
}

// summaryResults is the summary output_format: the execution's summary,
// each team's status and duration, each agent's status, tools and the
// first 200 characters of its output (summary), the final output, errors,
// warnings and the totals; no per-agent metrics or usage breakdowns.
type summaryResults struct {
	ExecutionID      string                   `json:"execution_id"`
	TeamID           string                   `json:"team_id"`
	OutputFormat     string                   `json:"output_format"`
	ExecutionSummary ExecutionSummary         `json:"execution_summary"`
	TeamResults      OrderedMap[*summaryTeam] `json:"team_results"`
	FinalOutput      *FinalOutput             `json:"final_output"`
	Errors           []models.ErrorInfo       `json:"errors"`
	Warnings         []string                 `json:"warnings"`
	Metrics          ExecutionMetrics         `json:"metrics"`
	Partial          bool                     `json:"partial"`
}

type summaryTeam struct {
	TeamName string                    `json:"team_name"`
	Status   string                    `json:"status"`
	Duration *float64                  `json:"duration"`
	Turns    int                       `json:"turns"`
	Error    string                    `json:"error,omitempty"`
	Partial  bool                      `json:"partial,omitempty"`
	Agents   OrderedMap[*summaryAgent] `json:"agents"`
}

type summaryAgent struct {
	AgentName string   `json:"agent_name"`
	Status    string   `json:"status"`
	Summary   *string  `json:"summary"`
	ToolsUsed []string `json:"tools_used"`
}

// minimalResults is the minimal output_format: the execution's summary,
// the final output and the errors.
type minimalResults struct {
	ExecutionID      string             `json:"execution_id"`
	TeamID           string             `json:"team_id"`
	OutputFormat     string             `json:"output_format"`
	ExecutionSummary ExecutionSummary   `json:"execution_summary"`
	FinalOutput      *FinalOutput       `json:"final_output"`
	Errors           []models.ErrorInfo `json:"errors"`
	Partial          bool               `json:"partial"`
}

// shapeResults cuts the results to output_format (detailed: all of them).
func shapeResults(r *Results, format string) any {
	switch format {
	case OutputMinimal:
		return minimalResults{
			ExecutionID: r.ExecutionID, TeamID: r.TeamID, OutputFormat: OutputMinimal, ExecutionSummary: r.ExecutionSummary,
			FinalOutput: r.FinalOutput, Errors: r.Errors, Partial: r.Partial,
		}
	case OutputSummary:
		out := summaryResults{
			ExecutionID: r.ExecutionID, TeamID: r.TeamID, OutputFormat: OutputSummary, ExecutionSummary: r.ExecutionSummary,
			FinalOutput: r.FinalOutput, Errors: r.Errors, Warnings: r.Warnings, Metrics: r.Metrics, Partial: r.Partial,
		}
		for _, id := range r.TeamResults.Keys() {
			t, _ := r.TeamResults.Get(id)
			st := &summaryTeam{TeamName: t.TeamName, Status: t.Status, Duration: t.Duration, Turns: t.Turns, Error: t.Error, Partial: t.Partial}
			for _, aid := range t.Agents.Keys() {
				a, _ := t.Agents.Get(aid)
				sa := &summaryAgent{AgentName: a.AgentName, Status: a.Status, ToolsUsed: a.ToolsUsed}
				if a.Output != "" {
					s := oneLine(a.Output, 200)
					sa.Summary = &s
				}
				st.Agents.Set(aid, sa)
			}
			out.TeamResults.Set(id, st)
		}
		return out
	}
	return r
}
