package workflows

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/op-stack/executor/models"
	"github.com/op-stack/executor/telemetry"
)

// runSignaler appends events a child workflow produces itself (warnings,
// delegation) to the run's log, by signalling the run's workflow. The
// producer is the child workflow, and Seq counts its batches, so a batch is
// applied once.
type runSignaler struct {
	RunID    string `json:"run_id"`
	Producer string `json:"producer"`
	Seq      int    `json:"seq"`
}

// eventSink takes the events of a team turn or a sub-agent: by signal to
// the run's workflow from a child workflow (runSignaler), or straight into
// the run's log when the turn runs inside the run's workflow (runLogSink).
type eventSink interface {
	// emit appends an event the workflow code produces itself.
	emit(ctx workflow.Context, source models.Source, category, action string, data map[string]any)
	// returnsEvents says whether activities return their last events in
	// their results (ReturnEvents), to be given to apply.
	returnsEvents() bool
	// apply appends events an activity returned; nil is nothing.
	apply(batch *models.EventBatch)
	// lease lends the run's next sequences to the LLM activity about to
	// start (lease.go), or returns nil; endLease, called once its result
	// or error is in, takes them back and applies what it returned.
	lease(ctx workflow.Context) *models.EventLease
	endLease(ctx workflow.Context, l *models.EventLease, batch *models.EventBatch, err error)
	// name prefixes the workflow IDs of the sub-agents started under it.
	name() string
}

// llmEventData completes the data of an llm.* event the workflow produces:
// spec 000 puts the agent_id, content and attempt on every one.
func llmEventData(source models.Source, category string, data map[string]any) map[string]any {
	if category == models.CategoryLLM {
		data["agent_id"] = source.AgentID
		if _, ok := data["content"]; !ok {
			data["content"] = ""
		}
		data["attempt"] = 1
	}
	return data
}

func (r *runSignaler) returnsEvents() bool                       { return false }
func (r *runSignaler) apply(batch *models.EventBatch)            {}
func (r *runSignaler) lease(workflow.Context) *models.EventLease { return nil }
func (r *runSignaler) endLease(workflow.Context, *models.EventLease, *models.EventBatch, error) {
}
func (r *runSignaler) name() string { return r.Producer }

// emit sends one event and waits until it is delivered, so it precedes
// whatever the workflow does next.
func (r *runSignaler) emit(ctx workflow.Context, source models.Source, category, action string, data map[string]any) {
	data = llmEventData(source, category, data)
	r.Seq++
	batch := models.EventBatch{Producer: r.Producer, Seq: r.Seq, Events: []models.Event{{
		RunID:     r.RunID,
		Timestamp: models.FormatTimestamp(workflow.Now(ctx)),
		Source:    source,
		Event:     models.EventKind{Category: category, Action: action},
		Data:      data,
	}}}
	// Best effort: the event is informational; the turn's result carries
	// what matters.
	_ = workflow.SignalExternalWorkflow(ctx, models.RunWorkflowID(r.RunID), "", models.SignalEvents, batch).Get(ctx, nil)
}

// agentTurn is one turn of an agent that may use tools: a worker answering
// its team supervisor's instruction, or a sub-agent doing a delegated task.
type agentTurn struct {
	RunID           string
	Agent           models.Agent
	Source          models.Source
	Task            string
	Instruction     string
	Context         []models.ContextItem
	CallerContext   string // a sub-agent's context from its caller
	Purpose         string
	MessageID       string
	ParentMessageID string
	Options         models.RunOptions
	Events          eventSink
	// Budget is the run's delegation budget as this workflow execution
	// holds it (see delegationBudget); nil, in a run started before the
	// delegation caps, is no cap at all.
	Budget *delegationBudget
	// Gate holds the turn's next LLM call or tool call while the run is
	// paused; nil without pause.
	Gate *pauseGate
	// Guidance takes the operator's guidance waiting for the agent
	// (steering; nil without it).
	Guidance func(agentID string) []string
	// Approvals holds the agent's turn's tool calls named in its
	// approval_tools until a person decides; nil without approval gates.
	Approvals *approvalBook
	// delegations counts the sub-agents this turn has started, over all
	// its tool rounds, against Options.MaxDelegationsPerTurn.
	delegations int
}

