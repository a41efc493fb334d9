package store

import (
	"context"
	"encoding/json"
	"fmt"
	"hash/crc64"
	"time"

	"gorm.io/gorm"

	"github.com/op-stack/executor/auth"
	"github.com/op-stack/executor/models"
)

type hierarchyRow struct {
	ID                      string `gorm:"primaryKey"`
	TenantID                string
	Name                    string
	Description             string
	GlobalSupervisorAgentID string
	GlobalSupervisorName    string
	GlobalPrompt            string
	GlobalModel             string
	GlobalTemperature       *float64
	GlobalMaxTokens         *int
	ExecutionMode           string
	EnableContextSharing    bool
	MaxIterations           int
	Dependencies            string
	MaxParallelTeams        int
	MaxExecutionTime        int
	GlobalSettings          string
	GlobalConfig            string // JSON of models.GlobalConfig; "{}" when none
	CreatedAt               time.Time
	UpdatedAt               time.Time
}

// agentSettings are an agent's LLM settings beyond model and sampling,
// stored as JSON (spec 001's llm_config, user_prompt; a supervisor's
// max_iterations).
type agentSettings struct {
	Provider      string `json:"provider,omitempty"`
	BaseURL       string `json:"base_url,omitempty"`
	Region        string `json:"region,omitempty"`
	Timeout       int    `json:"timeout,omitempty"`
	UserPrompt    string `json:"user_prompt,omitempty"`
	MaxIterations int    `json:"max_iterations,omitempty"`
	// Approval gates (issue 14): stored with the settings, so no column
	// is needed.
	RequiresApproval bool     `json:"requires_approval,omitempty"`
	ApprovalTools    []string `json:"approval_tools,omitempty"`
	ApprovalTimeout  int      `json:"approval_timeout,omitempty"`
	ApprovalDefault  string   `json:"approval_default,omitempty"`
	// Model fallbacks (issue 15).
	FallbackModels []string `json:"fallback_models,omitempty"`
	// Budget is the hierarchy's default budget, in its global
	// supervisor's settings (issue 15), so no column is needed.
	Budget *models.Budget `json:"budget,omitempty"`
	// Memory is the hierarchy's memory setting (issue 29), with its
	// budget.
	Memory *models.MemoryConfig `json:"memory,omitempty"`
	// A2A: a worker that is a remote A2A agent (issue 25).
	A2A *models.A2AAgent `json:"a2a,omitempty"`
}

func settingsOf(a models.Agent, supervisor bool) string {
	return settingsJSON(a, supervisor, nil)
}

func settingsJSON(a models.Agent, supervisor bool, budget *models.Budget) string {
	st := agentSettings{Budget: budget, Provider: a.Provider, BaseURL: a.BaseURL, Region: a.Region, Timeout: a.Timeout, UserPrompt: a.UserPrompt,
		RequiresApproval: a.RequiresApproval, ApprovalTools: a.ApprovalTools, ApprovalTimeout: a.ApprovalTimeout, ApprovalDefault: a.ApprovalDefault,
		FallbackModels: a.FallbackModels, A2A: a.A2A}
	if supervisor {
		st.MaxIterations = a.MaxIterations
	}
	raw, _ := json.Marshal(st)
	return string(raw)
}

// globalSettingsJSON is the global supervisor's settings with the
// hierarchy-wide ones stored there (budget, memory).
func globalSettingsJSON(a models.Agent, budget *models.Budget, mem *models.MemoryConfig) string {
	var st map[string]any
	_ = json.Unmarshal([]byte(settingsJSON(a, true, budget)), &st)
	if mem != nil {
		st["memory"] = mem
	}
	raw, _ := json.Marshal(st)
	return string(raw)
}

func applySettings(a *models.Agent, raw string, supervisor bool) error {
	var st agentSettings
	if raw != "" {
		if err := json.Unmarshal([]byte(raw), &st); err != nil {
			return fmt.Errorf("agent %s settings: %w", a.AgentID, err)
		}
	}
	a.Provider, a.BaseURL, a.Region, a.Timeout, a.UserPrompt = st.Provider, st.BaseURL, st.Region, st.Timeout, st.UserPrompt
	a.RequiresApproval, a.ApprovalTools, a.ApprovalTimeout, a.ApprovalDefault = st.RequiresApproval, st.ApprovalTools, st.ApprovalTimeout, st.ApprovalDefault
	a.FallbackModels, a.A2A = st.FallbackModels, st.A2A
	if supervisor {
		a.MaxIterations = st.MaxIterations
	}
	return nil
}

func (hierarchyRow) TableName() string { return "hierarchy_team" }

