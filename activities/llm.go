package activities

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"go.opentelemetry.io/otel/trace"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"

	"github.com/op-stack/executor/llm"
	"github.com/op-stack/executor/models"
	"github.com/op-stack/executor/store"
	"github.com/op-stack/executor/telemetry"
)

// maxCorrections bounds how often a supervisor is asked again after an
// answer that names no valid option.
const maxCorrections = 2

const defaultContextCharLimit = 8000

// Decide asks a supervisor which team or worker acts next. An answer that
// names no valid option is corrected by asking again, and after
// maxCorrections replaced by a fallback with a warning: a bad answer never
// fails the run.
func (a *Activities) Decide(ctx context.Context, in models.DecideInput) (*models.Decision, error) {
	var err error
	if in.Context, err = a.resolveContext(ctx, in.RunID, in.Context); err != nil {
		return nil, err
	}
	pub := a.newPublisher(ctx, in.RunID)
	defer pub.close()
	pub.deferWrites, pub.retryMax, pub.tenant = in.DeferWrites, in.RunOptions.RetryMax, in.RunOptions.Tenant
	pub.thread = in.RunOptions.ThreadID
	if err := pub.useLease(ctx, in.Lease); err != nil {
		return nil, err
	}
	// A supervisor's decision is its whole turn: its invoke_agent span is
	// this activity's, which runs once per attempt (replay-safe).
	ctx, span := telemetry.StartAgent(ctx, genAIAgent(in.Source, pub.thread), in.RunOptions.ModelFor(in.Supervisor), in.Supervisor.Provider)
	d, err := a.decide(ctx, pub, in)
	if d != nil {
		span.SetAttributes(telemetry.UsageAttributes(d.Usage.PromptTokens, d.Usage.CompletionTokens)...)
	}
	telemetry.EndSpan(span, err)
	return d, err
}

// decide is Decide's work, under its span.
func (a *Activities) decide(ctx context.Context, pub *publisher, in models.DecideInput) (*models.Decision, error) {
	req := llm.Request{
		Model:       in.RunOptions.ModelFor(in.Supervisor),
		Messages:    decisionMessages(in, contextLimit(in.RunOptions)),
		Temperature: in.Supervisor.Temperature,
		MaxTokens:   in.Supervisor.MaxTokens,
		JSONSchema:  decisionSchema(in),
		Provider:    in.Supervisor.Provider,
		BaseURL:     in.Supervisor.BaseURL,
		Region:      in.Supervisor.Region,
	}
	var usage models.Usage
	for try := 0; ; try++ {
		resp, err := a.completeWithFallback(ctx, pub, in.Source, "decision", req, in.Supervisor.FallbackModels, nil)
		if err != nil {
			return nil, err
		}
		usage = usage.Add(a.usage(resp, req.Model))
		d, perr := parseDecision(resp.Content, in)
		if perr == nil {
			d.Usage = usage
			a.publishDecision(ctx, pub, in, d)
			d.Calls = pub.records
			d.Events, d.Saved = pub.finishSaving(in.ReturnEvents, in.DeferWrites, models.AnswerRecord{RunID: in.RunID, Calls: d.Calls})
			return &d, nil
		}
		if try == maxCorrections {
			d = fallbackDecision(in)
			d.Usage = usage
			d.Warning = fmt.Sprintf("%s %q gave no valid decision after %d corrections (last problem: %v); chose %s %q instead",
				in.Source.AgentType, in.Source.AgentName, maxCorrections, perr, d.Action, d.Target)
			a.runLogger(ctx, in.RunID, in.Source).Warn("decision replaced by a fallback", "warning", d.Warning)
			if in.Publish {
				pub.emitLast(pub.event(in.Source, models.CategorySystem, models.ActionWarning, map[string]any{"message": d.Warning}))
			}
			a.publishDecision(ctx, pub, in, d)
			d.Calls = pub.records
			d.Events, d.Saved = pub.finishSaving(in.ReturnEvents, in.DeferWrites, models.AnswerRecord{RunID: in.RunID, Calls: d.Calls})
			return &d, nil
		}
		req.Messages = append(req.Messages,
			llm.Message{Role: llm.RoleAssistant, Content: resp.Content},
			llm.Message{Role: llm.RoleUser, Content: fmt.Sprintf("That answer is not valid: %v. Answer again with the JSON object only.", perr)},
		)
	}
}

