package llm

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/op-stack/executor/llm/llmfake"
	"github.com/op-stack/executor/models"
)

func TestParseModelTable(t *testing.T) {
	got, err := ParseModelTable(" gemini-2.0-flash = openrouter:google/gemini-2.0-flash-001 ,gpt-4o=openai,\n local=compatible:llama3:8b, ")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]ModelRoute{
		"gemini-2.0-flash": {Provider: "openrouter", UpstreamModel: "google/gemini-2.0-flash-001"},
		"gpt-4o":           {Provider: "openai", UpstreamModel: "gpt-4o"},
		"local":            {Provider: "compatible", UpstreamModel: "llama3:8b"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("%+v", got)
	}
	if got, err := ParseModelTable("  "); err != nil || len(got) != 0 {
		t.Fatalf("empty table: %v %v", got, err)
	}
	for _, bad := range []string{
		"gpt-4o",                  // no provider
		"=openai",                 // no model
		"gpt-4o=",                 // empty provider
		"gpt-4o=:x",               // empty provider with upstream
		"gpt 4o=openai",           // space in model
		"a=openai,a=openrouter",   // duplicate
		"ok=openai,broken-entry",  // one bad entry among good ones
		"m=open ai:x",             // space in provider
		"m=openrouter:some model", // space in upstream
	} {
		_, err := ParseModelTable(bad)
		if err == nil {
			t.Errorf("%q: no error", bad)
			continue
		}
		entry := bad
		if i := strings.LastIndex(bad, ","); i >= 0 {
			entry = bad[i+1:]
		}
		if !strings.Contains(err.Error(), entry) {
			t.Errorf("%q: error does not name the entry: %v", bad, err)
		}
	}
}

func TestDefaultProviderChoice(t *testing.T) {
	for _, tc := range []struct {
		providers []ProviderConfig
		want      string
	}{
		{nil, "offline"},
		{[]ProviderConfig{{Name: "compatible", BaseURL: "http://127.0.0.1:1/v1"}}, "compatible"},
		{[]ProviderConfig{{Name: "compatible", BaseURL: "http://127.0.0.1:1/v1"}, {Name: "openrouter", APIKey: "k"}}, "openrouter"},
		{[]ProviderConfig{{Name: "openrouter", APIKey: "k"}, {Name: "openai", APIKey: "k"}}, "openai"},
	} {
		r, err := NewRouter(RouterConfig{Providers: tc.providers})
		if err != nil {
			t.Fatal(err)
		}
		if r.DefaultProvider() != tc.want {
			t.Errorf("%v: default %q, want %q", tc.providers, r.DefaultProvider(), tc.want)
		}
	}
}

