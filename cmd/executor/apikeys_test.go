package main

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/op-stack/executor/auth"
	"github.com/op-stack/executor/config"
	"github.com/op-stack/executor/store"
)

// TestAPIKeysCommand: create prints the key alone on stdout, list shows it
// by id and prefix (never the key nor its hash), revoke revokes it, against
// the SQLite database under DATA_DIR.
func TestAPIKeysCommand(t *testing.T) {
	ctx := context.Background()
	cfg := config.Config{DataDir: t.TempDir()}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	run := func(args ...string) (string, string, error) {
		var stdout, stderr bytes.Buffer
		cmd := newAPIKeysCommand(func() (service, error) { return service{cfg: cfg, log: log}, nil })
		cmd.SetArgs(normalizeArgs(cmd, args))
		cmd.SetOut(&stdout)
		cmd.SetErr(&stderr)
		cmd.SilenceErrors, cmd.SilenceUsage = true, true
		err := cmd.ExecuteContext(ctx)
		return stdout.String(), stderr.String(), err
	}

	out, msg, err := run("create", "--tenant", "acme", "--scopes", "runs:read,runs:write", "--expires", "90d", "--description", "ci bot")
	if err != nil {
		t.Fatalf("create: %v\n%s", err, msg)
	}
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if len(lines) != 1 || !strings.HasSuffix(out, "\n") || !auth.LooksLikeAPIKey(lines[0]) {
		t.Fatalf("create's stdout is not one key line: %q", out)
	}
	key := lines[0]
	if !strings.Contains(msg, "tenant acme") || !strings.Contains(msg, "expires") || strings.Contains(msg, key) {
		t.Errorf("create's message: %q", msg)
	}

	st, err := store.Open("", cfg.SQLitePath())
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	p, err := auth.Keys{Lookup: st.KeyLookup()}.Authenticate(ctx, key)
	if err != nil || p.Tenant != "acme" || len(p.Scopes) != 2 {
		t.Fatalf("the created key does not authenticate: %v %+v", err, p)
	}
	rec, err := st.APIKeyByHash(ctx, auth.HashSecret(key))
	if err != nil {
		t.Fatal(err)
	}
	if d := time.Until(*rec.ExpiresAt); d < 89*24*time.Hour || d > 90*24*time.Hour {
		t.Errorf("expires in %v, want 90 days", d)
	}

	out, _, err = run("list")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, rec.ID) || !strings.Contains(out, key[:12]) || !strings.Contains(out, "acme") ||
		!strings.Contains(out, "runs:read,runs:write") || !strings.Contains(out, "active") || !strings.Contains(out, "ci bot") {
		t.Errorf("list does not show the key:\n%s", out)
	}
	if strings.Contains(out, key) || strings.Contains(out, rec.Hash) {
		t.Errorf("list shows the key or its hash:\n%s", out)
	}
	if out, _, err := run("list", "--tenant", "other"); err != nil || strings.Contains(out, rec.ID) {
		t.Errorf("list --tenant other: %v\n%s", err, out)
	}

	if _, _, err := run("revoke", rec.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := (auth.Keys{Lookup: st.KeyLookup()}).Authenticate(ctx, key); !errors.Is(err, auth.ErrInvalidCredentials) {
		t.Fatalf("the revoked key authenticates: %v", err)
	}
	if out, _, _ := run("list", "--tenant", "acme"); !strings.Contains(out, "revoked") {
		t.Errorf("list after revoke:\n%s", out)
	}
	if _, _, err := run("revoke", "key_unknown"); err == nil || !strings.Contains(err.Error(), "no API key") {
		t.Errorf("revoke of an unknown id: %v", err)
	}

	for _, bad := range [][]string{
		{"create", "--scopes", "runs:read"},
		{"create", "--tenant", " ", "--scopes", "runs:read"},
		{"create", "--tenant", "acme"},
		{"create", "--tenant", "acme", "--scopes", "runs:reed"},
		{"create", "--tenant", "acme", "--scopes", "admin", "--expires", "soon"},
		{"create", "--tenant", "acme", "--scopes", "admin", "--expires", "-1h"},
		{"revoke"},
		{"nope"},
		{},
	} {
		if out, _, err := run(bad...); err == nil || out != "" {
			t.Errorf("apikeys %q: err %v, stdout %q", bad, err, out)
		}
	}
	// Help goes to standard output, as with every cobra command; the
	// Go-style single-dash spelling the command had before cobra still
	// works.
	for _, help := range [][]string{{"-h"}, {"--help"}, {"create", "-h"}, {"list", "--help"}, {"revoke", "-h"}, {"create", "-help"}} {
		out, msg, err := run(help...)
		if err != nil || !strings.Contains(out, "Usage:") || !strings.Contains(out, "apikeys") {
			t.Errorf("apikeys %q: err %v, stdout %q, stderr %q", help, err, out, msg)
		}
	}
	if out, msg, err := run("create", "-tenant", "acme", "-scopes=runs:read"); err != nil || !auth.LooksLikeAPIKey(strings.TrimSpace(out)) {
		t.Errorf("single-dash flags: err %v, stdout %q, stderr %q", err, out, msg)
	}
}
