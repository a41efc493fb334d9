package auth

import (
	"testing"
	"time"
)

func TestParseTTL(t *testing.T) {
	for in, want := range map[string]time.Duration{"90d": 90 * 24 * time.Hour, "1d": 24 * time.Hour, "720h": 720 * time.Hour, "90m": 90 * time.Minute} {
		if got, err := ParseTTL(in); err != nil || got != want {
			t.Errorf("ParseTTL(%q) = %v, %v", in, got, err)
		}
	}
	for _, in := range []string{"", "d", "0d", "-1d", "0", "1y", "x"} {
		if _, err := ParseTTL(in); err == nil {
			t.Errorf("ParseTTL(%q) succeeded", in)
		}
	}
}