// turnResult is a finished turn.
type turnResult struct {
	Answer models.RespondResult
	Usage  models.Usage
	// SubAgentUsage is the part of Usage its sub-agents spent; nil when it
	// delegated to none.
	SubAgentUsage *models.Usage
	Warnings      []string
	ToolsUsed     []string
}

// run loops: the model answers or asks for tool calls; each tool call runs
// (a registry tool as its own activity, delegate as a child workflow) and
// its result goes back to the model, up to the agent's iteration limit,
// after which the model must answer without tools.
//
// With tracing on, the turn is an invoke_agent span (a replay-safe
// telemetry.WorkflowSpan, emitted once when the turn ends) and the parent
// of its activities' and sub-agents' spans. It adds no command, so runs in
// flight replay as before.
func (t *agentTurn) run(ctx workflow.Context) (turnResult, error) {
	agent := telemetry.Agent{Name: t.Source.AgentName, ID: t.Source.AgentID, Conversation: t.Options.ThreadID}
	sctx, span := telemetry.StartWorkflowSpan(ctx, "invoke_agent:"+t.Source.AgentID+":"+t.MessageID, "invoke_agent "+t.Source.AgentName,
		telemetry.AgentAttributes(agent, t.Options.ModelFor(t.Agent), t.Agent.Provider)...)
	res, err := t.rounds(sctx)
	// Not deferred: an evicted workflow's deferred calls run, and the span
	// must not be emitted then.
	span.End(ctx, err, telemetry.UsageAttributes(res.Usage.PromptTokens, res.Usage.CompletionTokens)...)
	return res, err
}

