package models

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"
)

// Temporal names shared by the API (which starts, signals and queries runs)
// and the workflows (which define them). Neither package imports the other.
const (
	// DefaultTaskQueue is the task queue of workflows and activities, unless
	// TEMPORAL_TASK_QUEUE says otherwise.
	DefaultTaskQueue = "op-stack-executor"

	// Workflow types.
	RunWorkflowName      = "RunWorkflow"
	TeamWorkflowName     = "TeamWorkflow"
	SubAgentWorkflowName = "SubAgentWorkflow"

	// SignalEvents carries an EventBatch from an activity to its run's
	// workflow.
	SignalEvents = "events"
	// UpdateEvents carries an EventBatch from an activity to its run's
	// workflow as a Temporal update, answered with an EventDelivery: the
	// sequences the batch was given, so the activity can hand the
	// sequenced events to the API's streams without a query. A batch
	// whose update fails goes as SignalEvents instead; the workflow applies
	// each batch once, whichever way it came.
	UpdateEvents = "events"
	// QueryEvents returns an EventPage: the run's events after a sequence.
	QueryEvents = "events"
	// QueryProgress returns the run's Progress.
	QueryProgress = "progress"
	// QueryResult returns the run's RunResult so far (partial while it runs).
	QueryResult = "result"
	// UpdatePause and UpdateResume pause and resume a run (validated
	// Temporal updates: the API gets a synchronous answer). A run's
	// workflow also takes them as signals of the same names, for
	// `temporal workflow signal --name pause`, and its sub-agent children
	// take them as signals from the run.
	UpdatePause  = "pause"
	UpdateResume = "resume"
	SignalPause  = "pause"
	SignalResume = "resume"
)

// RunWorkflowID is the workflow ID of a run: "run-<run_id>". Activities
// signal this ID without a Temporal run ID, so delivery follows the run
// across continue-as-new.
func RunWorkflowID(runID string) string { return "run-" + runID }

// TeamWorkflowID is the child workflow ID of a run's n-th team turn.
func TeamWorkflowID(runID string, turn int) string {
	return fmt.Sprintf("run-%s-team-%d", runID, turn)
}

// Run statuses, stored in execution.status.
const (
	RunPending   = "pending"
	RunRunning   = "running"
	RunCompleted = "completed"
	RunFailed    = "failed"
	RunCancelled = "cancelled"
	// RunTimedOut ends a run that overran its max_execution_time; its
	// partial results are kept (spec 001 EXECUTION_TIMEOUT).
	RunTimedOut = "timed_out"
	// RunPaused is a run held between steps: its in-flight LLM calls
	// finish, nothing new starts until it is resumed.
	RunPaused = "paused"
)

// RunStatuses lists every run status.
var RunStatuses = []string{RunQueued, RunPending, RunRunning, RunPaused, RunWaitingApproval, RunCompleted, RunFailed, RunCancelled, RunTimedOut}

// IsTerminal reports whether a run in this status will not change again.
func IsTerminal(status string) bool {
	return status == RunCompleted || status == RunFailed || status == RunCancelled || status == RunTimedOut
}

