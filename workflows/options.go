// Package workflows defines a run as Temporal workflows: RunWorkflow (the
// global supervisor's loop, one per run) and TeamWorkflow (one team turn,
// a child workflow, so the Web UI shows a run as a tree). Workflow code is
// deterministic: every side effect is an activity.
package workflows

import (
	"errors"
	"fmt"
	"time"

	enumspb "go.temporal.io/api/enums/v1"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/op-stack/executor/activities"
	"github.com/op-stack/executor/models"
)

// a is the activities' receiver as workflows see it: only method values are
// taken from it, so it is never dereferenced.
var a *activities.Activities

// Defaults for RunOptions fields left zero.
const (
	DefaultLLMCallTimeout   = 5 * time.Minute
	DefaultHeartbeatTimeout = 15 * time.Second
	DefaultMaxAttempts      = 5
	DefaultRetryInitial     = time.Second
	DefaultRetryMax         = 30 * time.Second
	// DefaultContinueAsNewAfter keeps a run's history far below Temporal's
	// limits (51,200 events, 10,000 signals per execution).
	DefaultContinueAsNewAfter = 10000
	// DefaultMaxDelegationsPerTurn and DefaultMaxDelegationsPerRun are the
	// delegation caps of runs whose options have none (started before
	// them); config's MAX_DELEGATIONS_PER_TURN and _PER_RUN defaults.
	DefaultMaxDelegationsPerTurn = 8
	DefaultMaxDelegationsPerRun  = 64
)

// WithDefaults fills zero RunOptions fields.
func WithDefaults(o models.RunOptions) models.RunOptions {
	if o.LLMCallTimeout <= 0 {
		o.LLMCallTimeout = DefaultLLMCallTimeout
	}
	if o.HeartbeatTimeout <= 0 {
		o.HeartbeatTimeout = DefaultHeartbeatTimeout
	}
	if o.MaxAttempts <= 0 {
		o.MaxAttempts = DefaultMaxAttempts
	}
	if o.RetryInitial <= 0 {
		o.RetryInitial = DefaultRetryInitial
	}
	if o.RetryMax <= 0 {
		o.RetryMax = DefaultRetryMax
	}
	if o.ContinueAsNewAfter <= 0 {
		o.ContinueAsNewAfter = DefaultContinueAsNewAfter
	}
	if o.MaxDelegationsPerTurn <= 0 {
		o.MaxDelegationsPerTurn = DefaultMaxDelegationsPerTurn
	}
	if o.MaxDelegationsPerRun <= 0 {
		o.MaxDelegationsPerRun = DefaultMaxDelegationsPerRun
	}
	return o
}

// llmContext sets the options of an LLM activity: a heartbeat timeout so a
// lost worker is noticed quickly, and the retry policy that owns every retry
// (the LLM client itself never retries). Rejected requests (4xx) are
// non-retryable application errors and fail at once.
func llmContext(ctx workflow.Context, o models.RunOptions, summary string, agent models.Agent) workflow.Context {
	timeout := llmTimeout(o, agent)
	return workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: timeout,
		HeartbeatTimeout:    o.HeartbeatTimeout,
		WaitForCancellation: true,
		Summary:             summary,
		RetryPolicy: &temporal.RetryPolicy{
			InitialInterval:        o.RetryInitial,
			BackoffCoefficient:     2,
			MaximumInterval:        o.RetryMax,
			MaximumAttempts:        o.MaxAttempts,
			NonRetryableErrorTypes: []string{models.ErrLLMRejected},
		},
	})
}

// storeContext sets the options of a database activity.
func storeContext(ctx workflow.Context) workflow.Context {
	return workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: 30 * time.Second,
		RetryPolicy: &temporal.RetryPolicy{
			InitialInterval:    500 * time.Millisecond,
			BackoffCoefficient: 2,
			MaximumInterval:    10 * time.Second,
		},
	})
}