type teamRow struct {
	ID                    string `gorm:"primaryKey"`
	ExternalID            string // the team's id as the caller knows it
	HierarchyID           string
	Position              int
	Name                  string
	Description           string
	SupervisorAgentID     string
	SupervisorName        string
	SupervisorPrompt      string
	SupervisorModel       string
	SupervisorTemperature *float64
	SupervisorMaxTokens   *int
	PreventDuplicate      bool
	ShareContext          bool
	SupervisorSettings    string
}

func (teamRow) TableName() string { return "team" }

type workerRow struct {
	ID           string `gorm:"primaryKey"`
	TeamID       string
	HierarchyID  string
	Position     int
	AgentID      string
	Name         string
	Role         string
	SystemPrompt string
	Model        string
	Temperature  *float64
	MaxTokens    *int
	Tools        string
	// SubAgents is a JSON array of the sub-agent names the worker may
	// delegate to; MaxIterations 0 means the engine's default.
	SubAgents     string
	MaxIterations int
	Settings      string
}

func (workerRow) TableName() string { return "worker" }

// HierarchySummary is one entry of a hierarchy listing.
type HierarchySummary struct {
	ID                      string    `json:"hierarchy_id"`
	TenantID                string    `json:"tenant_id,omitempty"`
	Name                    string    `json:"name"`
	Description             string    `json:"description,omitempty"`
	GlobalSupervisorAgentID string    `json:"global_supervisor_agent_id"`
	ExecutionMode           string    `json:"execution_mode"`
	CreatedAt               time.Time `json:"created_at"`
	UpdatedAt               time.Time `json:"updated_at"`
}

// ListFilter selects and pages a listing. Page is 1-based. Tenant, when
// set, restricts the listing to that tenant's objects; empty lists every
// tenant's.
type ListFilter struct {
	Page     int
	PageSize int
	Tenant   string
}

// scope restricts q to f's tenant, if any.
func (f ListFilter) scope(q *gorm.DB) *gorm.DB {
	if f.Tenant != "" {
		return q.Where("tenant_id = ?", f.Tenant)
	}
	return q
}

// DefaultTenant owns objects created without a tenant (auth.DefaultTenant).
const DefaultTenant = auth.DefaultTenant

func tenantOr(t string) string {
	if t == "" {
		return DefaultTenant
	}
	return t
}

func (f ListFilter) offset() int { return (f.Page - 1) * f.PageSize }

// CreateHierarchy stores a normalized, validated hierarchy with its teams
// and workers in one transaction and sets its timestamps.
func (s *Store) CreateHierarchy(ctx context.Context, h *models.Hierarchy) error {
	return s.createHierarchy(ctx, h, false)
}

// CreateNamedHierarchy is CreateHierarchy for spec 001's teams, whose
// team_name is unique within a tenant: when another hierarchy of h's tenant
// has h's name, nothing is written and the error is TEAM_ALREADY_EXISTS.
// Concurrent creates of one name are serialized (see lockHierarchyName), so
// exactly one of them succeeds.
func (s *Store) CreateNamedHierarchy(ctx context.Context, h *models.Hierarchy) error {
	return s.createHierarchy(ctx, h, true)
}

func (s *Store) createHierarchy(ctx context.Context, h *models.Hierarchy, uniqueName bool) error {
	now := time.Now().UTC()
	h.CreatedAt, h.UpdatedAt = now, now
	h.TenantID = tenantOr(h.TenantID)
	return s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		if uniqueName {
			if err := s.claimHierarchyName(tx, h.TenantID, h.Name, h.ID); err != nil {
				return err
			}
		}
		row := toHierarchyRow(h)
		if err := tx.Create(&row).Error; err != nil {
			return fmt.Errorf("insert hierarchy: %w", err)
		}
		return insertTeams(tx, h)
	})
}

// UpdateHierarchy replaces a hierarchy's settings, teams and workers in one
// transaction; its tenant never changes (set into h). It returns a HierarchyNotFound error when id is unknown, in
// which case nothing is written.
func (s *Store) UpdateHierarchy(ctx context.Context, h *models.Hierarchy) error {
	return s.updateHierarchy(ctx, h, false)
}

// UpdateNamedHierarchy is UpdateHierarchy for spec 001's teams: renaming a
// hierarchy to a name another hierarchy of its tenant has is refused with
// TEAM_ALREADY_EXISTS, and nothing is written. Keeping its own name is
// always allowed, so a tenant's older duplicates stay editable.
func (s *Store) UpdateNamedHierarchy(ctx context.Context, h *models.Hierarchy) error {
	return s.updateHierarchy(ctx, h, true)
}

