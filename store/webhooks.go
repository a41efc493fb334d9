package store

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/google/uuid"
	"gorm.io/gorm"
	"gorm.io/gorm/clause"

	"github.com/op-stack/executor/models"
)

// WebhookEndpoint is a tenant's webhook endpoint (issue 26): a URL that
// receives the events it lists of the tenant's runs, signed with a secret
// that is sealed at rest (under the MCP secret key, SetMCPSecretKey) and
// read back only to sign (WebhookSecret).
type WebhookEndpoint struct {
	ID       string
	TenantID string
	// RunID is "" for an endpoint of the whole tenant, or the key of the
	// one run whose runs/start named it (CreateRunWebhook).
	RunID       string
	URL         string
	Description string
	Events      []string
	Enabled     bool
	CreatedAt   time.Time
	UpdatedAt   time.Time
}

type webhookEndpointRow struct {
	ID          string `gorm:"primaryKey"`
	TenantID    string
	RunID       string
	URL         string
	Description string
	Events      string
	Enabled     bool
	Secret      []byte
	CreatedAt   time.Time
	UpdatedAt   time.Time
}

func (webhookEndpointRow) TableName() string { return "webhook_endpoint" }

func (r webhookEndpointRow) toEndpoint() WebhookEndpoint {
	e := WebhookEndpoint{ID: r.ID, TenantID: r.TenantID, RunID: r.RunID, URL: r.URL, Description: r.Description, Enabled: r.Enabled,
		CreatedAt: r.CreatedAt.UTC(), UpdatedAt: r.UpdatedAt.UTC()}
	_ = json.Unmarshal([]byte(r.Events), &e.Events)
	return e
}

// Webhook delivery statuses.
const (
	WebhookPending   = "pending"
	WebhookDelivered = "delivered"
	WebhookFailed    = "failed"
)

// WebhookDelivery is one event of a run for one endpoint: its id is the
// webhook-id the receiver sees, Payload the exact body sent.
type WebhookDelivery struct {
	ID         string `gorm:"primaryKey"`
	TenantID   string
	EndpointID string
	// RunID is the run's id as its tenant knows it (public id).
	RunID       string
	Sequence    int64
	EventType   string
	Payload     string
	Status      string
	Attempts    int
	LastError   string
	LastStatus  int
	CreatedAt   time.Time
	UpdatedAt   time.Time
	DeliveredAt *time.Time
}

// TableName implements gorm's tabler.
func (WebhookDelivery) TableName() string { return "webhook_delivery" }

// NewWebhookEndpointID returns a fresh endpoint id.
func NewWebhookEndpointID() string { return "whe_" + uuid.NewString() }

// WebhookDeliveryID is the id of the delivery of a run's event (by its
// sequence) to an endpoint: the same inputs give the same id, so storing a
// delivery twice (a retried activity) stores it once and the receiver can
// deduplicate by webhook-id.
func WebhookDeliveryID(endpointID, runID string, sequence int64) string {
	h := sha256.Sum256([]byte(endpointID + "\x00" + runID + "\x00" + strconv.FormatInt(sequence, 10)))
	return "msg_" + hex.EncodeToString(h[:16])
}

// newWebhookSecret makes a Standard Webhooks secret: "whsec_" and the
// base64 of 24 random bytes (the bytes are the HMAC key).
func newWebhookSecret() (string, error) {
	b := make([]byte, 24)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return "whsec_" + base64.StdEncoding.EncodeToString(b), nil
}

// ErrNoWebhookSecretKey refuses endpoints on a deployment without a key to
// seal their signing secrets.
var ErrNoWebhookSecretKey = errors.New("this deployment cannot store webhook secrets (MCP_SECRET_KEY is not set)")

func (s *Store) sealWebhookSecret(id, secret string) ([]byte, error) {
	p := s.mcpAEAD.Load()
	if p == nil {
		return nil, ErrNoWebhookSecretKey
	}
	aead := *p
	nonce := make([]byte, aead.NonceSize())
	if _, err := rand.Read(nonce); err != nil {
		return nil, err
	}
	return aead.Seal(nonce, nonce, []byte(secret), []byte("webhook:"+id)), nil
}

func (s *Store) openWebhookSecret(id string, sealed []byte) (string, error) {
	p := s.mcpAEAD.Load()
	if p == nil {
		return "", ErrNoWebhookSecretKey
	}
	aead := *p
	n := aead.NonceSize()
	if len(sealed) < n {
		return "", errors.New("sealed webhook secret is truncated")
	}
	plain, err := aead.Open(nil, sealed[:n], sealed[n:], []byte("webhook:"+id))
	if err != nil {
		return "", fmt.Errorf("cannot open the webhook endpoint's secret (was MCP_SECRET_KEY changed?): %w", err)
	}
	return string(plain), nil
}

func webhookNotFound(what, id string) error {
	e := models.Errorf(models.CodeWebhookNotFound, "webhook %s %q not found", what, id)
	e.Field = "id"
	return e
}