func (a *Activities) publishDecision(ctx context.Context, pub *publisher, in models.DecideInput, d models.Decision) {
	if !in.Publish || d.Action != models.DecisionDispatch {
		return
	}
	kind, data := models.DispatchEvent(in.Source, in.Options, d, in.Iteration)
	pub.emitLast(pub.event(in.Source, kind.Category, kind.Action, data))
}

// Respond runs an agent's turn: a worker's answer, or the global
// supervisor's final answer.
func (a *Activities) Respond(ctx context.Context, in models.RespondInput) (*models.RespondResult, error) {
	var err error
	if in.Context, err = a.resolveContext(ctx, in.RunID, in.Context); err != nil {
		return nil, err
	}
	pub := a.newPublisher(ctx, in.RunID)
	defer pub.close()
	pub.deferWrites, pub.retryMax, pub.tenant = in.DeferWrites, in.RunOptions.RetryMax, in.RunOptions.Tenant
	pub.thread = in.RunOptions.ThreadID
	if err := pub.useLease(ctx, in.Lease); err != nil {
		return nil, err
	}
	if in.Purpose == models.PurposeFinalAnswer {
		// The global supervisor's final answer is a turn of its own, one
		// activity: its invoke_agent span is the activity's. (A worker's or
		// a sub-agent's turn spans several activities: the workflow makes
		// its span, see workflows.agentTurn.)
		var span trace.Span
		ctx, span = telemetry.StartAgent(ctx, genAIAgent(in.Source, pub.thread), in.RunOptions.ModelFor(in.Agent), in.Agent.Provider)
		res, err := a.respond(ctx, pub, in)
		if res != nil {
			span.SetAttributes(telemetry.UsageAttributes(res.Usage.PromptTokens, res.Usage.CompletionTokens)...)
		}
		telemetry.EndSpan(span, err)
		return res, err
	}
	return a.respond(ctx, pub, in)
}

// respond is Respond's work.
func (a *Activities) respond(ctx context.Context, pub *publisher, in models.RespondInput) (*models.RespondResult, error) {
	req := llm.Request{
		Model:       in.RunOptions.ModelFor(in.Agent),
		Messages:    append(respondMessages(in, contextLimit(in.RunOptions)), transcriptMessages(in.Transcript)...),
		Temperature: in.Agent.Temperature,
		MaxTokens:   in.Agent.MaxTokens,
		Provider:    in.Agent.Provider,
		BaseURL:     in.Agent.BaseURL,
		Region:      in.Agent.Region,
	}
	var gates []models.MCPToolGate
	if !in.NoTools {
		req.Tools = a.toolDefinitions(in.Agent)
		mcpDefs, mcpGates := a.mcpDefinitions(ctx, pub, in.Source, in.RunOptions.Tenant, in.Agent)
		req.Tools, gates = append(req.Tools, mcpDefs...), mcpGates
	}
	var extra map[string]any
	if in.MessageID != "" {
		extra = map[string]any{"message_id": in.MessageID}
	}
	resp, err := a.completeWithFallback(ctx, pub, in.Source, in.Purpose, req, in.Agent.FallbackModels, extra)
	if err != nil {
		return nil, err
	}
	res := &models.RespondResult{Output: resp.Content, Model: req.Model, Offline: resp.Offline, Usage: a.usage(resp, req.Model)}
	if resp.Model != "" {
		res.Model = resp.Model // the model that answered (see llm.Router.Stream)
	}
	for _, c := range resp.ToolCalls {
		res.ToolCalls = append(res.ToolCalls, models.ToolCall{ID: c.ID, Name: c.Name, Arguments: c.Arguments})
		// Only the gates of tools the model called travel back: the
		// workflow gates those calls, and the history stays small.
		for _, g := range gates {
			if g.Function == c.Name && !slices.ContainsFunc(res.MCPGates, func(x models.MCPToolGate) bool { return x.Function == g.Function }) {
				res.MCPGates = append(res.MCPGates, g)
			}
		}
	}
	if len(res.ToolCalls) == 0 {
		// The turn's final output: the files it declares are stored now,
		// so that only their ids reach the workflow.
		res.Artifacts = a.storeFiles(ctx, pub, in.Source, models.ArtifactSourceAnswer, "", answerFiles(res.Output))
	}
	if len(res.ToolCalls) == 0 && !in.DeferWrites {
		// The turn's final output: stored under the id its stream carried
		// (by the workflow instead, when it defers the writes).
		if err := a.saveMessage(ctx, in, res.Output); err != nil {
			return nil, err
		}
	}
	res.Calls = pub.records
	rec := models.AnswerRecord{RunID: in.RunID, Calls: res.Calls}
	if len(res.ToolCalls) == 0 {
		// As the workflow would store it (agentTurn.rounds).
		rec.MessageID, rec.ParentMessageID, rec.Source, rec.Content = in.MessageID, in.ParentMessageID, in.Source, res.Output
	}
	res.Events, res.Saved = pub.finishSaving(in.ReturnEvents, in.DeferWrites, rec)
	return res, nil
}