// rounds is run's loop; a remote A2A worker's turn is one call instead.
func (t *agentTurn) rounds(ctx workflow.Context) (turnResult, error) {
	if t.isA2AWorker(ctx) {
		return t.runA2A(ctx)
	}
	var (
		res        turnResult
		transcript []models.ChatMessage
	)
	limit := t.Agent.MaxIterations
	if limit <= 0 {
		limit = models.DefaultAgentIterations
	}
	summary := agentSummary(teamName(t.Source), t.Agent, t.Options)
	for round := 1; ; round++ {
		in := models.RespondInput{
			RunID: t.RunID, Purpose: t.Purpose, Agent: t.Agent, Source: t.Source, Task: t.Task,
			Instruction: t.Instruction, Context: t.Context, CallerContext: t.CallerContext, RunOptions: t.Options, Transcript: transcript,
			NoTools: round > limit, MessageID: t.MessageID, ParentMessageID: t.ParentMessageID,
			ReturnEvents: t.Events.returnsEvents(), DeferWrites: t.Options.DeferWrites,
		}
		if t.Guidance != nil {
			in.Guidance = t.Guidance(t.Agent.AgentID)
		}
		if err := t.Gate.wait(ctx); err != nil {
			return res, err
		}
		var answer models.RespondResult
		in.Lease = t.Events.lease(ctx)
		err := workflow.ExecuteActivity(llmContext(ctx, t.Options, summary, t.Agent), a.Respond, in).Get(ctx, &answer)
		t.Events.endLease(ctx, in.Lease, answer.Events, err)
		if err != nil {
			return res, llmError(err, t.Source, t.Agent, t.Options)
		}
		rec := models.AnswerRecord{RunID: t.RunID, Calls: answer.Calls}
		if len(answer.ToolCalls) == 0 {
			// The turn's final answer, stored under the id its stream carried.
			rec.MessageID, rec.ParentMessageID = t.MessageID, t.ParentMessageID
			rec.Source, rec.Content = t.Source, answer.Output
		}
		if err := saveUnsaved(ctx, t.Options, answer.Saved, rec); err != nil {
			return res, err
		}
		res.Usage = res.Usage.Add(answer.Usage)
		if len(answer.ToolCalls) == 0 {
			res.Answer = answer
			return res, nil
		}
		transcript = append(transcript, models.ChatMessage{Role: "assistant", Content: answer.Output, ToolCalls: answer.ToolCalls})
		for _, call := range answer.ToolCalls {
			if !contains(res.ToolsUsed, call.Name) {
				res.ToolsUsed = append(res.ToolsUsed, call.Name)
			}
			if err := t.Gate.wait(ctx); err != nil {
				return res, err
			}
			var (
				out      models.ToolOutput
				usage    models.Usage
				rejected bool
				approved bool // at an MCP tool's gate
			)
			gated := t.Approvals != nil && contains(t.Agent.ApprovalTools, call.Name)
			mcpGate := mcpGateOf(answer.MCPGates, call.Name)
			if mcpGate != nil && changed(ctx, changeMCPApprovals) {
				if t.Approvals == nil {
					// No person can be asked here (a sub-agent, or a run
					// from before approval gates): the call does not run.
					rejected = true
					out = models.ToolOutput{Content: fmt.Sprintf("tool call refused: MCP tool %s/%s needs a person's approval (%s), which %s %q cannot ask for",
						mcpGate.Server, mcpGate.Tool, mcpGate.Reason, t.Source.AgentType, t.Source.AgentName), IsError: true}
					t.Events.emit(ctx, t.Source, models.CategoryLLM, models.ActionToolResult, mcpResultData(call, newExecutionID(ctx), out, mcpGate))
				} else {
					gated = true
				}
			} else {
				mcpGate = nil
			}
			if gated {
				r, err := t.Approvals.askTool(ctx, t.Source, t.Agent, call, mcpGate)
				if err != nil {
					return res, err
				}
				if err := t.Gate.wait(ctx); err != nil {
					return res, err
				}
				if r.Decision == models.ApprovalRejected {
					// The model gets the rejection as the tool's error result.
					rejected = true
					out = models.ToolOutput{Content: "tool call " + rejectionText(r), IsError: true}
					t.Events.emit(ctx, t.Source, models.CategoryLLM, models.ActionToolResult, mcpResultData(call, newExecutionID(ctx), out, mcpGate))
				} else {
					call.Arguments = r.Arguments
					approved = mcpGate != nil
				}
			}
			if !rejected {
				var err error
				if out, usage, err = t.callTool(ctx, call, approved); err != nil {
					return res, err
				}
			}
			res.Usage = res.Usage.Add(usage)
			if call.Name == models.DelegateToolName && usage != (models.Usage{}) {
				sub := usage
				if res.SubAgentUsage != nil {
					sub = res.SubAgentUsage.Add(usage)
				}
				res.SubAgentUsage = &sub
			}
			content := out.Content
			if out.IsError {
				content = "error: " + content
			}
			transcript = append(transcript, models.ChatMessage{Role: "tool", ToolCallID: call.ID, Content: content})
		}
		if round == limit {
			msg := fmt.Sprintf("%s %q reached its iteration limit (%d tool rounds); asking for its answer without tools", t.Source.AgentType, t.Source.AgentName, limit)
			res.Warnings = append(res.Warnings, msg)
			t.Events.emit(ctx, t.Source, models.CategorySystem, models.ActionWarning, map[string]any{"message": msg})
		}
	}
}

// mcpGateOf is the gate of the MCP tool function name among the gates
// an LLM call returned; nil when its calls need no approval.
func mcpGateOf(gates []models.MCPToolGate, name string) *models.MCPToolGate {
	for i := range gates {
		if gates[i].Function == name {
			return &gates[i]
		}
	}
	return nil
}

// mcpResultData is the llm.tool_result of a call that did not run, with
// its MCP server when it is an MCP tool's (gate set), as RunTool's are.
func mcpResultData(call models.ToolCall, execID string, out models.ToolOutput, gate *models.MCPToolGate) map[string]any {
	data := models.ToolResultData(call, execID, out)
	if gate != nil {
		data["mcp_server"] = gate.Server
	}
	return data
}

