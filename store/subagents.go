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

type subAgentRow struct {
	// The key is (tenant_id, id): a sub-agent id is the tenant's own.
	TenantID      string `gorm:"primaryKey"`
	ID            string `gorm:"primaryKey"`
	Name          string
	Description   string
	SystemPrompt  string
	Model         string
	Temperature   *float64
	MaxTokens     *int
	Tools         string // JSON array of tool keys
	SubAgents     string // JSON array of sub-agent names
	MaxDepth      int
	MaxIterations int
	Enabled       bool
	// Settings is a JSON object: provider, base_url, region, timeout.
	Settings string
	// Version counts the definition's writes: 1 at create, +1 per update.
	Version int
	// The store sets both times itself (see subAgentNow); gorm's automatic
	// update time would differ from the one the API answers with.
	CreatedAt time.Time `gorm:"autoCreateTime:false"`
	UpdatedAt time.Time `gorm:"autoUpdateTime:false"`
}

func (subAgentRow) TableName() string { return "sub_agent" }

// CreateSubAgent stores a normalized, validated sub-agent and sets its
// timestamps and version 1 (and its tenant, "default" when empty). An id
// or a name taken in the same tenant is an AlreadyExists error naming it;
// other tenants' ids and names are no obstacle.
func (s *Store) CreateSubAgent(ctx context.Context, sa *models.SubAgent) error {
	now := subAgentNow()
	sa.CreatedAt, sa.UpdatedAt, sa.Version = now, now, 1
	sa.TenantID = tenantOr(sa.TenantID)
	row, err := toSubAgentRow(sa)
	if err != nil {
		return err
	}
	db := s.db.WithContext(ctx)
	if err := db.Create(&row).Error; err != nil {
		if errors.Is(err, gorm.ErrDuplicatedKey) {
			// Both the primary key and the name (per tenant) are unique; tell the caller
			// which one clashed. This runs outside any transaction, so
			// PostgreSQL still answers after the failed insert.
			var n int64
			if cerr := db.Model(&subAgentRow{}).Where("tenant_id = ? AND id = ?", sa.TenantID, sa.ID).Count(&n).Error; cerr == nil && n > 0 {
				return subAgentTaken("id", "sub-agent id %q is taken", sa.ID)
			}
			return subAgentTaken("name", "sub-agent name %q is taken", sa.Name)
		}
		return fmt.Errorf("insert sub-agent: %w", err)
	}
	return nil
}

// UpdateSubAgent replaces every field of the sub-agent sa.ID of tenant
// sa.TenantID ("" is the default tenant) but keeps its created_at, and
// counts one more version (set into sa). An unknown id is a
// SubAgentNotFound error and a name taken by another sub-agent of the same
// tenant an AlreadyExists error; either way nothing is written.
func (s *Store) UpdateSubAgent(ctx context.Context, sa *models.SubAgent) error {
	sa.TenantID = tenantOr(sa.TenantID)
	return s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		// Counting the version first locks the row, so updates racing on
		// PostgreSQL each count and each answer its own version.
		res := tx.Model(&subAgentRow{}).Where("tenant_id = ? AND id = ?", sa.TenantID, sa.ID).UpdateColumn("version", gorm.Expr("version + 1"))
		if res.Error != nil {
			return res.Error
		}
		if res.RowsAffected == 0 {
			return subAgentNotFound("id", sa.ID)
		}
		var existing subAgentRow
		if err := tx.Select("created_at", "version").Take(&existing, "tenant_id = ? AND id = ?", sa.TenantID, sa.ID).Error; err != nil {
			return err
		}
		sa.CreatedAt, sa.UpdatedAt, sa.Version = existing.CreatedAt.UTC(), subAgentNow(), existing.Version
		row, err := toSubAgentRow(sa)
		if err != nil {
			return err
		}
		// Select("*") writes zero values too (a full replace); Omit keeps
		// the key, the creation time and the version just counted.
		err = tx.Model(&subAgentRow{}).Where("tenant_id = ? AND id = ?", sa.TenantID, sa.ID).Select("*").Omit("id", "tenant_id", "created_at", "version").
			Updates(&row).Error
		if errors.Is(err, gorm.ErrDuplicatedKey) {
			// The id matched this row, so only the name can clash.
			return subAgentTaken("name", "sub-agent name %q is taken", sa.Name)
		}
		if err != nil {
			return fmt.Errorf("update sub-agent: %w", err)
		}
		return nil
	})
}

