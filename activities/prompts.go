package activities

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	"github.com/op-stack/executor/llm"
	"github.com/op-stack/executor/models"
	"github.com/op-stack/executor/templating"
)

func optionKind(in models.DecideInput) string {
	if in.Source.AgentType == models.AgentTypeGlobalSupervisor {
		return "team"
	}
	return "worker"
}

// decisionMessages builds the prompt of a routing decision.
func decisionMessages(in models.DecideInput, limit int) []llm.Message {
	kind := optionKind(in)
	system := strings.TrimSpace(in.Supervisor.SystemPrompt) + "\n\n" + fmt.Sprintf(
		"You coordinate by deciding, one step at a time, which %[1]s acts next and what it should do, "+
			"or that the work is finished. Answer with one JSON object only: "+
			`{"action": "dispatch" or "finish", "target": the %[1]s's exact name (empty when finishing), `+
			`"instruction": what the %[1]s should do, "reason": why}.`, kind)
	if in.MaxTargets > 1 {
		system = strings.TrimSpace(in.Supervisor.SystemPrompt) + "\n\n" + fmt.Sprintf(
			"You coordinate by deciding which %[1]ss act next and what each should do, or that the work is finished. "+
				"%[1]ss you dispatch together work at the same time: dispatch several (at most %[2]d) only when they "+
				"do not need each other's results. Answer with one JSON object only: "+
				`{"action": "dispatch" or "finish", "targets": [{"target": a %[1]s's exact name, "instruction": what it should do}, …] `+
				`(empty when finishing), "reason": why}.`, kind, in.MaxTargets)
	}

	var b strings.Builder
	fmt.Fprintf(&b, "Task: %s\n", in.Task)
	if in.Supervisor.UserPrompt != "" {
		fmt.Fprintf(&b, "\n%s\n", in.Supervisor.UserPrompt)
	}
	if in.Instruction != "" {
		fmt.Fprintf(&b, "\nYour brief from the global supervisor: %s\n", in.Instruction)
	}
	fmt.Fprintf(&b, "\nAvailable %ss:\n", kind)
	for _, o := range in.Options {
		fmt.Fprintf(&b, "- %s: %s\n", o.Name, templating.Truncate(o.Description, 200))
	}
	if len(in.Completed) > 0 {
		fmt.Fprintf(&b, "\nAlready done: %s\n", strings.Join(in.Completed, ", "))
	}
	if len(in.Running) > 0 {
		fmt.Fprintf(&b, "\nAt work now (their outputs come later): %s. Finishing now means waiting for them and deciding again.\n", strings.Join(in.Running, ", "))
	}
	if in.Source.AgentType == models.AgentTypeGlobalSupervisor && in.RunOptions.Memory != nil && in.RunOptions.Memory.Preloaded != "" {
		// Preloaded at the run's start (the hierarchy's memory.preload).
		fmt.Fprintf(&b, "\nFrom long-term memory (saved by earlier runs):\n%s", templating.Truncate(in.RunOptions.Memory.Preloaded, limit))
	}
	writeContext(&b, in.Context, limit)
	writeGuidance(&b, in.Guidance)
	// The machine-readable state: real models read it as part of the
	// prompt, the offline model decides from it.
	fmt.Fprintf(&b, "\n%s\n", llm.FormatRoutingInput(llm.RoutingInput{Options: optionNames(in.Options), Completed: in.Completed, AllowFinish: in.AllowFinish}))
	if in.AllowFinish {
		fmt.Fprintf(&b, "Choose the next %s, or finish if the task is done.", kind)
	} else {
		fmt.Fprintf(&b, "Choose the next %s; nothing has been done yet, so finishing is not possible.", kind)
	}
	return []llm.Message{{Role: llm.RoleSystem, Content: system}, {Role: llm.RoleUser, Content: b.String()}}
}

// decisionSchema constrains the answer to the offered options.
func decisionSchema(in models.DecideInput) *llm.JSONSchema {
	targets := append(optionNames(in.Options), "")
	actions := []string{models.DecisionDispatch}
	if in.AllowFinish {
		actions = append(actions, models.DecisionFinish)
	}
	schema := map[string]any{
		"type": "object",
		"properties": map[string]any{
			"action":      map[string]any{"type": "string", "enum": actions},
			"target":      map[string]any{"type": "string", "enum": targets},
			"instruction": map[string]any{"type": "string"},
			"reason":      map[string]any{"type": "string"},
		},
		"required":             []string{"action", "target", "instruction", "reason"},
		"additionalProperties": false,
	}
	if in.MaxTargets > 1 {
		schema["properties"] = map[string]any{
			"action": map[string]any{"type": "string", "enum": actions},
			"targets": map[string]any{"type": "array", "items": map[string]any{
				"type": "object",
				"properties": map[string]any{
					"target":      map[string]any{"type": "string", "enum": optionNames(in.Options)},
					"instruction": map[string]any{"type": "string"},
				},
				"required":             []string{"target", "instruction"},
				"additionalProperties": false,
			}},
			"reason": map[string]any{"type": "string"},
		}
		schema["required"] = []string{"action", "targets", "reason"}
	}
	raw, _ := json.Marshal(schema)
	return &llm.JSONSchema{Name: "routing_decision", Schema: raw, Strict: true}
}

