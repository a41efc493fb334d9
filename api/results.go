package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/gin-gonic/gin"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"github.com/op-stack/executor/llm"
	"github.com/op-stack/executor/models"
	"github.com/op-stack/executor/store"
	"github.com/op-stack/executor/templating"
)

// Result formats of runs/results and GET /api/v1/executions/{id}/results.
const (
	FormatJSON     = "json"
	FormatMarkdown = "markdown"
)

// Results is a run's standardized output (spec 001 §4, StandardizedOutput):
// a summary, every team's and agent's output, the final output, errors and
// metrics. While the run is live, or after it failed, it holds what has been
// done so far.
type Results struct {
	ExecutionID      string                  `json:"execution_id"`
	TeamID           string                  `json:"team_id"` // the hierarchy's id
	ExecutionSummary ExecutionSummary        `json:"execution_summary"`
	TeamResults      OrderedMap[*TeamResult] `json:"team_results"`
	FinalOutput      *FinalOutput            `json:"final_output"`
	Errors           []models.ErrorInfo      `json:"errors"`
	Warnings         []string                `json:"warnings"`
	Metrics          ExecutionMetrics        `json:"metrics"`
	// Partial says the results are not a completed run's: it is still
	// running, or it failed, timed out or was cancelled and the results
	// hold what was done (spec 001's partial results on recovery).
	Partial bool `json:"partial"`
	// Offline says some answer (a worker's, a supervisor's decision or the
	// final answer) came from the built-in offline model: placeholder
	// text, not a model's work.
	Offline bool `json:"offline"`
	// UsageByAgent rolls up the recorded calls per agent_id: supervisors,
	// workers and sub-agents, in the order of their first call.
	UsageByAgent OrderedMap[*AgentMetrics] `json:"usage_by_agent"`
	// UsageBySubAgent rolls up the recorded calls of sub-agents per
	// agent_id, in the order of their first call, with the teams they
	// worked for and the agents that called them.
	UsageBySubAgent OrderedMap[*SubAgentMetrics] `json:"usage_by_sub_agent"`
	// The task and the hierarchy's name head the Markdown report.
	task, name string
}

// ExecutionSummary is spec 001's execution_summary. Durations are seconds
// with millisecond precision; TotalDuration is null until the run ends.
type ExecutionSummary struct {
	Status         string     `json:"status"`
	StartedAt      *time.Time `json:"started_at"`
	CompletedAt    *time.Time `json:"completed_at"`
	TotalDuration  *float64   `json:"total_duration"`
	TeamsExecuted  int        `json:"teams_executed"`
	AgentsInvolved int        `json:"agents_involved"`
}

// TeamResult is one team's part of the results: every turn the team had,
// merged (spec 001 TeamResult).
type TeamResult struct {
	TeamName string   `json:"team_name"`
	Status   string   `json:"status"`
	Duration *float64 `json:"duration"`
	// Turns counts how often the global supervisor dispatched the team.
	Turns int    `json:"turns"`
	Error string `json:"error,omitempty"`
	// Partial marks a failed team whose agents are the workers that
	// finished before it failed.
	Partial bool                     `json:"partial,omitempty"`
	Agents  OrderedMap[*AgentResult] `json:"agents"`
	// Metrics roll up the team's recorded calls: its supervisor's, its
	// workers' and their sub-agents' (calls recorded with the team's name;
	// for calls stored before llm_call had a team, its workers' and its
	// supervisor's when the hierarchy still names it).
	Metrics AgentMetrics `json:"metrics"`
}

// SubAgentMetrics are one sub-agent's figures from its recorded calls,
// with the teams it worked for and the agent_ids of its callers.
type SubAgentMetrics struct {
	AgentMetrics
	Teams   []string `json:"teams"`
	Callers []string `json:"callers"`
}

// AgentResult is one worker's part of a team's result. Output joins the
// outputs of every turn the agent worked in.
type AgentResult struct {
	AgentName string       `json:"agent_name"`
	Status    string       `json:"status"`
	Output    string       `json:"output"`
	ToolsUsed []string     `json:"tools_used"`
	Model     string       `json:"model,omitempty"`
	Metrics   AgentMetrics `json:"metrics"`
	// SubAgentUsage rolls up the calls of the sub-agents the worker
	// delegated to, nested ones included (not in Metrics, which are the
	// worker's own calls).
	SubAgentUsage AgentMetrics `json:"sub_agent_usage"`
	// Artifacts are the files the worker produced (spec 001 §4), in the
	// order they were stored; absent when it produced none.
	Artifacts []ArtifactInfo `json:"artifacts,omitempty"`
}

