package config

import (
	"os"
	"strings"
	"testing"
	"time"
)

func TestDefaults(t *testing.T) {
	c, err := load(func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatal(err)
	}
	if c.HTTPAddr != "" || c.AuthMode != "" || c.DatabaseURL != "" || c.SQLitePath() != ".data/executor.db" || c.TaskQueue != "op-stack-executor" ||
		c.DevServerUIPort != 8233 || c.MaxBodyBytes != 1<<20 || c.ShutdownTimeout != 30*time.Second {
		t.Errorf("defaults = %+v", c)
	}
}

func TestInvalidValuesAreRejected(t *testing.T) {
	for name, value := range map[string]string{"MAX_BODY_BYTES": "-1", "SHUTDOWN_TIMEOUT": "soon", "LOG_FORMAT": "xml", "TEMPORAL_UI_PORT": "x",
		"MAX_DELEGATIONS_PER_TURN": "0", "MAX_DELEGATIONS_PER_RUN": "-1",
		"RUN_RETENTION": "-1h", "RUN_RETENTION_TENANTS": "acme", "RUN_RETENTION_INTERVAL": "0"} {
		_, err := load(func(k string) (string, bool) {
			if k == name {
				return value, true
			}
			return "", false
		})
		if err == nil || !strings.Contains(err.Error(), name) {
			t.Errorf("%s=%s: want an error naming the variable, got %v", name, value, err)
		}
	}
}

// TestDocsDocumentEveryVariable keeps the configuration table of
// docs/configuration.md in step with the variables the service reads.
func TestDocsDocumentEveryVariable(t *testing.T) {
	readme, err := os.ReadFile("../docs/configuration.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range Vars() {
		row := "| `" + v.Name + "` |"
		if !strings.Contains(string(readme), row) {
			t.Errorf("docs/configuration.md has no configuration row for %s (want a line starting %q)", v.Name, row)
		}
	}
}

func TestCommandDefaults(t *testing.T) {
	for _, tc := range []struct {
		dev            bool
		addr, authMode string
	}{{true, DevHTTPAddr, AuthOff}, {false, ServeHTTPAddr, AuthRequired}} {
		c, err := load(func(string) (string, bool) { return "", false })
		if err != nil {
			t.Fatal(err)
		}
		c.ResolveCommandDefaults(tc.dev)
		if c.HTTPAddr != tc.addr || c.AuthMode != tc.authMode {
			t.Errorf("dev=%v: HTTP_ADDR %q, AUTH_MODE %q; want %q, %q", tc.dev, c.HTTPAddr, c.AuthMode, tc.addr, tc.authMode)
		}
		// dev answers with the offline model when no provider is
		// configured; serve refuses such runs.
		if c.OfflineFallback() != tc.dev {
			t.Errorf("dev=%v: LLM_OFFLINE_FALLBACK %q", tc.dev, c.LLMOfflineFallback)
		}
	}
	// What the environment sets wins.
	c, err := load(func(k string) (string, bool) {
		return map[string]string{"AUTH_MODE": "Required", "HTTP_ADDR": ":9999", "LLM_OFFLINE_FALLBACK": "False"}[k], true
	})
	if err != nil {
		t.Fatal(err)
	}
	c.ResolveCommandDefaults(true)
	if c.HTTPAddr != ":9999" || c.AuthMode != AuthRequired || c.OfflineFallback() {
		t.Errorf("set: HTTP_ADDR %q, AUTH_MODE %q, LLM_OFFLINE_FALLBACK %q", c.HTTPAddr, c.AuthMode, c.LLMOfflineFallback)
	}
	if _, err := load(func(k string) (string, bool) { return map[string]string{"LLM_OFFLINE_FALLBACK": "maybe"}[k], true }); err == nil {
		t.Error("LLM_OFFLINE_FALLBACK=maybe accepted")
	}
	if _, err := load(func(k string) (string, bool) { return map[string]string{"AUTH_MODE": "maybe"}[k], true }); err == nil {
		t.Error("AUTH_MODE=maybe accepted")
	}
	if _, err := load(func(k string) (string, bool) { return map[string]string{"OIDC_ISSUER": "https://idp"}[k], true }); err == nil {
		t.Error("OIDC_ISSUER without OIDC_AUDIENCE and OIDC_JWKS_URL accepted")
	}
}

func TestMetricsAddr(t *testing.T) {
	c, err := load(func(string) (string, bool) { return "", false })
	if err != nil || c.MetricsAddr != "" {
		t.Fatalf("default METRICS_ADDR = %q, %v; want empty (the API's address)", c.MetricsAddr, err)
	}
	c, err = load(func(k string) (string, bool) {
		if k == "METRICS_ADDR" {
			return " :9100 ", true
		}
		return "", false
	})
	if err != nil || c.MetricsAddr != ":9100" {
		t.Fatalf("METRICS_ADDR = %q, %v", c.MetricsAddr, err)
	}
}

