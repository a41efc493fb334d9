package activities

import (
	"context"
	"fmt"
	"strings"
	"time"

	"go.temporal.io/sdk/temporal"

	"github.com/op-stack/executor/llm"
	"github.com/op-stack/executor/models"
	"github.com/op-stack/executor/templating"
)

// MaxFormatRepairs bounds how often an answer that does not match the
// template is sent back with its problems before formatting fails.
const MaxFormatRepairs = 3

// FormatResults fills a run's output template (spec 001 §4 results/format):
// it gives the run's global supervisor model the task, the final answer, the
// teams' outputs, the template and the extraction rules, asks for JSON only,
// checks that the answer has exactly the template's shape, and sends back
// the problems until it has or MaxFormatRepairs repairs have been spent.
// The calls are not recorded in llm_call: they are not part of the run, and
// its metrics must not change when its results are formatted.
func (a *Activities) FormatResults(ctx context.Context, in models.FormatInput) (*models.FormatResult, error) {
	tmpl, err := templating.Parse(in.Template)
	if err != nil {
		return nil, temporal.NewNonRetryableApplicationError(err.Error(), models.ErrFormatInvalidTemplate, nil)
	}
	if a.Store != nil {
		hydrated, err := a.Store.HydrateResult(ctx, in.RunID, &models.RunResult{Teams: in.Teams})
		if err != nil {
			return nil, err
		}
		in.Teams = hydrated.Teams
	}
	ctx, stop := a.heartbeat(ctx)
	defer stop()
	sup := in.Supervisor
	schema, strict := tmpl.Schema()
	req := llm.Request{
		Model: in.Options.ModelFor(sup),
		Messages: []llm.Message{
			{Role: llm.RoleSystem, Content: templating.SystemPrompt},
			{Role: llm.RoleUser, Content: templating.Prompt(in, contextLimit(in.Options))},
		},
		Temperature: sup.Temperature,
		JSONSchema:  &llm.JSONSchema{Name: "output_template", Schema: schema, Strict: strict},
		Provider:    sup.Provider,
		BaseURL:     sup.BaseURL,
		Region:      sup.Region,
	}
	source := models.Source{AgentID: sup.AgentID, AgentType: models.AgentTypeGlobalSupervisor, AgentName: firstNonBlank(sup.Name, models.DefaultGlobalSupervisorName)}
	res := &models.FormatResult{Model: req.Model}
	log := a.runLogger(ctx, in.RunID, source)
	for repair := 0; ; repair++ {
		start := time.Now()
		resp, err := a.LLM.Stream(ctx, req, func(llm.Delta) {})
		// Not in llm_call (see above), but in the service's metrics: the
		// call costs tokens all the same.
		a.observeLLMCall(log, "format", req, resp, err, ctx.Err() != nil, time.Since(start), 0)
		if err != nil {
			return nil, a.llmFailure(ctx, source, req.Model, err, in.Options.RetryMax)
		}
		u := a.usage(resp, req.Model)
		res.Usage = res.Usage.Add(u)
		if !u.CostUnknown {
			// In the cost metric like any call (not in llm_call, see above).
			a.Metrics.AddLLMCost(firstNonEmptyModel(resp.Model, req.Model), in.Options.Tenant, u.CostUSD)
		}
		if resp.Model != "" {
			res.Model = resp.Model // the model that answered
		}
		if resp.Offline {
			// The offline stand-in cannot read results; it fills the
			// placeholders with labelled stand-in text so `executor dev`
			// shows the whole flow without a provider.
			res.Output, res.Offline = tmpl.FillOffline(), true
			return res, nil
		}
		value, problems := tmpl.Check(resp.Content)
		if len(problems) == 0 {
			if res.Output, err = tmpl.Render(value); err != nil {
				return nil, err
			}
			res.Repairs = repair
			return res, nil
		}
		log.Info("format answer does not match the template", "repair", repair, "problems", len(problems))
		if repair == MaxFormatRepairs {
			return nil, temporal.NewNonRetryableApplicationError(
				fmt.Sprintf("the model's answer did not match the output template after %d repairs: %s", MaxFormatRepairs, strings.Join(problems, "; ")),
				models.ErrFormatMismatch, nil)
		}
		req.Messages = append(req.Messages,
			llm.Message{Role: llm.RoleAssistant, Content: resp.Content},
			llm.Message{Role: llm.RoleUser, Content: templating.RepairPrompt(problems)},
		)
	}
}

func firstNonEmptyModel(models ...string) string {
	for _, m := range models {
		if m != "" {
			return m
		}
	}
	return ""
}
