// Package pricing turns an LLM call's token usage into its cost in US
// dollars, from a price table per model.
package pricing

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"
)

// Price is a model's list price in US dollars per million tokens.
// CachedInput prices prompt tokens served from the provider's cache (0:
// as Input); CacheWrite prompt tokens written to the cache (Bedrock's
// cache writes; 0: as Input); Reasoning prices reasoning tokens (0: as
// Output).
type Price struct {
	Input       float64 `json:"input"`
	Output      float64 `json:"output"`
	CachedInput float64 `json:"cached_input,omitempty"`
	CacheWrite  float64 `json:"cache_write,omitempty"`
	Reasoning   float64 `json:"reasoning,omitempty"`
}

// Usage is one call's token counts. CachedInput is the part of Input served
// from the cache, CacheWrite the part written to it; Reasoning the part of
// Output spent reasoning (the totals count them all).
type Usage struct {
	Input, Output, CachedInput, CacheWrite, Reasoning int
}

// Table maps model names to prices.
type Table map[string]Price

// Defaults are the list prices of common models, as published by OpenAI,
// Anthropic and Google as of 2025-06. Providers change their prices: check
// them, and override or add models with LLM_PRICES_FILE.
var Defaults = Table{
	"gpt-4o":            {Input: 2.50, CachedInput: 1.25, Output: 10.00},
	"gpt-4o-mini":       {Input: 0.15, CachedInput: 0.075, Output: 0.60},
	"gpt-4.1":           {Input: 2.00, CachedInput: 0.50, Output: 8.00},
	"gpt-4.1-mini":      {Input: 0.40, CachedInput: 0.10, Output: 1.60},
	"gpt-4.1-nano":      {Input: 0.10, CachedInput: 0.025, Output: 0.40},
	"o1":                {Input: 15.00, CachedInput: 7.50, Output: 60.00},
	"o3":                {Input: 2.00, CachedInput: 0.50, Output: 8.00},
	"o3-mini":           {Input: 1.10, CachedInput: 0.55, Output: 4.40},
	"o4-mini":           {Input: 1.10, CachedInput: 0.275, Output: 4.40},
	"claude-3-5-sonnet": {Input: 3.00, CachedInput: 0.30, Output: 15.00},
	"claude-3-7-sonnet": {Input: 3.00, CachedInput: 0.30, Output: 15.00},
	"claude-3-5-haiku":  {Input: 0.80, CachedInput: 0.08, Output: 4.00},
	"gemini-2.0-flash":  {Input: 0.10, CachedInput: 0.025, Output: 0.40},
	"gemini-1.5-pro":    {Input: 1.25, CachedInput: 0.3125, Output: 5.00},
	// The built-in offline model costs nothing.
	"offline": {},
}

// Load returns the defaults with the prices of a JSON file (an object of
// model names to prices) over them; an empty path returns the defaults.
func Load(path string) (Table, error) {
	t := Table{}
	for m, p := range Defaults {
		t[m] = p
	}
	if path == "" {
		return t, nil
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("LLM_PRICES_FILE: %w", err)
	}
	var extra map[string]Price
	if err := json.Unmarshal(b, &extra); err != nil {
		return nil, fmt.Errorf("LLM_PRICES_FILE %s: %w", path, err)
	}
	for m, p := range extra {
		if p.Input < 0 || p.Output < 0 || p.CachedInput < 0 || p.CacheWrite < 0 || p.Reasoning < 0 {
			return nil, fmt.Errorf("LLM_PRICES_FILE %s: model %q has a negative price", path, m)
		}
		t[strings.ToLower(strings.TrimSpace(m))] = p
	}
	return t, nil
}

// Lookup finds a model's price: by its name, else by the longest name of
// the table the model's name starts with (a dated version such as
// "gpt-4o-2024-08-06" or "claude-3-5-sonnet-20241022"), also after a
// provider prefix ("openai/gpt-4o").
func (t Table) Lookup(model string) (Price, bool) {
	m := strings.ToLower(strings.TrimSpace(model))
	if m == "" {
		return Price{}, false
	}
	if p, ok := t.lookup(m); ok {
		return p, true
	}
	if i := strings.LastIndexByte(m, '/'); i >= 0 {
		return t.lookup(m[i+1:])
	}
	return Price{}, false
}

func (t Table) lookup(m string) (Price, bool) {
	if p, ok := t[m]; ok {
		return p, true
	}
	best, found := "", false
	for name := range t {
		if len(name) > len(best) && strings.HasPrefix(m, name) && boundary(m, len(name)) {
			best, found = name, true
		}
	}
	if !found {
		return Price{}, false
	}
	return t[best], true
}

// boundary says the model's name goes on after a table name with a
// separator: "gpt-4o" prices "gpt-4o-2024-08-06" but not "gpt-4o1".
func boundary(m string, n int) bool {
	return n == len(m) || strings.ContainsRune("-:@.", rune(m[n]))
}

// Cost is what a call with this usage costs at this price, in US dollars:
//
//	( (Input − CachedInput − CacheWrite) × p.Input + CachedInput × p.CachedInput
//	+ CacheWrite × p.CacheWrite
//	+ (Output − Reasoning) × p.Output + Reasoning × p.Reasoning ) / 1e6
//
// A part's price of 0 is its base price (Input or Output); counts below 0
// are 0, and the parts are capped by their totals (cache reads first).
func (p Price) Cost(u Usage) float64 {
	input, output := max(u.Input, 0), max(u.Output, 0)
	cached := min(max(u.CachedInput, 0), input)
	written := min(max(u.CacheWrite, 0), input-cached)
	reasoning := min(max(u.Reasoning, 0), output)
	or := func(v, base float64) float64 {
		if v == 0 {
			return base
		}
		return v
	}
	micro := float64(input-cached-written)*p.Input + float64(cached)*or(p.CachedInput, p.Input) +
		float64(written)*or(p.CacheWrite, p.Input) +
		float64(output-reasoning)*p.Output + float64(reasoning)*or(p.Reasoning, p.Output)
	return micro / 1e6
}

// Cost is what a call of this model with this usage costs; ok is false
// when the table has no price for the model (the cost is unknown, not 0).
func (t Table) Cost(model string, u Usage) (usd float64, ok bool) {
	p, ok := t.Lookup(model)
	if !ok {
		return 0, false
	}
	return p.Cost(u), true
}
