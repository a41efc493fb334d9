package store

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"

	"github.com/op-stack/executor/models"
)

type messageRow struct {
	// TenantID is the tenant of the message's run: message ids are unique
	// per tenant (caller-set ids are the tenant's own).
	TenantID        string `gorm:"primaryKey"`
	ID              string `gorm:"primaryKey"`
	RunID           string
	ParentMessageID *string
	AgentID         string
	AgentType       string
	AgentName       string
	TeamName        *string
	Depth           int
	Path            string
	Content         string
	CreatedAt       time.Time
	UpdatedAt       time.Time
}

func (messageRow) TableName() string { return "message" }

// Message is an agent turn's stored final output.
type Message struct {
	ID              string     `json:"id"`
	RunID           string     `json:"run_id"`
	ParentMessageID *string    `json:"parent_message_id"`
	AgentID         string     `json:"agent_id"`
	AgentType       string     `json:"agent_type"`
	AgentName       string     `json:"agent_name"`
	TeamName        *string    `json:"team_name"`
	Depth           int        `json:"depth"`
	Path            []string   `json:"path"`
	Content         string     `json:"content"`
	CreatedAt       time.Time  `json:"created_at"`
	UpdatedAt       time.Time  `json:"updated_at"`
	Children        []*Message `json:"children"`
}

// SaveMessage upserts a message by its application-set id: saving it again
// (a retried activity, a replay) updates the same row.
func (s *Store) SaveMessage(ctx context.Context, m *Message) error {
	return saveMessage(s.db.WithContext(ctx), m)
}

func saveMessage(db *gorm.DB, m *Message) error {
	path, err := json.Marshal(m.Path)
	if err != nil {
		return err
	}
	tenant, err := runTenant(db, m.RunID)
	if err != nil {
		return err
	}
	now := time.Now().UTC()
	row := messageRow{
		TenantID: tenant, ID: m.ID, RunID: m.RunID, ParentMessageID: m.ParentMessageID, AgentID: m.AgentID, AgentType: m.AgentType,
		AgentName: m.AgentName, TeamName: m.TeamName, Depth: m.Depth, Path: string(path), Content: withoutNUL(m.Content),
		CreatedAt: now, UpdatedAt: now,
	}
	// Only the same run's message is updated: a message id set by a
	// caller (spec 003) can never overwrite another run's message. A
	// retry writes the same agent fields again; a reservation (see
	// reserveMessage) takes them, and its creation time, from the answer.
	set := clause.AssignmentColumns([]string{"content", "updated_at", "parent_message_id", "agent_id", "agent_type",
		"agent_name", "team_name", "depth", "path"})
	set = append(set, clause.Assignment{Column: clause.Column{Name: "created_at"},
		Value: gorm.Expr("CASE WHEN message.agent_type = ? THEN excluded.created_at ELSE message.created_at END", reservedAgentType)})
	return db.Clauses(clause.OnConflict{
		Columns:   []clause.Column{{Name: "tenant_id"}, {Name: "id"}},
		DoUpdates: set,
		Where:     clause.Where{Exprs: []clause.Expression{clause.Expr{SQL: "message.run_id = excluded.run_id"}}},
	}).Create(&row).Error
}

// reservedAgentType marks a message row that holds a caller-set message
// id for its run's final answer until the answer is written (item 3 of
// issue 23): the primary key makes a second run's claim on the id fail
// while the first is still in flight. Reservations are never listed.
const reservedAgentType = "reserved"

// runTenant is the tenant of run runID; the default tenant when the run is
// not stored (as for messages of runs stored before tenants).
func runTenant(db *gorm.DB, runID string) (string, error) {
	var tenants []string
	if err := db.Model(&runRow{}).Where("id = ?", runID).Limit(1).Pluck("tenant_id", &tenants).Error; err != nil {
		return "", err
	}
	if len(tenants) == 0 {
		return DefaultTenant, nil
	}
	return tenantOr(tenants[0]), nil
}

// runTenantExpr selects the tenant of run runID inside a query, as
// runTenant does.
func runTenantExpr(runID string) clause.Expr {
	return gorm.Expr("COALESCE((SELECT execution.tenant_id FROM execution WHERE execution.id = ?), ?)", runID, DefaultTenant)
}

// SaveAnswer stores an LLM activity's answer and usage records in one
// transaction; storing the same record again changes nothing.
func (s *Store) SaveAnswer(ctx context.Context, rec models.AnswerRecord) error {
	return s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		if err := saveAnswer(tx, rec); err != nil {
			return err
		}
		return forgetAnswers(tx, rec.Calls)
	})
}

// saveAnswer writes an answer's message and usage records.
func saveAnswer(tx *gorm.DB, rec models.AnswerRecord) error {
	if rec.MessageID != "" {
		if err := saveMessage(tx, MessageFromSource(rec.MessageID, rec.RunID, rec.ParentMessageID, rec.Content, rec.Source)); err != nil {
			return fmt.Errorf("save message %s: %w", rec.MessageID, err)
		}
	}
	for _, c := range rec.Calls {
		if err := recordLLMCall(tx, LLMCallFromRecord(c)); err != nil {
			return fmt.Errorf("record LLM call %s: %w", c.ID, err)
		}
	}
	return nil
}

