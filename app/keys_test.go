package app

import (
	"bytes"
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/op-stack/executor/config"
	"github.com/op-stack/executor/llm"
)

// modelsServer answers GET /v1/models with 200 for key good, else 401.
func modelsServer(t *testing.T, good string) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if r.Header.Get("Authorization") != "Bearer "+good {
			w.WriteHeader(http.StatusUnauthorized)
			w.Write([]byte(`{"error":{"message":"Incorrect API key provided","type":"invalid_request_error"}}`))
			return
		}
		w.Write([]byte(`{"object":"list","data":[]}`))
	}))
	t.Cleanup(srv.Close)
	return srv
}

// TestCheckKeysAtStart: with LLM_CHECK_KEYS_AT_START=fail a refused key
// stops the start naming the provider, with warn it is logged and the
// start goes on, with off nothing is asked; after the file is rotated to
// an accepted key and reread, fail passes. Keys never reach the log.
func TestCheckKeysAtStart(t *testing.T) {
	const good, bad = "sk-accepted-key-aaaa1111", "sk-refused-key-bbbb2222"
	srv := modelsServer(t, good)
	path := filepath.Join(t.TempDir(), "openai.key")
	if err := os.WriteFile(path, []byte(bad+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := config.Config{OpenAIAPIKeyFile: path, OpenAIBaseURL: srv.URL + "/v1", LLMDefaultModel: "gpt-4o"}
	router, err := NewLLM(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if !router.HasProvider("openai") {
		t.Fatal("OPENAI_API_KEY_FILE did not configure the openai provider")
	}
	var logs bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logs, nil))

	cfg.LLMCheckKeysAtStart = "off"
	if err := CheckKeysAtStart(context.Background(), cfg, router, log); err != nil || logs.Len() != 0 {
		t.Errorf("off: %v, logged %q", err, logs.String())
	}
	cfg.LLMCheckKeysAtStart = "warn"
	if err := CheckKeysAtStart(context.Background(), cfg, router, log); err != nil || !strings.Contains(logs.String(), "provider refused its key") {
		t.Errorf("warn: %v, logged %q", err, logs.String())
	}
	cfg.LLMCheckKeysAtStart = "fail"
	err = CheckKeysAtStart(context.Background(), cfg, router, log)
	if err == nil || !strings.Contains(err.Error(), "openai (HTTP 401)") {
		t.Errorf("fail with a refused key: %v", err)
	}

	if err := os.WriteFile(path, []byte(good), 0o600); err != nil {
		t.Fatal(err)
	}
	if n := llm.ReloadKeys(router.Keys(), log); n != 1 {
		t.Fatalf("ReloadKeys changed %d keys", n)
	}
	if err := CheckKeysAtStart(context.Background(), cfg, router, log); err != nil || !strings.Contains(logs.String(), "provider key accepted") {
		t.Errorf("fail with the rotated key: %v, logged %q", err, logs.String())
	}
	for _, k := range []string{good, bad} {
		if strings.Contains(logs.String()+err.Error(), k) {
			t.Errorf("a key reached the log or the error:\n%s", logs.String())
		}
	}
}

// TestNewLLMKeyFileErrors: an unreadable key file stops the start with
// an error naming the variable.
func TestNewLLMKeyFileErrors(t *testing.T) {
	_, err := NewLLM(config.Config{OpenRouterAPIKeyFile: filepath.Join(t.TempDir(), "missing")})
	if err == nil || !strings.Contains(err.Error(), "OPENROUTER_API_KEY_FILE") {
		t.Errorf("missing key file: %v", err)
	}
}