// changeBaseline stands for every change id below in one version marker:
// a run execution that records it takes every one of them, without a
// marker (and a TemporalChangeVersion upsert) each. Executions that
// started before it recorded the changes one by one and replay them so
// (changed asks each then). Measured on make cluster: the 18 markers and
// their upserts were 17 ms of the server's work in every run's first
// workflow task. A change made after it gets a marker of its own again.
const changeBaseline = "baseline-i28"

// baselineKey holds, in a run workflow's context, whether its execution
// recorded changeBaseline.
type baselineKey struct{}

// withBaseline asks for changeBaseline, at the very start of an execution,
// and keeps the answer in the context for changed.
func withBaseline(ctx workflow.Context) workflow.Context {
	return workflow.WithValue(ctx, baselineKey{}, workflow.GetVersion(ctx, changeBaseline, workflow.DefaultVersion, 1) == 1)
}

// changed says whether the execution takes change: without a marker under
// changeBaseline, else by its own workflow.GetVersion marker (executions
// from before the baseline, and workflows that do not ask for it).
func changed(ctx workflow.Context, change string) bool {
	if b, _ := ctx.Value(baselineKey{}).(bool); b {
		return true
	}
	return workflow.GetVersion(ctx, change, workflow.DefaultVersion, 1) == 1
}

