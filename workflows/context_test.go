package workflows

import (
	"strings"
	"testing"

	"github.com/op-stack/executor/models"
)

func TestBoundedKeepsTheNewestItemsWithinTheBudget(t *testing.T) {
	var items []models.ContextItem
	for i := 0; i < 50; i++ {
		o := models.WorkerOutput{Name: "w", Output: strings.Repeat("x", 1000), MessageID: "msg"}.WithPreview()
		items = append(items, models.ContextItem{From: "team t", Refs: []models.OutputRef{models.RefTo(o, "w")}})
	}
	got := bounded(items, models.RunOptions{ContextCharLimit: 8000, ContextTotalChars: 5000})
	// Each item costs 1000 characters plus its label: four fit in 5000.
	if len(got) != 5 {
		t.Fatalf("got %d items, want a note and the 4 newest", len(got))
	}
	if got[0].From != "earlier work" || !strings.Contains(got[0].Content, "46 earlier outputs") {
		t.Errorf("first item = %+v, want a note that 46 outputs are left out", got[0])
	}
	for _, it := range got[1:] {
		if len(it.Refs) != 1 || !it.Refs[0].Truncated || len([]rune(it.Refs[0].Text)) > models.OutputPreviewChars+1 {
			t.Errorf("item %+v: want one truncated reference carrying a preview only", it)
		}
	}
	if all := bounded(items[:3], models.RunOptions{ContextCharLimit: 8000, ContextTotalChars: 5000}); len(all) != 3 {
		t.Errorf("items within the budget were dropped: %d of 3 kept", len(all))
	}
	// The newest item is kept even when it alone exceeds the budget.
	if one := bounded(items, models.RunOptions{ContextCharLimit: 8000, ContextTotalChars: 10}); len(one) != 2 {
		t.Errorf("got %d items with a tiny budget, want the note and the newest", len(one))
	}
}

func TestResolvedReadsTruncatedReferences(t *testing.T) {
	long := strings.Repeat("y", 500)
	o := models.WorkerOutput{Name: "analyst", Output: long, MessageID: "m1"}.WithPreview()
	if !o.OutputTruncated || o.OutputChars != 500 {
		t.Fatalf("WithPreview = %+v, want a truncated preview of 500 characters", o)
	}
	item := teamItems([]models.TeamOutput{{TeamName: "research", Workers: []models.WorkerOutput{o, {Name: "searcher", Output: "short"}}}})[0]
	if ids := models.TruncatedRefs([]models.ContextItem{item}); len(ids) != 1 || ids[0] != "m1" {
		t.Fatalf("TruncatedRefs = %v, want [m1]", ids)
	}
	got := item.Resolved(map[string]string{"m1": long}).Content
	if want := "analyst: " + long + "\n\nsearcher: short"; got != want {
		t.Errorf("Resolved content = %q, want %q", got, want)
	}
	// Without the stored answer the preview stands in.
	if got := item.Resolved(nil).Content; !strings.HasPrefix(got, "analyst: yyy") || strings.Contains(got, long) {
		t.Errorf("Resolved without the message = %q", got)
	}
}

func TestWithPreviousSharesTheBudget(t *testing.T) {
	o := models.RunOptions{ContextCharLimit: 8000, ContextTotalChars: 5000}
	var items []models.ContextItem
	for i := 0; i < 10; i++ {
		items = append(items, models.ContextItem{From: "team t", Content: strings.Repeat("x", 1000)})
	}
	// Without a previous run: bounded, unchanged.
	if got, want := withPrevious(nil, items, o), bounded(items, o); len(got) != len(want) || got[0].Content != want[0].Content {
		t.Fatalf("withPrevious(nil) = %d items, bounded = %d", len(got), len(want))
	}
	previous := []models.ContextItem{{From: models.PreviousTaskLabel, Content: "old task"}, {From: models.PreviousAnswerLabel, Content: strings.Repeat("p", 2000)}}
	got := withPrevious(previous, items, o)
	if got[0].From != models.PreviousTaskLabel || got[1].From != models.PreviousAnswerLabel {
		t.Fatalf("previous items first: %+v", got[:2])
	}
	// 5000 - 2008 leaves room for two of the run's own outputs (and the
	// note); at least half the budget is always left to them.
	if len(got) != 2+1+2 || got[2].From != "earlier work" {
		t.Errorf("got %d items: %+v", len(got), got)
	}
	big := []models.ContextItem{{From: models.PreviousAnswerLabel, Content: strings.Repeat("p", 8000)}}
	if got := withPrevious(big, items, o); len(got) != 1+1+2 {
		t.Errorf("with a previous run over the budget, got %d items, want it, a note and half the budget's worth", len(got))
	}
}
