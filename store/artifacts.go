package store

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"

	"github.com/op-stack/executor/models"
)

// Artifact is a stored file an agent produced (spec 001 §4's artifacts).
// Its bytes live in the database rather than under a data directory: API
// replicas and workers share only the database, and a file a worker stored
// must be downloadable from any API replica.
type Artifact struct {
	ID        string `gorm:"primaryKey"`
	TenantID  string
	RunID     string
	AgentID   string
	AgentName string
	TeamName  string
	Source    string
	ToolName  string
	Name      string
	MediaType string
	Size      int64
	SHA256    string `gorm:"column:sha256"`
	// Content is the file; empty in listings (ListArtifacts).
	Content []byte
	// Producer names the activity that stored the file (workflow, Temporal
	// run and activity ids) and Attempt its attempt: storing a file for a
	// later attempt drops the earlier attempts' files of that activity.
	Producer  string
	Attempt   int
	CreatedAt time.Time
}

// TableName is the artifact table.
func (Artifact) TableName() string { return "artifact" }

// Ref is the artifact without its bytes.
func (a *Artifact) Ref() models.ArtifactRef {
	return models.ArtifactRef{ID: a.ID, Name: a.Name, MediaType: a.MediaType, Size: a.Size, SHA256: a.SHA256, Source: a.Source, ToolName: a.ToolName}
}

// ArtifactLimits bound what SaveArtifact stores: one file's size and the
// sum of a run's files. Zero means no limit.
type ArtifactLimits struct {
	MaxBytes    int64
	RunMaxBytes int64
}

// ArtifactID is the id of the index-th file stored by an activity's attempt:
// the same for a retried write of that file, different for another attempt
// or another file.
func ArtifactID(producer string, attempt, index int) string {
	sum := sha256.Sum256([]byte(fmt.Sprintf("%s\x00%d\x00%d", producer, attempt, index)))
	return "art_" + hex.EncodeToString(sum[:12])
}

// SaveArtifact stores a file of a run: it fills in the id (ArtifactID of
// Producer, Attempt and index), the tenant (the run's), the size, the
// SHA-256 and the time. Storing it again (a retried write) stores it once.
// Files of earlier attempts of the same producer are dropped first. A file
// over limits.MaxBytes, or one that would take the run's files over
// limits.RunMaxBytes, is refused with ARTIFACT_TOO_LARGE and nothing is
// stored; an unknown run is EXECUTION_NOT_FOUND.
func (s *Store) SaveArtifact(ctx context.Context, a *Artifact, index int, limits ArtifactLimits) error {
	if a.Content == nil {
		a.Content = []byte{}
	}
	a.Size = int64(len(a.Content))
	sum := sha256.Sum256(a.Content)
	a.SHA256 = hex.EncodeToString(sum[:])
	a.ID = ArtifactID(a.Producer, a.Attempt, index)
	a.CreatedAt = time.Now().UTC()
	if limits.MaxBytes > 0 && a.Size > limits.MaxBytes {
		return models.Errorf(models.CodeArtifactTooLarge, "file %q is %d bytes, over the limit of %d bytes per file (ARTIFACT_MAX_BYTES)", a.Name, a.Size, limits.MaxBytes)
	}
	return s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		// The run's row, locked on PostgreSQL: two activities of one run
		// storing at once see each other's files in the run's total.
		var run runRow
		q := tx.Select("id", "tenant_id")
		if s.dialect == DialectPostgres {
			q = q.Clauses(clause.Locking{Strength: "UPDATE"})
		}
		if err := q.Take(&run, "id = ?", a.RunID).Error; err != nil {
			if notFound(err) {
				return models.Errorf(models.CodeExecutionNotFound, "run %q not found", a.RunID)
			}
			return err
		}
		a.TenantID = tenantOr(run.TenantID)
		if a.Producer != "" {
			if err := tx.Where("producer = ? AND attempt < ?", a.Producer, a.Attempt).Delete(&Artifact{}).Error; err != nil {
				return err
			}
		}
		var existing int64
		if err := tx.Model(&Artifact{}).Where("id = ?", a.ID).Count(&existing).Error; err != nil {
			return err
		}
		if existing > 0 {
			return nil
		}
		if limits.RunMaxBytes > 0 {
			var total int64
			if err := tx.Model(&Artifact{}).Where("run_id = ?", a.RunID).Select("COALESCE(SUM(size), 0)").Scan(&total).Error; err != nil {
				return err
			}
			if total+a.Size > limits.RunMaxBytes {
				return models.Errorf(models.CodeArtifactTooLarge, "file %q (%d bytes) would take the run's files to %d bytes, over the limit of %d bytes per run (ARTIFACT_RUN_MAX_BYTES)", a.Name, a.Size, total+a.Size, limits.RunMaxBytes)
			}
		}
		return tx.Clauses(clause.OnConflict{DoNothing: true}).Create(a).Error
	})
}

// GetArtifact reads an artifact with its bytes. tenant "" reads any
// tenant's; otherwise an artifact of another tenant is not found, and so is
// one of another run than runID when runID is set (a run-scoped token).
// The filters are part of the one query, so an artifact of another tenant
// costs the same work as an unknown id and is answered alike.
func (s *Store) GetArtifact(ctx context.Context, id, tenant, runID string) (*Artifact, error) {
	q := s.db.WithContext(ctx).Where("id = ?", id)
	if tenant != "" {
		q = q.Where("tenant_id = ?", tenant)
	}
	if runID != "" {
		q = q.Where("run_id = ?", runID)
	}
	var a Artifact
	if err := q.Take(&a).Error; err != nil {
		if notFound(err) {
			return nil, models.Errorf(models.CodeArtifactNotFound, "artifact %q not found", id)
		}
		return nil, err
	}
	return &a, nil
}

// ListArtifacts lists a run's artifacts without their bytes, in the order
// they were stored.
func (s *Store) ListArtifacts(ctx context.Context, runID string) ([]Artifact, error) {
	var out []Artifact
	err := s.db.WithContext(ctx).Omit("content").Where("run_id = ?", runID).Order("created_at, id").Find(&out).Error
	if err != nil {
		return nil, err
	}
	return out, nil
}

// IsArtifactTooLarge reports whether err is SaveArtifact's refusal of a
// file over a limit.
func IsArtifactTooLarge(err error) bool {
	var me *models.Error
	return errors.As(err, &me) && me.Code == models.CodeArtifactTooLarge
}
