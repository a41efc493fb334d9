package api

import (
	"encoding/base64"
	"errors"
	"net/url"
	"slices"
	"strings"

	"github.com/gin-gonic/gin"

	"github.com/op-stack/executor/models"
	"github.com/op-stack/executor/store"
)

// Webhooks (issue 26, docs/webhooks.md): a tenant's endpoints that receive
// its runs' lifecycle events, signed with a secret shown once. The
// deliveries themselves are the worker's (activities.DeliverWebhook);
// these routes manage endpoints, show deliveries and send one again.

// maxWebhookDeliveries bounds a webhooks/deliveries page.
const maxWebhookDeliveries = 1000

func viewWebhook(e *store.WebhookEndpoint) models.WebhookEndpoint {
	return models.WebhookEndpoint{ID: e.ID, Tenant: e.TenantID, URL: e.URL, Description: e.Description,
		Events: nonNilStrings(e.Events), Enabled: e.Enabled, CreatedAt: e.CreatedAt, UpdatedAt: e.UpdatedAt}
}

func viewWebhookDelivery(d *store.WebhookDelivery) models.WebhookDelivery {
	v := models.WebhookDelivery{ID: d.ID, EndpointID: d.EndpointID, RunID: d.RunID, Sequence: d.Sequence, EventType: d.EventType,
		Status: d.Status, Attempts: d.Attempts, LastError: d.LastError, LastStatus: d.LastStatus,
		CreatedAt: d.CreatedAt.UTC(), UpdatedAt: d.UpdatedAt.UTC()}
	if d.DeliveredAt != nil {
		t := d.DeliveredAt.UTC()
		v.DeliveredAt = &t
	}
	return v
}

// checkWebhook validates the url, description and events of in.
func checkWebhook(in models.WebhookEndpointInput) (*store.WebhookEndpoint, error) {
	e := &store.WebhookEndpoint{URL: strings.TrimSpace(in.URL), Description: strings.TrimSpace(in.Description), Enabled: true}
	u, err := url.Parse(e.URL)
	if e.URL == "" {
		return nil, models.FieldError("url", "is required")
	}
	if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
		return nil, models.FieldError("url", "must be an absolute http or https URL")
	}
	if u.User != nil {
		return nil, models.FieldError("url", "must not carry credentials; verify the webhook-signature header instead")
	}
	if len(e.URL) > 2048 {
		return nil, models.FieldError("url", "must be at most 2048 characters")
	}
	if len(e.Description) > 500 {
		return nil, models.FieldError("description", "must be at most 500 characters")
	}
	if len(in.Events) == 0 {
		return nil, models.FieldError("events", "name at least one of %s", strings.Join(models.WebhookEventTypes(), ", "))
	}
	for _, ev := range in.Events {
		if !slices.Contains(models.WebhookEventTypes(), ev) {
			return nil, models.FieldError("events", "unknown event type %q (known: %s)", ev, strings.Join(models.WebhookEventTypes(), ", "))
		}
		if !slices.Contains(e.Events, ev) {
			e.Events = append(e.Events, ev)
		}
	}
	if in.Enabled != nil {
		e.Enabled = *in.Enabled
	}
	return e, nil
}

// checkRunWebhook validates runs/start's one-off webhook: its url and
// events as an endpoint's (every event type when none is given), and its
// caller-chosen secret.
func checkRunWebhook(in models.RunWebhookInput) (*store.WebhookEndpoint, string, error) {
	events := in.Events
	if len(events) == 0 {
		events = models.WebhookEventTypes()
	}
	e, err := checkWebhook(models.WebhookEndpointInput{URL: in.URL, Events: events})
	var fe *models.Error
	if errors.As(err, &fe) {
		fe.Field, fe.Message = "webhook."+fe.Field, "webhook."+fe.Message
	}
	if err != nil {
		return nil, "", err
	}
	key, decErr := base64.StdEncoding.DecodeString(strings.TrimPrefix(in.Secret, "whsec_"))
	if !strings.HasPrefix(in.Secret, "whsec_") || decErr != nil || len(key) < 24 || len(key) > 64 {
		return nil, "", models.FieldError("webhook.secret", "must be \"whsec_\" and the base64 of 24 to 64 random bytes (e.g. \"whsec_$(openssl rand -base64 32)\")")
	}
	return e, in.Secret, nil
}

// webhookSecretError turns the store's refusal to seal a secret into a
// 400 saying what the operator must set.
func webhookSecretError(err error) error {
	if errors.Is(err, store.ErrNoWebhookSecretKey) {
		return models.Errorf(models.CodeInvalidConfig, "%v", err)
	}
	return err
}

// webhookTenant is the tenant whose endpoints and deliveries a request
// reads: the caller's, or any ("") for a principal that sees every tenant.
func webhookTenant(c *gin.Context) string { return tenantFilter(c.Request.Context()) }

func (s *Server) createWebhook(c *gin.Context) {
	var in models.WebhookEndpointInput
	if err := decodeJSON(c, &in); err != nil {
		s.writeError(c, err)
		return
	}
	e, err := checkWebhook(in)
	if err != nil {
		s.writeError(c, err)
		return
	}
	if e.TenantID = ownTenant(c.Request.Context()); e.TenantID == noTenant {
		s.writeError(c, models.Errorf(models.CodePermissionDenied, "no tenant"))
		return
	}
	secret, err := s.store.CreateWebhookEndpoint(c.Request.Context(), e)
	if err != nil {
		s.writeError(c, webhookSecretError(err))
		return
	}
	view := viewWebhook(e)
	view.Secret = secret
	ok(c, view)
}

