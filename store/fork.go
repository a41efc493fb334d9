package store

import (
	"context"
	"errors"

	"gorm.io/gorm"

	"github.com/op-stack/executor/models"
)

// RunEvents returns every stored event of a run up to sequence upTo (0:
// all), in sequence order.
func (s *Store) RunEvents(ctx context.Context, runID string, upTo int64) ([]models.Event, error) {
	var out []models.Event
	after := int64(0)
	for {
		page, err := s.ListEvents(ctx, runID, EventFilter{After: after, Limit: 1000})
		if err != nil {
			return nil, err
		}
		for _, e := range page {
			if upTo > 0 && e.Sequence > upTo {
				return out, nil
			}
			out = append(out, e)
		}
		if len(page) < 1000 {
			return out, nil
		}
		after = page[len(page)-1].Sequence
	}
}

// CreateFork stores a fork as a pending run together with what it copies
// from its original, in one transaction: the events up to the fork point
// (already re-addressed to the fork) and the usage records of the calls
// among them. A fork is never half stored.
func (s *Store) CreateFork(ctx context.Context, r *Run, events []models.Event, calls []*LLMCall) error {
	row, err := newPendingRunRow(r)
	if err != nil {
		return err
	}
	err = s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		if err := tx.Create(&row).Error; err != nil {
			return err
		}
		// InsertEvents, inside the transaction.
		if err := (&Store{db: tx, dialect: s.dialect}).InsertEvents(ctx, events); err != nil {
			return err
		}
		for _, c := range calls {
			if err := recordLLMCall(tx, c); err != nil {
				return err
			}
		}
		return nil
	})
	if errors.Is(err, gorm.ErrDuplicatedKey) {
		return models.Errorf(models.CodeAlreadyExists, "run id %q is taken", r.ID)
	}
	return err
}

// DeleteFork removes a fork whose workflow could not be started, with
// what it copied.
func (s *Store) DeleteFork(ctx context.Context, id string) error {
	return s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		if err := tx.Where("run_id = ?", id).Delete(&eventRow{}).Error; err != nil {
			return err
		}
		if err := tx.Where("run_id = ?", id).Delete(&LLMCall{}).Error; err != nil {
			return err
		}
		return tx.Where("id = ? AND status = ?", id, models.RunPending).Delete(&runRow{}).Error
	})
}