func (s *Store) updateHierarchy(ctx context.Context, h *models.Hierarchy, uniqueName bool) error {
	return s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		var existing hierarchyRow
		if err := tx.Take(&existing, "id = ?", h.ID).Error; err != nil {
			if notFound(err) {
				return hierarchyNotFound(h.ID)
			}
			return err
		}
		if uniqueName && existing.Name != h.Name {
			if err := s.claimHierarchyName(tx, existing.TenantID, h.Name, h.ID); err != nil {
				return err
			}
		}
		h.CreatedAt, h.UpdatedAt = existing.CreatedAt, time.Now().UTC()
		h.TenantID = existing.TenantID
		row := toHierarchyRow(h)
		if err := tx.Select("*").Omit("created_at", "tenant_id").Save(&row).Error; err != nil {
			return fmt.Errorf("update hierarchy: %w", err)
		}
		// Workers go first: they reference teams.
		if err := tx.Where("hierarchy_id = ?", h.ID).Delete(&workerRow{}).Error; err != nil {
			return fmt.Errorf("delete workers: %w", err)
		}
		if err := tx.Where("hierarchy_id = ?", h.ID).Delete(&teamRow{}).Error; err != nil {
			return fmt.Errorf("delete teams: %w", err)
		}
		return insertTeams(tx, h)
	})
}

func insertTeams(tx *gorm.DB, h *models.Hierarchy) error {
	var workers []workerRow
	teams := make([]teamRow, 0, len(h.Teams))
	for i, t := range h.Teams {
		rowID := models.NewID()
		teams = append(teams, teamRow{
			ID:                    rowID,
			ExternalID:            t.ID,
			HierarchyID:           h.ID,
			Position:              i,
			Name:                  t.Name,
			Description:           t.Description,
			SupervisorAgentID:     t.Supervisor.AgentID,
			SupervisorName:        t.Supervisor.Name,
			SupervisorPrompt:      t.Supervisor.SystemPrompt,
			SupervisorModel:       t.Supervisor.Model,
			SupervisorTemperature: t.Supervisor.Temperature,
			SupervisorMaxTokens:   t.Supervisor.MaxTokens,
			PreventDuplicate:      t.PreventDuplicate,
			ShareContext:          t.ShareContext,
			SupervisorSettings:    settingsOf(t.Supervisor, true),
		})
		for j, w := range t.Workers {
			tools, err := json.Marshal(nonNil(w.Tools))
			if err != nil {
				return err
			}
			subAgents, err := json.Marshal(nonNil(w.SubAgents))
			if err != nil {
				return err
			}
			workers = append(workers, workerRow{
				ID:            models.NewID(),
				TeamID:        rowID,
				HierarchyID:   h.ID,
				Position:      j,
				AgentID:       w.AgentID,
				Name:          w.Name,
				Role:          w.Role,
				SystemPrompt:  w.SystemPrompt,
				Model:         w.Model,
				Temperature:   w.Temperature,
				MaxTokens:     w.MaxTokens,
				Tools:         string(tools),
				SubAgents:     string(subAgents),
				MaxIterations: w.MaxIterations,
				Settings:      settingsOf(w, false),
			})
		}
	}
	if err := tx.Create(&teams).Error; err != nil {
		return fmt.Errorf("insert teams: %w", err)
	}
	if err := tx.Create(&workers).Error; err != nil {
		return fmt.Errorf("insert workers: %w", err)
	}
	return nil
}

// GetHierarchy loads a hierarchy with its teams and workers in order.
func (s *Store) GetHierarchy(ctx context.Context, id string) (*models.Hierarchy, error) {
	return s.GetTenantHierarchy(ctx, "", id)
}