// resolveContext reads the whole answers the context's truncated references
// point at (messages of run runID's tenant) and joins every item's references into its content. A reference
// whose message cannot be found keeps its preview.
func (a *Activities) resolveContext(ctx context.Context, runID string, items []models.ContextItem) ([]models.ContextItem, error) {
	var whole map[string]string
	if ids := models.TruncatedRefs(items); len(ids) > 0 && a.Store != nil {
		// No model has been called yet, so waiting out a database outage
		// here costs nothing; failing would spend one of the call's
		// attempts. The wait heartbeats, and ends with the activity.
		wctx, stop := a.heartbeat(ctx)
		defer stop()
		for delay := 200 * time.Millisecond; ; delay = min(2*delay, 5*time.Second) {
			var err error
			if whole, err = a.Store.MessageContents(wctx, runID, ids); err == nil {
				break
			}
			if !store.IsUnavailable(err) || wctx.Err() != nil {
				return nil, fmt.Errorf("read earlier outputs: %w", err)
			}
			a.logger(ctx).Info("database unavailable; waiting to read earlier outputs", "retry_in", delay)
			select {
			case <-wctx.Done():
				return nil, fmt.Errorf("read earlier outputs: %w", err)
			case <-time.After(delay):
			}
		}
	}
	out := make([]models.ContextItem, len(items))
	for i, c := range items {
		out[i] = c.Resolved(whole)
	}
	return out, nil
}

// transcriptMessages converts a turn's tool rounds to chat messages.
func transcriptMessages(t []models.ChatMessage) []llm.Message {
	out := make([]llm.Message, 0, len(t))
	for _, m := range t {
		msg := llm.Message{Role: m.Role, Content: m.Content, ToolCallID: m.ToolCallID}
		for _, c := range m.ToolCalls {
			msg.ToolCalls = append(msg.ToolCalls, llm.ToolCall{ID: c.ID, Name: c.Name, Arguments: c.Arguments})
		}
		out = append(out, msg)
	}
	return out
}

// Reasons of an llm.fallback event.
const (
	FallbackCircuitOpen      = "circuit_open"
	FallbackRetriesExhausted = "retries_exhausted"
)

// completeWithFallback runs the call on req.Model and, when its provider
// keeps failing, on the agent's fallback models in order: a call moves on
// when it failed with a retryable error and either the provider's circuit
// is open (the breaker fails it fast, or this failure opened it) or this
// was the activity's last attempt. Fallback models are routed by the model
// table, the agent's provider, base URL and region applying to its own
// model only. Each move is an llm.fallback event
// (from, to, why); the response names the model that answered. Every
// attempt starts again with req.Model, so a provider that recovers is used
// again as soon as its circuit closes.
func (a *Activities) completeWithFallback(ctx context.Context, pub *publisher, source models.Source, purpose string, req llm.Request, fallbacks []string, extra map[string]any) (*llm.Response, error) {
	for i := 0; ; i++ {
		resp, raw, err := a.call(ctx, pub, source, purpose, req, extra)
		if err == nil || i >= len(fallbacks) || ctx.Err() != nil {
			return resp, err
		}
		why := a.fallbackReason(ctx, raw)
		if why == "" {
			return nil, err
		}
		data := map[string]any{"from": req.Model, "to": fallbacks[i], "why": why, "error": raw.Error()}
		a.runLogger(ctx, pub.runID, source).Warn("LLM call falls back to another model", "from", req.Model, "to", fallbacks[i], "why", why)
		pub.emit(pub.event(source, models.CategoryLLM, models.ActionFallback, data))
		// A fallback model is routed by the model table (LLM_MODELS), not
		// by the agent's provider, whose circuit may be the open one.
		req.Model, req.Provider, req.BaseURL, req.Region = fallbacks[i], "", "", ""
	}
}

