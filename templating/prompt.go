package templating

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/op-stack/executor/models"
)

// PromptMarker starts the first prompt of a formatting call and every
// repair request, so that test fakes (and people reading logs) can tell
// formatting calls from a run's calls.
const PromptMarker = "Fill the output template"

// SystemPrompt is the system message of a formatting call.
const SystemPrompt = "You turn the results of a team of AI agents into a filled JSON template. " +
	"You answer with one JSON object only: no prose before or after it, no code fences."

// Prompt is the user message of a formatting call: the run's task, final
// answer and team results, the template, the extraction rules and how to
// answer. Outputs are truncated so that a long run still fits a model's
// context: the final answer gets limit (the run's context limit), the
// worker outputs share four times that.
func Prompt(in models.FormatInput, limit int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s from the results of this run.\n\n", PromptMarker)
	if in.HierarchyName != "" {
		fmt.Fprintf(&b, "Team: %s\n", in.HierarchyName)
	}
	fmt.Fprintf(&b, "Task: %s\n", in.Task)
	if in.Status != "" {
		fmt.Fprintf(&b, "Run status: %s\n", in.Status)
	}
	if in.FinalAnswer != "" {
		fmt.Fprintf(&b, "\n# Final answer\n%s\n", Truncate(in.FinalAnswer, limit))
	}
	outputs := 0
	for _, t := range in.Teams {
		outputs += len(t.Workers)
	}
	perOutput := limit
	if outputs > 0 {
		perOutput = min(limit, max(1000, 4*limit/outputs))
	}
	if len(in.Teams) > 0 {
		b.WriteString("\n# Team results\n")
	}
	for _, t := range in.Teams {
		status := t.Status
		if status == "" {
			status = "completed"
		}
		fmt.Fprintf(&b, "\n## Team %q (%s)\n", t.TeamName, status)
		if t.Instruction != "" {
			fmt.Fprintf(&b, "Instruction: %s\n", Truncate(t.Instruction, 500))
		}
		if t.Error != "" {
			fmt.Fprintf(&b, "Error: %s\n", Truncate(t.Error, 500))
		}
		for _, w := range t.Workers {
			fmt.Fprintf(&b, "\n### %s (agent_id %s)\n", w.Name, w.AgentID)
			if w.Instruction != "" {
				fmt.Fprintf(&b, "Instruction: %s\n", Truncate(w.Instruction, 500))
			}
			fmt.Fprintf(&b, "Output:\n%s\n", Truncate(w.Output, perOutput))
		}
	}
	fmt.Fprintf(&b, "\n# Output template\n```json\n%s\n```\n", indentJSON(in.Template))
	if rules := bytes.TrimSpace(in.ExtractionRules); len(rules) > 0 && !bytes.Equal(rules, []byte("null")) {
		fmt.Fprintf(&b, "\n# Extraction rules (template key: how to fill it)\n```json\n%s\n```\n", indentJSON(in.ExtractionRules))
	}
	b.WriteString(`
# How to answer
- Answer with one JSON object that has exactly the template's keys at every level: none missing, none added, none renamed.
- A string in braces, like "{describe X}", is a placeholder: replace it with a string, or with an array of strings when the placeholder or its extraction rule asks for several items (a list, several points, 3-5 items).
- Any other string is fixed text: copy it unchanged.
- Objects stay objects with the same keys, arrays stay arrays, numbers stay numbers, booleans stay booleans.
- Use only facts from the results above, and write in the language of the template.
`)
	return b.String()
}

// RepairPrompt sends an answer's problems back. It repeats PromptMarker
// (see there).
func RepairPrompt(problems []string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s again: your answer does not match it.\nProblems:\n", PromptMarker)
	for _, p := range problems {
		fmt.Fprintf(&b, "- %s\n", p)
	}
	b.WriteString("Answer with the corrected JSON object only.")
	return b.String()
}

func indentJSON(raw []byte) string {
	var out bytes.Buffer
	if err := json.Indent(&out, bytes.TrimSpace(raw), "", "  "); err != nil {
		return string(raw)
	}
	return out.String()
}

// Truncate cuts s to n runes, saying so; n <= 0 keeps it whole.
func Truncate(s string, n int) string {
	if n <= 0 {
		return s
	}
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n]) + " …[truncated]"
}