// GetTenantHierarchy loads hierarchy id if it belongs to tenant ("": to
// any tenant). The tenant is part of the first query, so an unknown id and
// another tenant's take the same path and answer the same error (issue 23,
// item 8): another tenant's teams and workers are never read.
func (s *Store) GetTenantHierarchy(ctx context.Context, tenant, id string) (*models.Hierarchy, error) {
	db := s.db.WithContext(ctx)
	var row hierarchyRow
	q := db.Where("id = ?", id)
	if tenant != "" {
		q = q.Where("tenant_id = ?", tenant)
	}
	if err := q.Take(&row).Error; err != nil {
		if notFound(err) {
			return nil, hierarchyNotFound(id)
		}
		return nil, err
	}
	var teams []teamRow
	if err := db.Where("hierarchy_id = ?", id).Order("position").Find(&teams).Error; err != nil {
		return nil, err
	}
	var workers []workerRow
	if err := db.Where("hierarchy_id = ?", id).Order("position").Find(&workers).Error; err != nil {
		return nil, err
	}
	h := &models.Hierarchy{
		ID:          row.ID,
		TenantID:    row.TenantID,
		Name:        row.Name,
		Description: row.Description,
		GlobalSupervisor: models.Agent{
			AgentID:      row.GlobalSupervisorAgentID,
			Name:         row.GlobalSupervisorName,
			SystemPrompt: row.GlobalPrompt,
			Model:        row.GlobalModel,
			Temperature:  row.GlobalTemperature,
			MaxTokens:    row.GlobalMaxTokens,
		},
		ExecutionMode:        row.ExecutionMode,
		EnableContextSharing: row.EnableContextSharing,
		MaxIterations:        row.MaxIterations,
		MaxParallelTeams:     row.MaxParallelTeams,
		MaxExecutionTime:     row.MaxExecutionTime,
		CreatedAt:            row.CreatedAt.UTC(),
		UpdatedAt:            row.UpdatedAt.UTC(),
	}
	if err := applySettings(&h.GlobalSupervisor, row.GlobalSettings, true); err != nil {
		return nil, err
	}
	if row.GlobalSettings != "" {
		var st agentSettings
		if err := json.Unmarshal([]byte(row.GlobalSettings), &st); err != nil {
			return nil, err
		}
		h.Budget = st.Budget
		h.Memory = st.Memory
	}
	if row.GlobalConfig != "" && row.GlobalConfig != "{}" {
		var gc models.GlobalConfig
		if err := json.Unmarshal([]byte(row.GlobalConfig), &gc); err != nil {
			return nil, fmt.Errorf("hierarchy %s global_config: %w", row.ID, err)
		}
		h.GlobalConfig = &gc
	}
	if row.Dependencies != "" && row.Dependencies != "{}" {
		if err := json.Unmarshal([]byte(row.Dependencies), &h.Dependencies); err != nil {
			return nil, fmt.Errorf("hierarchy %s dependencies: %w", id, err)
		}
	}
	teamIndex := map[string]int{}
	for _, t := range teams {
		teamIndex[t.ID] = len(h.Teams)
		id := t.ExternalID
		if id == "" {
			id = t.ID
		}
		h.Teams = append(h.Teams, models.Team{
			ID:          id,
			Name:        t.Name,
			Description: t.Description,
			Supervisor: models.Agent{
				AgentID:      t.SupervisorAgentID,
				Name:         t.SupervisorName,
				SystemPrompt: t.SupervisorPrompt,
				Model:        t.SupervisorModel,
				Temperature:  t.SupervisorTemperature,
				MaxTokens:    t.SupervisorMaxTokens,
			},
			PreventDuplicate: t.PreventDuplicate,
			ShareContext:     t.ShareContext,
			Workers:          []models.Agent{},
		})
		if err := applySettings(&h.Teams[len(h.Teams)-1].Supervisor, t.SupervisorSettings, true); err != nil {
			return nil, err
		}
	}
	for _, w := range workers {
		var tools, subAgents []string
		if err := json.Unmarshal([]byte(w.Tools), &tools); err != nil {
			return nil, fmt.Errorf("worker %s tools: %w", w.ID, err)
		}
		if err := json.Unmarshal([]byte(w.SubAgents), &subAgents); err != nil {
			return nil, fmt.Errorf("worker %s sub_agents: %w", w.ID, err)
		}
		i, ok := teamIndex[w.TeamID]
		if !ok {
			return nil, fmt.Errorf("worker %s references missing team %s", w.ID, w.TeamID)
		}
		agent := models.Agent{
			AgentID:       w.AgentID,
			Name:          w.Name,
			Role:          w.Role,
			SystemPrompt:  w.SystemPrompt,
			Model:         w.Model,
			Temperature:   w.Temperature,
			MaxTokens:     w.MaxTokens,
			Tools:         tools,
			SubAgents:     subAgents,
			MaxIterations: w.MaxIterations,
		}
		if err := applySettings(&agent, w.Settings, false); err != nil {
			return nil, err
		}
		h.Teams[i].Workers = append(h.Teams[i].Workers, agent)
	}
	// The order is derived, not stored: recompute it from the dependencies.
	if err := h.Validate(); err != nil {
		return nil, fmt.Errorf("stored hierarchy %s is invalid: %w", id, err)
	}
	return h, nil
}