// callTool runs one tool call under a new tool_execution_id; approved
// says a person approved it at its MCP gate.
func (t *agentTurn) callTool(ctx workflow.Context, call models.ToolCall, approved bool) (models.ToolOutput, models.Usage, error) {
	execID := newExecutionID(ctx)
	if call.Name == models.DelegateToolName {
		return t.delegate(ctx, call, execID)
	}
	mcpTools := models.MCPToolKeys(t.Agent.Tools)
	summary := fmt.Sprintf("tool %s · %s", call.Name, t.Source.AgentName)
	if server, tool, isMCP := models.ParseMCPFunctionName(call.Name); isMCP && len(mcpTools) > 0 {
		// The Web UI's line for an MCP call names its server. A summary is
		// metadata, not part of the command replay compares.
		summary = fmt.Sprintf("mcp %s/%s · %s", server, tool, t.Source.AgentName)
	}
	tctx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: toolTimeout(t.Options),
		HeartbeatTimeout:    t.Options.HeartbeatTimeout,
		Summary:             summary,
		RetryPolicy: &temporal.RetryPolicy{
			InitialInterval: t.Options.RetryInitial, BackoffCoefficient: 2, MaximumInterval: t.Options.RetryMax,
			MaximumAttempts: models.MaxToolAttempts,
		},
	})
	start := workflow.Now(ctx)
	var out models.ToolOutput
	err := workflow.ExecuteActivity(tctx, a.RunTool, models.ToolInput{
		RunID: t.RunID, Source: t.Source, ExecutionID: execID, Call: call, RunOptions: t.Options,
		ReturnEvents: t.Events.returnsEvents(), MCPTools: mcpTools,
		MCPApprovalTools: models.MCPToolKeys(t.Agent.ApprovalTools), MCPApproved: approved,
	}).Get(ctx, &out)
	t.Events.apply(out.Events)
	out.Events = nil
	if err != nil && t.Options.ToolErrorResults && !temporal.IsCanceledError(err) && ctx.Err() == nil {
		// The activity failed (no attempt answered within its timeouts):
		// the model gets the error as the tool's result and goes on, and
		// the stream the llm.tool_result the activity could not send.
		out = models.ToolOutput{Content: toolFailure(call.Name, err, t.Options), IsError: true, DurationMs: workflow.Now(ctx).Sub(start).Milliseconds()}
		t.Events.emit(ctx, t.Source, models.CategoryLLM, models.ActionToolResult, models.ToolResultData(call, execID, out))
		return out, models.Usage{}, nil
	}
	return out, models.Usage{}, err
}

// defaultToolTimeout bounds one attempt of a tool call of a run whose
// options have no ToolCallTimeout.
const defaultToolTimeout = 2 * time.Minute

// toolTimeout bounds one attempt of a tool call.
func toolTimeout(o models.RunOptions) time.Duration {
	if o.ToolCallTimeout > 0 {
		return o.ToolCallTimeout
	}
	return defaultToolTimeout
}

// toolFailure is the error result of a tool activity that failed: for a
// timeout, the tool, which timeout and its limit.
func toolFailure(tool string, err error, o models.RunOptions) string {
	var timeout *temporal.TimeoutError
	if errors.As(err, &timeout) {
		kind, limit := "start-to-close", toolTimeout(o).String()
		if timeout.TimeoutType() == enumspb.TIMEOUT_TYPE_HEARTBEAT {
			kind, limit = "heartbeat", o.HeartbeatTimeout.String()
		}
		return fmt.Sprintf("tool %s timed out: no result within the %s timeout of %s, on every attempt (%d)", tool, kind, limit, models.MaxToolAttempts)
	}
	return fmt.Sprintf("tool %s failed: %s", tool, failureMessage(err))
}

type delegateArgs struct {
	Name string `json:"name"`
	Task string `json:"task"`
	// Context is optional structured context for the sub-agent (spec 003's
	// subAgent tool input).
	Context json.RawMessage `json:"context,omitempty"`
	// Options are spec 003's subAgent tool options: Mode narrows what the
	// sub-agent may use for this task (models.DelegateModes).
	Options *struct {
		Mode string `json:"mode"`
	} `json:"options,omitempty"`
}

// changeDelegateMode: the delegate tool's options.mode narrows the
// sub-agent's tools and sub-agents for the task (spec 003). A call with
// options made before it ran the sub-agent as defined; calls without
// options never reach the version check, so their histories are as before.
const changeDelegateMode = "delegate-mode"

