package models_test

import (
	"strings"
	"testing"

	"github.com/op-stack/executor/models"
)

func TestPreviousRunContextIsByReferenceAndBounded(t *testing.T) {
	long := strings.Repeat("a", 5000)
	var teams []models.TeamOutput
	for i := 0; i < 20; i++ {
		teams = append(teams, models.TeamOutput{TeamName: "t", Status: models.TeamCompleted, Workers: []models.WorkerOutput{
			{Name: "w", Output: strings.Repeat("x", 1000)}, // no message: cut, not referenced
		}})
	}
	teams = append(teams, models.TeamOutput{TeamName: "last", Status: models.TeamFailed, Workers: []models.WorkerOutput{{Name: "w2", Output: long, MessageID: "m-w2"}}})
	items := models.PreviousRunContext(models.PreviousRunSource{
		RunID: "r1", Status: models.RunCompleted, Task: strings.Repeat("t", 100), FinalAnswer: long, FinalAnswerMessageID: "m-final", Teams: teams,
	}, models.RunOptions{ContextCharLimit: 3000, ContextTotalChars: 16000})

	if items[0].From != models.PreviousTaskLabel || items[0].Content != strings.Repeat("t", 100) {
		t.Errorf("first item = %+v, want the task", items[0])
	}
	last := items[len(items)-1]
	if last.From != models.PreviousAnswerLabel || len(last.Refs) != 1 || !last.Refs[0].Truncated || last.Refs[0].MessageID != "m-final" || last.Refs[0].Chars != 5000 {
		t.Errorf("last item = %+v, want the final answer by reference", last)
	}
	if !strings.Contains(items[1].Content, "left out") {
		t.Errorf("second item = %+v, want a note on the team results left out", items[1])
	}
	// The newest team, by reference; its status shown.
	if it := items[len(items)-2]; it.From != "previous run: team last (failed)" || !it.Refs[0].Truncated || it.Refs[0].MessageID != "m-w2" {
		t.Errorf("newest team = %+v", it)
	}
	// Within half the total budget, every item within the per-item limit,
	// and no whole long answer in the input.
	used := 0
	for _, it := range items {
		used += min(it.Size(), 3000)
		for _, r := range it.Refs {
			if len([]rune(r.Text)) > 3001 {
				t.Errorf("item %q carries %d characters", it.From, len([]rune(r.Text)))
			}
		}
	}
	if used > 8000 {
		t.Errorf("previous context is %d characters, over half the budget", used)
	}

	// A run that ended without an answer says how it ended.
	items = models.PreviousRunContext(models.PreviousRunSource{RunID: "r2", Status: models.RunFailed, Task: "x", Error: "boom"}, models.RunOptions{})
	if len(items) != 2 || !strings.Contains(items[1].Content, "failed without a final answer: boom") {
		t.Errorf("failed run's context = %+v", items)
	}
}
