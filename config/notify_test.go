package config

import (
	"strings"
	"testing"
	"time"
)

func TestNotifySettings(t *testing.T) {
	env := func(kv map[string]string) func(string) (string, bool) {
		return func(k string) (string, bool) { v, ok := kv[k]; return v, ok }
	}
	c, err := load(env(nil))
	if err != nil {
		t.Fatal(err)
	}
	if c.SSENotify != NotifyAuto || c.SSESafetyPollInterval != time.Second || c.SSEPollInterval != 50*time.Millisecond {
		t.Fatalf("defaults: SSE_NOTIFY %q, SSE_SAFETY_POLL_INTERVAL %v, SSE_POLL_INTERVAL %v", c.SSENotify, c.SSESafetyPollInterval, c.SSEPollInterval)
	}
	c, err = load(env(map[string]string{"SSE_NOTIFY": " Off ", "SSE_SAFETY_POLL_INTERVAL": "250ms"}))
	if err != nil || c.SSENotify != NotifyOff || c.SSESafetyPollInterval != 250*time.Millisecond {
		t.Fatalf("SSE_NOTIFY=off: %q %v, %v", c.SSENotify, c.SSESafetyPollInterval, err)
	}
	for name, value := range map[string]string{"SSE_NOTIFY": "postgres", "SSE_SAFETY_POLL_INTERVAL": "0s"} {
		if _, err := load(env(map[string]string{name: value})); err == nil || !strings.Contains(err.Error(), name) {
			t.Errorf("%s=%s: want an error naming the variable, got %v", name, value, err)
		}
	}
}
