package main

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/op-stack/executor/api"
	"github.com/op-stack/executor/auth"
	"github.com/op-stack/executor/models"
	"github.com/op-stack/executor/store"
	"github.com/op-stack/executor/store/storetest"
)

// TestWebhooksCommand runs `executor webhooks` against the real API (in
// process, on SQLite, access control on): create prints the id and the
// secret once, list and get never show it, update changes only the flags
// given and --rotate-secret prints a new one, deliveries lists what a
// worker recorded, delete removes the endpoint, and an unknown id exits 1
// with the API's 404.
func TestWebhooksCommand(t *testing.T) {
	ctx := context.Background()
	st := storetest.SQLite(t)
	if err := st.SetMCPSecretKey(bytes.Repeat([]byte{5}, 32)); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(api.NewServer(api.Options{
		Store: st, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Access: api.Access{Mode: api.AuthRequired, Authenticator: auth.Keys{Lookup: st.KeyLookup()}},
	}).Handler())
	t.Cleanup(srv.Close)
	key, _, err := st.IssueAPIKey(ctx, "acme", []auth.Scope{auth.ScopeRunsRead, auth.ScopeRunsWrite}, 0, "cli-test")
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("EXECUTOR_URL", srv.URL)
	t.Setenv("EXECUTOR_API_KEY", key)
	run := func(args ...string) (string, string, int) {
		t.Helper()
		root := newRootCommand()
		var stdout, stderr bytes.Buffer
		root.SetArgs(args)
		root.SetOut(&stdout)
		root.SetErr(&stderr)
		code := 0
		if err := root.ExecuteContext(ctx); err != nil {
			code = 1
			if ee, ok := err.(exitError); ok {
				code = ee.code
			}
			stderr.WriteString(err.Error())
		}
		return stdout.String(), stderr.String(), code
	}
	must := func(args ...string) string {
		t.Helper()
		out, errOut, code := run(args...)
		if code != 0 {
			t.Fatalf("executor %q: exit %d\n%s%s", args, code, out, errOut)
		}
		return out
	}

	lines := strings.Split(strings.TrimSpace(must("webhooks", "create", "--url", "https://example.com/hooks", "--event", "run.completed", "--event", "run.failed")), "\n")
	if len(lines) != 2 || !strings.HasPrefix(lines[0], "whe_") || !strings.HasPrefix(lines[1], "whsec_") {
		t.Fatalf("create printed %q, want the id and the secret", lines)
	}
	id, secret := lines[0], lines[1]
	for _, args := range [][]string{{"webhooks", "list"}, {"webhooks", "get", id}, {"webhooks", "get", id, "-o", "json"}} {
		out := must(args...)
		if !strings.Contains(out, id) || strings.Contains(out, secret) || !strings.Contains(out, "run.completed") {
			t.Errorf("executor %q printed:\n%s", args, out)
		}
	}
	out := must("webhooks", "update", id, "--disable", "--rotate-secret")
	if !strings.Contains(out, "false") || !strings.Contains(out, "new secret  whsec_") || strings.Contains(out, secret) ||
		!strings.Contains(out, "https://example.com/hooks") || !strings.Contains(out, "run.completed, run.failed") {
		t.Errorf("update printed:\n%s", out)
	}
	if ep, _ := st.GetWebhookEndpoint(ctx, "", id); ep == nil || ep.Enabled {
		t.Errorf("update --disable left %+v", ep)
	}

	d := &store.WebhookDelivery{ID: store.WebhookDeliveryID(id, "run-9", 4), TenantID: "acme", EndpointID: id, RunID: "run-9", Sequence: 4,
		EventType: models.WebhookRunCompleted, Payload: "{}"}
	if err := st.InsertWebhookDelivery(ctx, d); err != nil {
		t.Fatal(err)
	}
	if out := must("webhooks", "deliveries", "--endpoint", id); !strings.Contains(out, d.ID) || !strings.Contains(out, "run-9") || !strings.Contains(out, "pending") {
		t.Errorf("deliveries printed:\n%s", out)
	}
	if out := must("webhooks", "delete", id); !strings.Contains(out, id+" deleted") {
		t.Errorf("delete printed %q", out)
	}
	if _, errOut, code := run("webhooks", "get", id); code != 1 || !strings.Contains(errOut, "WEBHOOK_NOT_FOUND") {
		t.Errorf("get of a deleted endpoint: exit %d %s", code, errOut)
	}
}