// fallbackReason says why a failed call moves to the next model, "" when
// it does not: only retryable failures do, when the provider's circuit is
// open or the activity has no attempt left.
func (a *Activities) fallbackReason(ctx context.Context, err error) string {
	circuitOpen := func(string) bool { return false }
	if b, ok := a.LLM.(interface{ Breaker() *llm.Breaker }); ok {
		circuitOpen = b.Breaker().IsOpen
	}
	last := false
	if activity.IsActivity(ctx) {
		info := activity.GetInfo(ctx)
		p := info.RetryPolicy
		last = p != nil && p.MaximumAttempts > 0 && info.Attempt >= p.MaximumAttempts
	}
	return fallbackWhy(err, circuitOpen, last)
}

// fallbackWhy is fallbackReason's decision: circuitOpen tells whether a
// provider's circuit is open, last whether this was the last attempt.
func fallbackWhy(err error, circuitOpen func(provider string) bool, last bool) string {
	var le *llm.Error
	switch {
	case !errors.As(err, &le) || !le.Retryable:
		return ""
	case errors.Is(err, llm.ErrCircuitOpen) || circuitOpen(le.Provider):
		return FallbackCircuitOpen
	case last:
		return FallbackRetriesExhausted
	}
	return ""
}

// complete runs one LLM call: it heartbeats while the call runs (so a dead
// worker is noticed within the heartbeat timeout and a cancellation reaches
// the call), records its usage, and turns a failure into a retryable or
// non-retryable application error that names the agent and the model.
func (a *Activities) complete(ctx context.Context, pub *publisher, source models.Source, purpose string, req llm.Request, extra map[string]any) (*llm.Response, error) {
	resp, _, err := a.call(ctx, pub, source, purpose, req, extra)
	return resp, err
}

// call is complete, also returning the LLM client's own error (for
// completeWithFallback) next to the activity's error.
func (a *Activities) call(ctx context.Context, pub *publisher, source models.Source, purpose string, req llm.Request, extra map[string]any) (*llm.Response, error, error) {
	// From here on ctx is the call's: a failed heartbeat RPC does not
	// cancel it (see heartbeat).
	ctx, stop := a.heartbeat(ctx)
	defer stop()
	if pub.attempt > 1 && pub.calls == 0 {
		// The previous attempt's partial output is void: clients drop this
		// agent's text from it.
		pub.emit(pub.event(source, models.CategoryLLM, models.ActionRetry, map[string]any{"previous_attempt": pub.attempt - 1}))
	}
	fingerprint := requestFingerprint(req)
	if resp, rec := a.keptAnswer(ctx, pub, fingerprint); resp != nil {
		// An earlier attempt received this answer and could not report it:
		// it is used as it is, without a request (see kept.go).
		pub.replayKept(source, resp, extra)
		pub.calls++
		pub.answers++
		a.runLogger(ctx, pub.runID, source).Info("LLM answer kept by an earlier attempt used; the model is not asked again",
			"llm_call_id", rec.ID, "model", rec.Model, "purpose", purpose)
		data := usageEventData(a.usage(resp, rec.Model), rec.Model, rec.ID, purpose, extra)
		data["kept"] = true
		pub.emitLast(pub.event(source, models.CategoryLLM, models.ActionUsage, data))
		if pub.deferWrites {
			// Stored already (KeepAnswer); SaveAnswer stores it once more,
			// which changes nothing, and drops the kept answer.
			pub.records = append(pub.records, *rec)
		}
		return resp, nil, nil
	}
	start := time.Now()
	var firstToken time.Duration
	// The call's chat span; the provider's HTTP request is its child.
	cctx, chat := telemetry.StartChat(ctx, telemetry.ChatRequest{
		Agent: genAIAgent(source, pub.thread), Model: req.Model, Provider: req.Provider,
		Messages: func() []telemetry.Message { return chatMessages(req.Messages) },
	})
	resp, err := a.LLM.Stream(cctx, req, func(d llm.Delta) {
		first := firstToken == 0
		if first {
			firstToken = time.Since(start)
		}
		if d.Reasoning != "" {
			pub.delta(source, models.ActionReasoning, d.Reasoning, extra, first)
			first = false
		}
		if d.Content != "" {
			pub.delta(source, models.ActionStream, d.Content, extra, first)
		}
	})
	pub.calls++
	latency := time.Since(start)
	endChat(chat, resp, err)
	call := llmCallRecord(pub, source, purpose, req.Model, latency, firstToken)
	if err != nil {
		call.Status, call.Error = "error", err.Error()
		if ctx.Err() != nil {
			call.Status = "cancelled"
		}
	} else {
		call.Status, call.Provider = "ok", resp.Provider
		if resp.Model != "" {
			// The model that answered: "offline" when the offline model
			// stood in, whatever was asked for.
			call.Model = resp.Model
		}
		call.PromptTokens, call.CompletionTokens, call.TotalTokens = resp.Usage.PromptTokens, resp.Usage.CompletionTokens, resp.Usage.TotalTokens
		call.CachedTokens, call.CacheWriteTokens, call.ReasoningTokens = resp.Usage.CachedTokens, resp.Usage.CacheWriteTokens, resp.Usage.ReasoningTokens
		if usd, ok := a.cost(call.Model, resp.Usage); ok {
			call.CostUSD = &usd
		}
		// Kept before anything else can fail or hang (event delivery, the
		// completion): a later attempt uses it instead of paying again.
		pub.answers++
		a.keepAnswer(ctx, pub, fingerprint, resp, call)
	}
	log := a.runLogger(ctx, pub.runID, source)
	a.observeLLMCall(log, purpose, req, resp, err, ctx.Err() != nil, latency, firstToken)
	if err == nil {
		u := a.usage(resp, req.Model)
		if !u.CostUnknown {
			a.Metrics.AddLLMCost(call.Model, pub.tenant, u.CostUSD)
		}
		pub.emitLast(pub.event(source, models.CategoryLLM, models.ActionUsage, usageEventData(u, call.Model, call.ID, purpose, extra)))
	}
	switch {
	case err == nil && pub.deferWrites:
		// The workflow stores it (SaveAnswer), retrying on its own.
		pub.records = append(pub.records, call)
	case a.Store != nil:
		// A failed attempt's record, or one of a run that started before
		// the workflow stored them: a lost record must not fail the call;
		// the context may be cancelled already, so the write gets its own
		// short deadline.
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		if rerr := a.Store.RecordLLMCall(rctx, store.LLMCallFromRecord(call)); rerr != nil {
			log.Warn("record LLM call", "error", rerr)
		}
		cancel()
	}
	if err != nil {
		return nil, err, a.llmFailure(ctx, source, req.Model, err, pub.retryMax)
	}
	return resp, nil, nil
}