// Change ids of workflow.GetVersion: runs that started before a change
// replay the code they ran.
const (
	// changeStatusLocalActivity: run status writes are local activities
	// (they were activities).
	changeStatusLocalActivity = "status-local-activity"
	// changeInlineTeams: team turns run inside the run's workflow (they
	// were TeamWorkflow children).
	changeInlineTeams = "inline-team-turns"
	// changeAnswerSaveStep: answers and usage records are stored by a local
	// activity after the LLM activity (the activity stored them itself, so
	// a failed write repeated the model call).
	changeAnswerSaveStep = "answer-save-step"
	// changeDelegationCaps: delegate calls over MaxDelegationsPerTurn or
	// MaxDelegationsPerRun are refused (there was no cap). The run's
	// workflow asks once, at its start, and carries the answer to its team
	// turns and sub-agents in RunOptions.DelegationCaps, so a child's
	// behaviour follows its input.
	changeDelegationCaps = "delegation-caps"
	// changeToolErrorResults: a tool activity that fails (a timeout on
	// every attempt) is an llm.tool_result with is_error for the model,
	// and the agent goes on (it failed the team).
	changeToolErrorResults = "tool-error-results"
	// changeSelfDelegation: a sub-agent may delegate to itself, up to its
	// max_depth (it was refused as a cycle).
	changeSelfDelegation = "self-delegation"
	// changePartialResults: a failed team turn keeps its finished workers'
	// outputs, marked partial (they were dropped).
	changePartialResults = "partial-results"
	// changePause: the run takes pause and resume (updates and signals)
	// and holds its new steps while paused. Asked once at the run's start
	// and carried in RunOptions.Pausable to its team turns and sub-agents.
	changePause = "pause-resume"
	// changeRoutedParallel: in routed mode with max_parallel_teams above
	// 1 the global supervisor may dispatch several ready teams at once
	// (runRouted); it dispatched one at a time.
	changeRoutedParallel = "routed-parallel"
	// changeTurnContinueAsNew: a run whose history grows long in the
	// middle of team turns stops them between two steps and continues as
	// new carrying them (RunState.Suspended); it waited for the turns to
	// end.
	changeTurnContinueAsNew = "turn-continue-as-new"
	// changeSteer: an operator may cancel one team's turn (cancel_team)
	// or give an agent guidance for its next prompt (redirect); each team
	// turn runs on a cancellable context of its own (see steer.go).
	changeSteer = "steer-teams"
	// changeApprovals: agents with requires_approval and tools in
	// approval_tools wait for a person's decision (approval.go); they
	// were ignored. Asked once at the run's start and carried in
	// RunOptions.Approvals; only team turns run inside the run's workflow
	// have gates.
	changeApprovals = "approval-gates"
	// changeUsageSearchAttributes: the run keeps the TotalTokens and
	// CostUsd search attributes current (when its options say the
	// namespace has them).
	changeUsageSearchAttributes = "usage-search-attributes"
	// changeForkSeed: a forked run (RunInput.Fork) starts from the state
	// its original had at the fork point. Asked only by forks, all of
	// which start with it; the marker says what a history is.
	changeForkSeed = "fork-seed"
	// changeKeyRejectedCode: a team turn or run that fails because a
	// provider refused its key (an ErrLLMKeyRejected failure) records
	// PROVIDER_KEY_REJECTED as its error code, in the run's errors, the
	// turn's output and the lifecycle.failed event; it recorded
	// EXECUTION_FAILED. Asked where such a failure is recorded (keyFailureCode),
	// so only runs that meet one carry the marker.
	changeKeyRejectedCode = "key-rejected-code"
	// changeIdleFlush: while the run is idle (paused, or waiting for an
	// approval) every event it appends is stored at once, so runs/events
	// trails the stream by one database write; such events waited for a
	// batch of persistBatch or the next safe point.
	changeIdleFlush = "idle-flush"
	// changeSupervisorStandIn: a team supervisor whose decision fails for
	// good (its retries and fallback models spent) hands its routing to a
	// stand-in, the global supervisor's model with the team supervisor's
	// prompt (TeamInput.SupervisorStandIn); the turn failed.
	changeSupervisorStandIn = "supervisor-stand-in"
	// changeAttemptOrder: the log keeps an LLM call's attempts apart
	// (models.EventLog.ApplyAttemptBatch): a repeated attempt is always
	// announced by an llm.retry before its text, a replaced attempt's late
	// batches are dropped, and a kept answer's usage is reported once.
	changeAttemptOrder = "attempt-order"
	// changeBatchOrder: a batch that arrives before an earlier batch of
	// its producer is held until that one is applied (models.EventLog.Gap,
	// Hold, NextHeld). It was applied at once, and the earlier batch,
	// applied next (a signal that another coroutine's selector had taken
	// while an event update's handler ran), was dropped as a repeat:
	// streamed text went missing from the log under load.
	changeBatchOrder = "batch-order"
	// changeEventLease: an LLM activity the run waits on alone numbers,
	// stores and pushes its own events under a lease of the run's next
	// sequences (models.EventLease, lease.go); they went to the workflow
	// as updates, a workflow task per batch.
	changeEventLease = "event-lease"
	// changeAdmissionQueue: a run started queued (RunInput.Queue)
	// announces lifecycle.queued and waits, idle, for admission (the admit
	// signal, or its poll of the store) before it starts (admission.go).
	changeAdmissionQueue = "admission-queue"
	// changeMCPApprovals: a call of an MCP tool that the LLM call's
	// listing gated (RespondResult.MCPGates: the server's approval policy
	// met by the tool's annotations, or an "mcp:" key of the agent's
	// approval_tools) waits for a person like an approval_tools call; where
	// nobody can be asked (a sub-agent, a run without gates) it is refused
	// with an error result. It ran at once. Asked only at such a call, so
	// only runs that meet one carry the marker.
	changeMCPApprovals = "mcp-approval-gates"
	// changeA2AWorkers (a2a.go): a worker naming a remote A2A agent is
	// called by the CallA2A activity. Asked only at such a worker's turn.
)

// recordFieldChanges asks, once at the start of a run's execution, for the
// changes whose behaviour the run's team turns and sub-agents follow, and
// carries the answers in the options (as changeDelegationCaps does).
func recordFieldChanges(ctx workflow.Context, o models.RunOptions) models.RunOptions {
	o.ToolErrorResults = changed(ctx, changeToolErrorResults)
	o.SelfDelegation = changed(ctx, changeSelfDelegation)
	o.PartialResults = changed(ctx, changePartialResults)
	return o
}