// MessageTree returns a run's messages as a forest: each message under its
// parent, roots and siblings in creation order.
func (s *Store) MessageTree(ctx context.Context, runID string) ([]*Message, error) {
	var rows []messageRow
	err := s.db.WithContext(ctx).Where("run_id = ? AND agent_type <> ?", runID, reservedAgentType).
		Order("created_at, id").Find(&rows).Error
	if err != nil {
		return nil, err
	}
	byID := make(map[string]*Message, len(rows))
	all := make([]*Message, 0, len(rows))
	for _, r := range rows {
		m := &Message{
			ID: r.ID, RunID: r.RunID, ParentMessageID: r.ParentMessageID, AgentID: r.AgentID, AgentType: r.AgentType,
			AgentName: r.AgentName, TeamName: r.TeamName, Depth: r.Depth, Content: r.Content,
			CreatedAt: r.CreatedAt.UTC(), UpdatedAt: r.UpdatedAt.UTC(), Children: []*Message{},
		}
		if err := json.Unmarshal([]byte(r.Path), &m.Path); err != nil {
			return nil, fmt.Errorf("message %s path: %w", r.ID, err)
		}
		byID[m.ID] = m
		all = append(all, m)
	}
	roots := []*Message{}
	for _, m := range all {
		if m.ParentMessageID != nil {
			if parent, ok := byID[*m.ParentMessageID]; ok {
				parent.Children = append(parent.Children, m)
				continue
			}
		}
		roots = append(roots, m)
	}
	return roots, nil
}

// MessageFromSource fills a message's agent fields from an event source.
func MessageFromSource(id, runID, parentID, content string, src models.Source) *Message {
	m := &Message{
		ID: id, RunID: runID, AgentID: src.AgentID, AgentType: src.AgentType, AgentName: src.AgentName,
		TeamName: src.TeamName, Depth: src.Depth, Path: src.Path, Content: content,
	}
	if parentID != "" {
		m.ParentMessageID = &parentID
	}
	return m
}

// MessageContents returns the content of the messages ids of run runID's
// tenant (a run reads its own, its forks' originals' and its previous
// run's messages, all of its tenant), by id; ids that are not stored are
// missing from the map.
func (s *Store) MessageContents(ctx context.Context, runID string, ids []string) (map[string]string, error) {
	out := make(map[string]string, len(ids))
	for start := 0; start < len(ids); start += 500 {
		// Bounded IN lists: SQLite caps bound parameters per statement.
		chunk := ids[start:min(start+500, len(ids))]
		var rows []messageRow
		if err := s.db.WithContext(ctx).Select("id", "content").
			Where("tenant_id = ? AND id IN ? AND agent_type <> ?", runTenantExpr(runID), chunk, reservedAgentType).Find(&rows).Error; err != nil {
			return nil, err
		}
		for _, r := range rows {
			out[r.ID] = r.Content
		}
	}
	return out, nil
}

// HydrateResult returns r with the whole answers of its truncated outputs
// (workflow state keeps previews; see models.WorkerOutput). r itself is
// never changed: it may be a workflow's own state, handed to a local
// activity as it is. runID names the run whose tenant's messages are read.
func (s *Store) HydrateResult(ctx context.Context, runID string, r *models.RunResult) (*models.RunResult, error) {
	if r == nil {
		return nil, nil
	}
	ids := models.TruncatedOutputs(r.Teams)
	if len(ids) == 0 {
		return r, nil
	}
	whole, err := s.MessageContents(ctx, runID, ids)
	if err != nil {
		return nil, fmt.Errorf("read outputs: %w", err)
	}
	out := *r
	out.Teams = models.CloneTeams(r.Teams)
	models.HydrateOutputs(out.Teams, whole)
	return &out, nil
}

// withoutNUL replaces NUL characters, which a PostgreSQL text column cannot
// hold (a model may still produce them), with U+FFFD; the same on SQLite,
// so both databases store the same text. JSON columns need nothing: JSON
// escapes NUL.
func withoutNUL(s string) string {
	return strings.ReplaceAll(s, "\x00", "\uFFFD")
}

// FinalAnswerMessageID returns the id of the message that stores a run's
// final answer (the global supervisor's newest message of the run), or ""
// when the run has none (it did not complete).
func (s *Store) FinalAnswerMessageID(ctx context.Context, runID string) (string, error) {
	var rows []messageRow
	err := s.db.WithContext(ctx).Select("id").
		Where("run_id = ? AND agent_type = ? AND parent_message_id IS NULL", runID, models.AgentTypeGlobalSupervisor).
		Order("created_at DESC, id DESC").Limit(1).Find(&rows).Error
	if err != nil || len(rows) == 0 {
		return "", err
	}
	return rows[0].ID, nil
}
