package llm

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/op-stack/executor/llm/bedrockfake"
	"github.com/op-stack/executor/llm/llmfake"
	"github.com/op-stack/executor/models"
)

// llmConfigEnv is a router with openai and openrouter on OpenAI-compatible
// fakes, aws_bedrock on the Bedrock fake and one more fake that only
// LLM_ALLOWED_BASE_URLS lets agents use.
type llmConfigEnv struct {
	openai, openrouter, allowed, stranger *llmfake.Server
	bedrock                               *bedrockfake.Server
	router                                *Router
}

func newLLMConfigEnv(t *testing.T) *llmConfigEnv {
	t.Helper()
	fakeAWSCredentials(t)
	e := &llmConfigEnv{
		openai:     llmfake.New(t, llmfake.Rule{Responses: []llmfake.Response{{Content: "from openai"}}}),
		openrouter: llmfake.New(t, llmfake.Rule{Responses: []llmfake.Response{{Content: "from openrouter"}}}),
		allowed:    llmfake.New(t, llmfake.Rule{Responses: []llmfake.Response{{Content: "from the allowed URL"}}}),
		stranger:   llmfake.New(t),
		bedrock:    bedrockfake.New(t, bedrockfake.Rule{Responses: []bedrockfake.Response{{Content: "from bedrock"}}}),
	}
	models, err := ParseModelTable("gpt-4o=openai,claude=aws_bedrock:anthropic.claude-3-5-sonnet-20240620-v1:0,typo=opnai")
	if err != nil {
		t.Fatal(err)
	}
	e.router, err = NewRouter(RouterConfig{
		Providers: []ProviderConfig{
			{Name: "openai", BaseURL: e.openai.URL(), APIKey: testKey},
			{Name: "openrouter", BaseURL: e.openrouter.URL(), APIKey: "sk-or-other-secret-key"},
		},
		Models:          models,
		DefaultModel:    "gpt-4o",
		Bedrock:         &BedrockConfig{Endpoint: e.bedrock.URL()},
		AllowedBaseURLs: []string{" " + e.allowed.URL() + "/ ", ""},
	})
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func (e *llmConfigEnv) calls() int {
	return len(e.openai.Calls()) + len(e.openrouter.Calls()) + len(e.allowed.Calls()) + len(e.stranger.Calls()) + len(e.bedrock.Calls())
}

func wantModelsError(t *testing.T, err error, code models.Code, contains ...string) *models.Error {
	t.Helper()
	var me *models.Error
	if !errors.As(err, &me) || me.Code != code {
		t.Fatalf("want a *models.Error %s, got %T %v", code.Name, err, err)
	}
	for _, s := range contains {
		if !strings.Contains(me.Message, s) {
			t.Fatalf("message %q lacks %q", me.Message, s)
		}
	}
	for _, secret := range []string{testKey, "sk-or-other-secret-key", testSecretKey, testAccessKeyID} {
		if strings.Contains(err.Error(), secret) {
			t.Fatalf("%q leaks a credential", err.Error())
		}
	}
	return me
}

func TestRouterPerAgentProvider(t *testing.T) {
	e := newLLMConfigEnv(t)
	ctx := context.Background()
	stream := func(req Request) *Response {
		t.Helper()
		resp, err := e.router.Stream(ctx, req, nil)
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}

	// The table says openai, the agent says openrouter: the agent wins and
	// the model goes upstream as given.
	req := simpleRequest("gpt-4o", "hi")
	req.Provider = "openrouter"
	if resp := stream(req); resp.Content != "from openrouter" || resp.Provider != "openrouter" || resp.Model != "gpt-4o" {
		t.Fatalf("%+v", resp)
	}
	if c := e.openrouter.Calls(); len(c) != 1 || c[0].Model != "gpt-4o" || len(e.openai.Calls()) != 0 {
		t.Fatalf("%+v", c)
	}

	// Same provider as the table: the table's upstream name is used.
	req = simpleRequest("claude", "hi")
	req.Provider = " AWS_Bedrock "
	if resp := stream(req); resp.Content != "from bedrock" || resp.Provider != ProviderBedrock || resp.Model != "claude" {
		t.Fatalf("%+v", resp)
	}
	if c := e.bedrock.Calls(); c[0].ModelID != "anthropic.claude-3-5-sonnet-20240620-v1:0" || c[0].Region != "us-east-1" {
		t.Fatalf("%+v", c[0])
	}

	// A model the table does not know, in another region.
	req = simpleRequest("meta.llama3-70b-instruct-v1:0", "hi")
	req.Provider, req.Region = "aws_bedrock", "eu-west-1"
	stream(req)
	if c := e.bedrock.Calls()[1]; c.ModelID != "meta.llama3-70b-instruct-v1:0" || c.Region != "eu-west-1" {
		t.Fatalf("%+v", c)
	}

	// A region on a provider that has none is ignored.
	req = simpleRequest("gpt-4o", "hi")
	req.Region = "eu-west-1"
	if resp := stream(req); resp.Provider != "openai" {
		t.Fatalf("%+v", resp)
	}

	// The offline model, asked for by provider: the answer names the model
	// that gave it, not the one asked for.
	req = simpleRequest("gpt-4o", "hi")
	req.Provider = "offline"
	if resp := stream(req); !resp.Offline || resp.Model != "offline" {
		t.Fatalf("%+v", resp)
	}

	// Failures: not retryable, typed, and nothing reaches a provider.
	before := e.calls()
	for _, tc := range []struct {
		provider, region string
		code             models.Code
		contains         string
	}{
		{"anthropic", "", models.CodeProviderNotSupported, "supported providers: aws_bedrock, compatible, offline, openai, openrouter"},
		{"compatible", "", models.CodeMissingAPIKey, "provider compatible is not configured"},
		{"aws_bedrock", "eu-west-1.evil.example", models.CodeInvalidConfig, "not an AWS region"},
	} {
		req := simpleRequest("m", "hi")
		req.Provider, req.Region = tc.provider, tc.region
		_, err := e.router.Stream(ctx, req, nil)
		le := asError(t, err)
		if le.Retryable || !strings.Contains(le.Message, tc.contains) {
			t.Fatalf("%s: %+v", tc.provider, le)
		}
		wantModelsError(t, err, tc.code)
	}
	if e.calls() != before {
		t.Fatal("a refused request reached a provider")
	}
}

func TestRouterPerAgentBaseURL(t *testing.T) {
	e := newLLMConfigEnv(t)
	ctx := context.Background()
	stream := func(provider, baseURL, region string) (*Response, error) {
		req := simpleRequest("gpt-4o", "hi")
		req.Provider, req.BaseURL, req.Region = provider, baseURL, region
		return e.router.Stream(ctx, req, nil)
	}

	// The provider's configured URL, however slashed, and its public
	// default, which means "that provider" and uses the configured one.
	for _, base := range []string{e.openai.URL(), e.openai.URL() + "//", strings.ToUpper(e.openai.URL()[:4]) + e.openai.URL()[4:], "https://api.openai.com/v1/"} {
		resp, err := stream("openai", base, "")
		if err != nil || resp.Content != "from openai" {
			t.Fatalf("%s: %+v %v", base, resp, err)
		}
	}
	// Without a provider, the base URL applies to the provider the model
	// routes to.
	if resp, err := stream("", "https://api.openai.com/v1", ""); err != nil || resp.Content != "from openai" {
		t.Fatalf("%+v %v", resp, err)
	}
	if resp, err := stream("openrouter", "https://openrouter.ai/api/v1", ""); err != nil || resp.Content != "from openrouter" {
		t.Fatalf("%+v %v", resp, err)
	}

	// An allowed URL gets a client of its own, with the provider's key,
	// created once.
	for range 2 {
		resp, err := stream("openai", e.allowed.URL(), "")
		if err != nil || resp.Content != "from the allowed URL" || resp.Provider != "openai" {
			t.Fatalf("%+v %v", resp, err)
		}
	}
	if c := e.allowed.Calls(); len(c) != 2 || c[0].APIKey != testKey {
		t.Fatalf("%+v", c)
	}
	if len(e.router.extra) != 1 {
		t.Fatalf("%d extra clients", len(e.router.extra))
	}

	// Everything else would hand the key to whoever chose the URL.
	before := e.calls()
	for _, tc := range []struct{ provider, base string }{
		{"openai", e.stranger.URL()},
		{"openai", "https://openrouter.ai/api/v1"},                                              // another provider's default
		{"openrouter", "https://api.openai.com/v1"},                                             // likewise
		{"openai", "https://api.openai.com@" + strings.TrimPrefix(e.stranger.URL(), "http://")}, // userinfo trick
		{"openai", "https://api.openai.com.evil.example/v1"},
		{"openai", e.openai.URL() + "/../v2"},
		{"openai", "ftp://api.openai.com/v1"},
		{"openai", "not a url"},
		{"", e.stranger.URL()},
		{"offline", e.openai.URL()},
		{"aws_bedrock", e.stranger.URL()},
	} {
		_, err := stream(tc.provider, tc.base, "")
		if le := asError(t, err); le.Retryable {
			t.Fatalf("%s %s: %+v", tc.provider, tc.base, le)
		}
		wantModelsError(t, err, models.CodeInvalidConfig)
	}
	if e.calls() != before {
		t.Fatal("a refused base URL was called")
	}

	// Bedrock: AWS's public endpoint of a region means that region (on
	// the configured endpoint); the configured endpoint means itself.
	if _, err := stream("aws_bedrock", "https://bedrock-runtime.ap-south-1.amazonaws.com/", ""); err != nil {
		t.Fatal(err)
	}
	if _, err := stream("aws_bedrock", e.bedrock.URL(), "eu-central-1"); err != nil {
		t.Fatal(err)
	}
	if c := e.bedrock.Calls(); len(c) != 2 || c[0].Region != "ap-south-1" || c[1].Region != "eu-central-1" {
		t.Fatalf("%+v", c)
	}
	_, err := stream("aws_bedrock", "https://bedrock-runtime.ap-south-1.amazonaws.com", "eu-west-1")
	wantModelsError(t, err, models.CodeInvalidConfig, "region")
}

func TestRouterCheck(t *testing.T) {
	e := newLLMConfigEnv(t)
	r := e.router
	for _, ok := range [][3]string{
		{"gpt-4o", "", ""},
		{"", "", ""},
		{"anything", "openrouter", ""},
		{"gpt-4o", "openai", "https://api.openai.com/v1"},
		{"gpt-4o", "openai", e.allowed.URL()},
		{"claude", "", ""},
		{"claude", "aws_bedrock", "https://bedrock-runtime.us-west-2.amazonaws.com"},
		{"x", "offline", ""},
	} {
		if err := r.Check(ok[0], ok[1], ok[2]); err != nil {
			t.Errorf("Check%q: %v", ok, err)
		}
	}
	wantModelsError(t, r.Check("m", "anthropic", ""), models.CodeProviderNotSupported, "anthropic", "aws_bedrock, compatible, offline, openai, openrouter")
	wantModelsError(t, r.Check("typo", "", ""), models.CodeProviderNotSupported, "opnai")
	wantModelsError(t, r.Check("m", "compatible", ""), models.CodeMissingAPIKey, "compatible")
	wantModelsError(t, r.Check("m", "openai", e.stranger.URL()), models.CodeInvalidConfig, "LLM_ALLOWED_BASE_URLS")
	if err := r.CheckRequest(Request{Model: "claude", Region: "eu-west-1"}); err != nil {
		t.Fatal(err)
	}
	wantModelsError(t, r.CheckRequest(Request{Model: "claude", Region: "moon-1"}), models.CodeInvalidConfig)
	if e.calls() != 0 {
		t.Fatal("Check called a provider")
	}

	// A table that routes to a known but missing provider, and a router
	// without Bedrock.
	models2, _ := ParseModelTable("gpt-4o=openai")
	r2, err := NewRouter(RouterConfig{
		Providers: []ProviderConfig{{Name: "openrouter", APIKey: "k"}},
		Models:    models2,
		Hints:     map[string]string{ProviderBedrock: "set AWS_ACCESS_KEY_ID and friends"},
	})
	if err != nil {
		t.Fatal(err)
	}
	wantModelsError(t, r2.Check("gpt-4o", "", ""), models.CodeMissingAPIKey, "OPENAI_API_KEY")
	wantModelsError(t, r2.Check("m", "aws_bedrock", ""), models.CodeMissingAPIKey, "AWS_ACCESS_KEY_ID")
	wantModelsError(t, r2.Check("", "", ""), models.CodeInvalidConfig, "no default model")
	// The default hint names the variables too.
	r3, _ := NewRouter(RouterConfig{})
	wantModelsError(t, r3.Check("m", "aws_bedrock", ""), models.CodeMissingAPIKey, "AWS_ACCESS_KEY_ID", "AWS_REGION")

	// Bedrock configured but without credentials in reach.
	isolateAWS(t)
	t.Setenv("AWS_REGION", "us-east-1")
	r4, err := NewRouter(RouterConfig{Bedrock: &BedrockConfig{Endpoint: e.bedrock.URL()}})
	if err != nil {
		t.Fatal(err)
	}
	wantModelsError(t, r4.Check("m", "aws_bedrock", ""), models.CodeMissingAPIKey, "AWS_ACCESS_KEY_ID")
}

func TestRouterProviderNames(t *testing.T) {
	r, err := NewRouter(RouterConfig{Providers: []ProviderConfig{{Name: "groq", BaseURL: "https://api.groq.com/openai/v1", APIKey: "k"}}})
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(r.ProviderNames(), ","); got != "aws_bedrock,compatible,groq,offline,openai,openrouter" {
		t.Fatal(got)
	}
	if got := strings.Join(r.ConfiguredProviders(), ","); got != "groq,offline" {
		t.Fatal(got)
	}
	// A custom provider is addressable by name.
	if err := r.Check("llama", "groq", "https://api.groq.com/openai/v1/"); err != nil {
		t.Fatal(err)
	}
}

func TestNewRouterRejectsBadLLMConfig(t *testing.T) {
	for name, cfg := range map[string]RouterConfig{
		"bedrock as compatible": {Providers: []ProviderConfig{{Name: "aws_bedrock", BaseURL: "http://127.0.0.1:1"}}},
		"bad allowed URL":       {AllowedBaseURLs: []string{"127.0.0.1:8000/v1"}},
		"bad bedrock endpoint":  {Bedrock: &BedrockConfig{Endpoint: "bedrock.local"}},
		"bad bedrock region":    {Bedrock: &BedrockConfig{Region: "Frankfurt"}},
		"bedrock default unset": {DefaultProvider: "aws_bedrock"},
	} {
		if _, err := NewRouter(cfg); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
	// Bedrock may be the explicit default provider.
	r, err := NewRouter(RouterConfig{Bedrock: &BedrockConfig{}, DefaultProvider: "aws_bedrock"})
	if err != nil || r.DefaultProvider() != ProviderBedrock {
		t.Fatalf("%v %v", r, err)
	}
	// But never the implicit one.
	r, _ = NewRouter(RouterConfig{Bedrock: &BedrockConfig{}})
	if r.DefaultProvider() != OfflineProvider {
		t.Fatal(r.DefaultProvider())
	}
}

func TestDescribeBedrockAndAllowedURLs(t *testing.T) {
	r, err := NewRouter(RouterConfig{
		Bedrock:         &BedrockConfig{Region: "eu-west-1", Endpoint: "https://user:secretpass@vpce-123.bedrock-runtime.eu-west-1.vpce.amazonaws.com"},
		AllowedBaseURLs: []string{"http://user:anothersecret@10.0.0.5:8000/v1/"},
	})
	if err != nil {
		t.Fatal(err)
	}
	d := r.Describe()
	for _, secret := range []string{"secretpass", "anothersecret"} {
		if strings.Contains(d, secret) {
			t.Fatalf("Describe leaks %q: %s", secret, d)
		}
	}
	for _, want := range []string{"aws_bedrock (region eu-west-1, https://user:xxxxx@vpce-123", "allowed base URLs: http://user:xxxxx@10.0.0.5:8000/v1"} {
		if !strings.Contains(d, want) {
			t.Errorf("Describe lacks %q: %s", want, d)
		}
	}
}
