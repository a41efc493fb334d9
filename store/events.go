package store

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"gorm.io/gorm"
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
	return insertEvents(s.db.WithContext(ctx), events)
}

func insertEvents(db *gorm.DB, events []models.Event) error {
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
	return db.Clauses(clause.OnConflict{DoNothing: true}).CreateInBatches(rows, 500).Error
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
	return decodeEvents(rows)
}

func decodeEvents(rows []eventRow) ([]models.Event, error) {
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

type eventLeaseRow struct {
	RunID     string `gorm:"primaryKey"`
	CallKey   string
	Producer  string
	FromSeq   int64
	UpdatedAt time.Time
}

func (eventLeaseRow) TableName() string { return "event_lease" }

// LeaseWrite is one write of an activity attempt under a run's event
// lease (models.EventLease).
type LeaseWrite struct {
	RunID string
	// CallKey names the activity across its attempts, Producer the
	// attempt.
	CallKey, Producer string
	From              int64
	// Claim takes the lease with this write (a first attempt's first
	// write), unless another attempt of the same call holds it already:
	// a later one, which fenced this one out.
	Claim bool
	// Carried are the lease's events from before From (stored once), with
	// Claim.
	Carried []models.Event
	Events  []models.Event
	// Answer, if set, is the call's answer record (SaveAnswer, without
	// forgetting its kept answers: its retries may still need them).
	Answer *models.AnswerRecord
	// Forget, with Claim, drops the answers kept for these usage records
	// (models.EventLease.Forget).
	Forget []string
	// Keep are answers received by the attempt, kept for its retries
	// (KeepAnswer) with its events.
	Keep []KeptAnswer
}

// ClaimEventLease makes producer (a retried attempt of callKey) the writer
// of the run's events from sequence from on, fencing out earlier attempts,
// stores the lease's carried events and returns the events stored from
// from on: the earlier attempts', which the claimant continues.
func (s *Store) ClaimEventLease(ctx context.Context, runID, callKey, producer string, from int64, carried []models.Event, forget []string) ([]models.Event, error) {
	var prior []models.Event
	err := s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		// The write comes first: on PostgreSQL it locks the row against a
		// concurrent write of an earlier attempt, on SQLite it makes the
		// transaction the writer before it reads.
		if _, err := claimLease(tx, LeaseWrite{RunID: runID, CallKey: callKey, Producer: producer, From: from}, false); err != nil {
			return err
		}
		if err := insertEvents(tx, carried); err != nil {
			return err
		}
		if err := forgetCalls(tx, forget); err != nil {
			return err
		}
		var err error
		prior, err = listEventsTx(tx, runID, from)
		return err
	})
	return prior, err
}

// claimLease writes the lease row; unlessSameCall keeps a row of another
// attempt of w's call, and reports false then.
func claimLease(tx *gorm.DB, w LeaseWrite, unlessSameCall bool) (bool, error) {
	row := eventLeaseRow{RunID: w.RunID, CallKey: w.CallKey, Producer: w.Producer, FromSeq: w.From, UpdatedAt: time.Now().UTC()}
	conflict := clause.OnConflict{
		Columns:   []clause.Column{{Name: "run_id"}},
		DoUpdates: clause.AssignmentColumns([]string{"call_key", "producer", "from_seq", "updated_at"}),
	}
	if unlessSameCall {
		conflict.Where = clause.Where{Exprs: []clause.Expression{clause.Expr{SQL: "event_lease.call_key <> excluded.call_key"}}}
	}
	res := tx.Clauses(conflict).Create(&row)
	return res.RowsAffected > 0, res.Error
}

// WriteLeased stores an attempt's events numbered under the run's lease,
// and its answer record, in one transaction, if the attempt holds the
// lease (or claims it now: w.Claim); false, with nothing stored, when
// another attempt has claimed it since, or the workflow has taken it back
// (ReleaseEventLease).
func (s *Store) WriteLeased(ctx context.Context, w LeaseWrite) (bool, error) {
	held := false
	err := s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		if w.Claim {
			ok, err := claimLease(tx, w, true)
			if err != nil || !ok {
				return err
			}
			if err := insertEvents(tx, w.Carried); err != nil {
				return err
			}
			if err := forgetCalls(tx, w.Forget); err != nil {
				return err
			}
		} else {
			res := tx.Model(&eventLeaseRow{}).Where("run_id = ? AND producer = ?", w.RunID, w.Producer).Update("updated_at", time.Now().UTC())
			if res.Error != nil || res.RowsAffected == 0 {
				return res.Error
			}
		}
		held = true
		for _, k := range w.Keep {
			if err := keepAnswer(tx, k); err != nil {
				return err
			}
		}
		if err := insertEvents(tx, w.Events); err != nil {
			return err
		}
		if w.Answer != nil {
			return saveAnswer(tx, *w.Answer)
		}
		return nil
	})
	return held && err == nil, err
}

// ReleaseEventLease takes a run's lease back after its activity failed:
// the attempts still running can store nothing more. It stores the
// lease's carried events and returns the events stored from from on.
func (s *Store) ReleaseEventLease(ctx context.Context, runID string, from int64, carried []models.Event) ([]models.Event, error) {
	var stored []models.Event
	err := s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		if err := tx.Where("run_id = ?", runID).Delete(&eventLeaseRow{}).Error; err != nil {
			return err
		}
		if err := insertEvents(tx, carried); err != nil {
			return err
		}
		var err error
		stored, err = listEventsTx(tx, runID, from)
		return err
	})
	return stored, err
}

// listEventsTx reads a run's stored events from sequence from on, every one.
func listEventsTx(tx *gorm.DB, runID string, from int64) ([]models.Event, error) {
	var rows []eventRow
	if err := tx.Where("run_id = ? AND sequence >= ?", runID, from).Order("sequence").Find(&rows).Error; err != nil {
		return nil, err
	}
	return decodeEvents(rows)
}