// rawDecision accepts the field names models use in practice besides ours.
type rawDecision struct {
	Action        string `json:"action"`
	Target        string `json:"target"`
	Next          string `json:"next"`
	SelectedAgent string `json:"selected_agent"`
	Team          string `json:"team"`
	Worker        string `json:"worker"`
	Instruction   string `json:"instruction"`
	Reason        string `json:"reason"`
	Reasoning     string `json:"reasoning"`
	// Targets is the list of a decision that may dispatch several
	// (DecideInput.MaxTargets); each item's name in any of the fields.
	Targets []struct {
		Target      string `json:"target"`
		Team        string `json:"team"`
		Name        string `json:"name"`
		Instruction string `json:"instruction"`
	} `json:"targets"`
}

// parseDecision reads a model's answer tolerantly: JSON (bare or fenced,
// with our field names or common alternatives), else a known option name or
// a finish word in free text. It returns an error saying what was wrong when
// the answer names no valid option.
func parseDecision(content string, in models.DecideInput) (models.Decision, error) {
	var raw rawDecision
	if obj := templating.ExtractObject(content); obj != "" && json.Unmarshal([]byte(obj), &raw) == nil {
		d := models.Decision{
			Action:      strings.ToLower(strings.TrimSpace(raw.Action)),
			Target:      firstNonBlank(raw.Target, raw.Next, raw.SelectedAgent, raw.Team, raw.Worker),
			Instruction: strings.TrimSpace(raw.Instruction),
			Reason:      strings.TrimSpace(firstNonBlank(raw.Reason, raw.Reasoning)),
		}
		var more []models.DispatchTarget
		if in.MaxTargets > 1 {
			for _, t := range raw.Targets {
				target := firstNonBlank(t.Target, t.Team, t.Name)
				if d.Target == "" {
					d.Target, d.Instruction = target, firstNonBlank(t.Instruction, d.Instruction)
					continue
				}
				more = append(more, models.DispatchTarget{Target: target, Instruction: strings.TrimSpace(t.Instruction)})
			}
		}
		if d.Action == "" {
			d.Action = models.DecisionDispatch
			if isFinishWord(d.Target) {
				d.Action = models.DecisionFinish
			}
		}
		d, err := validateDecision(d, in)
		if err != nil || d.Action != models.DecisionDispatch {
			return d, err
		}
		return validateMore(d, more, in)
	}
	text := strings.TrimSpace(content)
	if isFinishWord(text) {
		return validateDecision(models.Decision{Action: models.DecisionFinish, Reason: text}, in)
	}
	if name := findOptionIn(text, in.Options); name != "" {
		return validateDecision(models.Decision{Action: models.DecisionDispatch, Target: name, Reason: templating.Truncate(text, 500)}, in)
	}
	return models.Decision{}, fmt.Errorf("the answer is neither JSON nor names one of the %ss", optionKind(in))
}

func validateDecision(d models.Decision, in models.DecideInput) (models.Decision, error) {
	switch d.Action {
	case models.DecisionFinish, "done", "end", "complete", "stop":
		if !in.AllowFinish {
			return models.Decision{}, fmt.Errorf("finishing is not possible yet: no %s has worked", optionKind(in))
		}
		return models.Decision{Action: models.DecisionFinish, Reason: d.Reason}, nil
	case models.DecisionDispatch, "route", "delegate", "select":
	default:
		return models.Decision{}, fmt.Errorf("unknown action %q: use \"dispatch\" or \"finish\"", d.Action)
	}
	name := matchOption(d.Target, in.Options)
	if name == "" {
		return models.Decision{}, fmt.Errorf("%q is not one of the available %ss (%s)", d.Target, optionKind(in), strings.Join(optionNames(in.Options), ", "))
	}
	d.Action, d.Target = models.DecisionDispatch, name
	if d.Instruction == "" {
		d.Instruction = in.Task
	}
	return d, nil
}