func TestDelegationCaps(t *testing.T) {
	c, err := load(func(string) (string, bool) { return "", false })
	if err != nil || c.MaxDelegationsPerTurn != 8 || c.MaxDelegationsPerRun != 64 {
		t.Fatalf("defaults: per turn %d, per run %d, %v; want 8 and 64", c.MaxDelegationsPerTurn, c.MaxDelegationsPerRun, err)
	}
	env := map[string]string{"MAX_DELEGATIONS_PER_TURN": "2", "MAX_DELEGATIONS_PER_RUN": "5"}
	c, err = load(func(k string) (string, bool) { v, ok := env[k]; return v, ok })
	if err != nil || c.MaxDelegationsPerTurn != 2 || c.MaxDelegationsPerRun != 5 {
		t.Fatalf("set: per turn %d, per run %d, %v", c.MaxDelegationsPerTurn, c.MaxDelegationsPerRun, err)
	}
	// 0 does not mean unlimited: it is refused, as are negative and
	// non-numeric values.
	for _, bad := range []string{"0", "-3", "many", "1.5"} {
		for _, name := range []string{"MAX_DELEGATIONS_PER_TURN", "MAX_DELEGATIONS_PER_RUN"} {
			_, err := load(func(k string) (string, bool) {
				if k == name {
					return bad, true
				}
				return "", false
			})
			if err == nil || !strings.Contains(err.Error(), name) || !strings.Contains(err.Error(), "positive integer") {
				t.Errorf("%s=%s: want an error naming the variable and asking for a positive integer, got %v", name, bad, err)
			}
		}
	}
}

// TestProviderKeyFiles: a key and its file are never both taken, the
// files' poll and the check at start have their documented defaults, and
// a wrong check mode is refused.
func TestProviderKeyFiles(t *testing.T) {
	env := func(kv map[string]string) func(string) (string, bool) {
		return func(k string) (string, bool) { v, ok := kv[k]; return v, ok }
	}
	c, err := load(env(map[string]string{"OPENAI_API_KEY_FILE": "/run/secrets/openai"}))
	if err != nil || c.OpenAIAPIKeyFile != "/run/secrets/openai" || c.LLMKeyFilePoll != 10*time.Second || c.LLMCheckKeysAtStart != "off" {
		t.Fatalf("load = %+v, %v", c, err)
	}
	for _, name := range []string{"OPENAI_API_KEY", "OPENROUTER_API_KEY", "COMPATIBLE_API_KEY"} {
		_, err := load(env(map[string]string{name: "sk-x", name + "_FILE": "/run/secrets/k"}))
		if err == nil || !strings.Contains(err.Error(), name+"_FILE") || strings.Contains(err.Error(), "sk-x") {
			t.Errorf("%s and its file: %v", name, err)
		}
	}
	if _, err := load(env(map[string]string{"LLM_CHECK_KEYS_AT_START": "yes"})); err == nil || !strings.Contains(err.Error(), "LLM_CHECK_KEYS_AT_START") {
		t.Errorf("LLM_CHECK_KEYS_AT_START=yes: %v", err)
	}
	if c, err := load(env(map[string]string{"LLM_KEY_FILE_POLL": "0", "LLM_CHECK_KEYS_AT_START": "fail"})); err != nil || c.LLMKeyFilePoll != 0 || c.LLMCheckKeysAtStart != "fail" {
		t.Errorf("poll 0, check fail: %+v, %v", c, err)
	}
}

// TestRunRetention: retention is off by default; RUN_RETENTION and
// RUN_RETENTION_TENANTS set the default and per-tenant periods.
func TestRunRetention(t *testing.T) {
	c, err := load(func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatal(err)
	}
	if c.RunRetention != 0 || len(c.RunRetentionTenants) != 0 || c.RunRetentionInterval != 5*time.Minute {
		t.Errorf("defaults: %v %v %v", c.RunRetention, c.RunRetentionTenants, c.RunRetentionInterval)
	}
	env := map[string]string{"RUN_RETENTION": "720h", "RUN_RETENTION_TENANTS": " acme=24h, globex=0 "}
	c, err = load(func(k string) (string, bool) { v, ok := env[k]; return v, ok })
	if err != nil {
		t.Fatal(err)
	}
	if c.RunRetention != 720*time.Hour || len(c.RunRetentionTenants) != 2 || c.RunRetentionTenants["acme"] != 24*time.Hour || c.RunRetentionTenants["globex"] != 0 {
		t.Errorf("set: %v %v", c.RunRetention, c.RunRetentionTenants)
	}
}
