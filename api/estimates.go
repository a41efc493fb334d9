package api

import (
	"context"
	"math"
	"time"

	"github.com/op-stack/executor/models"
	"github.com/op-stack/executor/store"
)

// estimateHistory is how many of a hierarchy's latest completed runs the
// duration estimate averages.
const estimateHistory = 10

// historicalDuration is the mean duration, in seconds, of the latest
// completed runs (at most estimateHistory) of the hierarchy in the tenant,
// other than exclude. ok is false when there is none: nothing honest can
// be said before a hierarchy has completed once.
func (s *Server) historicalDuration(ctx context.Context, tenant, hierarchyID, exclude string) (mean float64, n int, ok bool) {
	runs, _, err := s.store.ListRuns(ctx, store.RunFilter{
		ListFilter:  store.ListFilter{Page: 1, PageSize: estimateHistory + 1, Tenant: tenant},
		HierarchyID: hierarchyID, Status: models.RunCompleted,
	})
	if err != nil {
		s.log.DebugContext(ctx, "duration estimate", "hierarchy_id", hierarchyID, "error", err)
		return 0, 0, false
	}
	var total float64
	for _, r := range runs {
		if r.ID == exclude || r.StartedAt == nil || r.CompletedAt == nil || n == estimateHistory {
			continue
		}
		total += r.CompletedAt.Sub(*r.StartedAt).Seconds()
		n++
	}
	if n == 0 {
		return 0, 0, false
	}
	return total / float64(n), n, true
}

// estimatedDuration is spec 001's estimated_duration of a new execution, in
// whole seconds: the mean of the hierarchy's latest completed executions,
// or nil when it has none.
func (s *Server) estimatedDuration(ctx context.Context, run *store.Run) *int64 {
	mean, _, ok := s.historicalDuration(ctx, run.TenantID, run.HierarchyID, run.ID)
	if !ok {
		return nil
	}
	return secondsPtr(mean)
}

// estimatedRemaining is spec 001's estimated_remaining_time, in whole
// seconds, at now: 0 for a finished execution; while teams remain and some
// are complete, the time so far extrapolated linearly over the teams left
// (elapsed × (100 − p) / p with p the completion percentage); before any
// team is complete, the hierarchy's mean duration (see estimatedDuration)
// minus the time so far. nil when neither can be said (no completed team
// and no history, or the run has already outlasted its history).
func (s *Server) estimatedRemaining(ctx context.Context, run *store.Run, percentage int, now time.Time) *int64 {
	if models.IsTerminal(run.Status) {
		zero := int64(0)
		return &zero
	}
	var elapsed float64
	if run.StartedAt != nil {
		elapsed = max(now.Sub(*run.StartedAt).Seconds(), 0)
	}
	if percentage > 0 && percentage < 100 && run.StartedAt != nil {
		return secondsPtr(elapsed * float64(100-percentage) / float64(percentage))
	}
	mean, _, ok := s.historicalDuration(ctx, run.TenantID, run.HierarchyID, run.ID)
	if !ok || mean <= elapsed {
		return nil
	}
	return secondsPtr(mean - elapsed)
}

func secondsPtr(x float64) *int64 {
	n := int64(math.Round(x))
	return &n
}