// maxCallerContextChars bounds the context a caller passes to a sub-agent
// (it travels in the child workflow's input).
const maxCallerContextChars = 16000

// callerContext is the delegate call's context as compact JSON, "" when
// absent or null, cut to maxCallerContextChars.
func callerContext(raw json.RawMessage) string {
	var b bytes.Buffer
	if len(raw) == 0 || json.Compact(&b, raw) != nil || b.String() == "null" {
		return ""
	}
	if r := []rune(b.String()); len(r) > maxCallerContextChars {
		return string(r[:maxCallerContextChars]) + " …[truncated]"
	}
	return b.String()
}

// delegate runs a sub-agent as a child workflow, after the guard: the
// turn and the run must be under their delegation caps (with t.Budget; see
// delegationBudget), the target must be on the caller's allowlist, exist
// and be enabled, not be on the call path already (a cycle), and not be
// nested deeper than its max_depth. A refusal is an error result for the
// calling model and a system.warning on the stream.
func (t *agentTurn) delegate(ctx workflow.Context, call models.ToolCall, execID string) (models.ToolOutput, models.Usage, error) {
	start := workflow.Now(ctx)
	t.Events.emit(ctx, t.Source, models.CategoryLLM, models.ActionToolCall, models.ToolCallData(call, execID))
	finish := func(out models.ToolOutput) models.ToolOutput {
		out.DurationMs = workflow.Now(ctx).Sub(start).Milliseconds()
		t.Events.emit(ctx, t.Source, models.CategoryLLM, models.ActionToolResult, models.ToolResultData(call, execID, out))
		return out
	}
	// counted says this call has been counted against the caps; a refusal
	// after that uncounts it: only sub-agents started count.
	counted := false
	warn := func(data map[string]any, format string, args ...any) (models.ToolOutput, models.Usage, error) {
		if counted {
			t.delegations--
			t.Budget.giveBack()
			counted = false
		}
		msg := "delegation refused: " + fmt.Sprintf(format, args...)
		data["message"], data["tool_execution_id"] = msg, execID
		t.Events.emit(ctx, t.Source, models.CategorySystem, models.ActionWarning, data)
		return finish(models.ToolOutput{Content: msg, IsError: true}), models.Usage{}, nil
	}
	refuse := func(format string, args ...any) (models.ToolOutput, models.Usage, error) {
		return warn(map[string]any{}, format, args...)
	}

	var args delegateArgs
	if err := json.Unmarshal([]byte(call.Arguments), &args); err != nil || strings.TrimSpace(args.Name) == "" || strings.TrimSpace(args.Task) == "" {
		return refuse(`the arguments must be {"name": <sub-agent>, "task": <text>, "context"?: <object>, "options"?: {"mode"?: <mode>}}`)
	}
	if t.Budget != nil {
		if limit := t.Options.MaxDelegationsPerTurn; t.delegations >= limit {
			return warn(map[string]any{"cap": "per_turn", "limit": limit},
				"cap reached: %s %q has started %d sub-agents in this turn, the most MAX_DELEGATIONS_PER_TURN allows; %q was not run, carry on without delegating",
				t.Source.AgentType, t.Source.AgentName, limit, args.Name)
		}
		ok, err := t.Budget.take(ctx)
		if err != nil {
			return models.ToolOutput{}, models.Usage{}, err
		}
		if !ok {
			limit := t.Options.MaxDelegationsPerRun
			return warn(map[string]any{"cap": "per_run", "limit": limit},
				"cap reached: the run has started the %d sub-agents MAX_DELEGATIONS_PER_RUN allows; %q was not run, carry on without delegating",
				limit, args.Name)
		}
		t.delegations++
		counted = true
	}
	if !contains(t.Agent.SubAgents, args.Name) {
		return refuse("%q is not on the allowlist of %s %q (allowed: %s)", args.Name, t.Source.AgentType, t.Source.AgentName, strings.Join(t.Agent.SubAgents, ", "))
	}
	var def models.SubAgent
	lctx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: 30 * time.Second,
		RetryPolicy:         &temporal.RetryPolicy{InitialInterval: 500 * time.Millisecond, MaximumAttempts: 5, NonRetryableErrorTypes: []string{models.ErrSubAgentUnavailable}},
	})
	// Runs started before tenants have no tenant and keep the activity
	// their histories recorded; the input decides, so replay agrees.
	load := workflow.ExecuteActivity(lctx, a.LoadSubAgent, args.Name)
	if t.Options.Tenant != "" {
		load = workflow.ExecuteActivity(lctx, a.LoadTenantSubAgent, models.LoadSubAgentInput{Tenant: t.Options.Tenant, Name: args.Name})
	}
	if err := load.Get(ctx, &def); err != nil {
		return refuse("%s", failureMessage(err))
	}
	// A sub-agent delegating to itself is recursion, which max_depth
	// bounds (changeSelfDelegation); another agent already on the call
	// path is a cycle.
	self := t.Options.SelfDelegation && t.Source.AgentType == models.AgentTypeSubAgent && def.ID == t.Source.AgentID
	if !self && contains(t.Source.Path, def.ID) {
		return refuse("cycle: %q (agent_id %s) is already on the call path %s", def.Name, def.ID, strings.Join(t.Source.Path, " → "))
	}
	maxDepth := def.MaxDepth
	if maxDepth <= 0 {
		maxDepth = models.DefaultSubAgentMaxDepth
	}
	if level := t.Source.SubAgentLevel() + 1; level > maxDepth {
		return refuse("depth: %q would run %d sub-agent levels deep, beyond its max_depth of %d", def.Name, level, maxDepth)
	}

	mode := ""
	if args.Options != nil && changed(ctx, changeDelegateMode) {
		mode = strings.TrimSpace(args.Options.Mode)
		if !models.ApplyDelegateMode(&def, mode) {
			return refuse("options.mode %q is not one of %s", mode, strings.Join(models.DelegateModes, ", "))
		}
	}

	source := models.SubAgentSource(t.Source, &def)
	childID := t.Events.name() + "-sub-" + execID
	cctx := workflow.WithChildOptions(ctx, workflow.ChildWorkflowOptions{
		WorkflowID:          childID,
		StaticSummary:       fmt.Sprintf("sub-agent %s · called by %s", def.Name, t.Source.AgentName),
		StaticDetails:       args.Task,
		WaitForCancellation: true,
	})
	lent := 0
	if t.Budget != nil {
		lent = t.Budget.lend()
	}
	var res models.SubAgentResult
	child := workflow.ExecuteChildWorkflow(cctx, SubAgentWorkflow, models.SubAgentInput{
		RunID: t.RunID, WorkflowID: childID, Definition: def, Source: source, Task: args.Task,
		MessageID: newMessageID(ctx), ParentMessageID: t.MessageID, Options: t.Options,
		DelegationBudget: lent, Context: callerContext(args.Context),
	})
	forget := t.Gate.track(ctx, child, childID)
	err := child.Get(ctx, &res)
	forget()
	if t.Budget != nil {
		spent := lent // a failed sub-agent: what it spent is unknown
		if err == nil {
			spent = res.Delegations
		}
		t.Budget.settle(lent, spent)
	}
	if err != nil {
		if temporal.IsCanceledError(err) {
			return models.ToolOutput{}, models.Usage{}, err
		}
		// What the failed sub-agent spent counts, so a budget overshoots by
		// no more than the calls in flight (changeFailedSubAgentUsage).
		var spent models.Usage
		if changed(ctx, changeFailedSubAgentUsage) {
			spent = failedSubAgentUsage(err)
		}
		return finish(models.ToolOutput{Content: fmt.Sprintf("sub-agent %q failed: %s", def.Name, failureMessage(err)), IsError: true}), spent, nil
	}
	out := map[string]any{"ok": true, "sub_agent": def.Name, "message_id": res.MessageID, "summary": res.Summary}
	if mode != "" {
		out["mode"] = mode
	}
	result, _ := json.Marshal(out)
	return finish(models.ToolOutput{Content: string(result)}), res.Usage, nil
}