// RunOptions are the per-run engine settings the API resolves from its
// configuration at start. They travel in the workflow input, so a run keeps
// the settings it started with. They never hold credentials.
type RunOptions struct {
	// Tenant owns the run: its hierarchy's tenant, set by the API at
	// start, never taken from a request body. Team turns and sub-agents
	// carry it with the options, and look sub-agents up in it. Empty in
	// runs started before tenants, whose sub-agents are the default
	// tenant's.
	Tenant string `json:"tenant,omitempty"`
	// Memory is the run's memory scope (docs/memory.md), resolved by the
	// API at the start; nil: its hierarchy declares no memory.
	Memory *RunMemory `json:"memory,omitempty"`
	// ThreadID is the run's thread (the public id of its first run), the
	// gen_ai.conversation.id of its traces; empty in runs started before it.
	ThreadID         string        `json:"thread_id,omitempty"`
	LLMCallTimeout   time.Duration `json:"llm_call_timeout"`
	HeartbeatTimeout time.Duration `json:"heartbeat_timeout"`
	MaxAttempts      int32         `json:"max_attempts"`
	RetryInitial     time.Duration `json:"retry_initial"`
	RetryMax         time.Duration `json:"retry_max"`
	DefaultModel     string        `json:"default_model"`
	ContextCharLimit int           `json:"context_char_limit"`
	// ContextTotalChars bounds all earlier outputs shown in one prompt
	// together: the newest are kept, older ones are left out. It keeps
	// prompts, and the references activities get, from growing with the
	// length of the run.
	ContextTotalChars int `json:"context_total_chars,omitempty"`
	// ContinueAsNewAfter is the history length past which the run's
	// workflow continues as new at its next safe point.
	ContinueAsNewAfter int `json:"continue_as_new_after"`
	// MaxDelegationsPerTurn caps the sub-agents one agent turn starts
	// through `delegate`; MaxDelegationsPerRun the sub-agents of the whole
	// run, nested ones and those of earlier executions (continue-as-new)
	// included. Calls over a cap are refused, not run. 0 (a run started
	// before the caps) means the defaults.
	MaxDelegationsPerTurn int `json:"max_delegations_per_turn,omitempty"`
	MaxDelegationsPerRun  int `json:"max_delegations_per_run,omitempty"`
	// ToolCallTimeout bounds one attempt of a tool call; 0 (a run started
	// before it) is 2 minutes.
	ToolCallTimeout time.Duration `json:"tool_call_timeout,omitempty"`
	// MaxParallelTeams overrides the hierarchy's for this run (spec 001
	// execution_config); 0 keeps the hierarchy's.
	MaxParallelTeams int `json:"max_parallel_teams,omitempty"`
	// Budget is the run's execution_config.budget; nil: no budget.
	Budget *Budget `json:"budget,omitempty"`
	// Budgets says the run enforces its budget (workflows' change
	// "budgets"), asked once at the run's start.
	Budgets bool `json:"budgets,omitempty"`
	// ScopedBudgetFail says a team's or an agent's budget spent fails the
	// run when OnExceeded is "fail" (workflows' change
	// "scoped-budget-fail"); before it they were only skipped.
	ScopedBudgetFail bool `json:"scoped_budget_fail,omitempty"`
	// DeferWrites is set by the run's workflow, never by the API: its LLM
	// activities only call the model and the workflows store answers and
	// usage records in a step of their own (SaveAnswer).
	DeferWrites bool `json:"defer_writes,omitempty"`
	// SearchAttributes says the namespace has the custom search attributes
	// (see search.go), so the workflow keeps RunStatus up to date.
	SearchAttributes bool `json:"search_attributes,omitempty"`
	// UsageSearchAttributes says the namespace has TotalTokens and CostUsd
	// (decided apart), so the workflow keeps them current with the run's
	// usage.
	UsageSearchAttributes bool `json:"usage_search_attributes,omitempty"`
	// DelegationCaps is set by the run's workflow, never by the API: its
	// agent turns and sub-agents enforce MaxDelegationsPerTurn and
	// MaxDelegationsPerRun (runs started before the caps do not).
	DelegationCaps bool `json:"delegation_caps,omitempty"`
	// ToolErrorResults is set by the run's workflow, never by the API: a
	// tool call that fails as an activity (a timeout on every attempt) is
	// an error result for the model, not a failed team (runs started
	// before changeToolErrorResults fail the team).
	ToolErrorResults bool `json:"tool_error_results,omitempty"`
	// SelfDelegation is set by the run's workflow, never by the API: a
	// sub-agent may delegate to itself (recursion, bounded by its
	// max_depth); the cycle check refuses only other agents already on
	// the call path.
	SelfDelegation bool `json:"self_delegation,omitempty"`
	// PartialResults is set by the run's workflow, never by the API: a
	// failed team turn keeps its finished workers' outputs in the run's
	// result, marked partial.
	PartialResults bool `json:"partial_results,omitempty"`
	// Pausable is set by the run's workflow, never by the API: the run
	// takes pause and resume, and its sub-agents hold between steps while
	// it is paused (runs started before pause do not).
	Pausable bool `json:"pausable,omitempty"`
	// Approvals is set by the run's workflow, never by the API: the run
	// holds agents with requires_approval and tools in approval_tools
	// (changeApprovals; runs started before approvals ignore them).
	Approvals bool `json:"approvals,omitempty"`
	// ApprovalTimeout is the approval timeout of agents that set none
	// (APPROVAL_TIMEOUT; 0: a gate waits until someone decides).
	ApprovalTimeout time.Duration `json:"approval_timeout,omitempty"`
}

// ModelFor is the model an agent's calls use: its own, else the run's
// default.
func (o RunOptions) ModelFor(agent Agent) string {
	if agent.Model != "" {
		return agent.Model
	}
	return o.DefaultModel
}

// RunInput starts a RunWorkflow.
type RunInput struct {
	RunID     string     `json:"run_id"`
	Task      string     `json:"task"`
	Hierarchy Hierarchy  `json:"hierarchy"` // a snapshot taken at start
	Options   RunOptions `json:"options"`
	// AnswerMessageID is the id, set by the caller at start (spec 003's
	// application-set message ids), under which the run's final answer is
	// stored and streamed; empty: the workflow generates one.
	AnswerMessageID string `json:"answer_message_id,omitempty"`
	// OfflineAgents are the agent_ids whose calls the built-in offline
	// model answers (chosen explicitly, or the dev fallback), as resolved
	// at start: lifecycle.started says so, so that nobody mistakes its
	// placeholder text for a model's work.
	OfflineAgents []string `json:"offline_agents,omitempty"`
	// Previous is the run this one follows up (runs/start's
	// previous_run_id): the supervisors see its task, final answer and
	// team results as context. Nil for a run that follows none.
	Previous *PreviousRun `json:"previous,omitempty"`
	// Queue is set on a run stored as queued (docs/queue.md): its
	// workflow announces lifecycle.queued and waits for admission before
	// it starts (changeAdmissionQueue). Nil: the run was admitted at once.
	Queue *QueueInfo `json:"queue,omitempty"`
	// Fork seeds a forked run (runs/fork): it starts from the original
	// run's state right after the fork point instead of from the
	// beginning. Nil for any other run, and once the fork has started.
	Fork *ForkSeed `json:"fork,omitempty"`
	// State is the run's state carried across continue-as-new; nil when
	// the run starts.
	State *RunState `json:"state,omitempty"`
}

