package api

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/op-stack/executor/models"
	"github.com/op-stack/executor/store"
	"github.com/op-stack/executor/store/storetest"
)

func TestEstimatedRemaining(t *testing.T) {
	s := &Server{store: storetest.SQLite(t), log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	ctx := context.Background()
	now := time.Now()
	started := now.Add(-30 * time.Second)
	run := &store.Run{ID: "r1", HierarchyID: "h1", Status: models.RunRunning, StartedAt: &started}
	for pct, want := range map[int]int64{50: 30, 25: 90, 75: 10} {
		if got := s.estimatedRemaining(ctx, run, pct, now); got == nil || *got != want {
			t.Errorf("%d%% after 30s: %v, want %d", pct, got, want)
		}
	}
	// No team complete and no completed run of the hierarchy: unknown.
	if got := s.estimatedRemaining(ctx, run, 0, now); got != nil {
		t.Errorf("no history: %d, want nil", *got)
	}
	if got := s.estimatedDuration(ctx, run); got != nil {
		t.Errorf("estimated_duration without history: %d, want nil", *got)
	}
	run.Status = models.RunFailed
	if got := s.estimatedRemaining(ctx, run, 50, now); got == nil || *got != 0 {
		t.Errorf("finished: %v, want 0", got)
	}
}
