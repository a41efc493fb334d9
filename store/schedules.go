package store

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"gorm.io/gorm"

	"github.com/op-stack/executor/models"
)

// Schedule is the service's record of a Temporal schedule (issue 26,
// item 2): which tenant owns it and which hierarchy it runs. Its spec,
// state and recent actions live in Temporal, the one source of truth.
type Schedule struct {
	ID          string
	TenantID    string
	HierarchyID string
	// Cron are the schedule's cron expressions as given (Temporal answers
	// them compiled into calendars).
	Cron      []string
	CreatedAt time.Time
}

type scheduleRow struct {
	ID          string `gorm:"primaryKey"`
	TenantID    string
	HierarchyID string
	Cron        string
	CreatedAt   time.Time
}

func (scheduleRow) TableName() string { return "schedule" }

// CreateSchedule records a schedule, in the default tenant when TenantID is
// empty.
func (s *Store) CreateSchedule(ctx context.Context, sc *Schedule) error {
	sc.TenantID = tenantOr(sc.TenantID)
	sc.CreatedAt = dbTime(time.Now())
	return s.db.WithContext(ctx).Create(&scheduleRow{ID: sc.ID, TenantID: sc.TenantID, HierarchyID: sc.HierarchyID, Cron: cronJSON(sc.Cron), CreatedAt: sc.CreatedAt}).Error
}

// SetScheduleCron records schedule id's new cron expressions.
func (s *Store) SetScheduleCron(ctx context.Context, id string, cron []string) error {
	return s.db.WithContext(ctx).Model(&scheduleRow{}).Where("id = ?", id).Update("cron", cronJSON(cron)).Error
}

func cronJSON(cron []string) string {
	if cron == nil {
		cron = []string{}
	}
	raw, _ := json.Marshal(cron)
	return string(raw)
}

// GetSchedule returns schedule id of tenant ("" for any tenant, for
// principals that see all); another tenant's is SCHEDULE_NOT_FOUND, as one
// that does not exist.
func (s *Store) GetSchedule(ctx context.Context, tenant, id string) (*Schedule, error) {
	var row scheduleRow
	q := s.db.WithContext(ctx).Where("id = ?", id)
	if tenant != "" {
		q = q.Where("tenant_id = ?", tenant)
	}
	err := q.Take(&row).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		e := models.Errorf(models.CodeScheduleNotFound, "schedule %q not found", id)
		e.Field = "id"
		return nil, e
	}
	if err != nil {
		return nil, err
	}
	return row.toSchedule(), nil
}

// ListSchedules returns one page of schedules, newest first, and the total
// count; f.Tenant "" lists every tenant's, hierarchyID "" every hierarchy's.
func (s *Store) ListSchedules(ctx context.Context, f ListFilter, hierarchyID string) ([]*Schedule, int64, error) {
	q := f.scope(s.db.WithContext(ctx).Model(&scheduleRow{}))
	if hierarchyID != "" {
		q = q.Where("hierarchy_id = ?", hierarchyID)
	}
	var total int64
	if err := q.Count(&total).Error; err != nil {
		return nil, 0, err
	}
	var rows []scheduleRow
	if err := q.Order("created_at DESC, id DESC").Offset(f.offset()).Limit(f.PageSize).Find(&rows).Error; err != nil {
		return nil, 0, err
	}
	out := make([]*Schedule, len(rows))
	for i := range rows {
		out[i] = rows[i].toSchedule()
	}
	return out, total, nil
}

// DeleteSchedule forgets schedule id; its runs keep their schedule_id.
func (s *Store) DeleteSchedule(ctx context.Context, id string) error {
	return s.db.WithContext(ctx).Where("id = ?", id).Delete(&scheduleRow{}).Error
}

func (row scheduleRow) toSchedule() *Schedule {
	sc := &Schedule{ID: row.ID, TenantID: row.TenantID, HierarchyID: row.HierarchyID, Cron: []string{}, CreatedAt: row.CreatedAt.UTC()}
	_ = json.Unmarshal([]byte(row.Cron), &sc.Cron)
	return sc
}