// RunState is a run's whole state in its workflow. It is serializable so
// that continue-as-new can carry it.
type RunState struct {
	Status         string       `json:"status"`
	Iteration      int          `json:"iteration"`
	Teams          []TeamOutput `json:"teams"`
	CompletedTeams []string     `json:"completed_teams"`
	CurrentTeam    string       `json:"current_team"`
	CurrentWorker  string       `json:"current_worker"`
	ActiveAgentID  string       `json:"active_agent_id"`
	Warnings       []string     `json:"warnings"`
	Errors         []ErrorInfo  `json:"errors"`
	Usage          Usage        `json:"usage"`
	Log            EventLog     `json:"log"`
	// StartedAt is when the run started (for max_execution_time); Turns
	// counts the team turns started, which number their child workflows.
	StartedAt *time.Time `json:"started_at,omitempty"`
	Turns     int        `json:"turns"`
	// Generation counts the continue-as-new hops of the run.
	Generation int `json:"generation"`
	// Delegations counts the sub-agents the run has started, nested ones
	// included, against RunOptions.MaxDelegationsPerRun; it is here so that
	// continue-as-new carries it.
	Delegations int `json:"delegations,omitempty"`
	// Suspended are the team turns stopped between two of their steps so
	// that the run could continue as new in the middle of them; the next
	// execution carries on with them first.
	Suspended []SuspendedTurn `json:"suspended,omitempty"`
	// Guidance is an operator's guidance not yet given, by agent_id
	// (runs/redirect): the agent's next prompt carries it.
	Guidance map[string][]string `json:"guidance,omitempty"`
	// TeamUsage is each team's usage (its workers and supervisor), by team
	// name, kept by runs with a budget (RunOptions.Budgets); TeamsOverBudget
	// are the teams whose budget is spent, no longer offered.
	TeamUsage       map[string]Usage `json:"team_usage,omitempty"`
	TeamsOverBudget []string         `json:"teams_over_budget,omitempty"`
	// AgentUsage is each agent's usage by agent_id, and AgentsOverBudget
	// the agents whose budget is spent (runs with a budget).
	AgentUsage       map[string]Usage `json:"agent_usage,omitempty"`
	AgentsOverBudget []string         `json:"agents_over_budget,omitempty"`
	// BudgetSpent says the run's own budget is spent (system.budget sent).
	BudgetSpent bool `json:"budget_spent,omitempty"`
	// BudgetFailure says which team's or agent's budget, spent under
	// on_exceeded "fail", ends the run (RunOptions.ScopedBudgetFail); ""
	// when it is the run's own.
	BudgetFailure string `json:"budget_failure,omitempty"`
}

// SuspendedTurn is a team turn stopped between two steps (before its
// supervisor's next decision): everything it needs to carry on.
type SuspendedTurn struct {
	Output     TeamOutput     `json:"output"` // what was known when it started
	Input      TeamInput      `json:"input"`
	Iteration  int            `json:"iteration"`
	Outputs    []WorkerOutput `json:"outputs"`
	Dispatched []string       `json:"dispatched"`
	Warnings   []string       `json:"warnings,omitempty"`
	Usage      Usage          `json:"usage"`
	// Planned are dispatches the turn makes before asking its supervisor
	// again (a fork's, see PlannedDispatch).
	Planned []PlannedDispatch `json:"planned,omitempty"`
	// Reassigned says the turn's routing had passed to its supervisor's
	// stand-in (TeamInput.SupervisorStandIn).
	Reassigned bool `json:"reassigned,omitempty"`
}

// PersistEventsInput stores a run's events.
type PersistEventsInput struct {
	Events []Event `json:"events"`
}

// Team turn statuses.
const (
	TeamCompleted = "completed"
	TeamFailed    = "failed"
	TeamSkipped   = "skipped"
)

// TeamOutput is what one team turn produced.
type TeamOutput struct {
	Turn        int            `json:"turn"`
	TeamID      string         `json:"team_id"`
	TeamName    string         `json:"team_name"`
	Instruction string         `json:"instruction"`
	Status      string         `json:"status"`          // completed, failed, skipped or cancelled
	Error       string         `json:"error,omitempty"` // why it failed or was skipped
	StartedAt   *time.Time     `json:"started_at,omitempty"`
	CompletedAt *time.Time     `json:"completed_at,omitempty"`
	Workers     []WorkerOutput `json:"workers"`
	// Partial marks a failed (or stopped) turn whose Workers are the
	// workers that finished before it failed.
	Partial bool `json:"partial,omitempty"`
	// Usage is what the turn spent: its supervisor's decisions and its
	// workers' turns, their sub-agents included.
	Usage Usage `json:"usage"`
	// ErrorCode is a failed turn's error code when it is not
	// EXECUTION_FAILED (PROVIDER_KEY_REJECTED); empty otherwise, and in
	// turns recorded before codes were kept.
	ErrorCode string `json:"error_code,omitempty"`
}

// WorkerOutput is one worker call's answer. In a workflow's state, Output
// holds at most OutputPreviewChars of a longer answer (OutputTruncated);
// the whole answer is the stored message MessageID, which the activities
// and the API read by reference (HydrateOutputs). That keeps a run's state,
// and so its history, from growing with the length of its answers.
type WorkerOutput struct {
	AgentID     string `json:"agent_id"`
	Name        string `json:"name"`
	Instruction string `json:"instruction"`
	Output      string `json:"output"`
	// OutputChars is the length of the whole answer in characters (runes).
	OutputChars int `json:"output_chars,omitempty"`
	// OutputTruncated says Output is a preview of message MessageID.
	OutputTruncated bool   `json:"output_truncated,omitempty"`
	Model           string `json:"model"`
	Offline         bool   `json:"offline,omitempty"`
	// Usage is what the worker's turn spent, its sub-agents included;
	// SubAgentUsage is its sub-agents' part (a failed sub-agent's too).
	Usage         Usage  `json:"usage"`
	SubAgentUsage *Usage `json:"sub_agent_usage,omitempty"`
	// ToolsUsed lists the tools the worker called in its turn, in order,
	// each once (delegate included).
	ToolsUsed []string `json:"tools_used,omitempty"`
	MessageID string   `json:"message_id,omitempty"`
}