// validateMore adds the further targets of a decision that may dispatch
// several: each must be offered; repeats are dropped, and so is anything
// past MaxTargets.
func validateMore(d models.Decision, more []models.DispatchTarget, in models.DecideInput) (models.Decision, error) {
	seen := map[string]bool{d.Target: true}
	for _, t := range more {
		name := matchOption(t.Target, in.Options)
		if name == "" {
			return models.Decision{}, fmt.Errorf("%q is not one of the available %ss (%s)", t.Target, optionKind(in), strings.Join(optionNames(in.Options), ", "))
		}
		if seen[name] || len(d.Also)+1 >= in.MaxTargets {
			continue
		}
		seen[name] = true
		if t.Instruction == "" {
			t.Instruction = in.Task
		}
		d.Also = append(d.Also, models.DispatchTarget{Target: name, Instruction: t.Instruction})
	}
	return d, nil
}

// fallbackDecision is used when the model never named a valid option: the
// first option not done yet, else finish (or the first option when
// finishing is not allowed).
func fallbackDecision(in models.DecideInput) models.Decision {
	done := map[string]bool{}
	for _, c := range in.Completed {
		done[c] = true
	}
	for _, o := range in.Options {
		if !done[o.Name] {
			return models.Decision{Action: models.DecisionDispatch, Target: o.Name, Instruction: in.Task, Reason: "fallback: the supervisor named no valid option"}
		}
	}
	if in.AllowFinish || len(in.Options) == 0 {
		return models.Decision{Action: models.DecisionFinish, Reason: "fallback: the supervisor named no valid option"}
	}
	return models.Decision{Action: models.DecisionDispatch, Target: in.Options[0].Name, Instruction: in.Task, Reason: "fallback: the supervisor named no valid option"}
}

// respondMessages builds the prompt of a worker's turn or of the final answer.
func respondMessages(in models.RespondInput, limit int) []llm.Message {
	var b strings.Builder
	fmt.Fprintf(&b, "Task: %s\n", in.Task)
	if in.Purpose == models.PurposeFinalAnswer {
		b.WriteString("\nThe teams have finished. Write the final answer to the task for the user, using their outputs below.\n")
	} else if in.Instruction != "" && in.Instruction != in.Task {
		fmt.Fprintf(&b, "\nYour instruction: %s\n", in.Instruction)
	}
	if in.CallerContext != "" {
		fmt.Fprintf(&b, "\nContext from your caller (JSON):\n%s\n", templating.Truncate(in.CallerContext, limit))
	}
	if in.Agent.UserPrompt != "" && in.Purpose != models.PurposeFinalAnswer {
		fmt.Fprintf(&b, "\n%s\n", in.Agent.UserPrompt)
	}
	writeContext(&b, in.Context, limit)
	writeGuidance(&b, in.Guidance)
	return []llm.Message{{Role: llm.RoleSystem, Content: in.Agent.SystemPrompt}, {Role: llm.RoleUser, Content: b.String()}}
}

// writeGuidance adds what an operator asked the agent to take into account
// (runs/redirect).
func writeGuidance(b *strings.Builder, guidance []string) {
	if len(guidance) == 0 {
		return
	}
	b.WriteString("\nGuidance from the operator:\n")
	for _, g := range guidance {
		fmt.Fprintf(b, "- %s\n", g)
	}
}

func writeContext(b *strings.Builder, items []models.ContextItem, limit int) {
	if len(items) == 0 {
		return
	}
	b.WriteString("\nOutputs so far:\n")
	for _, c := range items {
		fmt.Fprintf(b, "\n### %s\n%s\n", c.From, templating.Truncate(c.Content, limit))
	}
}

func matchOption(target string, options []models.Option) string {
	t := strings.TrimSpace(strings.Trim(strings.TrimSpace(target), `"'`))
	if t == "" {
		return ""
	}
	for _, o := range options {
		if o.Name == t {
			return o.Name
		}
	}
	for _, o := range options {
		if strings.EqualFold(o.Name, t) {
			return o.Name
		}
	}
	return ""
}

// findOptionIn finds the longest option name that appears in free text.
func findOptionIn(text string, options []models.Option) string {
	names := optionNames(options)
	sort.SliceStable(names, func(i, j int) bool { return len(names[i]) > len(names[j]) })
	lower := strings.ToLower(text)
	for _, n := range names {
		if strings.Contains(lower, strings.ToLower(n)) {
			return n
		}
	}
	return ""
}

func isFinishWord(s string) bool {
	switch strings.ToLower(strings.Trim(strings.TrimSpace(s), ".!\"'")) {
	case "finish", "finished", "done", "end", "complete", "completed", "stop", "none":
		return true
	}
	return false
}

func optionNames(options []models.Option) []string {
	names := make([]string, 0, len(options))
	for _, o := range options {
		names = append(names, o.Name)
	}
	return names
}

func firstNonBlank(values ...string) string {
	for _, v := range values {
		if s := strings.TrimSpace(v); s != "" {
			return s
		}
	}
	return ""
}