// usageEventData is an llm.usage event's data: what the call used and
// cost, and llm_call_id, its usage record, by which a consumer counts a
// call once (an attempt that uses a kept answer reports it again).
func usageEventData(u models.Usage, model, callID, purpose string, extra map[string]any) map[string]any {
	data := map[string]any{"model": model, "prompt_tokens": u.PromptTokens, "completion_tokens": u.CompletionTokens,
		"total_tokens": u.TotalTokens, "cached_tokens": u.CachedTokens, "cache_write_tokens": u.CacheWriteTokens,
		"reasoning_tokens": u.ReasoningTokens, "purpose": purpose, "llm_call_id": callID}
	if u.CostUnknown {
		data["cost_usd"], data["cost_unknown"] = nil, true
	} else {
		data["cost_usd"] = u.CostUSD
	}
	for k, v := range extra {
		data[k] = v
	}
	return data
}

// observeLLMCall counts one LLM call attempt in the metrics and logs it:
// at debug when it succeeded, at warn when it failed (the provider's error
// text, which never carries a key), at info when it was cancelled.
func (a *Activities) observeLLMCall(log *slog.Logger, purpose string, req llm.Request, resp *llm.Response, err error, cancelled bool, latency, firstToken time.Duration) {
	obs := telemetry.LLMCall{Model: req.Model, Provider: req.Provider, Outcome: telemetry.OutcomeOK, Duration: latency, FirstToken: firstToken}
	switch {
	case err == nil:
		obs.Provider = resp.Provider
		if resp.Model != "" {
			obs.Model = resp.Model // as in llm_call: the model that answered
		}
		obs.PromptTokens, obs.CompletionTokens = resp.Usage.PromptTokens, resp.Usage.CompletionTokens
	case cancelled:
		obs.Outcome = telemetry.OutcomeCancelled
	default:
		obs.Outcome = telemetry.OutcomeError
	}
	var le *llm.Error
	if err != nil && errors.As(err, &le) && le.Provider != "" {
		obs.Provider = le.Provider
	}
	a.Metrics.ObserveLLMCall(obs)
	attrs := []any{"purpose", purpose, "model", req.Model, "provider", obs.Provider, "outcome", obs.Outcome, "duration_ms", latency.Milliseconds()}
	switch obs.Outcome {
	case telemetry.OutcomeOK:
		log.Debug("LLM call", append(attrs, "prompt_tokens", obs.PromptTokens, "completion_tokens", obs.CompletionTokens)...)
	case telemetry.OutcomeCancelled:
		log.Info("LLM call", attrs...)
	default:
		log.Warn("LLM call", append(attrs, "error", err)...)
	}
}

