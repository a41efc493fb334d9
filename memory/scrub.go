package memory

import (
	"regexp"
	"strings"
)

// Redacted replaces a secret the service will not write to memory.
const Redacted = "[REDACTED]"

// secretPatterns are credentials recognisable by their shape: provider API
// keys, cloud access keys, bearer tokens, private keys, this service's own
// API keys and stream tokens. Memory outlives runs and is shown to every
// later run of the tenant, so a key pasted into a task must not be kept.
var secretPatterns = []*regexp.Regexp{
	regexp.MustCompile(`-----BEGIN [A-Z ]*PRIVATE KEY-----[\s\S]*?-----END [A-Z ]*PRIVATE KEY-----`),
	regexp.MustCompile(`\b(?:sk|rk|pk)-[A-Za-z0-9_-]{16,}`),
	regexp.MustCompile(`\bsk-ant-[A-Za-z0-9_-]{16,}`),
	regexp.MustCompile(`\b(?:AKIA|ASIA)[0-9A-Z]{16}\b`),
	regexp.MustCompile(`\bgh[pousr]_[A-Za-z0-9]{20,}`),
	regexp.MustCompile(`\bxox[abprs]-[A-Za-z0-9-]{10,}`),
	regexp.MustCompile(`\bAIza[0-9A-Za-z_-]{30,}`),
	regexp.MustCompile(`\b(?:osk|ost)_[A-Za-z0-9_-]{16,}`),
	regexp.MustCompile(`(?i)\bbearer\s+[A-Za-z0-9._~+/=-]{12,}`),
	regexp.MustCompile(`(?i)((?:api[_-]?key|secret|password|passwd|token)["']?\s*[:=]\s*["']?)[^\s"',}]{6,}`),
}

// Scrubber redacts secrets from text before it is stored.
type Scrubber struct {
	// Known are exact secret values the process holds (its providers'
	// keys): any occurrence is redacted whatever its shape.
	Known []string
}

// Scrub returns s with every secret replaced by Redacted, and whether it
// replaced any.
func (sc Scrubber) Scrub(s string) (string, bool) {
	out := s
	for _, k := range sc.Known {
		if len(k) >= 8 {
			out = strings.ReplaceAll(out, k, Redacted)
		}
	}
	for _, p := range secretPatterns {
		out = p.ReplaceAllStringFunc(out, func(m string) string {
			// Keep a "password: " label, redact what follows it.
			if sub := p.FindStringSubmatch(m); len(sub) > 1 && sub[1] != "" {
				return sub[1] + Redacted
			}
			return Redacted
		})
	}
	return out, out != s
}

// scrubJSON redacts secrets in every string of a JSON value (keys and
// values), so the result stays valid JSON.
func (sc Scrubber) scrubJSON(v any) any {
	switch x := v.(type) {
	case string:
		s, _ := sc.Scrub(x)
		return s
	case []any:
		for i := range x {
			x[i] = sc.scrubJSON(x[i])
		}
		return x
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, val := range x {
			nk, _ := sc.Scrub(k)
			out[nk] = sc.scrubJSON(val)
		}
		return out
	}
	return v
}