// OutputPreviewChars bounds the preview of an answer kept in workflow state.
const OutputPreviewChars = 200

// WithPreview returns o with Output cut to a preview when it is longer than
// OutputPreviewChars and stored as a message (MessageID set); a short answer,
// or one with no message to read it back from, is kept whole.
func (o WorkerOutput) WithPreview() WorkerOutput {
	r := []rune(o.Output)
	o.OutputChars = len(r)
	if o.MessageID != "" && len(r) > OutputPreviewChars {
		o.Output, o.OutputTruncated = string(r[:OutputPreviewChars])+"…", true
	}
	return o
}

// ErrorInfo is one error of a run's results (spec 001 §4).
type ErrorInfo struct {
	ErrorCode string         `json:"error_code"`
	Message   string         `json:"message"`
	Timestamp string         `json:"timestamp"`
	Context   map[string]any `json:"context,omitempty"`
}

// Usage counts tokens.
type Usage struct {
	PromptTokens     int `json:"prompt_tokens"`
	CompletionTokens int `json:"completion_tokens"`
	TotalTokens      int `json:"total_tokens"`
	// CachedTokens is the part of PromptTokens read from the provider's
	// prompt cache, CacheWriteTokens the part written to it,
	// ReasoningTokens the part of CompletionTokens spent reasoning.
	CachedTokens     int `json:"cached_tokens,omitempty"`
	CacheWriteTokens int `json:"cache_write_tokens,omitempty"`
	ReasoningTokens  int `json:"reasoning_tokens,omitempty"`
	// CostUSD is what the calls cost in US dollars, from the price table;
	// CostUnknown says some call's model has no price, so CostUSD is only
	// the priced calls' part (a cost is never reported as 0 for want of a
	// price).
	CostUSD     float64 `json:"cost_usd,omitempty"`
	CostUnknown bool    `json:"cost_unknown,omitempty"`
}

// Add returns the sum of two usages.
func (u Usage) Add(o Usage) Usage {
	return Usage{
		PromptTokens: u.PromptTokens + o.PromptTokens, CompletionTokens: u.CompletionTokens + o.CompletionTokens,
		TotalTokens: u.TotalTokens + o.TotalTokens, CostUSD: u.CostUSD + o.CostUSD, CostUnknown: u.CostUnknown || o.CostUnknown,
		CachedTokens: u.CachedTokens + o.CachedTokens, CacheWriteTokens: u.CacheWriteTokens + o.CacheWriteTokens,
		ReasoningTokens: u.ReasoningTokens + o.ReasoningTokens,
	}
}

// RunResult is what a RunWorkflow returns and what runs/get shows.
type RunResult struct {
	FinalAnswer string       `json:"final_answer"`
	Teams       []TeamOutput `json:"teams"`
	Warnings    []string     `json:"warnings,omitempty"`
	Errors      []ErrorInfo  `json:"errors,omitempty"`
	Usage       Usage        `json:"usage"`
	// SubAgentUsage is the part of Usage spent by the sub-agents the
	// workers delegated to (the workers' SubAgentUsage summed).
	SubAgentUsage Usage `json:"sub_agent_usage"`
	// Offline says some answer of the run came from the built-in offline
	// model (placeholder text). The API sets it when it reads a run (from
	// the run's usage records and workers); workflows leave it unset.
	Offline bool `json:"offline,omitempty"`
}

// TeamInput starts a TeamWorkflow: one team turn.
type TeamInput struct {
	RunID       string `json:"run_id"`
	RootAgentID string `json:"root_agent_id"` // the global supervisor's, heads every path
	Turn        int    `json:"turn"`
	Task        string `json:"task"`
	Team        Team   `json:"team"`
	Instruction string `json:"instruction"`
	// PriorContext is what the turn's agents see of earlier teams, by
	// reference and bounded (see RunOptions.ContextTotalChars).
	PriorContext []ContextItem `json:"prior_context,omitempty"`
	// PriorTeams is the same as whole outputs, as runs started before
	// PriorContext passed it; only read when PriorContext is empty.
	PriorTeams    []TeamOutput `json:"prior_teams,omitempty"`
	MaxIterations int          `json:"max_iterations"`
	Options       RunOptions   `json:"options"`
	// PreviousContext is what the team supervisor sees of the run this
	// one follows up (RunInput.Previous); empty for other runs.
	PreviousContext []ContextItem `json:"previous_context,omitempty"`
	// SupervisorStandIn is who routes for the team supervisor when its
	// model fails for good: the global supervisor's LLM settings (model,
	// provider, endpoint, fallbacks), used with the team supervisor's own
	// prompt. nil in runs from before supervisor reassignment, whose team
	// turns fail with their supervisor.
	SupervisorStandIn *Agent `json:"supervisor_stand_in,omitempty"`
}

// TeamResult is what a TeamWorkflow returns.
type TeamResult struct {
	Output          TeamOutput `json:"output"`
	Warnings        []string   `json:"warnings,omitempty"`
	SupervisorUsage Usage      `json:"supervisor_usage"`
	// Suspended is set, and nothing else, when the turn stopped between two
	// steps for the run to continue as new.
	Suspended *SuspendedTurn `json:"suspended,omitempty"`
}

