package api_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/op-stack/executor/api"
	"github.com/op-stack/executor/auth"
	"github.com/op-stack/executor/models"
	"github.com/op-stack/executor/store"
	"github.com/op-stack/executor/store/storetest"
)

// TestWebhooksAPI: create answers the secret once (get, list and update
// never show it; rotate_secret makes a new one), the secret is sealed at
// rest, bad input is a 400 naming the field and stores nothing, another
// tenant's endpoint and delivery read as unknown ones (404
// WEBHOOK_NOT_FOUND) and its list shows none of them, the runs scopes
// apply, and a deployment without MCP_SECRET_KEY refuses endpoints.
func TestWebhooksAPI(t *testing.T) {
	storetest.ForEachDialect(t, func(t *testing.T, st *store.Store) {
		ctx := context.Background()
		srv := httptest.NewServer(api.NewServer(api.Options{
			Store: st, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
			Access: api.Access{Mode: api.AuthRequired, Authenticator: auth.Keys{Lookup: st.KeyLookup()}},
		}).Handler())
		t.Cleanup(srv.Close)
		rw := []auth.Scope{auth.ScopeRunsRead, auth.ScopeRunsWrite}
		keyA, _, _ := st.IssueAPIKey(ctx, "tenant-a", rw, 0, "a")
		keyB, _, _ := st.IssueAPIKey(ctx, "tenant-b", rw, 0, "b")
		keyRead, _, _ := st.IssueAPIKey(ctx, "tenant-a", []auth.Scope{auth.ScopeRunsRead}, 0, "a-read")
		keyHier, _, _ := st.IssueAPIKey(ctx, "tenant-a", []auth.Scope{auth.ScopeHierarchiesRead, auth.ScopeHierarchiesWrite}, 0, "a-hier")
		admin, _, _ := st.IssueAPIKey(ctx, "ops", []auth.Scope{auth.ScopeAdmin}, 0, "ops")
		call := func(key, route, body string) (int, string) {
			t.Helper()
			resp, raw := artifactCall(t, http.MethodPost, srv.URL+"/api/executor/v1/webhooks/"+route, key, body)
			return resp.StatusCode, string(raw)
		}
		const create = `{"url":"https://example.com/hooks","events":["run.completed","run.failed","run.completed"],"description":"mine"}`

		// Without the key that seals secrets: refused, nothing stored.
		if code, raw := call(keyA, "create", create); code != http.StatusBadRequest || !strings.Contains(raw, models.CodeInvalidConfig.Name) || !strings.Contains(raw, "MCP_SECRET_KEY") {
			t.Fatalf("create without MCP_SECRET_KEY: %d %s", code, raw)
		}
		if err := st.SetMCPSecretKey(bytes.Repeat([]byte{7}, 32)); err != nil {
			t.Fatal(err)
		}

		for _, bad := range []struct{ body, field string }{
			{`{"events":["run.completed"]}`, "url"},
			{`{"url":"ftp://example.com","events":["run.completed"]}`, "url"},
			{`{"url":"/relative","events":["run.completed"]}`, "url"},
			{`{"url":"https://user:pw@example.com/h","events":["run.completed"]}`, "url"},
			{`{"url":"https://example.com/h"}`, "events"},
			{`{"url":"https://example.com/h","events":["run.exploded"]}`, "events"},
			{`{"url":"https://example.com/h","events":["run.completed"],"description":"` + strings.Repeat("x", 501) + `"}`, "description"},
		} {
			code, raw := call(keyA, "create", bad.body)
			if code != http.StatusBadRequest || !strings.Contains(raw, models.CodeInvalidParameters.Name) || !strings.Contains(raw, `"field":"`+bad.field+`"`) {
				t.Errorf("create %s: %d %s, want 400 on %s", bad.body, code, raw, bad.field)
			}
		}
		if list, _ := st.ListWebhookEndpoints(ctx, ""); len(list) != 0 {
			t.Fatalf("refused creates stored %+v", list)
		}

		code, raw := call(keyA, "create", create)
		var ep models.WebhookEndpoint
		if code != http.StatusOK || json.Unmarshal(envelopeData(t, raw), &ep) != nil || !strings.HasPrefix(ep.Secret, "whsec_") ||
			ep.Tenant != "tenant-a" || !ep.Enabled || strings.Join(ep.Events, ",") != "run.completed,run.failed" {
			t.Fatalf("create: %d %s", code, raw)
		}
		// Sealed at rest, opened for the worker only.
		if sec, err := st.WebhookSecret(ctx, ep.ID); err != nil || sec != ep.Secret {
			t.Fatalf("stored secret = %q, %v", sec, err)
		}
		for _, route := range []string{"get", "list"} {
			code, raw := call(keyA, route, `{"id":"`+ep.ID+`"}`)
			if code != http.StatusOK || strings.Contains(raw, ep.Secret) || strings.Contains(raw, `"secret"`) || !strings.Contains(raw, ep.ID) {
				t.Errorf("%s: %d %s", route, code, raw)
			}
		}
		// The read scope reads, but does not write; the hierarchies scopes
		// do neither.
		if code, raw := call(keyRead, "get", `{"id":"`+ep.ID+`"}`); code != http.StatusOK {
			t.Errorf("runs:read get: %d %s", code, raw)
		}
		if code, _ := call(keyRead, "create", create); code != http.StatusForbidden {
			t.Errorf("runs:read create: %d, want 403", code)
		}
		if code, _ := call(keyHier, "list", `{}`); code != http.StatusForbidden {
			t.Errorf("hierarchies key list: %d, want 403", code)
		}

		// A delivery of tenant A's, as a worker records one.
		d := &store.WebhookDelivery{ID: store.WebhookDeliveryID(ep.ID, "run-1", 1), TenantID: "tenant-a", EndpointID: ep.ID, RunID: "run-1",
			Sequence: 1, EventType: models.WebhookRunCompleted, Payload: `{}`}
		if err := st.InsertWebhookDelivery(ctx, d); err != nil {
			t.Fatal(err)
		}
		if code, raw := call(keyA, "deliveries", `{"endpoint_id":"`+ep.ID+`"}`); code != http.StatusOK || !strings.Contains(raw, d.ID) || !strings.Contains(raw, `"status":"pending"`) {
			t.Errorf("deliveries: %d %s", code, raw)
		}
		if code, raw := call(keyA, "deliveries", `{"status":"lost"}`); code != http.StatusBadRequest || !strings.Contains(raw, `"field":"status"`) {
			t.Errorf("deliveries with a bad status: %d %s", code, raw)
		}
		if code, raw := call(keyA, "deliveries", `{"limit":1001}`); code != http.StatusBadRequest || !strings.Contains(raw, `"field":"limit"`) {
			t.Errorf("deliveries with a bad limit: %d %s", code, raw)
		}

		// Tenant B: A's endpoint and delivery are unknown, its lists empty.
		_, unknown := call(keyB, "get", `{"id":"whe_nope"}`)
		for _, c := range []struct{ route, body string }{
			{"get", `{"id":"` + ep.ID + `"}`},
			{"update", `{"id":"` + ep.ID + `","url":"https://evil.example/h","events":["run.started"]}`},
			{"delete", `{"id":"` + ep.ID + `"}`},
			{"deliveries", `{"endpoint_id":"` + ep.ID + `"}`},
			{"redeliver", `{"id":"` + d.ID + `"}`},
		} {
			code, raw := call(keyB, c.route, c.body)
			if code != http.StatusNotFound || !strings.Contains(raw, models.CodeWebhookNotFound.Name) {
				t.Errorf("tenant B %s of A's: %d %s", c.route, code, raw)
			}
			if c.route == "get" && strings.ReplaceAll(raw, ep.ID, "whe_nope") != unknown {
				t.Errorf("tenant B's get of A's endpoint %s differs from an unknown id's %s", raw, unknown)
			}
		}
		for _, route := range []string{"list", "deliveries"} {
			if code, raw := call(keyB, route, `{}`); code != http.StatusOK || strings.Contains(raw, ep.ID) || strings.Contains(raw, d.ID) {
				t.Errorf("tenant B's %s: %d %s", route, code, raw)
			}
		}
		// An admin sees every tenant's.
		if code, raw := call(admin, "get", `{"id":"`+ep.ID+`"}`); code != http.StatusOK {
			t.Errorf("admin get: %d %s", code, raw)
		}
		// Without Temporal, a redelivery is refused, not lost silently.
		if code, raw := call(keyA, "redeliver", `{"id":"`+d.ID+`"}`); code != http.StatusServiceUnavailable {
			t.Errorf("redeliver without Temporal: %d %s", code, raw)
		}

		// Update keeps the secret unless rotated, and enabled unless given.
		code, raw = call(keyA, "update", `{"id":"`+ep.ID+`","url":"https://example.com/v2","events":["run.started"]}`)
		if code != http.StatusOK || strings.Contains(raw, `"secret"`) || !strings.Contains(raw, `"url":"https://example.com/v2"`) || !strings.Contains(raw, `"enabled":true`) {
			t.Fatalf("update: %d %s", code, raw)
		}
		if sec, _ := st.WebhookSecret(ctx, ep.ID); sec != ep.Secret {
			t.Error("update without rotate_secret changed the secret")
		}
		if code, raw := call(keyA, "update", `{"url":"https://example.com/v2","events":["run.started"]}`); code != http.StatusBadRequest || !strings.Contains(raw, `"field":"id"`) {
			t.Errorf("update without id: %d %s", code, raw)
		}
		code, raw = call(keyA, "update", `{"id":"`+ep.ID+`","url":"https://example.com/v2","events":["run.started"],"enabled":false,"rotate_secret":true}`)
		var rotated models.WebhookEndpoint
		if code != http.StatusOK || json.Unmarshal(envelopeData(t, raw), &rotated) != nil || !strings.HasPrefix(rotated.Secret, "whsec_") || rotated.Secret == ep.Secret || rotated.Enabled {
			t.Fatalf("rotate: %d %s", code, raw)
		}
		if sec, _ := st.WebhookSecret(ctx, ep.ID); sec != rotated.Secret {
			t.Error("rotate_secret did not store the new secret")
		}

		if code, raw := call(keyA, "delete", `{"id":"`+ep.ID+`"}`); code != http.StatusOK || !strings.Contains(raw, `"deleted":true`) {
			t.Fatalf("delete: %d %s", code, raw)
		}
		if code, _ := call(keyA, "get", `{"id":"`+ep.ID+`"}`); code != http.StatusNotFound {
			t.Errorf("get after delete: %d", code)
		}
		if ds, _ := st.ListWebhookDeliveries(ctx, store.WebhookDeliveryFilter{EndpointID: ep.ID}); len(ds) != 0 {
			t.Errorf("deleting the endpoint kept its deliveries: %+v", ds)
		}
	})
}

// envelopeData is the data of a success envelope.
func envelopeData(t *testing.T, raw string) json.RawMessage {
	t.Helper()
	var env struct {
		Data json.RawMessage `json:"data"`
	}
	if err := json.Unmarshal([]byte(raw), &env); err != nil {
		t.Fatal(err)
	}
	return env.Data
}