// GetSubAgent loads the sub-agent with id of tenant; tenant "" looks in
// every tenant (for principals that see all of them), preferring prefer's.
// One query answers an unknown id and another tenant's alike, so neither
// can be told from the other (issue 23, item 8).
func (s *Store) GetSubAgent(ctx context.Context, tenant, prefer, id string) (*models.SubAgent, error) {
	var rows []subAgentRow
	q := s.db.WithContext(ctx).Where("id = ?", id)
	if tenant != "" {
		q = q.Where("tenant_id = ?", tenant)
	} else {
		q = q.Order(clause.OrderBy{Expression: clause.Expr{SQL: "CASE WHEN tenant_id = ? THEN 0 ELSE 1 END, tenant_id", Vars: []any{prefer}, WithoutParentheses: true}})
	}
	if err := q.Limit(1).Find(&rows).Error; err != nil {
		return nil, err
	}
	if len(rows) == 0 {
		return nil, subAgentNotFound("id", id)
	}
	return rows[0].toModel()
}

// GetSubAgentByName loads tenant's sub-agent called name (names are unique
// per tenant; "" is the default tenant).
func (s *Store) GetSubAgentByName(ctx context.Context, tenant, name string) (*models.SubAgent, error) {
	var row subAgentRow
	if err := s.db.WithContext(ctx).Take(&row, "tenant_id = ? AND name = ?", tenantOr(tenant), name).Error; err != nil {
		if notFound(err) {
			return nil, subAgentNotFound("name", name)
		}
		return nil, err
	}
	return row.toModel()
}

// DeleteSubAgent removes tenant's sub-agent with id ("" is the default
// tenant). Workers and sub-agents that list it by name keep the name; the
// engine refuses to delegate to a name it cannot load.
func (s *Store) DeleteSubAgent(ctx context.Context, tenant, id string) error {
	res := s.db.WithContext(ctx).Where("tenant_id = ? AND id = ?", tenantOr(tenant), id).Delete(&subAgentRow{})
	if res.Error != nil {
		return res.Error
	}
	if res.RowsAffected == 0 {
		return subAgentNotFound("id", id)
	}
	return nil
}

// ListSubAgents returns one page of sub-agents, newest first, and the total
// count.
func (s *Store) ListSubAgents(ctx context.Context, f ListFilter) ([]models.SubAgent, int64, error) {
	db := f.scope(s.db.WithContext(ctx).Model(&subAgentRow{}))
	var total int64
	if err := db.Count(&total).Error; err != nil {
		return nil, 0, err
	}
	var rows []subAgentRow
	if err := db.Order("created_at DESC, id").Offset(f.offset()).Limit(f.PageSize).Find(&rows).Error; err != nil {
		return nil, 0, err
	}
	out := make([]models.SubAgent, 0, len(rows))
	for i := range rows {
		sa, err := rows[i].toModel()
		if err != nil {
			return nil, 0, err
		}
		out = append(out, *sa)
	}
	return out, total, nil
}

// ExistingSubAgentNames reports which of names belong to a stored
// sub-agent of tenant ("" is the default tenant), ignoring the one with id excludeID ("" ignores none): an
// update validates references against the other sub-agents, since its own
// old name is about to be replaced. It answers with one query however many
// names a hierarchy lists.
func (s *Store) ExistingSubAgentNames(ctx context.Context, tenant string, names []string, excludeID string) (map[string]bool, error) {
	found := map[string]bool{}
	if len(names) == 0 {
		return found, nil
	}
	q := s.db.WithContext(ctx).Model(&subAgentRow{}).Where("tenant_id = ? AND name IN ?", tenantOr(tenant), names)
	if excludeID != "" {
		q = q.Where("id <> ?", excludeID)
	}
	var got []string
	if err := q.Pluck("name", &got).Error; err != nil {
		return nil, err
	}
	for _, n := range got {
		found[n] = true
	}
	return found, nil
}

func toSubAgentRow(sa *models.SubAgent) (subAgentRow, error) {
	tools, err := json.Marshal(nonNil(sa.Tools))
	if err != nil {
		return subAgentRow{}, err
	}
	subAgents, err := json.Marshal(nonNil(sa.SubAgents))
	if err != nil {
		return subAgentRow{}, err
	}
	return subAgentRow{
		ID:            sa.ID,
		TenantID:      sa.TenantID,
		Name:          sa.Name,
		Description:   sa.Description,
		SystemPrompt:  sa.SystemPrompt,
		Model:         sa.Model,
		Temperature:   sa.Temperature,
		MaxTokens:     sa.MaxTokens,
		Tools:         string(tools),
		SubAgents:     string(subAgents),
		MaxDepth:      sa.MaxDepth,
		MaxIterations: sa.MaxIterations,
		Enabled:       sa.Enabled,
		Settings:      settingsOf(models.Agent{Provider: sa.Provider, BaseURL: sa.BaseURL, Region: sa.Region, Timeout: sa.Timeout, FallbackModels: sa.FallbackModels}, false),
		Version:       sa.Version,
		CreatedAt:     sa.CreatedAt,
		UpdatedAt:     sa.UpdatedAt,
	}, nil
}