// DeleteHierarchy removes a hierarchy with its teams and workers. Runs keep
// their rows and their snapshot of the hierarchy.
func (s *Store) DeleteHierarchy(ctx context.Context, id string) error {
	return s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		if err := tx.Where("hierarchy_id = ?", id).Delete(&workerRow{}).Error; err != nil {
			return err
		}
		if err := tx.Where("hierarchy_id = ?", id).Delete(&teamRow{}).Error; err != nil {
			return err
		}
		res := tx.Where("id = ?", id).Delete(&hierarchyRow{})
		if res.Error != nil {
			return res.Error
		}
		if res.RowsAffected == 0 {
			return hierarchyNotFound(id)
		}
		return nil
	})
}

// ListHierarchies returns one page of hierarchies, newest first, and the
// total count.
func (s *Store) ListHierarchies(ctx context.Context, f ListFilter) ([]HierarchySummary, int64, error) {
	db := f.scope(s.db.WithContext(ctx).Model(&hierarchyRow{}))
	var total int64
	if err := db.Count(&total).Error; err != nil {
		return nil, 0, err
	}
	var rows []hierarchyRow
	if err := db.Order("created_at DESC, id").Offset(f.offset()).Limit(f.PageSize).Find(&rows).Error; err != nil {
		return nil, 0, err
	}
	out := make([]HierarchySummary, 0, len(rows))
	for _, r := range rows {
		out = append(out, HierarchySummary{
			ID:                      r.ID,
			TenantID:                r.TenantID,
			Name:                    r.Name,
			Description:             r.Description,
			GlobalSupervisorAgentID: r.GlobalSupervisorAgentID,
			ExecutionMode:           r.ExecutionMode,
			CreatedAt:               r.CreatedAt.UTC(),
			UpdatedAt:               r.UpdatedAt.UTC(),
		})
	}
	return out, total, nil
}

func toHierarchyRow(h *models.Hierarchy) hierarchyRow {
	gs := h.GlobalSupervisor
	deps, _ := json.Marshal(h.Dependencies)
	if h.Dependencies == nil {
		deps = []byte("{}")
	}
	return hierarchyRow{
		Dependencies:            string(deps),
		MaxParallelTeams:        h.MaxParallelTeams,
		MaxExecutionTime:        h.MaxExecutionTime,
		GlobalSettings:          globalSettingsJSON(gs, h.Budget, h.Memory),
		GlobalConfig:            globalConfigOf(h.GlobalConfig),
		ID:                      h.ID,
		TenantID:                h.TenantID,
		Name:                    h.Name,
		Description:             h.Description,
		GlobalSupervisorAgentID: gs.AgentID,
		GlobalSupervisorName:    gs.Name,
		GlobalPrompt:            gs.SystemPrompt,
		GlobalModel:             gs.Model,
		GlobalTemperature:       gs.Temperature,
		GlobalMaxTokens:         gs.MaxTokens,
		ExecutionMode:           h.ExecutionMode,
		EnableContextSharing:    h.EnableContextSharing,
		MaxIterations:           h.MaxIterations,
		CreatedAt:               h.CreatedAt,
		UpdatedAt:               h.UpdatedAt,
	}
}

func hierarchyNotFound(id string) error {
	return models.Errorf(models.CodeHierarchyNotFound, "hierarchy %q not found", id)
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// globalConfigOf is the global_config column of a hierarchy.
func globalConfigOf(gc *models.GlobalConfig) string {
	if gc == nil {
		return "{}"
	}
	raw, err := json.Marshal(gc)
	if err != nil {
		return "{}"
	}
	return string(raw)
}

// claimHierarchyName refuses, with TEAM_ALREADY_EXISTS, a name that another
// hierarchy (not id) of tenant has. On PostgreSQL it first takes a
// transaction-scoped advisory lock on (tenant, name), so that of two
// transactions claiming one name the second sees the first's row; SQLite
// needs none, its one connection runs one transaction at a time.
func (s *Store) claimHierarchyName(tx *gorm.DB, tenant, name, id string) error {
	if s.dialect == DialectPostgres {
		key := int64(crc64.Checksum([]byte("hierarchy-name\x00"+tenant+"\x00"+name), crc64.MakeTable(crc64.ECMA)))
		if err := tx.Exec("SELECT pg_advisory_xact_lock(?)", key).Error; err != nil {
			return fmt.Errorf("lock hierarchy name: %w", err)
		}
	}
	var taken int64
	if err := tx.Model(&hierarchyRow{}).Where("tenant_id = ? AND name = ? AND id <> ?", tenant, name, id).Count(&taken).Error; err != nil {
		return fmt.Errorf("check hierarchy name: %w", err)
	}
	if taken > 0 {
		e := models.Errorf(models.CodeAlreadyExists, "a team named %q already exists", name)
		e.Field = "name"
		return e
	}
	return nil
}