// Progress is a run's position, from the QueryProgress query.
type Progress struct {
	Status         string   `json:"status"`
	CurrentTeam    string   `json:"current_team"`
	CurrentWorker  string   `json:"current_worker"`
	ActiveAgentID  string   `json:"active_agent_id"`
	CompletedTeams []string `json:"completed_teams"`
	TotalTeams     int      `json:"total_teams"`
	Iteration      int      `json:"iteration"`
}

// Decision actions.
const (
	DecisionDispatch = "dispatch"
	DecisionFinish   = "finish"
)

// Option is one choice offered to a supervisor: a team or a worker.
type Option struct {
	Name        string `json:"name"`
	AgentID     string `json:"agent_id,omitempty"` // a worker option's agent_id
	Description string `json:"description"`
}

// ContextItem is an earlier output shown to an agent. Workflows pass
// outputs by reference (Refs); the activity that builds the prompt reads
// the truncated ones from the database and joins them into Content, so an
// activity's input does not carry whole answers.
type ContextItem struct {
	From    string      `json:"from"`
	Content string      `json:"content,omitempty"`
	Refs    []OutputRef `json:"refs,omitempty"`
}

// OutputRef points at one stored answer. Text is the whole answer when it
// is short, else a preview (Truncated) and the answer is message MessageID.
// Name, when set, labels the answer in the joined content ("name: text").
type OutputRef struct {
	Name      string `json:"name,omitempty"`
	MessageID string `json:"message_id,omitempty"`
	Text      string `json:"text"`
	Truncated bool   `json:"truncated,omitempty"`
	// Chars is the whole answer's length in characters.
	Chars int `json:"chars,omitempty"`
}

// RefTo is the reference to a worker output.
func RefTo(o WorkerOutput, name string) OutputRef {
	chars := o.OutputChars
	if chars == 0 {
		chars = len([]rune(o.Output))
	}
	return OutputRef{Name: name, MessageID: o.MessageID, Text: o.Output, Truncated: o.OutputTruncated, Chars: chars}
}

// Size is the item's length in characters once resolved.
func (c ContextItem) Size() int {
	n := len([]rune(c.Content))
	for _, r := range c.Refs {
		n += r.Chars + len(r.Name) + 2
	}
	return n
}

// TruncatedRefs returns the message ids the items' truncated references
// point at: what must be read to resolve them.
func TruncatedRefs(items []ContextItem) []string {
	var ids []string
	for _, c := range items {
		for _, r := range c.Refs {
			if r.Truncated && r.MessageID != "" {
				ids = append(ids, r.MessageID)
			}
		}
	}
	return ids
}

// Resolved returns the item with its references joined into Content
// ("name: text" blocks separated by blank lines, as TeamOutput.Summary
// writes them). whole maps message ids to whole answers; a truncated
// reference missing from it keeps its preview.
func (c ContextItem) Resolved(whole map[string]string) ContextItem {
	if len(c.Refs) == 0 {
		return c
	}
	var b strings.Builder
	b.WriteString(c.Content)
	for _, r := range c.Refs {
		if b.Len() > 0 {
			b.WriteString("\n\n")
		}
		text := r.Text
		if full, ok := whole[r.MessageID]; ok && r.Truncated {
			text = full
		}
		if r.Name != "" {
			b.WriteString(r.Name)
			b.WriteString(": ")
		}
		b.WriteString(text)
	}
	return ContextItem{From: c.From, Content: b.String()}
}

// HydrateOutputs replaces the truncated outputs of teams with the whole
// answers in whole (message id → answer), in place.
func HydrateOutputs(teams []TeamOutput, whole map[string]string) {
	for i := range teams {
		for j := range teams[i].Workers {
			w := &teams[i].Workers[j]
			if full, ok := whole[w.MessageID]; ok && w.OutputTruncated {
				w.Output, w.OutputTruncated = full, false
			}
		}
	}
}

// CloneTeams returns a copy of teams that shares no slice with it, so that
// the copy's outputs can be changed (hydrated) without touching the
// original: a local activity gets the workflow's own values, not copies.
func CloneTeams(teams []TeamOutput) []TeamOutput {
	if teams == nil {
		return nil
	}
	out := make([]TeamOutput, len(teams))
	for i, t := range teams {
		t.Workers = append([]WorkerOutput(nil), t.Workers...)
		out[i] = t
	}
	return out
}

// TruncatedOutputs returns the message ids of the truncated outputs of teams.
func TruncatedOutputs(teams []TeamOutput) []string {
	var ids []string
	for _, t := range teams {
		for _, w := range t.Workers {
			if w.OutputTruncated && w.MessageID != "" {
				ids = append(ids, w.MessageID)
			}
		}
	}
	return ids
}