// CreateWebhookEndpoint stores e in its tenant with a new signing secret,
// which it returns: the only time the secret leaves the store but to sign.
func (s *Store) CreateWebhookEndpoint(ctx context.Context, e *WebhookEndpoint) (secret string, err error) {
	if secret, err = newWebhookSecret(); err != nil {
		return "", err
	}
	e.RunID = ""
	return secret, s.createWebhookEndpoint(ctx, e, secret)
}

// CreateRunWebhook stores the one-off endpoint of one run (e.RunID, its
// key) with the secret its caller chose; deliveries of that run go to it
// besides the tenant's endpoints. Lists do not show it.
func (s *Store) CreateRunWebhook(ctx context.Context, e *WebhookEndpoint, secret string) error {
	if e.RunID == "" {
		return errors.New("a run's webhook needs its run")
	}
	return s.createWebhookEndpoint(ctx, e, secret)
}

func (s *Store) createWebhookEndpoint(ctx context.Context, e *WebhookEndpoint, secret string) error {
	e.TenantID = tenantOr(e.TenantID)
	if e.ID == "" {
		e.ID = NewWebhookEndpointID()
	}
	sealed, err := s.sealWebhookSecret(e.ID, secret)
	if err != nil {
		return err
	}
	e.CreatedAt = dbTime(time.Now())
	e.UpdatedAt = e.CreatedAt
	row := webhookEndpointRow{ID: e.ID, TenantID: e.TenantID, RunID: e.RunID, URL: e.URL, Description: e.Description,
		Events: mustJSON(nonNil(e.Events)), Enabled: e.Enabled, Secret: sealed, CreatedAt: e.CreatedAt, UpdatedAt: e.UpdatedAt}
	if err := s.db.WithContext(ctx).Create(&row).Error; err != nil {
		return fmt.Errorf("insert webhook endpoint: %w", err)
	}
	return nil
}

func (s *Store) webhookEndpointRow(ctx context.Context, db *gorm.DB, tenant, id string) (webhookEndpointRow, error) {
	var row webhookEndpointRow
	q := db.WithContext(ctx).Where("id = ?", id)
	if tenant != "" {
		q = q.Where("tenant_id = ?", tenant)
	}
	err := q.Take(&row).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return row, webhookNotFound("endpoint", id)
	}
	return row, err
}

// GetWebhookEndpoint loads endpoint id of tenant ("" for any tenant);
// another tenant's is not found, as an unknown one.
func (s *Store) GetWebhookEndpoint(ctx context.Context, tenant, id string) (*WebhookEndpoint, error) {
	row, err := s.webhookEndpointRow(ctx, s.db, tenant, id)
	if err != nil {
		return nil, err
	}
	e := row.toEndpoint()
	return &e, nil
}

// ListWebhookEndpoints lists tenant's endpoints, oldest first ("" lists
// every tenant's), but the one-off endpoints of single runs.
func (s *Store) ListWebhookEndpoints(ctx context.Context, tenant string) ([]WebhookEndpoint, error) {
	var rows []webhookEndpointRow
	q := s.db.WithContext(ctx).Where("run_id = ?", "").Order("created_at, id")
	if tenant != "" {
		q = q.Where("tenant_id = ?", tenant)
	}
	if err := q.Find(&rows).Error; err != nil {
		return nil, err
	}
	out := make([]WebhookEndpoint, 0, len(rows))
	for _, r := range rows {
		out = append(out, r.toEndpoint())
	}
	return out, nil
}

// UpdateWebhookEndpoint replaces the URL, description, events and enabled
// flag of endpoint e.ID of tenant ("" for any); with rotate it also makes
// a new secret and returns it.
func (s *Store) UpdateWebhookEndpoint(ctx context.Context, tenant string, e *WebhookEndpoint, rotate bool) (secret string, err error) {
	err = s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		old, err := s.webhookEndpointRow(ctx, tx, tenant, e.ID)
		if err != nil {
			return err
		}
		sealed := old.Secret
		if rotate {
			if secret, err = newWebhookSecret(); err != nil {
				return err
			}
			if sealed, err = s.sealWebhookSecret(old.ID, secret); err != nil {
				return err
			}
		}
		e.TenantID, e.CreatedAt, e.UpdatedAt = old.TenantID, old.CreatedAt.UTC(), dbTime(time.Now())
		e.RunID = old.RunID
		row := webhookEndpointRow{ID: old.ID, TenantID: old.TenantID, RunID: old.RunID, URL: e.URL, Description: e.Description,
			Events: mustJSON(nonNil(e.Events)), Enabled: e.Enabled, Secret: sealed, CreatedAt: old.CreatedAt, UpdatedAt: e.UpdatedAt}
		return tx.Select("*").Save(&row).Error
	})
	return secret, err
}

// DeleteWebhookEndpoint deletes endpoint id of tenant ("" for any) and its
// deliveries.
func (s *Store) DeleteWebhookEndpoint(ctx context.Context, tenant, id string) error {
	return s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		if _, err := s.webhookEndpointRow(ctx, tx, tenant, id); err != nil {
			return err
		}
		if err := tx.Where("endpoint_id = ?", id).Delete(&WebhookDelivery{}).Error; err != nil {
			return err
		}
		return tx.Where("id = ?", id).Delete(&webhookEndpointRow{}).Error
	})
}