// AgentMetrics are one agent's figures from its recorded LLM calls.
type AgentMetrics struct {
	TokensUsed int `json:"tokens_used"`
	// CachedTokens, CacheWriteTokens and ReasoningTokens are the parts of
	// TokensUsed priced at their own rates (see docs/cost-and-budgets.md).
	CachedTokens     int     `json:"cached_tokens"`
	CacheWriteTokens int     `json:"cache_write_tokens"`
	ReasoningTokens  int     `json:"reasoning_tokens"`
	APICallsMade     int     `json:"api_calls_made"`
	ProcessingTime   float64 `json:"processing_time"` // seconds, every call's latency summed
	// CostUSD is what the agent's calls cost; CostUnknown says some
	// successful call's model has no price (CostUSD is then the priced
	// calls' part).
	CostUSD     float64 `json:"cost_usd"`
	CostUnknown bool    `json:"cost_unknown"`
}

// add counts one recorded call.
func (m *AgentMetrics) add(c store.LLMCall) {
	m.APICallsMade++
	m.TokensUsed += c.TotalTokens
	m.CachedTokens += c.CachedTokens
	m.CacheWriteTokens += c.CacheWriteTokens
	m.ReasoningTokens += c.ReasoningTokens
	m.ProcessingTime += float64(c.LatencyMs) / 1000
	switch {
	case c.CostUSD != nil:
		m.CostUSD += *c.CostUSD
	case c.Status == "ok":
		m.CostUnknown = true
	}
}

// sum adds another agent's metrics.
func (m *AgentMetrics) sum(o AgentMetrics) {
	m.APICallsMade += o.APICallsMade
	m.TokensUsed += o.TokensUsed
	m.CachedTokens += o.CachedTokens
	m.CacheWriteTokens += o.CacheWriteTokens
	m.ReasoningTokens += o.ReasoningTokens
	m.ProcessingTime += o.ProcessingTime
	m.CostUSD += o.CostUSD
	m.CostUnknown = m.CostUnknown || o.CostUnknown
}

func (m AgentMetrics) rounded() AgentMetrics {
	m.ProcessingTime, m.CostUSD = round(m.ProcessingTime, 3), roundCost(m.CostUSD)
	return m
}

// FinalOutput is the global supervisor's final answer in spec 001's
// final_output shape.
type FinalOutput struct {
	Type    string `json:"type"`
	Title   string `json:"title"`
	Summary string `json:"summary"`
	Content string `json:"content"`
	// Artifacts are every file the run's agents produced (workers,
	// supervisors and sub-agents), in the order they were stored; absent
	// when there are none.
	Artifacts []ArtifactInfo `json:"artifacts,omitempty"`
}

// ExecutionMetrics are spec 001's metrics, computed from the run's llm_call
// records: every attempt of every LLM call counts as one API call.
type ExecutionMetrics struct {
	TotalTokensUsed int `json:"total_tokens_used"`
	// The parts of TotalTokensUsed priced at their own rates.
	CachedTokens        int     `json:"cached_tokens"`
	CacheWriteTokens    int     `json:"cache_write_tokens"`
	ReasoningTokens     int     `json:"reasoning_tokens"`
	APICallsMade        int     `json:"api_calls_made"`
	SuccessRate         float64 `json:"success_rate"`          // ok calls / all calls; 0 without calls
	AverageResponseTime float64 `json:"average_response_time"` // seconds, mean latency of ok calls
	// TotalCostUSD is what the run's calls cost in US dollars;
	// CostUnknown says some successful call's model has no price.
	TotalCostUSD float64 `json:"total_cost_usd"`
	CostUnknown  bool    `json:"cost_unknown"`
	// SubAgentUsage rolls up the calls of every sub-agent of the run
	// (included in the totals above).
	SubAgentUsage AgentMetrics `json:"sub_agent_usage"`
}

// OrderedMap is a JSON object that keeps its keys in insertion order, so
// team_results lists the teams in the order they worked (encoding/json
// would sort map keys).
type OrderedMap[V any] struct {
	keys []string
	vals map[string]V
}

// Set adds or replaces a key; a new key goes last.
func (m *OrderedMap[V]) Set(k string, v V) {
	if m.vals == nil {
		m.vals = map[string]V{}
	}
	if _, ok := m.vals[k]; !ok {
		m.keys = append(m.keys, k)
	}
	m.vals[k] = v
}

// Get returns the value of k.
func (m *OrderedMap[V]) Get(k string) (V, bool) {
	v, ok := m.vals[k]
	return v, ok
}

// Keys returns the keys in order.
func (m *OrderedMap[V]) Keys() []string { return m.keys }

// Len is the number of keys.
func (m *OrderedMap[V]) Len() int { return len(m.keys) }

