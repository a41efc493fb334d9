package pricing

import (
	"math"
	"os"
	"path/filepath"
	"testing"
)

func near(a, b float64) bool { return math.Abs(a-b) < 1e-12 }

func TestCostArithmetic(t *testing.T) {
	p := Price{Input: 2.5, CachedInput: 1.25, Output: 10}
	// 1,000 prompt tokens at 2.50/M plus 500 completion tokens at 10/M.
	if got := p.Cost(Usage{Input: 1000, Output: 500}); !near(got, 0.0025+0.005) {
		t.Fatalf("cost = %v", got)
	}
	// 400 of the prompt tokens cached: 600*2.5 + 400*1.25 per million.
	if got := p.Cost(Usage{Input: 1000, CachedInput: 400, Output: 500}); !near(got, (600*2.5+400*1.25+500*10)/1e6) {
		t.Fatalf("cached cost = %v", got)
	}
	// Reasoning without its own price costs as output.
	if got := p.Cost(Usage{Output: 500, Reasoning: 200}); !near(got, 500*10/1e6) {
		t.Fatalf("reasoning cost = %v", got)
	}
	r := Price{Input: 1, Output: 4, Reasoning: 8}
	if got := r.Cost(Usage{Output: 500, Reasoning: 200}); !near(got, (300*4+200*8)/1e6) {
		t.Fatalf("priced reasoning cost = %v", got)
	}
	// Counts past the totals are capped; negative ones are 0.
	if got := r.Cost(Usage{Input: -5, Output: 10, Reasoning: 50}); !near(got, 10*8/1e6) {
		t.Fatalf("capped cost = %v", got)
	}
	if got := (Price{}).Cost(Usage{Input: 1e6, Output: 1e6}); got != 0 {
		t.Fatalf("free model cost = %v", got)
	}
}

func TestLookup(t *testing.T) {
	tab := Defaults
	for model, want := range map[string]string{
		"gpt-4o":                     "gpt-4o",
		"GPT-4o-2024-08-06":          "gpt-4o",
		"gpt-4o-mini":                "gpt-4o-mini",
		"gpt-4o-mini-2024-07-18":     "gpt-4o-mini",
		"openai/gpt-4.1":             "gpt-4.1",
		"gpt-4.1-mini-2025-04-14":    "gpt-4.1-mini",
		"claude-3-5-sonnet-20241022": "claude-3-5-sonnet",
		"o3-mini":                    "o3-mini",
	} {
		got, ok := tab.Lookup(model)
		if !ok || got != tab[want] {
			t.Errorf("Lookup(%q) = %+v, %v; want %s's price", model, got, ok, want)
		}
	}
	for _, model := range []string{"", "gpt-4o1", "llama-3-70b", "my-model"} {
		if _, ok := tab.Lookup(model); ok {
			t.Errorf("Lookup(%q) found a price", model)
		}
	}
	if _, ok := tab.Cost("unknown-model", Usage{Input: 10}); ok {
		t.Error("an unpriced model's cost is known")
	}
	usd, ok := tab.Cost("gpt-4o-mini", Usage{Input: 1_000_000, Output: 1_000_000})
	if !ok || !near(usd, 0.75) {
		t.Errorf("gpt-4o-mini cost = %v, %v", usd, ok)
	}
}

func TestLoad(t *testing.T) {
	tab, err := Load("")
	if err != nil || len(tab) != len(Defaults) {
		t.Fatalf("Load(\"\") = %d prices, %v", len(tab), err)
	}
	path := filepath.Join(t.TempDir(), "prices.json")
	os.WriteFile(path, []byte(`{"gpt-4o": {"input": 1, "output": 2}, "My-Model": {"input": 0.5, "output": 1.5, "cached_input": 0.1}}`), 0o600)
	tab, err = Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if tab["gpt-4o"] != (Price{Input: 1, Output: 2}) {
		t.Errorf("override: %+v", tab["gpt-4o"])
	}
	if p, ok := tab.Lookup("my-model"); !ok || p.CachedInput != 0.1 {
		t.Errorf("addition: %+v %v", p, ok)
	}
	if tab["gpt-4o-mini"] != Defaults["gpt-4o-mini"] {
		t.Error("defaults lost")
	}
	if Defaults["gpt-4o"].Input != 2.5 {
		t.Error("Load changed the defaults")
	}
	os.WriteFile(path, []byte(`{"x": {"input": -1}}`), 0o600)
	if _, err := Load(path); err == nil {
		t.Error("a negative price loaded")
	}
	os.WriteFile(path, []byte(`[`), 0o600)
	if _, err := Load(path); err == nil {
		t.Error("bad JSON loaded")
	}
	if _, err := Load(filepath.Join(t.TempDir(), "missing.json")); err == nil {
		t.Error("a missing file loaded")
	}
}

// Cache writes (Bedrock) have their own price, by default the input's; the
// cached and written parts together are capped by the prompt's count.
func TestCostCacheWrites(t *testing.T) {
	p := Price{Input: 3, CachedInput: 0.3, CacheWrite: 3.75, Output: 15}
	u := Usage{Input: 1000, CachedInput: 600, CacheWrite: 300, Output: 100}
	if got := p.Cost(u); !near(got, (100*3+600*0.3+300*3.75+100*15)/1e6) {
		t.Fatalf("cost = %v", got)
	}
	if got := (Price{Input: 3, Output: 15}).Cost(u); !near(got, (1000*3+100*15)/1e6) {
		t.Fatalf("cost without cache prices = %v", got)
	}
	// 900 cached leaves 100 of the prompt to be written.
	if got := p.Cost(Usage{Input: 1000, CachedInput: 900, CacheWrite: 300}); !near(got, (900*0.3+100*3.75)/1e6) {
		t.Fatalf("capped cost = %v", got)
	}
}
