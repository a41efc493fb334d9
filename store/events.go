package store

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"gorm.io/gorm/clause"

	"github.com/op-stack/executor/models"
)

type eventRow struct {
	RunID     string `gorm:"primaryKey"`
	Sequence  int64  `gorm:"primaryKey"`
	AgentID   *string
	EventType string
	Payload   string
	CreatedAt time.Time
}

func (eventRow) TableName() string { return "execution_event" }

// InsertEvents stores events; an event whose (run_id, sequence) is stored
// already is skipped, so a retried or replayed write stores each event once.
func (s *Store) InsertEvents(ctx context.Context, events []models.Event) error {
	if len(events) == 0 {
		return nil
	}
	rows := make([]eventRow, 0, len(events))
	now := time.Now().UTC()
	for _, e := range events {
		payload, err := json.Marshal(e)
		if err != nil {
			return fmt.Errorf("event %d: %w", e.Sequence, err)
		}
		var agentID *string
		if e.Source.AgentID != "" {
			id := e.Source.AgentID
			agentID = &id
		}
		rows = append(rows, eventRow{RunID: e.RunID, Sequence: e.Sequence, AgentID: agentID, EventType: e.Event.String(), Payload: string(payload), CreatedAt: now})
	}
	return s.db.WithContext(ctx).Clauses(clause.OnConflict{DoNothing: true}).CreateInBatches(rows, 500).Error
}

// EventFilter selects stored events of a run.
type EventFilter struct {
	After   int64    // events with a greater sequence
	Limit   int      // at most this many; 0 means 1000
	AgentID string   // only this agent's events
	Types   []string // only these "<category>.<action>" types
}

// ListEvents returns a run's stored events in sequence order.
func (s *Store) ListEvents(ctx context.Context, runID string, f EventFilter) ([]models.Event, error) {
	if f.Limit <= 0 {
		f.Limit = 1000
	}
	q := s.db.WithContext(ctx).Where("run_id = ? AND sequence > ?", runID, f.After)
	if f.AgentID != "" {
		q = q.Where("agent_id = ?", f.AgentID)
	}
	if len(f.Types) > 0 {
		q = q.Where("event_type IN ?", f.Types)
	}
	var rows []eventRow
	if err := q.Order("sequence").Limit(f.Limit).Find(&rows).Error; err != nil {
		return nil, err
	}
	out := make([]models.Event, 0, len(rows))
	for _, r := range rows {
		var e models.Event
		if err := json.Unmarshal([]byte(r.Payload), &e); err != nil {
			return nil, fmt.Errorf("event %s/%d: %w", r.RunID, r.Sequence, err)
		}
		out = append(out, e)
	}
	return out, nil
}

// LastEventSequence returns the highest stored sequence of a run, 0 when
// none is stored.
func (s *Store) LastEventSequence(ctx context.Context, runID string) (int64, error) {
	var last *int64
	err := s.db.WithContext(ctx).Model(&eventRow{}).Where("run_id = ?", runID).Select("MAX(sequence)").Scan(&last).Error
	if err != nil || last == nil {
		return 0, err
	}
	return *last, nil
}