// MarshalJSON writes the object in key order.
func (m OrderedMap[V]) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, k := range m.keys {
		if i > 0 {
			b.WriteByte(',')
		}
		key, _ := json.Marshal(k)
		val, err := json.Marshal(m.vals[k])
		if err != nil {
			return nil, err
		}
		b.Write(key)
		b.WriteByte(':')
		b.Write(val)
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

// ResultsInput is everything BuildResults reads.
type ResultsInput struct {
	Run *store.Run
	// Result is the run's result: the stored one, or the live workflow's
	// partial one; nil when there is none yet.
	Result *models.RunResult
	// Calls are the run's llm_call records.
	Calls []store.LLMCall
	// Now ends the durations of turns still running.
	Now time.Time
	// Supervisors maps team ids and names to their supervisor's agent_id,
	// so a team's metrics include its supervisor's calls.
	Supervisors map[string]string
	// Artifacts are the run's stored files, without their bytes.
	Artifacts []store.Artifact
}

// BuildResults computes a run's Results from its row, its (partial) result
// and its LLM call records. It is pure: same input, same output.
//
// Teams are keyed by team id (by name for results stored before team ids
// were recorded) in the order they first worked; a team dispatched twice
// has one entry, its durations summed and its agents' outputs joined.
// Metrics come from the call records, so retried attempts count as calls
// and the token total matches what the providers billed; without records
// (a run from before they existed) the tokens come from the result's usage.
func BuildResults(in ResultsInput) *Results {
	run := in.Run
	res := in.Result
	if res == nil {
		res = &models.RunResult{}
	}
	out := &Results{
		ExecutionID: run.PublicID,
		TeamID:      run.HierarchyID,
		ExecutionSummary: ExecutionSummary{
			Status: run.Status, StartedAt: run.StartedAt, CompletedAt: run.CompletedAt,
		},
		Errors:   []models.ErrorInfo{},
		Warnings: append([]string{}, res.Warnings...),
		Partial:  run.Status != models.RunCompleted,
		task:     run.Task,
		name:     run.HierarchyName,
	}
	live := !models.IsTerminal(run.Status)
	if run.StartedAt != nil && run.CompletedAt != nil {
		d := seconds(run.CompletedAt.Sub(*run.StartedAt))
		out.ExecutionSummary.TotalDuration = &d
	}

	perAgent := map[string]*AgentMetrics{}
	// perTeam sums the calls recorded with a team; subOf the sub-agent
	// calls below each worker (by the worker's agent_id).
	perTeam := map[string]*AgentMetrics{}
	subOf := map[string]*AgentMetrics{}
	var okCalls int
	var okLatency int64
	for _, c := range in.Calls {
		m := perAgent[c.AgentID]
		if m == nil {
			m = &AgentMetrics{}
			perAgent[c.AgentID] = m
		}
		m.add(c)
		if c.TeamName != "" {
			if perTeam[c.TeamName] == nil {
				perTeam[c.TeamName] = &AgentMetrics{}
			}
			perTeam[c.TeamName].add(c)
		}
		if c.SubAgentCall() {
			out.Metrics.SubAgentUsage.add(c)
			worker := c.AgentPath[2]
			if subOf[worker] == nil {
				subOf[worker] = &AgentMetrics{}
			}
			subOf[worker].add(c)
			sm, seen := out.UsageBySubAgent.Get(c.AgentID)
			if !seen {
				sm = &SubAgentMetrics{Teams: []string{}, Callers: []string{}}
				out.UsageBySubAgent.Set(c.AgentID, sm)
			}
			sm.add(c)
			if c.TeamName != "" && !contains(sm.Teams, c.TeamName) {
				sm.Teams = append(sm.Teams, c.TeamName)
			}
			if caller := c.AgentPath[len(c.AgentPath)-2]; !contains(sm.Callers, caller) {
				sm.Callers = append(sm.Callers, caller)
			}
		}
		var run AgentMetrics
		run.add(c)
		out.Metrics.TotalCostUSD += run.CostUSD
		out.Metrics.CostUnknown = out.Metrics.CostUnknown || run.CostUnknown
		out.Metrics.TotalTokensUsed += c.TotalTokens
		out.Metrics.CachedTokens += c.CachedTokens
		out.Metrics.CacheWriteTokens += c.CacheWriteTokens
		out.Metrics.ReasoningTokens += c.ReasoningTokens
		if c.Status == "ok" && c.Provider == llm.OfflineProvider {
			out.Offline = true
		}
		if c.Status == "ok" {
			okCalls++
			okLatency += c.LatencyMs
		}
	}
	out.Metrics.APICallsMade = len(in.Calls)
	if len(in.Calls) > 0 {
		out.Metrics.SuccessRate = round(float64(okCalls)/float64(len(in.Calls)), 4)
	} else {
		out.Metrics.TotalTokensUsed = res.Usage.TotalTokens
		out.Metrics.CachedTokens, out.Metrics.CacheWriteTokens, out.Metrics.ReasoningTokens = res.Usage.CachedTokens, res.Usage.CacheWriteTokens, res.Usage.ReasoningTokens
		out.Metrics.TotalCostUSD, out.Metrics.CostUnknown = res.Usage.CostUSD, res.Usage.CostUnknown
	}
	out.Metrics.TotalCostUSD = roundCost(out.Metrics.TotalCostUSD)
	out.Metrics.SubAgentUsage = out.Metrics.SubAgentUsage.rounded()
	for _, k := range out.UsageBySubAgent.Keys() {
		sm, _ := out.UsageBySubAgent.Get(k)
		sm.AgentMetrics = sm.AgentMetrics.rounded()
	}
	for _, c := range in.Calls {
		if _, seen := out.UsageByAgent.Get(c.AgentID); !seen {
			m := perAgent[c.AgentID].rounded()
			out.UsageByAgent.Set(c.AgentID, &m)
		}
	}
	if okCalls > 0 {
		out.Metrics.AverageResponseTime = round(float64(okLatency)/float64(okCalls)/1000, 3)
	}

	agents := map[string]bool{}
	for _, t := range res.Teams {
		key := firstNonEmpty(t.TeamID, t.TeamName)
		tr, seen := out.TeamResults.Get(key)
		if !seen {
			tr = &TeamResult{TeamName: t.TeamName}
			out.TeamResults.Set(key, tr)
		}
		tr.Turns++
		tr.Status = teamStatus(t.Status, run.Status, live)
		tr.Partial = t.Partial && (t.Status == models.TeamFailed || t.Status == models.TeamCancelled)
		if t.Error != "" {
			tr.Error = t.Error
		}
		if t.StartedAt != nil {
			end := t.CompletedAt
			if end == nil && live {
				end = &in.Now
			}
			if end != nil {
				d := seconds(end.Sub(*t.StartedAt))
				if tr.Duration != nil {
					d = round(d+*tr.Duration, 3)
				}
				tr.Duration = &d
			}
		}
		for _, w := range t.Workers {
			agents[w.AgentID] = true
			out.Offline = out.Offline || w.Offline
			ar, seen := tr.Agents.Get(w.AgentID)
			if !seen {
				ar = &AgentResult{AgentName: w.Name, Status: models.TeamCompleted, ToolsUsed: []string{}, Model: w.Model}
				if w.Offline {
					// Runs recorded the requested model before they
					// recorded the one that answered.
					ar.Model = llm.OfflineProvider
				}
				if m := perAgent[w.AgentID]; m != nil {
					ar.Metrics = m.rounded()
				}
				if m := subOf[w.AgentID]; m != nil {
					ar.SubAgentUsage = m.rounded()
				}
				for _, a := range in.Artifacts {
					if a.AgentID == w.AgentID {
						ar.Artifacts = append(ar.Artifacts, artifactInfo(a))
					}
				}
				tr.Agents.Set(w.AgentID, ar)
			}
			if ar.Output != "" && w.Output != "" {
				ar.Output += "\n\n"
			}
			ar.Output += w.Output
			for _, tool := range w.ToolsUsed {
				if !contains(ar.ToolsUsed, tool) {
					ar.ToolsUsed = append(ar.ToolsUsed, tool)
				}
			}
		}
	}
	for _, k := range out.TeamResults.Keys() {
		tr, _ := out.TeamResults.Get(k)
		if tr.Status != models.TeamSkipped {
			out.ExecutionSummary.TeamsExecuted++
		}
		tr.Metrics = teamMetrics(in, k, tr, perAgent, perTeam).rounded()
	}
	out.ExecutionSummary.AgentsInvolved = len(agents)

	if res.FinalAnswer != "" {
		out.FinalOutput = &FinalOutput{Type: "text", Title: run.HierarchyName, Summary: oneLine(res.FinalAnswer, 200), Content: res.FinalAnswer}
		if len(in.Artifacts) > 0 {
			out.FinalOutput.Artifacts = artifactInfos(in.Artifacts)
		}
	}

	out.Errors = append(out.Errors, res.Errors...)
	for _, t := range res.Teams {
		if t.Status == models.TeamFailed && t.Error != "" {
			at := run.UpdatedAt
			if t.CompletedAt != nil {
				at = *t.CompletedAt
			}
			code := models.CodeExecutionFailed.Name
			if t.ErrorCode != "" {
				code = t.ErrorCode
			}
			out.addError(models.ErrorInfo{
				ErrorCode: code, Message: t.Error, Timestamp: models.FormatTimestamp(at),
				Context: map[string]any{"team_id": t.TeamID, "team_name": t.TeamName, "turn": t.Turn},
			})
		}
	}
	if run.Error != "" && (run.Status == models.RunFailed || run.Status == models.RunTimedOut) {
		code := runErrorCode(run)
		at := run.UpdatedAt
		if run.CompletedAt != nil {
			at = *run.CompletedAt
		}
		out.addError(models.ErrorInfo{ErrorCode: code, Message: run.Error, Timestamp: models.FormatTimestamp(at), Context: map[string]any{"status": run.Status}})
	}
	return out
}

// runErrorCode is the error code of a failed or timed-out run's error:
// the code its workflow recorded with that message (PROVIDER_KEY_REJECTED,
// BUDGET_EXCEEDED...), else EXECUTION_TIMEOUT for a timed-out run and
// EXECUTION_FAILED for any other (a terminated workflow, runs recorded
// before codes were kept).
func runErrorCode(run *store.Run) string {
	if run.Result != nil {
		for _, e := range run.Result.Errors {
			if e.Message == run.Error && e.ErrorCode != "" {
				return e.ErrorCode
			}
		}
	}
	if run.Status == models.RunTimedOut {
		return models.CodeExecutionTimeout.Name
	}
	return models.CodeExecutionFailed.Name
}

// teamMetrics rolls up a team's calls: those recorded with its name
// (supervisor, workers and their sub-agents), plus, for calls stored before
// llm_call had a team, its workers' and its supervisor's by agent_id.
func teamMetrics(in ResultsInput, key string, tr *TeamResult, perAgent, perTeam map[string]*AgentMetrics) AgentMetrics {
	var tm AgentMetrics
	if m := perTeam[tr.TeamName]; m != nil {
		tm.sum(*m)
	}
	legacy := func(agentID string) {
		for _, c := range in.Calls {
			if c.AgentID == agentID && c.TeamName == "" && c.AgentPath == nil {
				tm.add(c)
			}
		}
	}
	for _, aid := range tr.Agents.Keys() {
		if perAgent[aid] != nil {
			legacy(aid)
		}
	}
	sup := in.Supervisors[key]
	if sup == "" {
		sup = in.Supervisors[tr.TeamName]
	}
	if _, isWorker := tr.Agents.Get(sup); !isWorker && perAgent[sup] != nil {
		legacy(sup)
	}
	return tm
}

// addError adds e unless an error with the same message is listed: the
// engine may have recorded a team's failure in the result already.
func (r *Results) addError(e models.ErrorInfo) {
	for _, x := range r.Errors {
		if x.Message == e.Message {
			return
		}
	}
	r.Errors = append(r.Errors, e)
}

// teamStatus is a turn's status, or for a turn without one (still
// running) "running" while the run is live and the run's status after.
func teamStatus(turn, run string, live bool) string {
	switch {
	case turn != "":
		return turn
	case live:
		return models.RunRunning
	}
	return run
}

func seconds(d time.Duration) float64 { return round(d.Seconds(), 3) }

func round(x float64, places int) float64 {
	p := math.Pow(10, float64(places))
	return math.Round(x*p) / p
}

// Markdown renders the results as a readable report: a summary table, the
// final output, a section per team and agent with its output, then errors,
// warnings and metrics.
func (r *Results) Markdown() string {
	var b strings.Builder
	title := r.name
	if title == "" {
		title = r.TeamID
	}
	fmt.Fprintf(&b, "# Execution results: %s\n\n", mdInline(title))
	s := r.ExecutionSummary
	b.WriteString("| | |\n|---|---|\n")
	row := func(k, v string) { fmt.Fprintf(&b, "| %s | %s |\n", k, mdCell(v)) }
	row("Execution", "`"+r.ExecutionID+"`")
	row("Team", "`"+r.TeamID+"`")
	if r.task != "" {
		row("Task", oneLine(r.task, 300))
	}
	row("Status", s.Status)
	row("Started", mdTime(s.StartedAt))
	row("Completed", mdTime(s.CompletedAt))
	if s.TotalDuration != nil {
		row("Total duration", fmt.Sprintf("%.3f s", *s.TotalDuration))
	} else {
		row("Total duration", "—")
	}
	row("Teams executed", fmt.Sprint(s.TeamsExecuted))
	row("Agents involved", fmt.Sprint(s.AgentsInvolved))
	if r.Offline {
		row("Offline", "yes: answers came from the built-in offline model (placeholder text)")
	}

	b.WriteString("\n## Final output\n\n")
	if r.FinalOutput != nil {
		b.WriteString(strings.TrimSpace(r.FinalOutput.Content))
		b.WriteString("\n")
		if len(r.FinalOutput.Artifacts) > 0 {
			b.WriteString("\n### Files\n\n")
			for _, a := range r.FinalOutput.Artifacts {
				fmt.Fprintf(&b, "- [%s](%s) · %s · %d bytes · %s\n", mdInline(a.Name), a.URL, a.MediaType, a.Size, mdInline(a.AgentName))
			}
		}
	} else {
		b.WriteString("_No final output yet._\n")
	}

	b.WriteString("\n## Teams\n")
	if r.TeamResults.Len() == 0 {
		b.WriteString("\n_No team has worked yet._\n")
	}
	for _, id := range r.TeamResults.Keys() {
		t, _ := r.TeamResults.Get(id)
		dur := "—"
		if t.Duration != nil {
			dur = fmt.Sprintf("%.3f s", *t.Duration)
		}
		partial := ""
		if t.Partial {
			partial = " · partial: the agents below finished before the team failed"
		}
		fmt.Fprintf(&b, "\n### %s\n\nTeam id `%s` · status **%s** · duration %s · turns %d%s · tokens %d · cost %s (sub-agents included)\n",
			mdInline(t.TeamName), id, t.Status, dur, t.Turns, partial, t.Metrics.TokensUsed, mdCost(t.Metrics.CostUSD, t.Metrics.CostUnknown))
		if t.Error != "" {
			fmt.Fprintf(&b, "\n> Error: %s\n", oneLine(t.Error, 1000))
		}
		for _, aid := range t.Agents.Keys() {
			a, _ := t.Agents.Get(aid)
			tools := "none"
			if len(a.ToolsUsed) > 0 {
				tools = strings.Join(a.ToolsUsed, ", ")
			}
			sub := ""
			if s := a.SubAgentUsage; s.APICallsMade > 0 {
				sub = fmt.Sprintf(" · sub-agents: tokens %d, cost %s", s.TokensUsed, mdCost(s.CostUSD, s.CostUnknown))
			}
			fmt.Fprintf(&b, "\n#### %s\n\nAgent id `%s` · status **%s** · tools used: %s · tokens %d · API calls %d · processing time %.3f s · cost %s%s\n\n",
				mdInline(a.AgentName), aid, a.Status, tools, a.Metrics.TokensUsed, a.Metrics.APICallsMade, a.Metrics.ProcessingTime,
				mdCost(a.Metrics.CostUSD, a.Metrics.CostUnknown), sub)
			out := strings.TrimSpace(a.Output)
			if out == "" {
				out = "_No output._"
			}
			b.WriteString(out)
			b.WriteString("\n")
		}
	}

	b.WriteString("\n## Errors\n\n")
	if len(r.Errors) == 0 {
		b.WriteString("None.\n")
	}
	for _, e := range r.Errors {
		fmt.Fprintf(&b, "- **%s** (%s): %s\n", e.ErrorCode, e.Timestamp, oneLine(e.Message, 2000))
	}
	if len(r.Warnings) > 0 {
		b.WriteString("\n## Warnings\n\n")
		for _, w := range r.Warnings {
			fmt.Fprintf(&b, "- %s\n", oneLine(w, 2000))
		}
	}

	m := r.Metrics
	b.WriteString("\n## Metrics\n\n| Metric | Value |\n|---|---|\n")
	fmt.Fprintf(&b, "| Total tokens used | %d |\n", m.TotalTokensUsed)
	fmt.Fprintf(&b, "| Cached prompt tokens | %d |\n", m.CachedTokens)
	if m.CacheWriteTokens > 0 {
		fmt.Fprintf(&b, "| Prompt tokens written to the cache | %d |\n", m.CacheWriteTokens)
	}
	fmt.Fprintf(&b, "| Reasoning tokens | %d |\n", m.ReasoningTokens)
	fmt.Fprintf(&b, "| Total cost | %s |\n", mdCost(m.TotalCostUSD, m.CostUnknown))
	if m.SubAgentUsage.APICallsMade > 0 {
		fmt.Fprintf(&b, "| Sub-agents' cost | %s |\n", mdCost(m.SubAgentUsage.CostUSD, m.SubAgentUsage.CostUnknown))
	}
	fmt.Fprintf(&b, "| API calls made | %d |\n", m.APICallsMade)
	fmt.Fprintf(&b, "| Success rate | %.1f%% |\n", m.SuccessRate*100)
	fmt.Fprintf(&b, "| Average response time | %.3f s |\n", m.AverageResponseTime)
	return b.String()
}

// mdCost writes a cost in US dollars; an unknown part says so.
func mdCost(usd float64, unknown bool) string {
	s := "$" + strconv.FormatFloat(roundCost(usd), 'f', -1, 64)
	if unknown {
		s += " (some calls unpriced: unknown)"
	}
	return s
}

func mdTime(t *time.Time) string {
	if t == nil {
		return "—"
	}
	return models.FormatTimestamp(*t)
}

// mdCell keeps a value on one table row: no newlines, escaped pipes.
func mdCell(s string) string {
	return strings.ReplaceAll(strings.Join(strings.Fields(s), " "), "|", `\|`)
}

// mdInline keeps a name on its heading line.
func mdInline(s string) string { return strings.Join(strings.Fields(s), " ") }

// resultsInput is runs/results' body.
type resultsInput struct {
	runIDInput
	Format string `json:"format"`
	// OutputFormat is spec 001's detailed|summary|minimal; empty: the
	// execution's team's global_config.output_format.
	OutputFormat string `json:"output_format"`
}

// resultFormat checks a requested format; empty means JSON.
func resultFormat(f string) (string, error) {
	switch strings.ToLower(strings.TrimSpace(f)) {
	case "", FormatJSON:
		return FormatJSON, nil
	case FormatMarkdown, "md":
		return FormatMarkdown, nil
	case FormatXML:
		return FormatXML, nil
	}
	return "", models.FieldError("format", "must be %q, %q or %q, got %q", FormatJSON, FormatMarkdown, FormatXML, f)
}

// runResults is runs/results: {"id","format"}.
func (s *Server) runResults(c *gin.Context) {
	in, id, valid := readIDBody[resultsInput](s, c)
	if !valid {
		return
	}
	format, err := negotiateResultFormat(c, in.Format)
	if err != nil {
		s.writeError(c, err)
		return
	}
	shape, err := outputFormat("output_format", in.OutputFormat)
	if err != nil {
		s.writeError(c, err)
		return
	}
	run, data, err := s.loadResults(c.Request.Context(), id, format)
	if err != nil {
		s.writeError(c, err)
		return
	}
	data = shapeRunResults(run, data, shape)
	if format == FormatXML {
		// An XML answer is XML throughout: contract 002's envelope as a
		// document, the results in <data>.
		writeXMLBody(c, http.StatusOK, okBody{Code: 0, Message: "success", Data: data})
		return
	}
	ok(c, data)
}

// markdownResults is the data of a Markdown results answer.
type markdownResults struct {
	Format  string `json:"format"`
	Content string `json:"content"`
}

// loadResults loads a run and builds its results in format: *Results for
// JSON and XML (the caller writes XML, see writeXMLBody), markdownResults
// for Markdown.
func (s *Server) loadResults(ctx context.Context, id, format string) (*store.Run, any, error) {
	run, err := s.visibleRun(ctx, id)
	if err != nil {
		return nil, nil, err
	}
	result := s.currentResult(ctx, run)
	calls, err := s.store.LLMCalls(ctx, run.ID)
	if err != nil {
		return nil, nil, err
	}
	sups := map[string]string{}
	if h, err := s.store.GetHierarchy(ctx, run.HierarchyID); err == nil {
		for _, t := range h.Teams {
			sups[t.ID], sups[t.Name] = t.Supervisor.AgentID, t.Supervisor.AgentID
		}
	}
	arts, err := s.store.ListArtifacts(ctx, run.ID)
	if err != nil {
		return nil, nil, err
	}
	r := BuildResults(ResultsInput{Run: run, Result: result, Calls: calls, Now: time.Now().UTC(), Supervisors: sups, Artifacts: arts})
	if !keepsIntermediate(run) {
		// save_intermediate_results false: the final output only.
		dropIntermediate(r)
	}
	switch format {
	case FormatMarkdown:
		return run, markdownResults{Format: FormatMarkdown, Content: r.Markdown()}, nil
	}
	return run, r, nil
}

// currentResult is the run's result: while it is live, the workflow's
// partial result (query QueryResult); otherwise, or when the query fails,
// the stored one.
func (s *Server) currentResult(ctx context.Context, run *store.Run) *models.RunResult {
	if models.IsTerminal(run.Status) || s.runs == nil || s.runs.Temporal == nil {
		return run.Result
	}
	qctx, cancel := context.WithTimeout(ctx, queryTimeout)
	defer cancel()
	resp, err := s.runs.Temporal.QueryWorkflow(qctx, run.WorkflowID, "", models.QueryResult)
	if err == nil {
		var live models.RunResult
		if err = resp.Get(&live); err == nil {
			// The workflow holds previews of long answers.
			var whole *models.RunResult
			if whole, err = s.store.HydrateResult(ctx, run.ID, &live); err == nil {
				return whole
			}
		}
	}
	s.log.Debug("result query", "run_id", run.ID, "error", err)
	return run.Result
}

// formatTimeout bounds a results/format request: the formatting workflow
// (every repair and retry included) must finish within it.
const formatTimeout = 2 * time.Minute

// formatInputBody is the body of results/format: spec 001's
// output_template and extraction_rules (plus "id" on the executor API).
type formatInputBody struct {
	runIDInput
	OutputTemplate  json.RawMessage `json:"output_template"`
	ExtractionRules json.RawMessage `json:"extraction_rules"`
}

// formatRunResults is runs/results/format: {"id","output_template","extraction_rules"}.
func (s *Server) formatRunResults(c *gin.Context) {
	in, id, valid := readIDBody[formatInputBody](s, c)
	if !valid {
		return
	}
	out, err := s.formatResults(c.Request.Context(), id, in)
	if err != nil {
		s.writeError(c, err)
		return
	}
	ok(c, out)
}

// formatResults fills the template from the run's results by running
// FormatResultsWorkflow on the runs' task queue and waiting for it: the
// LLM keys live in the worker, never in the API. It returns the filled
// template, with exactly the template's keys in its order.
func (s *Server) formatResults(ctx context.Context, id string, in formatInputBody) (json.RawMessage, error) {
	if isJSONAbsent(in.OutputTemplate) {
		return nil, models.FieldError("output_template", "is required: a JSON object whose values are fixed text or {placeholders} to fill")
	}
	if _, err := templating.Parse(in.OutputTemplate); err != nil {
		return nil, models.FieldError("output_template", "%v", err)
	}
	rules := in.ExtractionRules
	if isJSONAbsent(rules) {
		rules = nil
	} else if trimmed := bytes.TrimSpace(rules); trimmed[0] != '{' || !json.Valid(trimmed) {
		return nil, models.FieldError("extraction_rules", "must be a JSON object (template key: how to fill it)")
	}
	run, err := s.visibleRun(ctx, id)
	if err != nil {
		return nil, err
	}
	result := s.currentResult(ctx, run)
	if result == nil || (len(result.Teams) == 0 && result.FinalAnswer == "") {
		return nil, models.Errorf(models.CodeExecutionInProgress, "execution %q has no output to format yet (status %s)", run.PublicID, run.Status)
	}
	if s.runs.Temporal == nil {
		return nil, models.Errorf(models.CodeUnavailable, "formatting is not served by this process")
	}
	// The run's snapshot of its hierarchy lives in its workflow; the stored
	// hierarchy is the next best source of the supervisor's model. Without
	// it (deleted) the default model answers.
	var sup models.Agent
	if h, err := s.store.GetHierarchy(ctx, run.HierarchyID); err == nil {
		sup = h.GlobalSupervisor
	} else if models.ErrorCode(err) != models.CodeHierarchyNotFound {
		return nil, err
	}
	input := models.FormatInput{
		RunID: run.ID, HierarchyName: run.HierarchyName, Task: run.Task, Status: run.Status,
		FinalAnswer: result.FinalAnswer, Teams: boundOutputs(result.Teams, 4*s.contextLimit()),
		Supervisor: sup, Template: in.OutputTemplate, ExtractionRules: rules,
		Options: s.runs.Options, Timeout: formatTimeout,
	}
	wid := "format-" + run.ID + "-" + models.NewID()
	we, err := s.runs.Temporal.ExecuteWorkflow(ctx, client.StartWorkflowOptions{
		ID:                       wid,
		TaskQueue:                s.runs.TaskQueue,
		WorkflowExecutionTimeout: formatTimeout,
		StaticSummary:            "format results of run " + run.PublicID,
	}, models.FormatResultsWorkflowName, input)
	if err != nil {
		return nil, &models.Error{Code: models.CodeUnavailable, Message: "could not start formatting: Temporal is unavailable", Err: err}
	}
	// A little longer than the workflow may take, so its own timeout is
	// what normally ends a slow one.
	wctx, cancel := context.WithTimeout(ctx, formatTimeout+5*time.Second)
	defer cancel()
	var res models.FormatResult
	if err := we.Get(wctx, &res); err != nil {
		return nil, s.formatFailure(ctx, wctx, wid, err)
	}
	return res.Output, nil
}

// formatFailure maps a formatting workflow's failure to a client error.
// The activity's messages are meant for clients: they name the model and
// the problems, never a key.
func (s *Server) formatFailure(ctx, wctx context.Context, workflowID string, err error) error {
	if wctx.Err() != nil {
		// Nobody waits any more: stop the workflow's LLM calls.
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		_ = s.runs.Temporal.CancelWorkflow(cctx, workflowID, "")
		cancel()
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return &models.Error{Code: models.CodeExecutionTimeout, Message: fmt.Sprintf("formatting did not finish within %v", formatTimeout), Err: err}
	}
	var (
		appErr     *temporal.ApplicationError
		timeoutErr *temporal.TimeoutError
	)
	switch {
	case errors.As(err, &appErr):
		switch appErr.Type() {
		case models.ErrFormatInvalidTemplate:
			return models.FieldError("output_template", "%s", appErr.Message())
		case models.ErrFormatMismatch:
			return &models.Error{Code: models.CodeExecutionFailed, Message: "formatting failed: " + appErr.Message(), Err: err}
		case models.ErrLLMRejected, models.ErrLLMUnavailable:
			return &models.Error{Code: models.CodeExecutionFailed, Message: "formatting failed: " + appErr.Message(), Err: err}
		case models.ErrLLMKeyRejected:
			return &models.Error{Code: models.CodeProviderKeyRejected, Message: "formatting failed: " + appErr.Message(), Err: err}
		}
	case errors.As(err, &timeoutErr):
		return &models.Error{Code: models.CodeExecutionTimeout, Message: fmt.Sprintf("formatting did not finish within %v", formatTimeout), Err: err}
	}
	return fmt.Errorf("format workflow %s: %w", workflowID, err)
}

// contextLimit is the run options' context limit, or its default.
func (s *Server) contextLimit() int {
	if s.runs != nil && s.runs.Options.ContextCharLimit > 0 {
		return s.runs.Options.ContextCharLimit
	}
	return 8000
}

// boundOutputs copies teams with every worker output cut to limit runes:
// the outputs travel in the formatting workflow's input and history, and
// the activity truncates them further for the prompt anyway.
func boundOutputs(teams []models.TeamOutput, limit int) []models.TeamOutput {
	out := make([]models.TeamOutput, len(teams))
	for i, t := range teams {
		t.Workers = append([]models.WorkerOutput(nil), t.Workers...)
		for j := range t.Workers {
			if r := []rune(t.Workers[j].Output); len(r) > limit {
				t.Workers[j].Output = string(r[:limit]) + " …[truncated]"
			}
		}
		out[i] = t
	}
	return out
}

// isJSONAbsent reports whether a raw body field was left out or null.
func isJSONAbsent(raw json.RawMessage) bool {
	t := bytes.TrimSpace(raw)
	return len(t) == 0 || bytes.Equal(t, []byte("null"))
}