// DecideInput asks a supervisor what comes next: dispatch one of Options
// with an instruction, or finish.
type DecideInput struct {
	RunID       string        `json:"run_id"`
	Supervisor  Agent         `json:"supervisor"`
	Source      Source        `json:"source"`
	Task        string        `json:"task"`
	Instruction string        `json:"instruction,omitempty"` // a team supervisor's brief from the global supervisor
	Options     []Option      `json:"options"`
	Completed   []string      `json:"completed"`
	Context     []ContextItem `json:"context,omitempty"`
	AllowFinish bool          `json:"allow_finish"`
	Iteration   int           `json:"iteration"`
	RunOptions  RunOptions    `json:"run_options"`
	// Publish asks the activity to publish the dispatch event (and any
	// warning) itself. The run's workflow leaves it off and appends them to
	// its log directly, which saves a signal per decision.
	Publish bool `json:"publish"`
	// DeferWrites asks the activity to call the model only and return its
	// usage records (Calls): the workflow stores them in a step of its own
	// (SaveAnswer), so a failed database write never repeats a paid call.
	DeferWrites bool `json:"defer_writes,omitempty"`
	// ReturnEvents asks for the attempt's last events in the result
	// (Events) rather than in a final signal: the caller appends them to
	// the run's log itself.
	ReturnEvents bool `json:"return_events,omitempty"`
	// Lease, when set, hands the run's next event sequences to this
	// activity (EventLease): it stores and pushes its events itself, and
	// returns them numbered (EventBatch.Leased).
	Lease *EventLease `json:"lease,omitempty"`
	// MaxTargets above 1 lets the global supervisor dispatch up to that
	// many of the options at once (routed parallelism; the answer's
	// "targets" list); Running names the teams still at work, which are
	// not offered.
	MaxTargets int      `json:"max_targets,omitempty"`
	Running    []string `json:"running,omitempty"`
	// Guidance is what an operator asked this supervisor to take into
	// account (runs/redirect), shown in its prompt.
	Guidance []string `json:"guidance,omitempty"`
}

// DispatchTarget is one more team a decision dispatches, with its own
// instruction (Decision.Also).
type DispatchTarget struct {
	Target      string `json:"target"`
	Instruction string `json:"instruction"`
}

// Decision is a supervisor's validated choice. Target is always one of the
// offered options when Action is dispatch.
type Decision struct {
	Action      string `json:"action"`
	Target      string `json:"target"`
	Instruction string `json:"instruction"`
	Reason      string `json:"reason"`
	// Also are the further options a decision with MaxTargets above 1
	// dispatches at the same time as Target: distinct, offered, at most
	// MaxTargets-1.
	Also []DispatchTarget `json:"also,omitempty"`
	// Warning explains a correction: the model named no valid option and
	// the choice was repaired.
	Warning string `json:"warning,omitempty"`
	Usage   Usage  `json:"usage"`
	// Calls are the usage records of the successful model calls, when the
	// input asked for them (DeferWrites).
	Calls []LLMCallRecord `json:"calls,omitempty"`
	// Events are the attempt's last events when the input asked for them
	// (ReturnEvents); the caller applies them to the run's log.
	Events *EventBatch `json:"events,omitempty"`
	// Saved says the activity stored the answer record (message and usage
	// records) itself, with its leased events (EventLease, DeferWrites):
	// the caller skips its SaveAnswer step.
	Saved bool `json:"saved,omitempty"`
}

// Purposes of a RespondInput.
const (
	PurposeWorker      = "worker"
	PurposeFinalAnswer = "final_answer"
)

// RespondInput asks an agent for its answer: a worker's or sub-agent's
// output (possibly after tool calls) or the global supervisor's final
// answer.
type RespondInput struct {
	RunID       string        `json:"run_id"`
	Purpose     string        `json:"purpose"`
	Agent       Agent         `json:"agent"`
	Source      Source        `json:"source"`
	Task        string        `json:"task"`
	Instruction string        `json:"instruction"`
	Context     []ContextItem `json:"context,omitempty"`
	// CallerContext is the structured context a sub-agent's caller gave
	// with the task (the delegate tool's optional "context", as JSON).
	CallerContext string     `json:"caller_context,omitempty"`
	RunOptions    RunOptions `json:"run_options"`
	// Transcript holds this turn's earlier tool calls and their results.
	Transcript []ChatMessage `json:"transcript,omitempty"`
	// NoTools asks for a final answer without offering tools (the agent
	// reached its iteration limit).
	NoTools bool `json:"no_tools,omitempty"`
	// MessageID is the id, set before streaming starts, of the message
	// that stores this turn's final output; it is on the turn's llm.stream
	// events. ParentMessageID links a sub-agent's message to its caller's.
	MessageID       string `json:"message_id,omitempty"`
	ParentMessageID string `json:"parent_message_id,omitempty"`
	// DeferWrites asks the activity to call the model only: the workflow
	// stores the answer (message MessageID) and the usage records (Calls)
	// in a step of its own (SaveAnswer), so a failed database write never
	// repeats a paid call.
	DeferWrites bool `json:"defer_writes,omitempty"`
	// ReturnEvents asks for the attempt's last events in the result
	// (Events) rather than in a final signal: the caller appends them to
	// the run's log itself.
	ReturnEvents bool `json:"return_events,omitempty"`
	// Lease, when set, hands the run's next event sequences to this
	// activity (EventLease): it stores and pushes its events itself, and
	// returns them numbered (EventBatch.Leased).
	Lease *EventLease `json:"lease,omitempty"`
	// Guidance is what an operator asked this agent to take into account
	// (runs/redirect), shown in its prompt.
	Guidance []string `json:"guidance,omitempty"`
}

