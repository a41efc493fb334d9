package store_test

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/op-stack/executor/models"
	"github.com/op-stack/executor/store"
	"github.com/op-stack/executor/store/storetest"
)

// TestWebhookStore: an endpoint's secret is sealed (not in the row in the
// clear, and bound to its endpoint: a sealed secret copied onto another
// endpoint does not open); a delivery recorded twice is recorded once and
// keeps its progress; a delivered delivery is not failed afterwards; a
// reset makes it pending again; tenants see only theirs.
func TestWebhookStore(t *testing.T) {
	storetest.ForEachDialect(t, func(t *testing.T, st *store.Store) {
		ctx := context.Background()
		if _, err := st.CreateWebhookEndpoint(ctx, &store.WebhookEndpoint{TenantID: "a", URL: "https://x", Events: []string{"run.started"}}); err != store.ErrNoWebhookSecretKey {
			t.Fatalf("create without a key: %v", err)
		}
		if err := st.SetMCPSecretKey(bytes.Repeat([]byte{9}, 32)); err != nil {
			t.Fatal(err)
		}
		a := &store.WebhookEndpoint{TenantID: "a", URL: "https://a.example/h", Events: []string{models.WebhookRunStarted}, Enabled: true}
		secretA, err := st.CreateWebhookEndpoint(ctx, a)
		if err != nil {
			t.Fatal(err)
		}
		b := &store.WebhookEndpoint{TenantID: "b", URL: "https://b.example/h", Events: []string{models.WebhookRunStarted}, Enabled: true}
		if _, err := st.CreateWebhookEndpoint(ctx, b); err != nil {
			t.Fatal(err)
		}
		var raw []byte
		if err := st.DB().Raw("SELECT secret FROM webhook_endpoint WHERE id = ?", a.ID).Row().Scan(&raw); err != nil {
			t.Fatal(err)
		}
		if bytes.Contains(raw, []byte(strings.TrimPrefix(secretA, "whsec_"))) {
			t.Fatal("the secret is stored in the clear")
		}
		if err := st.DB().Exec("UPDATE webhook_endpoint SET secret = ? WHERE id = ?", raw, b.ID).Error; err != nil {
			t.Fatal(err)
		}
		if _, err := st.WebhookSecret(ctx, b.ID); err == nil {
			t.Error("a's sealed secret opened on b")
		}
		if got, err := st.WebhookSecret(ctx, a.ID); err != nil || got != secretA {
			t.Fatalf("secret = %q, %v", got, err)
		}
		if _, err := st.GetWebhookEndpoint(ctx, "b", a.ID); models.ErrorCode(err) != models.CodeWebhookNotFound {
			t.Errorf("tenant b got a's endpoint: %v", err)
		}
		if list, _ := st.ListWebhookEndpoints(ctx, "b"); len(list) != 1 || list[0].ID != b.ID {
			t.Errorf("tenant b lists %+v", list)
		}

		d := &store.WebhookDelivery{ID: store.WebhookDeliveryID(a.ID, "r1", 1), TenantID: "a", EndpointID: a.ID, RunID: "r1", Sequence: 1,
			EventType: models.WebhookRunStarted, Payload: `{"n":1}`}
		if err := st.InsertWebhookDelivery(ctx, d); err != nil {
			t.Fatal(err)
		}
		if err := st.RecordWebhookAttempt(ctx, d.ID, false, 503, "the receiver answered 503"); err != nil {
			t.Fatal(err)
		}
		again := *d
		again.Payload = `{"n":2}`
		if err := st.InsertWebhookDelivery(ctx, &again); err != nil {
			t.Fatal(err)
		}
		got, err := st.GetWebhookDelivery(ctx, "a", d.ID)
		if err != nil || got.Attempts != 1 || got.Payload != `{"n":1}` || got.LastStatus != 503 || got.Status != store.WebhookPending {
			t.Fatalf("after a second insert: %+v, %v", got, err)
		}
		if _, err := st.GetWebhookDelivery(ctx, "b", d.ID); models.ErrorCode(err) != models.CodeWebhookNotFound {
			t.Errorf("tenant b got a's delivery: %v", err)
		}
		if err := st.RecordWebhookAttempt(ctx, d.ID, true, 200, ""); err != nil {
			t.Fatal(err)
		}
		if err := st.FailWebhookDelivery(ctx, d.ID, "late"); err != nil {
			t.Fatal(err)
		}
		if got, _ := st.GetWebhookDelivery(ctx, "", d.ID); got.Status != store.WebhookDelivered || got.Attempts != 2 || got.DeliveredAt == nil {
			t.Errorf("delivered then failed: %+v", got)
		}
		if got, err := st.ResetWebhookDelivery(ctx, "a", d.ID); err != nil || got.Status != store.WebhookPending {
			t.Errorf("reset: %+v, %v", got, err)
		}
		if ds, _ := st.ListWebhookDeliveries(ctx, store.WebhookDeliveryFilter{Tenant: "a", Status: store.WebhookPending}); len(ds) != 1 {
			t.Errorf("pending deliveries of a: %+v", ds)
		}
		if err := st.DeleteWebhookEndpoint(ctx, "b", a.ID); models.ErrorCode(err) != models.CodeWebhookNotFound {
			t.Errorf("tenant b deleted a's endpoint: %v", err)
		}
	})
}
