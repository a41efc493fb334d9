package workflows

import (
	"errors"
	"fmt"
	"net/url"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/op-stack/executor/models"
)

// changeA2AWorkers: a worker with an "a2a" setting is a remote A2A agent,
// called by the CallA2A activity instead of the model loop (issue 25).
// Asked only at such a worker's turn, so only runs that have one carry
// the marker; before it, hierarchies could not name one.
const changeA2AWorkers = "a2a-workers"

// isA2AWorker says whether the turn is a remote A2A worker's, asking
// changeA2AWorkers only for those.
func (t *agentTurn) isA2AWorker(ctx workflow.Context) bool {
	return t.Agent.A2A != nil && t.Purpose == models.PurposeWorker &&
		changed(ctx, changeA2AWorkers)
}

// runA2A is the turn of a remote A2A worker: one CallA2A activity, whose
// answer is stored as the turn's message like a model's final answer.
// Its retries follow the LLM calls' policy, but for the remote task's
// own failures and refusals, which are not retried.
func (t *agentTurn) runA2A(ctx workflow.Context) (turnResult, error) {
	var res turnResult
	if err := t.Gate.wait(ctx); err != nil {
		return res, err
	}
	o := t.Options
	in := models.A2ACallInput{
		RunID: t.RunID, Agent: t.Agent, Source: t.Source, Task: t.Task, Instruction: t.Instruction, Context: t.Context,
		ContextID: models.A2AContextID(t.RunID, t.Agent.AgentID), RunOptions: o,
		MessageID: t.MessageID, ParentMessageID: t.ParentMessageID,
		DeferWrites: o.DeferWrites, ReturnEvents: t.Events.returnsEvents(),
	}
	if t.Guidance != nil {
		in.Guidance = t.Guidance(t.Agent.AgentID)
	}
	host := t.Agent.A2A.CardURL
	if u, err := url.Parse(host); err == nil {
		host = u.Host
	}
	actx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: llmTimeout(o, t.Agent),
		HeartbeatTimeout:    o.HeartbeatTimeout,
		// The activity cancels the remote task before it ends.
		WaitForCancellation: true,
		Summary:             fmt.Sprintf("a2a %s · %s", host, t.Agent.Name),
		RetryPolicy: &temporal.RetryPolicy{
			InitialInterval:        o.RetryInitial,
			BackoffCoefficient:     2,
			MaximumInterval:        o.RetryMax,
			MaximumAttempts:        o.MaxAttempts,
			NonRetryableErrorTypes: []string{models.ErrA2ATaskFailed, models.ErrA2ARefused},
		},
	})
	var answer models.RespondResult
	if err := workflow.ExecuteActivity(actx, a.CallA2A, in).Get(ctx, &answer); err != nil {
		return res, a2aError(err, t.Source, t.Agent, o)
	}
	t.Events.apply(answer.Events)
	answer.Events = nil
	rec := models.AnswerRecord{RunID: t.RunID, MessageID: t.MessageID, ParentMessageID: t.ParentMessageID, Source: t.Source, Content: answer.Output}
	if err := saveAnswer(ctx, o, rec); err != nil {
		return res, err
	}
	res.Answer = answer
	return res, nil
}

// a2aError names the worker, the agent's card and the limit in the error
// of a CallA2A activity that timed out; other errors name them already.
func a2aError(err error, source models.Source, agent models.Agent, o models.RunOptions) error {
	var timeout *temporal.TimeoutError
	if err == nil || !errors.As(err, &timeout) {
		return err
	}
	limit, kind := llmTimeout(o, agent), "start-to-close"
	if timeout.TimeoutType() == enumspb.TIMEOUT_TYPE_HEARTBEAT {
		limit, kind = o.HeartbeatTimeout, "heartbeat"
	}
	msg := fmt.Sprintf("%s %q (agent_id %s) calling the remote A2A agent %s: no answer within the %s timeout of %s, on every attempt",
		source.AgentType, source.AgentName, source.AgentID, agent.A2A.CardURL, kind, limit)
	return temporal.NewNonRetryableApplicationError(msg, models.ErrLLMTimeout, err)
}
