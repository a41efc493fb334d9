package activities

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"go.temporal.io/sdk/temporal"

	"github.com/op-stack/executor/a2aremote"
	"github.com/op-stack/executor/models"
)

// CallA2A runs one turn of a worker that is a remote A2A agent
// (models.A2AAgent): the agent's card is fetched, the instruction sent
// (streamed when the card says so), and the agent's text published as the
// worker's llm.stream events, its working status messages as
// llm.reasoning, under the message id of the turn's answer, as a model's
// answer would be. It heartbeats throughout; cancelled, it cancels the
// remote task. Failures: a transport failure is an ErrA2AUnavailable
// error Temporal retries (the retry is announced by llm.retry, as for a
// model); a task that failed, was rejected, or asked for input, and a
// call the guard or the card refuses, are non-retryable (ErrA2ATaskFailed,
// ErrA2ARefused), and fail the worker as a rejected model call does.
func (a *Activities) CallA2A(ctx context.Context, in models.A2ACallInput) (*models.RespondResult, error) {
	who := fmt.Sprintf("worker %q (agent_id %s)", in.Source.AgentName, in.Source.AgentID)
	if in.Agent.A2A == nil {
		return nil, temporal.NewNonRetryableApplicationError(who+" is not a remote A2A agent", models.ErrA2ARefused, nil)
	}
	if a.A2A == nil {
		return nil, temporal.NewNonRetryableApplicationError(who+": remote A2A agents are not enabled on this worker", models.ErrA2ARefused, nil)
	}
	var err error
	if in.Context, err = a.resolveContext(ctx, in.RunID, in.Context); err != nil {
		return nil, err
	}
	pub := a.newPublisher(ctx, in.RunID)
	defer pub.close()
	pub.deferWrites, pub.retryMax, pub.tenant = in.DeferWrites, in.RunOptions.RetryMax, in.RunOptions.Tenant
	wctx, stop := a.heartbeat(ctx)
	defer stop()
	if pub.attempt > 1 {
		// The previous attempt's partial text is void, as for a model.
		pub.emit(pub.event(in.Source, models.CategoryLLM, models.ActionRetry, map[string]any{"previous_attempt": pub.attempt - 1}))
	}
	var extra map[string]any
	if in.MessageID != "" {
		extra = map[string]any{"message_id": in.MessageID}
	}
	first := true
	log := a.runLogger(ctx, in.RunID, in.Source)
	res, err := a.A2A.Call(wctx, a2aremote.Request{
		Agent: *in.Agent.A2A, ContextID: in.ContextID, Text: a2aPrompt(in, contextLimit(in.RunOptions)),
	}, func(u a2aremote.Update) {
		if u.Progress != "" {
			pub.delta(in.Source, models.ActionReasoning, u.Progress+"\n", extra, first)
			first = false
		}
		if u.Text != "" {
			pub.delta(in.Source, models.ActionStream, u.Text, extra, first)
			first = false
		}
	})
	pub.calls++
	if err != nil {
		if ctx.Err() != nil || wctx.Err() != nil {
			log.Info("remote A2A call cancelled", "card_url", in.Agent.A2A.CardURL)
			return nil, errors.Join(ctx.Err(), wctx.Err())
		}
		var re *a2aremote.Error
		if !errors.As(err, &re) {
			return nil, temporal.NewApplicationError(who+": "+err.Error(), models.ErrA2AUnavailable)
		}
		log.Warn("remote A2A call failed", "card_url", in.Agent.A2A.CardURL, "kind", re.Kind, "error", re.Message)
		msg := who + ": " + re.Message
		switch re.Kind {
		case a2aremote.KindTaskFailed:
			return nil, temporal.NewNonRetryableApplicationError(msg, models.ErrA2ATaskFailed, nil)
		case a2aremote.KindRefused:
			return nil, temporal.NewNonRetryableApplicationError(msg, models.ErrA2ARefused, nil)
		default:
			return nil, temporal.NewApplicationError(msg, models.ErrA2AUnavailable)
		}
	}
	log.Info("remote A2A agent answered", "card_url", in.Agent.A2A.CardURL, "agent", res.AgentName, "task_id", res.TaskID, "streamed", res.Streamed, "chars", len(res.Text))
	out := &models.RespondResult{Output: res.Text, Model: models.A2AModelPrefix + res.AgentName}
	if !in.DeferWrites {
		rin := models.RespondInput{RunID: in.RunID, Source: in.Source, MessageID: in.MessageID, ParentMessageID: in.ParentMessageID}
		if err := a.saveMessage(ctx, rin, out.Output); err != nil {
			return nil, err
		}
	}
	out.Events = pub.finish(in.ReturnEvents)
	return out, nil
}

// a2aPrompt is the text sent to a remote agent: the worker's instruction
// first, then the run's task, the outputs it may use and the operator's
// guidance, as a model's prompt has them.
func a2aPrompt(in models.A2ACallInput, limit int) string {
	var b strings.Builder
	instruction := strings.TrimSpace(in.Instruction)
	if instruction == "" {
		instruction = in.Task
	}
	b.WriteString(instruction)
	b.WriteString("\n")
	if in.Task != "" && in.Task != instruction {
		fmt.Fprintf(&b, "\nThe overall task: %s\n", in.Task)
	}
	writeContext(&b, in.Context, limit)
	writeGuidance(&b, in.Guidance)
	return b.String()
}
