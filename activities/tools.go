package activities

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"go.temporal.io/sdk/temporal"

	"github.com/op-stack/executor/llm"
	"github.com/op-stack/executor/mcp"
	"github.com/op-stack/executor/memory"
	"github.com/op-stack/executor/models"
	"github.com/op-stack/executor/store"
	"github.com/op-stack/executor/telemetry"
	"github.com/op-stack/executor/tools"
)

// toolDefinitions are the tools an agent is offered: its registry tools,
// plus delegate when it may call sub-agents.
func (a *Activities) toolDefinitions(agent models.Agent) []llm.ToolDef {
	var defs []llm.ToolDef
	if a.Tools != nil {
		defs = a.Tools.Definitions(agent.Tools)
	}
	if len(agent.SubAgents) > 0 {
		params, _ := json.Marshal(map[string]any{
			"type": "object",
			"properties": map[string]any{
				"name":    map[string]any{"type": "string", "enum": agent.SubAgents, "description": "the sub-agent to run"},
				"task":    map[string]any{"type": "string", "description": "what the sub-agent should do, with everything it needs to know"},
				"context": map[string]any{"type": "object", "description": "optional structured context for the sub-agent (URLs, data, preferences); it sees it as JSON"},
				"options": map[string]any{"type": "object", "additionalProperties": false, "properties": map[string]any{
					"mode": map[string]any{"type": "string", "enum": models.DelegateModes,
						"description": "optional: default (as defined), no_delegation (its tools, no sub-agents) or no_tools (neither)"},
				}},
			},
			"required":             []string{"name", "task"},
			"additionalProperties": false,
		})
		defs = append(defs, llm.ToolDef{
			Name:        models.DelegateToolName,
			Description: "Run a sub-agent on a task and get a short summary of its answer.",
			Parameters:  params,
		})
	}
	return defs
}

// RunTool runs one tool call and publishes its llm.tool_call and
// llm.tool_result events, which share the call's tool_execution_id and both
// carry the tool's name (spec 004). A failing tool is an error result for
// the model, never a failed run.
func (a *Activities) RunTool(ctx context.Context, in models.ToolInput) (*models.ToolOutput, error) {
	pub := a.newPublisher(ctx, in.RunID)
	defer pub.close()
	if pub.attempt == 1 {
		data := models.ToolCallData(in.Call, in.ExecutionID)
		if server, ok := mcp.IsFunctionName(in.Call.Name); ok {
			data["mcp_server"] = server
		}
		pub.emit(pub.event(in.Source, models.CategoryLLM, models.ActionToolCall, data))
	}
	mcpServer, isMCP := mcp.IsFunctionName(in.Call.Name)
	isMCP = isMCP && a.MCP != nil
	tool := telemetry.ToolCall{Agent: genAIAgent(in.Source, in.RunOptions.ThreadID), Name: in.Call.Name, CallID: in.ExecutionID, Arguments: in.Call.Arguments}
	if isMCP {
		tool.MCPServer = mcpServer
	}
	// One span per attempt, in the attempt: never repeated by a replay.
	ctx, span := telemetry.StartTool(ctx, tool)
	out, err := a.runTool(ctx, pub, in, isMCP, mcpServer)
	if out != nil {
		telemetry.EndTool(span, out.Content, out.IsError, err)
	} else {
		telemetry.EndTool(span, "", false, err)
	}
	return out, err
}