// WebhookEndpointsFor lists the enabled endpoints of run (its key) in
// tenant: the tenant's and the run's own (the caller picks those that want
// an event).
func (s *Store) WebhookEndpointsFor(ctx context.Context, tenant, run string) ([]WebhookEndpoint, error) {
	var rows []webhookEndpointRow
	if err := s.db.WithContext(ctx).Where("tenant_id = ? AND enabled = ? AND (run_id = ? OR run_id = ?)", tenantOr(tenant), true, "", run).
		Order("id").Find(&rows).Error; err != nil {
		return nil, err
	}
	out := make([]WebhookEndpoint, 0, len(rows))
	for _, r := range rows {
		out = append(out, r.toEndpoint())
	}
	return out, nil
}

// WebhookSecret opens endpoint id's signing secret: for the worker's
// delivery activity, never for an answer.
func (s *Store) WebhookSecret(ctx context.Context, id string) (string, error) {
	row, err := s.webhookEndpointRow(ctx, s.db, "", id)
	if err != nil {
		return "", err
	}
	return s.openWebhookSecret(row.ID, row.Secret)
}

// InsertWebhookDelivery stores d as pending; a delivery stored before
// (same id) is kept as it is.
func (s *Store) InsertWebhookDelivery(ctx context.Context, d *WebhookDelivery) error {
	now := dbTime(time.Now())
	d.Status, d.CreatedAt, d.UpdatedAt = WebhookPending, now, now
	return s.db.WithContext(ctx).Clauses(clause.OnConflict{DoNothing: true}).Create(d).Error
}

// GetWebhookDelivery loads delivery id of tenant ("" for any).
func (s *Store) GetWebhookDelivery(ctx context.Context, tenant, id string) (*WebhookDelivery, error) {
	var d WebhookDelivery
	q := s.db.WithContext(ctx).Where("id = ?", id)
	if tenant != "" {
		q = q.Where("tenant_id = ?", tenant)
	}
	err := q.Take(&d).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return nil, webhookNotFound("delivery", id)
	}
	if err != nil {
		return nil, err
	}
	return &d, nil
}

// WebhookDeliveryFilter selects deliveries; empty fields select all.
type WebhookDeliveryFilter struct {
	Tenant     string
	EndpointID string
	RunID      string
	Status     string
	Limit      int
}

// ListWebhookDeliveries lists deliveries, newest first.
func (s *Store) ListWebhookDeliveries(ctx context.Context, f WebhookDeliveryFilter) ([]WebhookDelivery, error) {
	q := s.db.WithContext(ctx).Order("created_at DESC, sequence DESC")
	if f.Tenant != "" {
		q = q.Where("tenant_id = ?", f.Tenant)
	}
	if f.EndpointID != "" {
		q = q.Where("endpoint_id = ?", f.EndpointID)
	}
	if f.RunID != "" {
		q = q.Where("run_id = ?", f.RunID)
	}
	if f.Status != "" {
		q = q.Where("status = ?", f.Status)
	}
	if f.Limit > 0 {
		q = q.Limit(f.Limit)
	}
	var out []WebhookDelivery
	return out, q.Find(&out).Error
}

// RecordWebhookAttempt counts one attempt of delivery id: delivered, or
// not with the receiver's HTTP status (0: none) and the error.
func (s *Store) RecordWebhookAttempt(ctx context.Context, id string, delivered bool, httpStatus int, errMsg string) error {
	now := dbTime(time.Now())
	upd := map[string]any{"attempts": gorm.Expr("attempts + 1"), "last_status": httpStatus, "last_error": errMsg, "updated_at": now}
	if delivered {
		upd["status"], upd["delivered_at"] = WebhookDelivered, now
	}
	return s.db.WithContext(ctx).Model(&WebhookDelivery{}).Where("id = ?", id).Updates(upd).Error
}

// FailWebhookDelivery marks delivery id failed for good (its retries are
// exhausted); a delivered one stays delivered.
func (s *Store) FailWebhookDelivery(ctx context.Context, id, errMsg string) error {
	return s.db.WithContext(ctx).Model(&WebhookDelivery{}).Where("id = ? AND status <> ?", id, WebhookDelivered).
		Updates(map[string]any{"status": WebhookFailed, "last_error": errMsg, "updated_at": dbTime(time.Now())}).Error
}

// ResetWebhookDelivery makes delivery id of tenant ("" for any) pending
// again, for a redelivery.
func (s *Store) ResetWebhookDelivery(ctx context.Context, tenant, id string) (*WebhookDelivery, error) {
	d, err := s.GetWebhookDelivery(ctx, tenant, id)
	if err != nil {
		return nil, err
	}
	d.Status, d.UpdatedAt = WebhookPending, dbTime(time.Now())
	if err := s.db.WithContext(ctx).Model(&WebhookDelivery{}).Where("id = ?", id).
		Updates(map[string]any{"status": WebhookPending, "updated_at": d.UpdatedAt}).Error; err != nil {
		return nil, err
	}
	return d, nil
}