// storeOutageLimit is how long a run waits for its database to come back
// before a write fails it.
const storeOutageLimit = 24 * time.Hour

// saveAnswer stores what an LLM activity returned when its writes were
// deferred (o.DeferWrites): a local activity, retried until the database
// answers. In a run from before changeAnswerSaveStep the activity stored
// them itself, and there is nothing to do.
func saveAnswer(ctx workflow.Context, o models.RunOptions, rec models.AnswerRecord) error {
	return saveUnsaved(ctx, o, false, rec)
}

// saveUnsaved is saveAnswer for an answer whose activity may have stored
// the record itself (saved: models.Decision.Saved, RespondResult.Saved).
func saveUnsaved(ctx workflow.Context, o models.RunOptions, saved bool, rec models.AnswerRecord) error {
	if saved || !o.DeferWrites || (len(rec.Calls) == 0 && rec.MessageID == "") {
		return nil
	}
	return workflow.ExecuteLocalActivity(storeLocalContext(ctx), a.SaveAnswer, rec).Get(ctx, nil)
}

// storeLocalContext sets the options of a database write made as a local
// activity: retried until it succeeds, as storeContext's activities are.
// The SDK ends a local activity's retries at its schedule-to-close timeout,
// which defaults to the start-to-close one: without a long one, a 30 s
// database outage would fail the run.
func storeLocalContext(ctx workflow.Context) workflow.Context {
	return workflow.WithLocalActivityOptions(ctx, workflow.LocalActivityOptions{
		ScheduleToCloseTimeout: storeOutageLimit,
		StartToCloseTimeout:    30 * time.Second,
		RetryPolicy: &temporal.RetryPolicy{
			InitialInterval:    500 * time.Millisecond,
			BackoffCoefficient: 2,
			MaximumInterval:    10 * time.Second,
		},
	})
}

func agentSummary(team string, agent models.Agent, o models.RunOptions) string {
	name := agent.Name
	if team != "" {
		name = team + "/" + name
	}
	return name + " · " + o.ModelFor(agent)
}

// llmTimeout is how long one attempt of an agent's LLM call may take.
func llmTimeout(o models.RunOptions, agent models.Agent) time.Duration {
	if agent.Timeout > 0 {
		// Spec 001's llm_config.timeout: this agent's calls get their own limit.
		return time.Duration(agent.Timeout) * time.Second
	}
	return o.LLMCallTimeout
}

// llmError names the agent, the model and the limit in the error of an LLM
// activity that timed out (Temporal's own says only "StartToClose"); other
// errors already name them (see activities.llmFailure) and pass as they are.
func llmError(err error, source models.Source, agent models.Agent, o models.RunOptions) error {
	var timeout *temporal.TimeoutError
	if err == nil || !errors.As(err, &timeout) {
		return err
	}
	limit := llmTimeout(o, agent)
	if timeout.TimeoutType() == enumspb.TIMEOUT_TYPE_HEARTBEAT {
		limit = o.HeartbeatTimeout
	}
	kind := map[enumspb.TimeoutType]string{
		enumspb.TIMEOUT_TYPE_START_TO_CLOSE:    "start-to-close",
		enumspb.TIMEOUT_TYPE_HEARTBEAT:         "heartbeat",
		enumspb.TIMEOUT_TYPE_SCHEDULE_TO_CLOSE: "schedule-to-close",
		enumspb.TIMEOUT_TYPE_SCHEDULE_TO_START: "schedule-to-start",
	}[timeout.TimeoutType()]
	msg := fmt.Sprintf("%s %q (agent_id %s) calling model %q: no answer within the %s timeout of %s, on every attempt",
		source.AgentType, source.AgentName, source.AgentID, o.ModelFor(agent), kind, limit)
	return temporal.NewNonRetryableApplicationError(msg, models.ErrLLMTimeout, err)
}