// llmFailure turns a failed call into the activity's error. A provider's
// Retry-After becomes the next retry's delay, capped at retryMax
// (LLM_RETRY_MAX): a provider asking for an hour, or for a date years
// away, must not park the run (0 leaves it uncapped).
func (a *Activities) llmFailure(ctx context.Context, source models.Source, model string, err error, retryMax time.Duration) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	var le *llm.Error
	if !errors.As(err, &le) {
		return err
	}
	msg := fmt.Sprintf("%s %q (agent_id %s) calling model %q: %s", source.AgentType, source.AgentName, source.AgentID, model, le.Error())
	if le.KeyRejected() {
		// The operator's key, not the request: the run says so with its
		// own code (PROVIDER_KEY_REJECTED) so nobody debugs the prompt.
		return temporal.NewNonRetryableApplicationError(msg, models.ErrLLMKeyRejected, nil)
	}
	if !le.Retryable {
		return temporal.NewNonRetryableApplicationError(msg, models.ErrLLMRejected, nil)
	}
	delay := le.RetryAfter
	if retryMax > 0 && delay > retryMax {
		delay = retryMax
	}
	return temporal.NewApplicationErrorWithOptions(msg, models.ErrLLMUnavailable, temporal.ApplicationErrorOptions{NextRetryDelay: delay})
}

func contextLimit(o models.RunOptions) int {
	if o.ContextCharLimit > 0 {
		return o.ContextCharLimit
	}
	return defaultContextCharLimit
}

func toUsage(u llm.Usage) models.Usage {
	return models.Usage{
		PromptTokens: u.PromptTokens, CompletionTokens: u.CompletionTokens, TotalTokens: u.TotalTokens,
		CachedTokens: u.CachedTokens, CacheWriteTokens: u.CacheWriteTokens, ReasoningTokens: u.ReasoningTokens,
	}
}

// usage is a successful call's usage with its cost, priced by the model
// that answered.
func (a *Activities) usage(resp *llm.Response, asked string) models.Usage {
	model := resp.Model
	if model == "" {
		model = asked
	}
	u := toUsage(resp.Usage)
	if usd, ok := a.cost(model, resp.Usage); ok {
		u.CostUSD = usd
	} else {
		u.CostUnknown = true
	}
	return u
}

func llmCallRecord(pub *publisher, source models.Source, purpose, model string, latency, firstToken time.Duration) models.LLMCallRecord {
	return models.LLMCallRecord{
		ID:           fmt.Sprintf("%s/%d", pub.producer, pub.calls),
		RunID:        pub.runID,
		AgentID:      source.AgentID,
		Purpose:      purpose,
		Model:        model,
		Attempt:      int(pub.attempt),
		LatencyMs:    latency.Milliseconds(),
		FirstTokenMs: firstToken.Milliseconds(),
		TeamName:     teamOf(source),
		AgentPath:    source.Path,
	}
}

// teamOf is the team a source works in, "" for the global supervisor.
func teamOf(s models.Source) string {
	if s.TeamName == nil {
		return ""
	}
	return *s.TeamName
}

// genAIAgent is what the spans say of the agent source: its name, its
// agent_id and the run's thread. Never the tenant, a key or a header.
func genAIAgent(source models.Source, thread string) telemetry.Agent {
	return telemetry.Agent{Name: source.AgentName, ID: source.AgentID, Conversation: thread}
}

// chatMessages are a request's messages as gen_ai.input.messages records
// them (only with content capture on).
func chatMessages(msgs []llm.Message) []telemetry.Message {
	out := make([]telemetry.Message, len(msgs))
	for i, m := range msgs {
		out[i] = telemetry.Message{Role: m.Role, Content: m.Content}
	}
	return out
}

// endChat ends an LLM call's chat span with its answer or error.
func endChat(chat telemetry.ChatSpan, resp *llm.Response, err error) {
	if err != nil {
		var le *llm.Error
		if errors.As(err, &le) {
			chat.SetProvider(le.Provider)
		}
		chat.End(nil, err)
		return
	}
	res := &telemetry.ChatResult{Provider: resp.Provider, Model: resp.Model, InputTokens: resp.Usage.PromptTokens,
		OutputTokens: resp.Usage.CompletionTokens, FinishReason: resp.FinishReason, Output: resp.Content}
	chat.End(res, nil)
}