// RespondResult is an agent's answer: final output, or tool calls to run.
type RespondResult struct {
	Output    string     `json:"output"`
	ToolCalls []ToolCall `json:"tool_calls,omitempty"`
	Model     string     `json:"model"`
	Offline   bool       `json:"offline,omitempty"`
	Usage     Usage      `json:"usage"`
	// Calls are the usage records of the successful model calls, when the
	// input asked for them (DeferWrites).
	Calls []LLMCallRecord `json:"calls,omitempty"`
	// Events are the attempt's last events when the input asked for them
	// (ReturnEvents); the caller applies them to the run's log.
	Events *EventBatch `json:"events,omitempty"`
	// Saved says the activity stored the answer record (message and usage
	// records) itself, with its leased events (EventLease, DeferWrites):
	// the caller skips its SaveAnswer step.
	Saved bool `json:"saved,omitempty"`
	// Artifacts are the files the answer declared, as stored (their bytes
	// stay in the database).
	Artifacts []ArtifactRef `json:"artifacts,omitempty"`
	// MCPGates are the MCP tools offered to the model whose calls wait for
	// a person (their server's approval policy and annotations, or the
	// agent's approval_tools), as the listing of this call found them.
	MCPGates []MCPToolGate `json:"mcp_gates,omitempty"`
}

// ChatMessage is one message of an agent turn's transcript.
type ChatMessage struct {
	Role       string     `json:"role"`
	Content    string     `json:"content"`
	ToolCalls  []ToolCall `json:"tool_calls,omitempty"`
	ToolCallID string     `json:"tool_call_id,omitempty"`
}

