package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"

	"github.com/op-stack/executor/models"
)

// KeptAnswer is an answer an LLM activity received, kept so that a later
// attempt of the same activity uses it instead of asking the model again
// (see docs/cost-and-budgets.md, "An answer is never bought twice").
type KeptAnswer struct {
	// CallKey names the activity: its workflow id, Temporal run id and
	// activity id, which Temporal keeps across the activity's attempts.
	CallKey string
	// Ordinal is the answer's place among the activity's answers, from 1.
	Ordinal int
	RunID   string
	// Fingerprint is a hash of the request the answer answers.
	Fingerprint string
	// Response is the answer as the LLM client returned it (JSON).
	Response string
	// Record is the usage record of the request that produced it.
	Record models.LLMCallRecord
}

type keptAnswerRow struct {
	CallKey     string `gorm:"primaryKey"`
	Ordinal     int    `gorm:"primaryKey"`
	RunID       string
	Fingerprint string
	CallID      string
	Response    string
	Record      string
	CreatedAt   time.Time
}

func (keptAnswerRow) TableName() string { return "llm_answer" }

// KeepAnswer stores a received answer with its usage record, in one
// transaction: the llm_call row of the request that produced it is written
// now, so a request whose activity cannot report its result is recorded
// all the same (SaveAnswer writing it again later stores it once). A
// second answer for the same call key and ordinal (two attempts running
// at once) keeps the first; its own usage record is still written.
func (s *Store) KeepAnswer(ctx context.Context, k KeptAnswer) error {
	return s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error { return keepAnswer(tx, k) })
}

// keepAnswer is KeepAnswer's writes, in tx.
func keepAnswer(tx *gorm.DB, k KeptAnswer) error {
	rec, err := json.Marshal(k.Record)
	if err != nil {
		return err
	}
	row := keptAnswerRow{
		CallKey: k.CallKey, Ordinal: k.Ordinal, RunID: k.RunID, Fingerprint: k.Fingerprint,
		CallID: k.Record.ID, Response: withoutNUL(k.Response), Record: string(rec), CreatedAt: time.Now().UTC(),
	}
	if err := tx.Clauses(clause.OnConflict{DoNothing: true}).Create(&row).Error; err != nil {
		return fmt.Errorf("keep answer: %w", err)
	}
	if err := recordLLMCall(tx, LLMCallFromRecord(k.Record)); err != nil {
		return fmt.Errorf("record LLM call %s: %w", k.Record.ID, err)
	}
	return nil
}

// KeptAnswerFor returns the answer kept for a call key and ordinal, nil
// when there is none.
func (s *Store) KeptAnswerFor(ctx context.Context, callKey string, ordinal int) (*KeptAnswer, error) {
	var row keptAnswerRow
	err := s.db.WithContext(ctx).Where("call_key = ? AND ordinal = ?", callKey, ordinal).Take(&row).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	k := &KeptAnswer{CallKey: row.CallKey, Ordinal: row.Ordinal, RunID: row.RunID, Fingerprint: row.Fingerprint, Response: row.Response}
	if err := json.Unmarshal([]byte(row.Record), &k.Record); err != nil {
		return nil, fmt.Errorf("kept answer %s/%d record: %w", callKey, ordinal, err)
	}
	return k, nil
}

// KeptAnswers counts the answers kept for a run (for tests and
// operators: they go once stored).
func (s *Store) KeptAnswers(ctx context.Context, runID string) (int64, error) {
	var n int64
	err := s.db.WithContext(ctx).Model(&keptAnswerRow{}).Where("run_id = ?", runID).Count(&n).Error
	return n, err
}

// forgetAnswers drops the kept answers of usage records the workflow has
// stored: the activity that received them has completed, so no attempt of
// it will ask for them again.
func forgetAnswers(tx *gorm.DB, calls []models.LLMCallRecord) error {
	ids := make([]string, len(calls))
	for i, c := range calls {
		ids[i] = c.ID
	}
	return forgetCalls(tx, ids)
}

// forgetCalls drops the answers kept for these usage record ids.
func forgetCalls(tx *gorm.DB, ids []string) error {
	if len(ids) == 0 {
		return nil
	}
	return tx.Where("call_id IN ?", ids).Delete(&keptAnswerRow{}).Error
}
