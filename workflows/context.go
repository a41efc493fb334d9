package workflows

import (
	"fmt"

	"github.com/op-stack/executor/models"
)

// DefaultContextTotalChars bounds the earlier outputs shown in one prompt
// when RunOptions.ContextTotalChars is zero.
const DefaultContextTotalChars = models.DefaultContextTotalChars

// teamItems is the context of completed team turns: one item per turn,
// each worker's answer by reference.
func teamItems(teams []models.TeamOutput) []models.ContextItem {
	items := make([]models.ContextItem, 0, len(teams))
	for _, t := range teams {
		item := models.ContextItem{From: "team " + t.TeamName}
		for _, o := range t.Workers {
			item.Refs = append(item.Refs, models.RefTo(o, o.Name))
		}
		items = append(items, item)
	}
	return items
}

// workerItems is the context of a team turn's earlier worker answers.
func workerItems(outputs []models.WorkerOutput) []models.ContextItem {
	items := make([]models.ContextItem, 0, len(outputs))
	for _, o := range outputs {
		items = append(items, models.ContextItem{From: "worker " + o.Name, Refs: []models.OutputRef{models.RefTo(o, "")}})
	}
	return items
}

// bounded keeps the newest items whose sizes (each capped at the per-item
// limit, as the prompt truncates them) fit in the total budget, and says
// how many older ones were left out. The newest item is always kept. The
// budget keeps both the prompts and the activities' inputs the same size
// however long the run grows.
func bounded(items []models.ContextItem, o models.RunOptions) []models.ContextItem {
	perItem, total := o.ContextCharLimit, o.ContextTotalChars
	if perItem <= 0 {
		perItem = 8000
	}
	if total <= 0 {
		total = DefaultContextTotalChars
	}
	used, keep := 0, 0
	for i := len(items) - 1; i >= 0; i-- {
		size := min(items[i].Size(), perItem)
		if keep > 0 && used+size > total {
			break
		}
		used += size
		keep++
	}
	if keep == len(items) {
		return items
	}
	left := len(items) - keep
	out := make([]models.ContextItem, 0, keep+1)
	out = append(out, models.ContextItem{
		From:    "earlier work",
		Content: fmt.Sprintf("%d earlier outputs are left out to keep this prompt within its context budget.", left),
	})
	return append(out, items[left:]...)
}

// withPrevious is bounded(items), preceded in a follow-up run by what the
// supervisors see of the previous run (RunInput.Previous's context, at
// most half the budget: see models.PreviousRunContext); the run's own
// items get the rest of the budget, and at least half of it. Without a
// previous run it is bounded(items), so other runs see what they saw.
func withPrevious(previous, items []models.ContextItem, o models.RunOptions) []models.ContextItem {
	if len(previous) == 0 {
		return bounded(items, o)
	}
	perItem, total := o.ContextCharLimit, o.ContextTotalChars
	if perItem <= 0 {
		perItem = models.DefaultContextCharLimit
	}
	if total <= 0 {
		total = DefaultContextTotalChars
	}
	used := 0
	for _, c := range previous {
		used += min(c.Size(), perItem)
	}
	o.ContextTotalChars = max(total-used, total/2)
	return concat(previous, bounded(items, o))
}

// previousContext is the previous run's context of a follow-up run; nil
// for other runs.
func (w *runWorkflow) previousContext() []models.ContextItem {
	if w.in.Previous == nil {
		return nil
	}
	return w.in.Previous.Context
}
