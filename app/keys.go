package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/op-stack/executor/config"
	"github.com/op-stack/executor/llm"
)

// providerKey is a provider's key from its variable or its file (the
// configuration refuses both); an unreadable or empty file stops the
// start, naming the variable and the file, never a key.
func providerKey(provider, variable, value, file string) (*llm.Key, error) {
	if file == "" {
		return llm.NewKey(provider, value), nil
	}
	k, err := llm.NewKeyFile(provider, file)
	if err != nil {
		return nil, fmt.Errorf("%s_FILE: %w", variable, err)
	}
	return k, nil
}

// keyCheckTimeout bounds each provider's answer to the key check at
// start: a slow provider delays the start by at most this much.
const keyCheckTimeout = 10 * time.Second

// CheckKeysAtStart asks each configured OpenAI-compatible provider whether
// it accepts its key, as LLM_CHECK_KEYS_AT_START says: "off" asks nothing;
// "warn" logs each refused key; "fail" also returns an error naming the
// providers that refused theirs, which stops the process before it serves.
// A provider that could not tell (no /models endpoint, 5xx, no answer) is
// logged and never fails the start. Keys are never logged.
func CheckKeysAtStart(ctx context.Context, cfg config.Config, router *llm.Router, log *slog.Logger) error {
	mode := cfg.LLMCheckKeysAtStart
	if mode == "" || mode == "off" || router == nil {
		return nil
	}
	var refused []string
	for _, c := range router.CheckKeys(ctx, keyCheckTimeout) {
		var le *llm.Error
		errors.As(c.Err, &le)
		switch {
		case c.Err == nil:
			log.Info("provider key accepted", "provider", c.Provider)
		case c.Rejected():
			refused = append(refused, fmt.Sprintf("%s (HTTP %d)", c.Provider, le.StatusCode))
			log.Error("provider refused its key: runs using it will fail with PROVIDER_KEY_REJECTED", "provider", c.Provider, "status", le.StatusCode, "message", le.Message)
		case le != nil:
			log.Warn("provider key not checked: the provider's answer says nothing about the key", "provider", c.Provider, "status", le.StatusCode, "message", le.Message)
		default:
			log.Warn("provider key not checked", "provider", c.Provider, "error", c.Err)
		}
	}
	if len(refused) > 0 && mode == "fail" {
		return fmt.Errorf("LLM_CHECK_KEYS_AT_START=fail: provider refused its key: %s", strings.Join(refused, ", "))
	}
	return nil
}

// WatchKeys rereads the router's key files every LLM_KEY_FILE_POLL and on
// each signal from reload (the process's SIGHUP), until ctx ends; see
// llm.WatchKeys.
func WatchKeys(ctx context.Context, cfg config.Config, router *llm.Router, reload <-chan os.Signal, log *slog.Logger) {
	llm.WatchKeys(ctx, router.Keys(), cfg.LLMKeyFilePoll, reload, log)
}
