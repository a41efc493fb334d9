package models

import "fmt"

// Context budgets when RunOptions leaves them zero (CONTEXT_CHAR_LIMIT and
// CONTEXT_TOTAL_CHAR_LIMIT's defaults).
const (
	DefaultContextCharLimit  = 8000
	DefaultContextTotalChars = 32000
)

// PreviousRun is what a follow-up run (runs/start's previous_run_id) is
// given of the run it follows: RunInput.Previous. Runs started without it
// (and every run started before follow-ups) have none, so their replays
// are unchanged.
type PreviousRun struct {
	RunID    string `json:"run_id"`
	ThreadID string `json:"thread_id"`
	Status   string `json:"status"`
	// Context is what the follow-up's global and team supervisors see of
	// the previous run: its task, its teams' results and its final answer,
	// oldest first. Answers go by reference (previews with message ids,
	// which the activity that builds a prompt resolves), and the whole is
	// bounded when the run starts (PreviousRunContext), so the input stays
	// small however long the previous run's answers were.
	Context []ContextItem `json:"context,omitempty"`
}

// PreviousRunSource is what PreviousRunContext reads of a finished run.
type PreviousRunSource struct {
	RunID       string
	Status      string
	Task        string
	FinalAnswer string
	// FinalAnswerMessageID is the message storing FinalAnswer; empty: the
	// answer is cut to the per-item limit instead of referenced.
	FinalAnswerMessageID string
	Error                string
	Teams                []TeamOutput
}

// Labels of the previous run's context items, as prompts show them.
const (
	PreviousTaskLabel   = "previous run: task"
	PreviousAnswerLabel = "previous run: final answer"
	previousTeamLabel   = "previous run: team "
)

// PreviousRunContext builds PreviousRun.Context within the context limits
// of o: each item at most ContextCharLimit characters, and the whole at
// most half of ContextTotalChars (the follow-up's own outputs get the
// rest). The task and the final answer (or how the run ended without one)
// are always kept; team results are left out, oldest first, when they do
// not fit, and a note says how many.
func PreviousRunContext(p PreviousRunSource, o RunOptions) []ContextItem {
	perItem, total := o.ContextCharLimit, o.ContextTotalChars
	if perItem <= 0 {
		perItem = DefaultContextCharLimit
	}
	if total <= 0 {
		total = DefaultContextTotalChars
	}
	budget := total / 2
	task := ContextItem{From: PreviousTaskLabel, Content: cutRunes(p.Task, perItem)}
	var last ContextItem
	if p.FinalAnswer != "" {
		last = ContextItem{From: PreviousAnswerLabel, Refs: []OutputRef{answerRef(p.FinalAnswer, p.FinalAnswerMessageID, perItem)}}
	} else {
		msg := fmt.Sprintf("The previous run ended %s without a final answer.", p.Status)
		if p.Error != "" {
			msg = fmt.Sprintf("The previous run ended %s without a final answer: %s", p.Status, cutRunes(p.Error, 500))
		}
		last = ContextItem{From: "previous run: outcome", Content: msg}
	}
	used := min(task.Size(), perItem) + min(last.Size(), perItem)
	var teams []ContextItem // newest first
	left := 0
	for i := len(p.Teams) - 1; i >= 0; i-- {
		t := p.Teams[i]
		if len(t.Workers) == 0 {
			continue
		}
		item := ContextItem{From: previousTeamLabel + t.TeamName}
		if t.Status != "" && t.Status != TeamCompleted {
			item.From += " (" + t.Status + ")"
		}
		for _, w := range t.Workers {
			ref := RefTo(w, w.Name)
			if !w.OutputTruncated {
				ref = answerRef(w.Output, w.MessageID, perItem)
				ref.Name = w.Name
			}
			item.Refs = append(item.Refs, ref)
		}
		size := min(item.Size(), perItem)
		if left > 0 || used+size > budget {
			left++
			continue
		}
		used += size
		teams = append(teams, item)
	}
	out := make([]ContextItem, 0, len(teams)+3)
	out = append(out, task)
	if left > 0 {
		out = append(out, ContextItem{From: "previous run: earlier work", Content: fmt.Sprintf("%d earlier team results of the previous run are left out to keep this prompt within its context budget.", left)})
	}
	for i := len(teams) - 1; i >= 0; i-- {
		out = append(out, teams[i])
	}
	return append(out, last)
}

// answerRef refers to a stored answer: a preview and its message when the
// answer is long and stored, else the answer itself cut to perItem.
func answerRef(text, messageID string, perItem int) OutputRef {
	chars := len([]rune(text))
	if messageID != "" && chars > OutputPreviewChars {
		return OutputRef{MessageID: messageID, Text: cutRunes(text, OutputPreviewChars), Truncated: true, Chars: chars}
	}
	text = cutRunes(text, perItem)
	return OutputRef{MessageID: messageID, Text: text, Chars: len([]rune(text))}
}

func cutRunes(s string, n int) string {
	if r := []rune(s); len(r) > n {
		return string(r[:n]) + "…"
	}
	return s
}