func TestNewRouterRejectsBadConfig(t *testing.T) {
	for name, cfg := range map[string]RouterConfig{
		"nameless":           {Providers: []ProviderConfig{{APIKey: "k"}}},
		"reserved":           {Providers: []ProviderConfig{{Name: "offline"}}},
		"twice":              {Providers: []ProviderConfig{{Name: "openai"}, {Name: "openai"}}},
		"compatible no URL":  {Providers: []ProviderConfig{{Name: "compatible"}}},
		"bad URL":            {Providers: []ProviderConfig{{Name: "compatible", BaseURL: "localhost:8000"}}},
		"missing default":    {DefaultProvider: "openai"},
		"missing default v2": {Providers: []ProviderConfig{{Name: "openrouter"}}, DefaultProvider: "openai"},
	} {
		if _, err := NewRouter(cfg); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

func TestResolve(t *testing.T) {
	models, err := ParseModelTable("gemini-2.0-flash=openrouter:google/gemini-2.0-flash-001,gpt-4o=openai,mini=offline")
	if err != nil {
		t.Fatal(err)
	}
	r, err := NewRouter(RouterConfig{
		Providers:    []ProviderConfig{{Name: "openrouter", APIKey: "k"}},
		Models:       models,
		DefaultModel: "gemini-2.0-flash",
	})
	if err != nil {
		t.Fatal(err)
	}
	for model, want := range map[string]Route{
		"":                 {Model: "gemini-2.0-flash", Provider: "openrouter", UpstreamModel: "google/gemini-2.0-flash-001"},
		"gemini-2.0-flash": {Model: "gemini-2.0-flash", Provider: "openrouter", UpstreamModel: "google/gemini-2.0-flash-001"},
		"meta/llama-3":     {Model: "meta/llama-3", Provider: "openrouter", UpstreamModel: "meta/llama-3"},
		"mini":             {Model: "mini", Provider: "offline", UpstreamModel: "mini", Offline: true},
		"offline":          {Model: "offline", Provider: "offline", UpstreamModel: "offline", Offline: true},
	} {
		got, err := r.Resolve(model)
		if err != nil || got != want {
			t.Errorf("Resolve(%q) = %+v, %v; want %+v", model, got, err, want)
		}
	}

	_, err = r.Resolve("gpt-4o")
	var re *RouteError
	if !errors.As(err, &re) || re.Provider != "openai" || re.Model != "gpt-4o" {
		t.Fatalf("%T %v", err, err)
	}
	if want := "model gpt-4o routes to provider openai, which is not configured: set OPENAI_API_KEY"; err.Error() != want {
		t.Fatalf("got %q\nwant %q", err.Error(), want)
	}
}

// TestNoOfflineFallback: without a configured provider and without the
// fallback (executor serve), a model goes nowhere and Check says
// MISSING_API_KEY naming the model; the offline model chosen explicitly
// still serves.
func TestNoOfflineFallback(t *testing.T) {
	r, err := NewRouter(RouterConfig{NoOfflineFallback: true, DefaultModel: "gemini-2.0-flash",
		Models: map[string]ModelRoute{"cheap": {Provider: OfflineProvider}}})
	if err != nil {
		t.Fatal(err)
	}
	if r.DefaultProvider() != "" {
		t.Fatalf("default provider %q, want none", r.DefaultProvider())
	}
	for _, model := range []string{"", "gpt-4o"} {
		err := r.Check(model, "", "")
		var me *models.Error
		if !errors.As(err, &me) || me.Code != models.CodeMissingAPIKey || me.Field != "model" {
			t.Fatalf("%q: %v", model, err)
		}
		want := model
		if want == "" {
			want = "gemini-2.0-flash"
		}
		if !strings.Contains(me.Message, "model "+want+" routes to no configured provider") || !strings.Contains(me.Message, "OPENAI_API_KEY") {
			t.Errorf("%q: message %q", model, me.Message)
		}
		if _, err := r.Stream(context.Background(), simpleRequest(model, "hi"), nil); err == nil {
			t.Errorf("%q: streamed without a provider", model)
		}
	}
	// Explicit choices of the offline model: by model id, table entry and
	// provider.
	for _, req := range []Request{{Model: "offline"}, {Model: "cheap"}, {Model: "gpt-4o", Provider: OfflineProvider}} {
		if err := r.CheckRequest(req); err != nil {
			t.Errorf("%+v: %v", req, err)
		}
		req.Messages = simpleRequest("", "hi").Messages
		resp, err := r.Stream(context.Background(), req, nil)
		if err != nil || !resp.Offline || resp.Model != "offline" {
			t.Errorf("%+v: %+v %v", req, resp, err)
		}
	}
	// LLM_DEFAULT_PROVIDER=offline chooses it for every model.
	r, err = NewRouter(RouterConfig{NoOfflineFallback: true, DefaultProvider: OfflineProvider})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Check("gpt-4o", "", ""); err != nil {
		t.Errorf("default provider offline: %v", err)
	}
	if !strings.Contains(r.Describe(), "default provider: offline") {
		t.Error(r.Describe())
	}
}

func TestResolveWithoutProviders(t *testing.T) {
	r, err := NewRouter(RouterConfig{})
	if err != nil {
		t.Fatal(err)
	}
	for _, model := range []string{"", "gpt-4o", "anything"} {
		route, err := r.Resolve(model)
		if err != nil || !route.Offline || route.Provider != "offline" {
			t.Fatalf("%q: %+v %v", model, route, err)
		}
	}
	if route, _ := r.Resolve(""); route.Model != "offline" {
		t.Fatalf("empty model: %+v", route)
	}

	r, _ = NewRouter(RouterConfig{Providers: []ProviderConfig{{Name: "openai", APIKey: "k"}}})
	if _, err := r.Resolve(""); err == nil || !strings.Contains(err.Error(), "no default model") {
		t.Fatalf("empty model with no default: %v", err)
	}
	r, _ = NewRouter(RouterConfig{Models: map[string]ModelRoute{"m": {Provider: "opnai"}}, Hints: map[string]string{"openai": "set LLM_OPENAI_KEY"}})
	if _, err := r.Resolve("m"); err == nil || !strings.Contains(err.Error(), "configured: offline") {
		t.Fatalf("unknown provider: %v", err)
	}
	r, _ = NewRouter(RouterConfig{Models: map[string]ModelRoute{"m": {Provider: "openai"}}, Hints: map[string]string{"openai": "set LLM_OPENAI_KEY"}})
	if _, err := r.Resolve("m"); err == nil || !strings.HasSuffix(err.Error(), ": set LLM_OPENAI_KEY") {
		t.Fatalf("hint override: %v", err)
	}
}

func TestRouterStream(t *testing.T) {
	s := llmfake.New(t, llmfake.Rule{Model: "google/gemini-2.0-flash-001", Responses: []llmfake.Response{{Content: "from openrouter"}}})
	models, _ := ParseModelTable("gemini-2.0-flash=openrouter:google/gemini-2.0-flash-001,gpt-4o=openai")
	r, err := NewRouter(RouterConfig{
		Providers: []ProviderConfig{{Name: "openrouter", BaseURL: s.URL(), APIKey: testKey}},
		Models:    models,
	})
	if err != nil {
		t.Fatal(err)
	}
	var c collect
	resp, err := r.Stream(context.Background(), simpleRequest("gemini-2.0-flash", "hi"), c.on)
	if err != nil {
		t.Fatal(err)
	}
	if resp.Content != "from openrouter" || resp.Model != "gemini-2.0-flash" || resp.Provider != "openrouter" || len(c.deltas) == 0 {
		t.Fatalf("%+v", resp)
	}
	if got := s.Calls()[0].Model; got != "google/gemini-2.0-flash-001" {
		t.Fatalf("upstream model sent: %q", got)
	}

	// Provider errors name the caller's model, and keep the upstream name.
	s.SetRules(llmfake.Rule{Responses: []llmfake.Response{{Status: 404, ErrorMessage: "no such model"}}})
	_, err = r.Stream(context.Background(), simpleRequest("gemini-2.0-flash", "hi"), nil)
	le := asError(t, err)
	if le.Model != "gemini-2.0-flash" || le.UpstreamModel != "google/gemini-2.0-flash-001" || le.Retryable || le.Provider != "openrouter" {
		t.Fatalf("%+v", le)
	}

	// An unresolvable model fails before any call, not retryable.
	before := len(s.Calls())
	_, err = r.Stream(context.Background(), simpleRequest("gpt-4o", "hi"), nil)
	le = asError(t, err)
	var re *RouteError
	if le.Retryable || !errors.As(err, &re) || re.Provider != "openai" || !strings.Contains(err.Error(), "OPENAI_API_KEY") {
		t.Fatalf("%+v", le)
	}
	if len(s.Calls()) != before {
		t.Fatal("an unresolvable model reached a provider")
	}

	// The offline model is always there.
	resp, err = r.Stream(context.Background(), simpleRequest("offline", "hi"), nil)
	if err != nil || !resp.Offline || resp.Provider != "offline" || resp.Model != "offline" {
		t.Fatalf("%+v %v", resp, err)
	}
}

func TestDescribeNeverShowsKeys(t *testing.T) {
	models, _ := ParseModelTable("gemini-2.0-flash=openrouter:google/gemini-2.0-flash-001,gpt-4o=openai,local=compatible:llama3")
	r, err := NewRouter(RouterConfig{
		Providers: []ProviderConfig{
			{Name: "openrouter", APIKey: testKey},
			{Name: "compatible", BaseURL: "http://user:secretpass@127.0.0.1:8000/v1", APIKey: "another-secret-key"},
		},
		Models:       models,
		DefaultModel: "gemini-2.0-flash",
	})
	if err != nil {
		t.Fatal(err)
	}
	d := r.Describe()
	for _, secret := range []string{testKey, "another-secret-key", "secretpass"} {
		if strings.Contains(d, secret) {
			t.Fatalf("Describe leaks %q: %s", secret, d)
		}
	}
	for _, want := range []string{"openrouter (https://openrouter.ai/api/v1)", "compatible (http://user:xxxxx@127.0.0.1:8000/v1)", "offline",
		"default provider: openrouter", "default model: gemini-2.0-flash", "gpt-4o=openai (provider not configured)", "local=compatible:llama3"} {
		if !strings.Contains(d, want) {
			t.Errorf("Describe lacks %q: %s", want, d)
		}
	}
}