// runTool is RunTool's work, under its span.
func (a *Activities) runTool(ctx context.Context, pub *publisher, in models.ToolInput, isMCP bool, mcpServer string) (*models.ToolOutput, error) {
	callCtx, stop := a.heartbeat(ctx)
	start := time.Now()
	var (
		content string
		files   []tools.File
		err     error
	)
	if isMCP {
		// A tenant's MCP tool (see mcp.FunctionName): its server answers.
		var res tools.Result
		res, err = a.MCP.Call(callCtx, tenantOf(in.RunOptions.Tenant), in.MCPTools, in.Call.Name, json.RawMessage(in.Call.Arguments),
			mcp.CallApproval{Keys: in.MCPApprovalTools, Approved: in.MCPApproved})
		content, files = res.Content, res.Files
	} else if memory.IsTool(in.Call.Name) && a.Memory != nil {
		// The run's tenant and declared namespaces bound the call, which
		// the registry's tools cannot know (docs/memory.md).
		content, err = a.Memory.RunTool(callCtx, memory.ToolCall{Tenant: tenantOf(in.RunOptions.Tenant), RunKey: in.RunID,
			Scope: in.RunOptions.Memory, Name: in.Call.Name, Arguments: in.Call.Arguments})
	} else {
		switch runner := a.Tools.(type) {
		case nil:
			err = fmt.Errorf("no tools are configured on this worker")
		case FileToolRunner:
			var res tools.Result
			res, err = runner.ExecuteResult(callCtx, in.Call.Name, in.Call.Arguments)
			content, files = res.Content, res.Files
		default:
			content, err = a.Tools.Execute(callCtx, in.Call.Name, in.Call.Arguments)
		}
	}
	cancelled := callCtx.Err()
	stop()
	if cancelled != nil {
		return nil, cancelled
	}
	if err != nil && tools.IsRetryable(err) && pub.attempt < models.MaxToolAttempts {
		return nil, temporal.NewApplicationError(fmt.Sprintf("tool %s: %v", in.Call.Name, err), models.ErrToolUnavailable)
	}
	out := &models.ToolOutput{Content: content, DurationMs: time.Since(start).Milliseconds()}
	if err != nil {
		out.Content, out.IsError = err.Error(), true
	} else if len(files) > 0 {
		// The files' bytes stay here: stored, they travel as ids.
		out.Artifacts = a.storeFiles(ctx, pub, in.Source, models.ArtifactSourceTool, in.Call.Name, files)
		out.Content = withFileNote(out.Content, out.Artifacts, len(files))
	}
	// The arguments and result stay out of the log: they are the run's
	// content, which the event stream carries.
	a.runLogger(ctx, in.RunID, in.Source).Debug("tool call", "tool", in.Call.Name, "tool_execution_id", in.ExecutionID, "is_error", out.IsError, "duration_ms", out.DurationMs)
	data := models.ToolResultData(in.Call, in.ExecutionID, *out)
	if isMCP {
		data["mcp_server"] = mcpServer
	}
	if len(out.Artifacts) > 0 {
		ids := make([]string, len(out.Artifacts))
		for i, r := range out.Artifacts {
			ids[i] = r.ID
		}
		data["artifact_ids"] = ids
	}
	pub.emitLast(pub.event(in.Source, models.CategoryLLM, models.ActionToolResult, data))
	out.Events = pub.finish(in.ReturnEvents)
	return out, nil
}

// FileToolRunner is a ToolRunner whose tools may return files
// (tools.Registry): RunTool stores them as the run's artifacts.
type FileToolRunner interface {
	ExecuteResult(ctx context.Context, key, arguments string) (tools.Result, error)
}

// LoadSubAgent reads an enabled sub-agent definition of the default tenant
// by name: the activity of runs started before tenants.
func (a *Activities) LoadSubAgent(ctx context.Context, name string) (*models.SubAgent, error) {
	return a.LoadTenantSubAgent(ctx, models.LoadSubAgentInput{Name: name})
}

// LoadTenantSubAgent reads an enabled sub-agent definition by name, in the
// run's tenant: a run never reaches another tenant's sub-agents.
func (a *Activities) LoadTenantSubAgent(ctx context.Context, in models.LoadSubAgentInput) (*models.SubAgent, error) {
	name := in.Name
	def, err := a.Store.GetSubAgentByName(ctx, in.Tenant, name)
	if err != nil {
		if models.ErrorCode(err) == models.CodeSubAgentNotFound {
			return nil, temporal.NewNonRetryableApplicationError(fmt.Sprintf("sub-agent %q does not exist", name), models.ErrSubAgentUnavailable, nil)
		}
		return nil, err
	}
	if !def.Enabled {
		return nil, temporal.NewNonRetryableApplicationError(fmt.Sprintf("sub-agent %q is disabled", name), models.ErrSubAgentUnavailable, nil)
	}
	return def, nil
}

// saveMessage stores a turn's final output under its application-set id.
func (a *Activities) saveMessage(ctx context.Context, in models.RespondInput, content string) error {
	if a.Store == nil || in.MessageID == "" {
		return nil
	}
	err := a.Store.SaveMessage(ctx, store.MessageFromSource(in.MessageID, in.RunID, in.ParentMessageID, content, in.Source))
	if err != nil && !errors.Is(err, context.Canceled) {
		return fmt.Errorf("save message %s: %w", in.MessageID, err)
	}
	return err
}

// tenantOf is a run's tenant: runs from before tenants are the default's.
func tenantOf(t string) string {
	if t == "" {
		return store.DefaultTenant
	}
	return t
}

// mcpDefinitions are the function definitions of the agent's MCP tool
// keys, and the gates of those whose calls wait for a person (see
// mcp.Toolbox.Offer). A server that cannot be listed is left out with a
// system.warning: the agent goes on with its other tools.
func (a *Activities) mcpDefinitions(ctx context.Context, pub *publisher, src models.Source, tenant string, agent models.Agent) ([]llm.ToolDef, []models.MCPToolGate) {
	if a.MCP == nil {
		return nil, nil
	}
	keys := models.MCPToolKeys(agent.Tools)
	if len(keys) == 0 {
		return nil, nil
	}
	defs, gates, warnings := a.MCP.Offer(ctx, tenantOf(tenant), keys, models.MCPToolKeys(agent.ApprovalTools))
	for _, w := range warnings {
		pub.emit(pub.event(src, models.CategorySystem, models.ActionWarning, map[string]any{"message": w}))
	}
	return defs, gates
}