// webhookID reads the {"id"} body of get, delete and redeliver.
func webhookID(c *gin.Context) (string, error) {
	var in struct {
		ID string `json:"id"`
	}
	if err := decodeJSON(c, &in); err != nil {
		return "", err
	}
	if in.ID = strings.TrimSpace(in.ID); in.ID == "" {
		return "", models.FieldError("id", "is required")
	}
	return in.ID, nil
}

func (s *Server) getWebhook(c *gin.Context) {
	id, err := webhookID(c)
	if err != nil {
		s.writeError(c, err)
		return
	}
	e, err := s.store.GetWebhookEndpoint(c.Request.Context(), webhookTenant(c), id)
	if err != nil {
		s.writeError(c, err)
		return
	}
	ok(c, viewWebhook(e))
}

func (s *Server) listWebhooks(c *gin.Context) {
	list, err := s.store.ListWebhookEndpoints(c.Request.Context(), webhookTenant(c))
	if err != nil {
		s.writeError(c, err)
		return
	}
	items := make([]models.WebhookEndpoint, 0, len(list))
	for i := range list {
		items = append(items, viewWebhook(&list[i]))
	}
	ok(c, models.WebhookEndpointList{Items: items, Total: len(items)})
}

func (s *Server) updateWebhook(c *gin.Context) {
	var in models.WebhookEndpointInput
	if err := decodeJSON(c, &in); err != nil {
		s.writeError(c, err)
		return
	}
	id := strings.TrimSpace(in.ID)
	if id == "" {
		s.writeError(c, models.FieldError("id", "is required"))
		return
	}
	ctx := c.Request.Context()
	old, err := s.store.GetWebhookEndpoint(ctx, webhookTenant(c), id)
	if err != nil {
		s.writeError(c, err)
		return
	}
	if in.Enabled == nil {
		in.Enabled = &old.Enabled
	}
	e, err := checkWebhook(in)
	if err != nil {
		s.writeError(c, err)
		return
	}
	e.ID = old.ID
	secret, err := s.store.UpdateWebhookEndpoint(ctx, old.TenantID, e, in.RotateSecret)
	if err != nil {
		s.writeError(c, webhookSecretError(err))
		return
	}
	view := viewWebhook(e)
	view.Secret = secret
	ok(c, view)
}

func (s *Server) deleteWebhook(c *gin.Context) {
	id, err := webhookID(c)
	if err != nil {
		s.writeError(c, err)
		return
	}
	if err := s.store.DeleteWebhookEndpoint(c.Request.Context(), webhookTenant(c), id); err != nil {
		s.writeError(c, err)
		return
	}
	ok(c, gin.H{"id": id, "deleted": true})
}

func (s *Server) listWebhookDeliveries(c *gin.Context) {
	var in struct {
		EndpointID string `json:"endpoint_id"`
		RunID      string `json:"run_id"`
		Status     string `json:"status"`
		Limit      int    `json:"limit"`
	}
	if err := decodeJSON(c, &in); err != nil {
		s.writeError(c, err)
		return
	}
	switch in.Status {
	case "", store.WebhookPending, store.WebhookDelivered, store.WebhookFailed:
	default:
		s.writeError(c, models.FieldError("status", "must be %q, %q or %q", store.WebhookPending, store.WebhookDelivered, store.WebhookFailed))
		return
	}
	if in.Limit < 0 || in.Limit > maxWebhookDeliveries {
		s.writeError(c, models.FieldError("limit", "must be between 0 (the default, 100) and %d", maxWebhookDeliveries))
		return
	}
	if in.Limit == 0 {
		in.Limit = 100
	}
	ctx := c.Request.Context()
	tenant := webhookTenant(c)
	if in.EndpointID != "" {
		// Another tenant's endpoint answers 404, as an unknown one.
		if _, err := s.store.GetWebhookEndpoint(ctx, tenant, in.EndpointID); err != nil {
			s.writeError(c, err)
			return
		}
	}
	list, err := s.store.ListWebhookDeliveries(ctx, store.WebhookDeliveryFilter{Tenant: tenant, EndpointID: in.EndpointID,
		RunID: strings.TrimSpace(in.RunID), Status: in.Status, Limit: in.Limit})
	if err != nil {
		s.writeError(c, err)
		return
	}
	items := make([]models.WebhookDelivery, 0, len(list))
	for i := range list {
		items = append(items, viewWebhookDelivery(&list[i]))
	}
	ok(c, models.WebhookDeliveryList{Items: items, Total: len(items)})
}

// redeliverWebhook sends a delivery again, with the same webhook-id and
// body, through its (endpoint, run) workflow, after what that workflow
// still has to send: a failed one, or one the receiver lost.
func (s *Server) redeliverWebhook(c *gin.Context) {
	id, err := webhookID(c)
	if err != nil {
		s.writeError(c, err)
		return
	}
	ctx := c.Request.Context()
	// Another tenant's delivery is unknown, whatever this process serves.
	if _, err := s.store.GetWebhookDelivery(ctx, webhookTenant(c), id); err != nil {
		s.writeError(c, err)
		return
	}
	if s.webhooks == nil {
		s.writeError(c, models.Errorf(models.CodeUnavailable, "webhook deliveries are not served by this process"))
		return
	}
	d, err := s.store.ResetWebhookDelivery(ctx, webhookTenant(c), id)
	if err != nil {
		s.writeError(c, err)
		return
	}
	if err := s.webhooks.Enqueue(ctx, d.EndpointID, d.RunID, d.ID); err != nil {
		s.writeError(c, err)
		return
	}
	ok(c, viewWebhookDelivery(d))
}