// ToolCall is a model's request to run a tool.
type ToolCall struct {
	ID        string `json:"id"`
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

// DelegateToolName is the tool through which an agent runs a sub-agent.
const DelegateToolName = "delegate"

// ToolInput runs one tool call.
type ToolInput struct {
	RunID       string     `json:"run_id"`
	Source      Source     `json:"source"`
	ExecutionID string     `json:"tool_execution_id"`
	Call        ToolCall   `json:"call"`
	RunOptions  RunOptions `json:"run_options"`
	// MCPTools are the calling agent's MCP tool keys ("mcp:<server>/...",
	// see MCPToolKeys): the activity runs an MCP call only if one covers
	// it, so a model cannot reach a tenant's server its agent does not
	// list. Empty for agents without MCP tools, whose inputs stay as they
	// were.
	MCPTools []string `json:"mcp_tools,omitempty"`
	// MCPApprovalTools are the calling agent's "mcp:" approval_tools keys,
	// and MCPApproved says a person approved this call at its gate. The
	// activity refuses an MCP call that its server's policy or these keys
	// gate and nobody approved: a call the workflow did not gate (the
	// tool was not offered by a listing, its server down then, and the
	// model named it anyway) does not run unasked.
	MCPApprovalTools []string `json:"mcp_approval_tools,omitempty"`
	MCPApproved      bool     `json:"mcp_approved,omitempty"`
	// ReturnEvents asks for the attempt's last events in the result
	// (Events) rather than in a final signal: the caller appends them to
	// the run's log itself.
	ReturnEvents bool `json:"return_events,omitempty"`
}

// ToolOutput is a tool call's result. A failed tool is a result with
// IsError, which the model sees and can react to, not a failed run.
type ToolOutput struct {
	Content    string `json:"content"`
	IsError    bool   `json:"is_error"`
	DurationMs int64  `json:"duration_ms"`
	// Events are the attempt's last events when the input asked for them
	// (ReturnEvents); the caller applies them to the run's log.
	Events *EventBatch `json:"events,omitempty"`
	// Artifacts are the files the tool returned, as stored (their bytes
	// stay in the database; Content names them).
	Artifacts []ArtifactRef `json:"artifacts,omitempty"`
}

// SubAgentInput runs a sub-agent on a delegated task, as a child workflow.
type SubAgentInput struct {
	RunID string `json:"run_id"`
	// WorkflowID is the child workflow's own ID, given in the input so the
	// workflow never needs its execution info (which a replay tool may not
	// reproduce) to name its own children.
	WorkflowID      string     `json:"workflow_id"`
	Definition      SubAgent   `json:"definition"`
	Source          Source     `json:"source"`
	Task            string     `json:"task"`
	MessageID       string     `json:"message_id"`
	ParentMessageID string     `json:"parent_message_id"`
	Options         RunOptions `json:"options"`
	// Context is the optional structured context the caller gave with the
	// task (the delegate tool's "context", compact JSON), which the
	// sub-agent sees in its prompt.
	Context string `json:"context,omitempty"`
	// DelegationBudget is how many sub-agents this one and its own
	// sub-agents may start together, lent by the caller out of the run's
	// MaxDelegationsPerRun (with Options.DelegationCaps).
	DelegationBudget int `json:"delegation_budget,omitempty"`
}

// LoadSubAgentInput names a sub-agent to load: by name, in a tenant (empty:
// the default tenant).
type LoadSubAgentInput struct {
	Tenant string `json:"tenant,omitempty"`
	Name   string `json:"name"`
}

// SubAgentResult is what a sub-agent returns to its caller.
type SubAgentResult struct {
	MessageID string `json:"message_id"`
	Summary   string `json:"summary"`
	Usage     Usage  `json:"usage"`
	// Delegations counts the sub-agents this one started, nested ones
	// included: what it spent of its DelegationBudget.
	Delegations int `json:"delegations,omitempty"`
}

// SubAgentFailure is what a failed sub-agent reports in its failure's
// details: what it spent before it failed (its LLM calls that finished and
// its own sub-agents'), so its caller counts it in usage and budgets.
type SubAgentFailure struct {
	Usage       Usage `json:"usage"`
	Delegations int   `json:"delegations,omitempty"`
}

// LLMCallRecord is one model call's usage record (table llm_call). Its ID
// names the activity attempt (workflow, Temporal run, activity, attempt)
// and the call within it, so storing it twice stores it once.
type LLMCallRecord struct {
	ID               string `json:"id"`
	RunID            string `json:"run_id"`
	AgentID          string `json:"agent_id"`
	Purpose          string `json:"purpose"`
	Model            string `json:"model"`
	Provider         string `json:"provider"`
	Attempt          int    `json:"attempt"`
	Status           string `json:"status"`
	PromptTokens     int    `json:"prompt_tokens"`
	CompletionTokens int    `json:"completion_tokens"`
	TotalTokens      int    `json:"total_tokens"`
	// CachedTokens, CacheWriteTokens and ReasoningTokens are the parts of
	// the prompt and completion counts priced at their own rates.
	CachedTokens     int    `json:"cached_tokens,omitempty"`
	CacheWriteTokens int    `json:"cache_write_tokens,omitempty"`
	ReasoningTokens  int    `json:"reasoning_tokens,omitempty"`
	LatencyMs        int64  `json:"latency_ms"`
	FirstTokenMs     int64  `json:"first_token_ms"`
	Error            string `json:"error,omitempty"`
	// CostUSD is the call's cost; nil when it failed or its model has no
	// price.
	CostUSD *float64 `json:"cost_usd,omitempty"`
	// TeamName is the team the call's agent worked in (a sub-agent's is
	// its caller's team); empty for the global supervisor. AgentPath is the
	// agent's path from the global supervisor (Source.Path).
	TeamName  string   `json:"team_name,omitempty"`
	AgentPath []string `json:"agent_path,omitempty"`
}

// AnswerRecord is what a workflow stores after an LLM activity that
// deferred its writes: the calls' usage and, for a turn's final answer, the
// message. Storing it again stores it once.
type AnswerRecord struct {
	RunID string          `json:"run_id"`
	Calls []LLMCallRecord `json:"calls,omitempty"`
	// Message is the answer, stored under MessageID; empty MessageID
	// stores no message.
	MessageID       string `json:"message_id,omitempty"`
	ParentMessageID string `json:"parent_message_id,omitempty"`
	Source          Source `json:"source"`
	Content         string `json:"content,omitempty"`
}

// RunStatusUpdate moves a run's stored status. Applying it twice has the
// effect of applying it once, and a terminal status is never overwritten.
type RunStatusUpdate struct {
	RunID  string     `json:"run_id"`
	Status string     `json:"status"`
	Result *RunResult `json:"result,omitempty"`
	Error  string     `json:"error,omitempty"`
}

// FormatResultsWorkflowName is the workflow type that fills an output
// template from a run's results (spec 001 §4 results/format). It is a short
// workflow of its own, not part of the run, so the LLM keys stay in the
// worker and a finished run can be formatted any number of times.
const FormatResultsWorkflowName = "FormatResultsWorkflow"

// FormatInput asks for a run's results poured into a JSON template. Template
// and ExtractionRules are kept as raw JSON so the template's key order
// reaches the prompt and the answer unchanged.
type FormatInput struct {
	RunID         string       `json:"run_id"`
	HierarchyName string       `json:"hierarchy_name"`
	Task          string       `json:"task"`
	Status        string       `json:"status"`
	FinalAnswer   string       `json:"final_answer"`
	Teams         []TeamOutput `json:"teams"`
	// Supervisor is the run's global supervisor: its model (and llm_config)
	// answers; empty fields fall back to Options.DefaultModel.
	Supervisor      Agent           `json:"supervisor"`
	Template        json.RawMessage `json:"template"`
	ExtractionRules json.RawMessage `json:"extraction_rules,omitempty"`
	Options         RunOptions      `json:"options"`
	// Timeout bounds one attempt of the formatting activity (every repair
	// included); the API waits about this long for the answer.
	Timeout time.Duration `json:"timeout"`
}

// FormatResult is the filled template: exactly the template's keys, in the
// template's order.
type FormatResult struct {
	Output json.RawMessage `json:"output"`
	Model  string          `json:"model"`
	// Repairs counts the answers that were sent back with their problems
	// before one matched the template.
	Repairs int   `json:"repairs"`
	Usage   Usage `json:"usage"`
	Offline bool  `json:"offline,omitempty"`
}

// Budget limits what a run may spend (execution_config.budget).
type Budget struct {
	BudgetLimit
	// OnExceeded is BudgetFinish (the default) or BudgetFail.
	OnExceeded string `json:"on_exceeded,omitempty"`
	// Teams are per-team limits, by team name: a team whose limit is spent
	// is no longer offered to the global supervisor.
	Teams map[string]BudgetLimit `json:"teams,omitempty"`
	// Agents are per-agent limits, by agent_id: a worker whose limit is
	// spent is no longer offered to its team supervisor, a team
	// supervisor's ends its team's turn, the global supervisor's ends the
	// run as the run's own limit does.
	Agents map[string]BudgetLimit `json:"agents,omitempty"`
}

// How a run ends once its budget is spent.
const (
	BudgetFinish = "finish"
	BudgetFail   = "fail"
)

// BudgetLimit is a token and/or cost ceiling; zero fields are no limit.
type BudgetLimit struct {
	MaxTokens  int     `json:"max_tokens,omitempty"`
	MaxCostUSD float64 `json:"max_cost_usd,omitempty"`
}

// Spent tells whether u has reached the limit.
func (l BudgetLimit) Spent(u Usage) bool {
	return (l.MaxTokens > 0 && u.TotalTokens >= l.MaxTokens) || (l.MaxCostUSD > 0 && u.CostUSD >= l.MaxCostUSD)
}
