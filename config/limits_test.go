package config

import (
	"slices"
	"strings"
	"testing"
	"time"
)

func loadWith(env map[string]string) (Config, error) {
	return load(func(k string) (string, bool) {
		v, found := env[k]
		return v, found
	})
}

func TestAccessLimitDefaults(t *testing.T) {
	c, err := loadWith(nil)
	if err != nil {
		t.Fatal(err)
	}
	if c.RateLimitRPS != 20 || c.RateLimitBurst != 40 || c.MaxConcurrentRunsPerTenant != 50 ||
		c.CORSAllowedOrigins != nil || c.IdempotencyKeyTTL != 24*time.Hour {
		t.Errorf("rate %v burst %d runs %d origins %v ttl %v", c.RateLimitRPS, c.RateLimitBurst, c.MaxConcurrentRunsPerTenant, c.CORSAllowedOrigins, c.IdempotencyKeyTTL)
	}
}

func TestAccessLimitValues(t *testing.T) {
	c, err := loadWith(map[string]string{
		"RATE_LIMIT_RPS":                 "0",
		"MAX_CONCURRENT_RUNS_PER_TENANT": "0",
		"CORS_ALLOWED_ORIGINS":           " https://app.example.com, http://localhost:3000 ,",
		"IDEMPOTENCY_KEY_TTL":            "1h",
	})
	if err != nil {
		t.Fatal(err)
	}
	if c.RateLimitRPS != 0 || c.MaxConcurrentRunsPerTenant != 0 || c.IdempotencyKeyTTL != time.Hour ||
		!slices.Equal(c.CORSAllowedOrigins, []string{"https://app.example.com", "http://localhost:3000"}) {
		t.Errorf("rate %v runs %d origins %q ttl %v", c.RateLimitRPS, c.MaxConcurrentRunsPerTenant, c.CORSAllowedOrigins, c.IdempotencyKeyTTL)
	}
	if c, err := loadWith(map[string]string{"RATE_LIMIT_RPS": "2.5"}); err != nil || c.RateLimitRPS != 2.5 {
		t.Errorf("RATE_LIMIT_RPS=2.5: %v, %v", c.RateLimitRPS, err)
	}
}

func TestAccessLimitInvalidValues(t *testing.T) {
	for _, tc := range [][2]string{
		{"RATE_LIMIT_RPS", "-1"}, {"RATE_LIMIT_RPS", "fast"}, {"RATE_LIMIT_RPS", "NaN"}, {"RATE_LIMIT_RPS", "+Inf"},
		{"RATE_LIMIT_BURST", "0"}, {"MAX_CONCURRENT_RUNS_PER_TENANT", "-1"}, {"IDEMPOTENCY_KEY_TTL", "forever"},
		{"CORS_ALLOWED_ORIGINS", "*"}, {"CORS_ALLOWED_ORIGINS", "app.example.com"}, {"CORS_ALLOWED_ORIGINS", "https://app.example.com/"},
		{"CORS_ALLOWED_ORIGINS", "https://*.example.com"}, {"CORS_ALLOWED_ORIGINS", "ftp://app.example.com"},
		{"CORS_ALLOWED_ORIGINS", "https://App.Example.com"}, {"CORS_ALLOWED_ORIGINS", "https://u@app.example.com"},
		{"CORS_ALLOWED_ORIGINS", "https://app.example.com?x"},
	} {
		_, err := loadWith(map[string]string{tc[0]: tc[1]})
		if err == nil || !strings.Contains(err.Error(), tc[0]) {
			t.Errorf("%s=%s: want an error naming the variable, got %v", tc[0], tc[1], err)
		}
	}
}