// changeFailedSubAgentUsage: a caller counts what a failed sub-agent spent
// (the SubAgentFailure in its failure's details) in its turn's usage, and
// so in the run's usage and budgets; before it, a failed sub-agent's calls
// counted nowhere in the workflow.
const changeFailedSubAgentUsage = "failed-sub-agent-usage"

// failedSubAgentUsage is what a failed sub-agent reported spending in its
// failure's details; nothing when it reported nothing (a sub-agent that
// failed before it could, or one of an older version).
func failedSubAgentUsage(err error) models.Usage {
	var appErr *temporal.ApplicationError
	if !errors.As(err, &appErr) || appErr.Type() != models.ErrSubAgentFailed || !appErr.HasDetails() {
		return models.Usage{}
	}
	var f models.SubAgentFailure
	if appErr.Details(&f) != nil {
		return models.Usage{}
	}
	return f.Usage
}

// subAgentSummaryChars bounds what a sub-agent returns to its caller; the
// whole answer is on the stream and stored as its message.
const subAgentSummaryChars = 2000

// SubAgentWorkflow runs a sub-agent on a delegated task: one agent turn,
// with its own tools and sub-agents, and returns a short summary. With the
// delegation caps (Options.DelegationCaps) its sub-agents are paid for out
// of the budget its caller lent it (in.DelegationBudget), and it returns
// what it spent (see delegationBudget).
func SubAgentWorkflow(ctx workflow.Context, in models.SubAgentInput) (*models.SubAgentResult, error) {
	in.Options = WithDefaults(in.Options)
	spent := 0
	turn := &agentTurn{
		RunID: in.RunID, Agent: in.Definition.Agent(), Source: in.Source, Task: in.Task, Instruction: in.Task,
		Purpose: models.PurposeWorker, MessageID: in.MessageID, ParentMessageID: in.ParentMessageID, Options: in.Options,
		Events: &runSignaler{RunID: in.RunID, Producer: in.WorkflowID},
		Budget: newDelegationBudget(in.Options, in.DelegationBudget, &spent),
		Gate:   newPauseGate(in.Options),
	}
	turn.CallerContext = in.Context
	turn.Gate.listen(ctx)
	res, err := turn.run(ctx)
	if err != nil {
		if temporal.IsCanceledError(err) || ctx.Err() != nil {
			return nil, err
		}
		// The failure carries what the sub-agent spent before it failed,
		// for its caller to count (changeFailedSubAgentUsage). Its message
		// is the cause's, without the cause itself, so the caller's
		// failureMessage reads the same text as before.
		return nil, temporal.NewApplicationErrorWithOptions(failureMessage(err), models.ErrSubAgentFailed, temporal.ApplicationErrorOptions{
			NonRetryable: true,
			Details:      []any{models.SubAgentFailure{Usage: res.Usage, Delegations: spent}},
		})
	}
	summary := res.Answer.Output
	if r := []rune(summary); len(r) > subAgentSummaryChars {
		summary = string(r[:subAgentSummaryChars]) + " …[truncated; the full answer is message " + in.MessageID + "]"
	}
	return &models.SubAgentResult{MessageID: in.MessageID, Summary: summary, Usage: res.Usage, Delegations: spent}, nil
}

// newExecutionID returns a tool_execution_id ("exec_" + 12 hex, spec 004),
// recorded in the history so a replay sees the same one.
func newExecutionID(ctx workflow.Context) string {
	return randomID(ctx, "exec_", 6)
}

// newMessageID returns an application-set message id (spec 003).
func newMessageID(ctx workflow.Context) string {
	return randomID(ctx, "msg_", 12)
}

func randomID(ctx workflow.Context, prefix string, n int) string {
	var id string
	encoded := workflow.SideEffect(ctx, func(workflow.Context) any {
		b := make([]byte, n)
		_, _ = rand.Read(b)
		return prefix + hex.EncodeToString(b)
	})
	_ = encoded.Get(&id)
	return id
}

func teamName(s models.Source) string {
	if s.TeamName == nil {
		return ""
	}
	return *s.TeamName
}