func (r *subAgentRow) toModel() (*models.SubAgent, error) {
	sa := &models.SubAgent{
		ID:            r.ID,
		TenantID:      r.TenantID,
		Name:          r.Name,
		Description:   r.Description,
		SystemPrompt:  r.SystemPrompt,
		Model:         r.Model,
		Temperature:   r.Temperature,
		MaxTokens:     r.MaxTokens,
		MaxDepth:      r.MaxDepth,
		MaxIterations: r.MaxIterations,
		Enabled:       r.Enabled,
		Version:       r.Version,
		CreatedAt:     r.CreatedAt.UTC(),
		UpdatedAt:     r.UpdatedAt.UTC(),
	}
	var settings models.Agent
	if err := applySettings(&settings, r.Settings, false); err != nil {
		return nil, fmt.Errorf("sub-agent %s: %w", r.ID, err)
	}
	sa.Provider, sa.BaseURL, sa.Region, sa.Timeout = settings.Provider, settings.BaseURL, settings.Region, settings.Timeout
	sa.FallbackModels = settings.FallbackModels
	var err error
	if sa.Tools, err = decodeStrings(r.Tools); err != nil {
		return nil, fmt.Errorf("sub-agent %s tools: %w", r.ID, err)
	}
	if sa.SubAgents, err = decodeStrings(r.SubAgents); err != nil {
		return nil, fmt.Errorf("sub-agent %s sub_agents: %w", r.ID, err)
	}
	return sa, nil
}

// decodeStrings reads a JSON string array column; the result is never nil,
// so the API answers [] rather than null.
func decodeStrings(s string) ([]string, error) {
	var out []string
	if err := json.Unmarshal([]byte(s), &out); err != nil {
		return nil, err
	}
	return nonNil(out), nil
}

// subAgentNow is the write time, truncated to what PostgreSQL keeps
// (microseconds), so the create and update responses equal a later get.
func subAgentNow() time.Time { return time.Now().UTC().Truncate(time.Microsecond) }

func subAgentNotFound(by, key string) error {
	return models.Errorf(models.CodeSubAgentNotFound, "sub-agent with %s %q not found", by, key)
}

func subAgentTaken(field, format string, args ...any) error {
	e := models.Errorf(models.CodeAlreadyExists, format, args...)
	e.Field = field
	return e
}

// SubAgentIDsIn reports which of ids are the ids of tenant's sub-agents
// ("" is the default tenant): a hierarchy's agent_ids must not be, since a
// run's call paths and cycle check name agents by id (spec 003).
func (s *Store) SubAgentIDsIn(ctx context.Context, tenant string, ids []string) (map[string]bool, error) {
	found := map[string]bool{}
	if len(ids) == 0 {
		return found, nil
	}
	var got []string
	if err := s.db.WithContext(ctx).Model(&subAgentRow{}).Where("tenant_id = ? AND id IN ?", tenantOr(tenant), ids).Pluck("id", &got).Error; err != nil {
		return nil, err
	}
	for _, id := range got {
		found[id] = true
	}
	return found, nil
}

// HierarchyUsingAgentID returns the id of one of tenant's hierarchies that
// has an agent (global supervisor, team supervisor or worker) with
// agent_id id, or "" when none has: a sub-agent's id must not be one.
func (s *Store) HierarchyUsingAgentID(ctx context.Context, tenant, id string) (string, error) {
	db := s.db.WithContext(ctx)
	tenant = tenantOr(tenant)
	var ids []string
	if err := db.Model(&hierarchyRow{}).Where("tenant_id = ? AND global_supervisor_agent_id = ?", tenant, id).Limit(1).Pluck("id", &ids).Error; err != nil || len(ids) > 0 {
		return first(ids), err
	}
	owned := db.Model(&hierarchyRow{}).Select("id").Where("tenant_id = ?", tenant)
	if err := db.Model(&teamRow{}).Where("supervisor_agent_id = ? AND hierarchy_id IN (?)", id, owned).Limit(1).Pluck("hierarchy_id", &ids).Error; err != nil || len(ids) > 0 {
		return first(ids), err
	}
	err := db.Model(&workerRow{}).Where("agent_id = ? AND hierarchy_id IN (?)", id, owned).Limit(1).Pluck("hierarchy_id", &ids).Error
	return first(ids), err
}

func first(ids []string) string {
	if len(ids) == 0 {
		return ""
	}
	return ids[0]
}
