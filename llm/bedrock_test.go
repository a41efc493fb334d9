package llm

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/bedrockruntime/types"

	"github.com/op-stack/executor/llm/bedrockfake"
	"github.com/op-stack/executor/models"
)

// Fake AWS credentials. They only ever reach the loopback fake, which
// ignores signatures; tests check that none of them shows up in errors.
const (
	testAccessKeyID  = "AKIAFAKEDONOTLEAK7Q2Z"
	testSecretKey    = "fake-secret-DO-NOT-LEAK-9b8c7d6e5f4a"
	testSessionToken = "fake-session-token-DO-NOT-LEAK-31c5"
	testBearerToken  = "bedrock-api-key-DO-NOT-LEAK-0f9e8d"
)

// awsEnvVars are every variable through which the AWS SDK could pick up
// the machine's real configuration or reach the network.
var awsEnvVars = []string{
	"AWS_ACCESS_KEY_ID", "AWS_ACCESS_KEY", "AWS_SECRET_ACCESS_KEY", "AWS_SECRET_KEY", "AWS_SESSION_TOKEN",
	"AWS_PROFILE", "AWS_DEFAULT_PROFILE", "AWS_REGION", "AWS_DEFAULT_REGION", "AWS_BEARER_TOKEN_BEDROCK",
	"AWS_WEB_IDENTITY_TOKEN_FILE", "AWS_ROLE_ARN", "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
	"AWS_CONTAINER_CREDENTIALS_FULL_URI", "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_BEDROCK_RUNTIME",
	"AWS_MAX_ATTEMPTS", "AWS_RETRY_MODE", "AWS_SDK_LOAD_CONFIG", "AWS_CA_BUNDLE",
}

// isolateAWS hides the machine's AWS configuration from the SDK: no
// variables, no config files, no EC2 metadata service (which is not on
// loopback). Tests using it cannot run in parallel (t.Setenv).
func isolateAWS(t *testing.T) {
	t.Helper()
	for _, k := range awsEnvVars {
		t.Setenv(k, "") // restores the old value after the test
		os.Unsetenv(k)
	}
	dir := t.TempDir()
	t.Setenv("AWS_CONFIG_FILE", filepath.Join(dir, "config"))
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", filepath.Join(dir, "credentials"))
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
}

// fakeAWSCredentials isolates the SDK and gives it static test
// credentials and a region through the standard variables.
func fakeAWSCredentials(t *testing.T) {
	t.Helper()
	isolateAWS(t)
	t.Setenv("AWS_ACCESS_KEY_ID", testAccessKeyID)
	t.Setenv("AWS_SECRET_ACCESS_KEY", testSecretKey)
	t.Setenv("AWS_SESSION_TOKEN", testSessionToken)
	t.Setenv("AWS_REGION", "us-east-1")
}

func newTestBedrock(t *testing.T, s *bedrockfake.Server) *Bedrock {
	t.Helper()
	b, err := NewBedrock(BedrockConfig{Endpoint: s.URL()})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

const claude = "anthropic.claude-3-5-sonnet-20240620-v1:0"

func assertNoSecrets(t *testing.T, s string) {
	t.Helper()
	for _, secret := range []string{testAccessKeyID, testSecretKey, testSessionToken, testBearerToken} {
		if strings.Contains(s, secret) {
			t.Fatalf("credential %q leaked into %q", secret, s)
		}
	}
}

// Bedrock's cache reads and writes: its inputTokens leaves them out, the
// usage's prompt count holds them, as OpenAI's does.
func TestBedrockCacheUsage(t *testing.T) {
	fakeAWSCredentials(t)
	s := bedrockfake.New(t, bedrockfake.Rule{ModelID: claude, Responses: []bedrockfake.Response{{
		Content: "ok",
		Usage:   bedrockfake.Usage{InputTokens: 100, OutputTokens: 50, TotalTokens: 1050, CacheReadInputTokens: 600, CacheWriteInputTokens: 300},
	}}})
	resp, err := newTestBedrock(t, s).Stream(context.Background(), simpleRequest(claude, "what?"), func(Delta) {})
	if err != nil {
		t.Fatal(err)
	}
	want := Usage{PromptTokens: 1000, CompletionTokens: 50, TotalTokens: 1050, CachedTokens: 600, CacheWriteTokens: 300}
	if resp.Usage != want {
		t.Fatalf("usage %+v, want %+v", resp.Usage, want)
	}
}

func TestBedrockStreamsTextAndReasoning(t *testing.T) {
	fakeAWSCredentials(t)
	const content = "The answer is forty-two, as computed step by step."
	const reasoning = "Let me think about what the question asks first."
	s := bedrockfake.New(t, bedrockfake.Rule{ModelID: claude, Responses: []bedrockfake.Response{{
		Content: content, Reasoning: reasoning, ChunkSize: 3,
		Usage: bedrockfake.Usage{InputTokens: 11, OutputTokens: 22, TotalTokens: 33},
	}}})
	req := simpleRequest(claude, "what?")
	req.Temperature, req.MaxTokens = ptr(0.0), ptr(123)
	var c collect
	resp, err := newTestBedrock(t, s).Stream(context.Background(), req, c.on)
	if err != nil {
		t.Fatal(err)
	}
	gotC, gotR := c.joined()
	if gotC != content || gotR != reasoning || resp.Content != content || resp.Reasoning != reasoning {
		t.Fatalf("content %q / %q, reasoning %q / %q", gotC, resp.Content, gotR, resp.Reasoning)
	}
	if len(c.deltas) < 20 {
		t.Fatalf("only %d deltas: not streamed", len(c.deltas))
	}
	seenContent := false
	for _, d := range c.deltas {
		if (d.Content == "") == (d.Reasoning == "") {
			t.Fatalf("delta with both or neither: %+v", d)
		}
		if d.Content != "" {
			seenContent = true
		} else if seenContent {
			t.Fatal("reasoning after content: out of order")
		}
	}
	want := Usage{PromptTokens: 11, CompletionTokens: 22, TotalTokens: 33}
	if resp.Usage != want || resp.FinishReason != "stop" || resp.Provider != ProviderBedrock || resp.Model != claude {
		t.Fatalf("%+v", resp)
	}

	calls := s.Calls()
	if len(calls) != 1 {
		t.Fatalf("%d calls", len(calls))
	}
	call := calls[0]
	if call.ModelID != claude || call.AccessKeyID != testAccessKeyID || call.Region != "us-east-1" || call.Service != "bedrock" {
		t.Fatalf("model %q, signed by %q in %q for %q", call.ModelID, call.AccessKeyID, call.Region, call.Service)
	}
	if call.SystemText() != "You are a careful tester. Answer briefly." {
		t.Fatalf("system %q", call.SystemText())
	}
	if len(call.Messages) != 1 || call.Messages[0].Role != "user" || call.Messages[0].Text() != "what?" {
		t.Fatalf("messages %+v", call.Messages)
	}
	ic := call.InferenceConfig
	if ic == nil || ic.Temperature == nil || *ic.Temperature != 0 || ic.MaxTokens == nil || *ic.MaxTokens != 123 {
		t.Fatalf("inferenceConfig %+v (temperature 0 must be sent, not dropped)", ic)
	}
	if strings.Contains(string(call.Body), testSecretKey) {
		t.Fatal("the secret key is in the request body")
	}
}

func TestBedrockInferenceConfigOmittedWhenUnset(t *testing.T) {
	fakeAWSCredentials(t)
	s := bedrockfake.New(t)
	req := simpleRequest(claude, "hi")
	req.Temperature = ptr(0.7)
	if _, err := newTestBedrock(t, s).Stream(context.Background(), req, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := newTestBedrock(t, s).Stream(context.Background(), simpleRequest(claude, "hi"), nil); err != nil {
		t.Fatal(err)
	}
	calls := s.Calls()
	if ic := calls[0].InferenceConfig; ic == nil || ic.Temperature == nil || *ic.Temperature < 0.69 || *ic.Temperature > 0.71 || ic.MaxTokens != nil {
		t.Fatalf("%+v", ic)
	}
	if calls[1].InferenceConfig != nil {
		t.Fatalf("%+v", calls[1].InferenceConfig)
	}
}

func TestBedrockToolUse(t *testing.T) {
	fakeAWSCredentials(t)
	s := bedrockfake.New(t, bedrockfake.Rule{HasTools: true, Responses: []bedrockfake.Response{{
		Content: "Let me look.",
		ToolUses: []bedrockfake.ToolUse{
			{ID: "tooluse_a1", Name: "http_get", Input: `{"url":"https://example.com/a","timeout":3}`},
			{Name: "now"}, // no input: Bedrock sends none, the call gets {}
		},
		ChunkSize: 5,
	}}})
	schema := json.RawMessage(`{"type":"object","properties":{"url":{"type":"string"}},"required":["url"]}`)
	req := Request{Model: claude, Messages: []Message{
		{Role: RoleSystem, Content: "Use tools."},
		{Role: RoleUser, Content: "fetch it"},
		{Role: RoleAssistant, ToolCalls: []ToolCall{{ID: "call_1", Name: "http_get", Arguments: `{"url":"https://example.com/0"}`}, {ID: "call_2", Name: "now", Arguments: ""}}},
		{Role: RoleTool, ToolCallID: "call_1", Content: "page zero"},
		{Role: RoleTool, ToolCallID: "call_2", Content: ""},
		{Role: RoleUser, Content: "and the next one"},
	}, Tools: []ToolDef{{Name: "http_get", Description: "Fetch a URL.", Parameters: schema}, {Name: "now"}}}
	var c collect
	resp, err := newTestBedrock(t, s).Stream(context.Background(), req, c.on)
	if err != nil {
		t.Fatal(err)
	}
	if resp.FinishReason != "tool_calls" || resp.Content != "Let me look." || len(resp.ToolCalls) != 2 {
		t.Fatalf("%+v", resp)
	}
	tc := resp.ToolCalls[0]
	if tc.ID != "tooluse_a1" || tc.Name != "http_get" || tc.Arguments != `{"url":"https://example.com/a","timeout":3}` {
		t.Fatalf("%+v", tc)
	}
	if tc := resp.ToolCalls[1]; tc.ID == "" || tc.Name != "now" || tc.Arguments != "{}" {
		t.Fatalf("%+v", tc)
	}
	if gotC, _ := c.joined(); gotC != "Let me look." {
		t.Fatalf("tool input leaked into the content stream: %q", gotC)
	}

	call := s.Calls()[0]
	if got := call.ToolNames(); !reflect.DeepEqual(got, []string{"http_get", "now"}) {
		t.Fatalf("tools %v", got)
	}
	spec := call.ToolConfig.Tools[0].ToolSpec
	if spec.Description != "Fetch a URL." || !jsonEqual(spec.InputSchema.JSON, schema) {
		t.Fatalf("tool spec %+v %s", spec, spec.InputSchema.JSON)
	}
	if got := call.ToolConfig.Tools[1].ToolSpec.InputSchema.JSON; !jsonEqual(got, json.RawMessage(`{"type":"object","properties":{}}`)) {
		t.Fatalf("parameterless tool schema %s", got)
	}
	// Roles alternate: the two tool results and the next user text share
	// one user turn.
	var roles []string
	for _, m := range call.Messages {
		roles = append(roles, m.Role)
	}
	if !reflect.DeepEqual(roles, []string{"user", "assistant", "user"}) {
		t.Fatalf("roles %v", roles)
	}
	asst := call.Messages[1].Content
	if len(asst) != 2 || asst[0].ToolUse == nil || asst[0].ToolUse.ToolUseID != "call_1" || !jsonEqual(asst[0].ToolUse.Input, json.RawMessage(`{"url":"https://example.com/0"}`)) ||
		asst[1].ToolUse == nil || !jsonEqual(asst[1].ToolUse.Input, json.RawMessage(`{}`)) {
		t.Fatalf("assistant turn %+v", asst)
	}
	user := call.Messages[2].Content
	if len(user) != 3 || user[0].ToolResult == nil || user[0].ToolResult.ToolUseID != "call_1" || user[0].ToolResult.Text() != "page zero" ||
		user[1].ToolResult == nil || user[1].ToolResult.Text() != emptyPlaceholder || user[2].Text != "and the next one" {
		t.Fatalf("user turn %+v", user)
	}
}

func jsonEqual(a, b json.RawMessage) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	return reflect.DeepEqual(x, y)
}

func TestBedrockJSONSchemaGoesInTheSystemPrompt(t *testing.T) {
	fakeAWSCredentials(t)
	s := bedrockfake.New(t, bedrockfake.Rule{Responses: []bedrockfake.Response{{Content: `{"action":"finish"}`}}})
	req := simpleRequest(claude, "route")
	req.JSONSchema = &JSONSchema{Name: "routing", Schema: json.RawMessage(`{"type":"object","properties":{"action":{"type":"string"}}}`), Strict: true}
	resp, err := newTestBedrock(t, s).Stream(context.Background(), req, nil)
	if err != nil || resp.Content != `{"action":"finish"}` {
		t.Fatalf("%+v %v", resp, err)
	}
	sys := s.Calls()[0].SystemText()
	if !strings.HasPrefix(sys, "You are a careful tester.") || !strings.Contains(sys, "JSON schema (routing)") || !strings.Contains(sys, `"action":{"type":"string"}`) {
		t.Fatalf("system %q", sys)
	}
	req.JSONSchema.Schema = json.RawMessage(`{broken`)
	_, err = newTestBedrock(t, s).Stream(context.Background(), req, nil)
	if le := asError(t, err); le.Retryable {
		t.Fatalf("%+v", le)
	}
}

func TestBuildConverseInputEdges(t *testing.T) {
	// Tool history without tools on offer becomes text: Converse refuses
	// toolUse blocks without a toolConfig.
	in, err := buildConverseInput(Request{Model: "m", Messages: []Message{
		{Role: RoleAssistant, Content: "I start."},
		{Role: RoleAssistant, ToolCalls: []ToolCall{{ID: "c", Name: "t", Arguments: `not json`}}},
		{Role: RoleTool, ToolCallID: "c", Content: "r"},
		{Role: RoleUser, Content: "   "},
	}})
	if err != nil {
		t.Fatal(err)
	}
	if in.ToolConfig != nil || len(in.Messages) != 3 {
		t.Fatalf("%+v", in)
	}
	if in.Messages[0].Role != types.ConversationRoleUser || in.Messages[1].Role != types.ConversationRoleAssistant || len(in.Messages[1].Content) != 2 {
		t.Fatalf("a conversation must start with a user turn, and consecutive turns merge: %+v", in.Messages)
	}
	for _, m := range in.Messages {
		for _, b := range m.Content {
			if _, ok := b.(*types.ContentBlockMemberText); !ok {
				t.Fatalf("non-text block %T without tools", b)
			}
		}
	}
	if got := toolInput("not json"); !reflect.DeepEqual(got, map[string]any{"raw_arguments": "not json"}) {
		t.Fatalf("%v", got)
	}
	if got := toolInput(`[1]`); !reflect.DeepEqual(got, map[string]any{"raw_arguments": "[1]"}) {
		t.Fatalf("%v", got)
	}
	if _, err := buildConverseInput(Request{Model: "m", Tools: []ToolDef{{Name: "x", Parameters: json.RawMessage(`{`)}}}); err == nil {
		t.Fatal("invalid tool schema accepted")
	}
}

func TestBedrockErrors(t *testing.T) {
	fakeAWSCredentials(t)
	s := bedrockfake.New(t)
	b := newTestBedrock(t, s)
	for _, tc := range []struct {
		name      string
		resp      bedrockfake.Response
		status    int
		retryable bool
		code      string
	}{
		{"throttled", bedrockfake.Response{Status: 429}, 429, true, "ThrottlingException"},
		{"model not ready", bedrockfake.Response{Status: 429, ErrorType: "ModelNotReadyException"}, 429, true, "ModelNotReadyException"},
		{"unavailable", bedrockfake.Response{Status: 503}, 503, true, "ServiceUnavailableException"},
		{"internal", bedrockfake.Response{Status: 500}, 500, true, "InternalServerException"},
		{"model timeout", bedrockfake.Response{Status: 408}, 408, true, "ModelTimeoutException"},
		{"invalid", bedrockfake.Response{Status: 400, ErrorMessage: "Malformed input request"}, 400, false, "ValidationException"},
		{"denied", bedrockfake.Response{Status: 403}, 403, false, "AccessDeniedException"},
		{"no such model", bedrockfake.Response{Status: 404}, 404, false, "ResourceNotFoundException"},
		{"model error", bedrockfake.Response{Status: 424}, 424, false, "ModelErrorException"},
		{"unknown 502", bedrockfake.Response{Status: 502, ErrorType: "SomethingNew"}, 502, true, "SomethingNew"},
		{"unknown 409", bedrockfake.Response{Status: 409, ErrorType: "SomethingNew"}, 409, true, "SomethingNew"},
		{"unknown 422", bedrockfake.Response{Status: 422, ErrorType: "SomethingNew"}, 422, false, "SomethingNew"},
		// AWS quotes the access key it rejected; the secret must never show.
		{"echoes credentials", bedrockfake.Response{Status: 403, ErrorType: "UnrecognizedClientException",
			ErrorMessage: "The security token included in the request is invalid: " + testAccessKeyID + " " + testSecretKey + " " + testSessionToken}, 403, false, "UnrecognizedClientException"},
		{"stream throttled", bedrockfake.Response{Content: "partial answer", StreamException: "throttlingException", ExceptionAfterEvents: 2}, 0, true, "ThrottlingException"},
		{"stream model error", bedrockfake.Response{Content: "partial", StreamException: "modelStreamErrorException", ExceptionAfterEvents: 1}, 0, true, "ModelStreamErrorException"},
		{"stream invalid", bedrockfake.Response{Content: "partial", StreamException: "validationException", ExceptionAfterEvents: 1}, 0, false, "ValidationException"},
		{"stream unavailable", bedrockfake.Response{Content: "partial", StreamException: "serviceUnavailableException", ExceptionAfterEvents: 3}, 0, true, "ServiceUnavailableException"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s.SetDefault(tc.resp)
			before := len(s.Calls())
			_, err := b.Stream(context.Background(), simpleRequest(claude, "hi"), nil)
			le := asError(t, err)
			if le.StatusCode != tc.status || le.Retryable != tc.retryable || le.Provider != ProviderBedrock || le.Model != claude {
				t.Fatalf("%+v", le)
			}
			if !strings.Contains(le.Message, tc.code) {
				t.Fatalf("message %q lacks %s", le.Message, tc.code)
			}
			if tc.status != 0 && !strings.Contains(le.Message, "request id fake-request-") {
				t.Fatalf("message %q lacks the request id", le.Message)
			}
			assertNoSecrets(t, err.Error())
			if got := len(s.Calls()) - before; got != 1 {
				t.Fatalf("%d attempts: the SDK retried on its own", got)
			}
		})
	}
}

func TestBedrockNoSDKRetriesEvenWithAWSMaxAttempts(t *testing.T) {
	fakeAWSCredentials(t)
	t.Setenv("AWS_MAX_ATTEMPTS", "5")
	t.Setenv("AWS_RETRY_MODE", "adaptive")
	s := bedrockfake.New(t, bedrockfake.Rule{Responses: []bedrockfake.Response{{Status: 503}}})
	_, err := newTestBedrock(t, s).Stream(context.Background(), simpleRequest(claude, "hi"), nil)
	if le := asError(t, err); !le.Retryable || len(s.Calls()) != 1 {
		t.Fatalf("%+v after %d calls", le, len(s.Calls()))
	}
}

func TestBedrockBrokenStreams(t *testing.T) {
	fakeAWSCredentials(t)
	s := bedrockfake.New(t)
	b := newTestBedrock(t, s)
	for name, resp := range map[string]bedrockfake.Response{
		"dropped":          {Content: "a long answer cut short", DropAfterEvents: 3},
		"no messageStop":   {Content: "an answer", OmitMessageStop: true},
		"no events at all": {Content: "x", DropAfterEvents: 1},
	} {
		t.Run(name, func(t *testing.T) {
			s.SetDefault(resp)
			_, err := b.Stream(context.Background(), simpleRequest(claude, "hi"), nil)
			if le := asError(t, err); !le.Retryable {
				t.Fatalf("%+v", le)
			}
		})
	}
	// Usage missing: estimated, not zero.
	s.SetDefault(bedrockfake.Response{Content: "twelve chars", OmitMetadata: true})
	resp, err := b.Stream(context.Background(), simpleRequest(claude, "hi"), nil)
	if err != nil || !resp.Usage.Estimated || resp.Usage.CompletionTokens != 3 {
		t.Fatalf("%+v %v", resp, err)
	}
}

func TestBedrockContextCancel(t *testing.T) {
	fakeAWSCredentials(t)
	s := bedrockfake.New(t)
	b := newTestBedrock(t, s)
	for name, resp := range map[string]bedrockfake.Response{
		"before the answer": {Hang: true},
		"mid-stream":        {Content: "some words then silence", HangAfterEvents: 3},
	} {
		t.Run(name, func(t *testing.T) {
			s.SetDefault(resp)
			ctx, cancel := context.WithCancel(context.Background())
			time.AfterFunc(150*time.Millisecond, cancel)
			start := time.Now()
			_, err := b.Stream(ctx, simpleRequest(claude, "hi"), nil)
			if !errors.Is(err, context.Canceled) {
				t.Fatalf("want context.Canceled, got %T %v", err, err)
			}
			var le *Error
			if errors.As(err, &le) {
				t.Fatal("a cancelled call must return ctx.Err(), not a provider error")
			}
			if d := time.Since(start); d > 3*time.Second {
				t.Fatalf("took %v to notice the cancellation", d)
			}
		})
	}
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	s.SetDefault(bedrockfake.Response{Hang: true})
	if _, err := b.Stream(ctx, simpleRequest(claude, "hi"), nil); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("%T %v", err, err)
	}
}

func TestBedrockRegions(t *testing.T) {
	fakeAWSCredentials(t)
	s := bedrockfake.New(t)
	b := newTestBedrock(t, s)
	req := simpleRequest(claude, "hi")
	for _, region := range []string{"", "eu-west-1", "us-gov-west-1", "eu-west-1", ""} {
		req.Region = region
		if _, err := b.Stream(context.Background(), req, nil); err != nil {
			t.Fatal(err)
		}
	}
	var got []string
	for _, c := range s.Calls() {
		got = append(got, c.Region)
	}
	if want := []string{"us-east-1", "eu-west-1", "us-gov-west-1", "eu-west-1", "us-east-1"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("signed for %v, want %v", got, want)
	}
	if n := len(b.clients); n != 3 {
		t.Fatalf("%d clients cached, want one per region", n)
	}

	// A region becomes part of a host name: anything else is refused
	// before a request is signed.
	before := len(s.Calls())
	for _, bad := range []string{"evil.example.com", "us-east-1/../x", "US-EAST-1", "us_east_1"} {
		req.Region = bad
		_, err := b.Stream(context.Background(), req, nil)
		if le := asError(t, err); le.Retryable {
			t.Fatalf("%q: %+v", bad, le)
		}
	}
	if len(s.Calls()) != before {
		t.Fatal("a bad region reached the endpoint")
	}

	// A configured default region wins over AWS_REGION.
	b2, err := NewBedrock(BedrockConfig{Endpoint: s.URL(), Region: "ap-southeast-2"})
	if err != nil {
		t.Fatal(err)
	}
	req.Region = ""
	if _, err := b2.Stream(context.Background(), req, nil); err != nil {
		t.Fatal(err)
	}
	if c := s.Calls(); c[len(c)-1].Region != "ap-southeast-2" {
		t.Fatalf("%+v", c[len(c)-1])
	}
	if _, err := NewBedrock(BedrockConfig{Region: "nowhere"}); err == nil {
		t.Fatal("bad default region accepted")
	}
	if _, err := NewBedrock(BedrockConfig{Endpoint: "localhost:1234"}); err == nil {
		t.Fatal("relative endpoint accepted")
	}
}

func TestBedrockConcurrentRegions(t *testing.T) {
	fakeAWSCredentials(t)
	s := bedrockfake.New(t)
	b := newTestBedrock(t, s)
	regions := []string{"us-east-1", "us-west-2", "eu-central-1", "ap-northeast-1"}
	errs := make(chan error, 40)
	for i := range 40 {
		go func() {
			req := simpleRequest(claude, "hi")
			req.Region = regions[i%len(regions)]
			_, err := b.Stream(context.Background(), req, nil)
			errs <- err
		}()
	}
	for range 40 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	if len(b.clients) != len(regions) {
		t.Fatalf("%d clients", len(b.clients))
	}
}

func TestBedrockWithoutCredentials(t *testing.T) {
	isolateAWS(t)
	t.Setenv("AWS_REGION", "us-east-1")
	s := bedrockfake.New(t)
	b := newTestBedrock(t, s)
	_, err := b.Stream(context.Background(), simpleRequest(claude, "hi"), nil)
	le := asError(t, err)
	if le.Retryable || !strings.Contains(le.Message, "AWS_ACCESS_KEY_ID") {
		t.Fatalf("%+v", le)
	}
	if len(s.Calls()) != 0 {
		t.Fatal("an unsigned request was sent")
	}
	err = b.CheckSetup(context.Background(), "")
	var me *models.Error
	if !errors.As(err, &me) || me.Code != models.CodeMissingAPIKey || !strings.Contains(me.Message, "AWS_ACCESS_KEY_ID") {
		t.Fatalf("%T %v", err, err)
	}

	// A Bedrock API key is enough on its own; the SDK sends it over HTTPS
	// only.
	t.Setenv("AWS_BEARER_TOKEN_BEDROCK", testBearerToken)
	s = bedrockfake.NewServer(bedrockfake.Options{TLS: true})
	t.Cleanup(s.Close)
	b, err = NewBedrock(BedrockConfig{Endpoint: s.URL(), HTTPClient: s.HTTPClient()})
	if err != nil {
		t.Fatal(err)
	}
	if err := b.CheckSetup(context.Background(), ""); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Stream(context.Background(), simpleRequest(claude, "hi"), nil); err != nil {
		t.Fatal(err)
	}
	if c := s.Calls(); len(c) != 1 || !c[0].BearerAuth {
		t.Fatalf("%+v", c)
	}
	s.SetDefault(bedrockfake.Response{Status: 403, ErrorType: "AccessDeniedException", ErrorMessage: "bad key " + testBearerToken})
	_, err = b.Stream(context.Background(), simpleRequest(claude, "hi"), nil)
	assertNoSecrets(t, asError(t, err).Error())
}

func TestBedrockCheckSetup(t *testing.T) {
	fakeAWSCredentials(t)
	s := bedrockfake.New(t)
	b := newTestBedrock(t, s)
	if err := b.CheckSetup(context.Background(), ""); err != nil {
		t.Fatal(err)
	}
	if err := b.CheckSetup(context.Background(), "eu-west-1"); err != nil {
		t.Fatal(err)
	}
	var me *models.Error
	if err := b.CheckSetup(context.Background(), "evil.com"); !errors.As(err, &me) || me.Code != models.CodeInvalidConfig {
		t.Fatalf("%v", err)
	}
	if len(s.Calls()) != 0 {
		t.Fatal("CheckSetup called Bedrock")
	}

	os.Unsetenv("AWS_REGION")
	b = newTestBedrock(t, s)
	err := b.CheckSetup(context.Background(), "")
	if !errors.As(err, &me) || me.Code != models.CodeMissingAPIKey || !strings.Contains(me.Message, "AWS_REGION") {
		t.Fatalf("%v", err)
	}
	if err := b.CheckSetup(context.Background(), "eu-west-1"); err != nil {
		t.Fatalf("a request region stands in for the default: %v", err)
	}
	_, err = b.Stream(context.Background(), simpleRequest(claude, "hi"), nil)
	if le := asError(t, err); le.Retryable || !strings.Contains(le.Message, "AWS_REGION") {
		t.Fatalf("%+v", le)
	}

	// A profile that does not exist fails to load, and says so.
	t.Setenv("AWS_PROFILE", "no-such-profile")
	b = newTestBedrock(t, s)
	if err := b.CheckSetup(context.Background(), "us-east-1"); !errors.As(err, &me) || me.Code != models.CodeMissingAPIKey {
		t.Fatalf("%v", err)
	}
}

func TestBedrockCredentialsInEnv(t *testing.T) {
	env := func(kv ...string) func(string) string {
		m := map[string]string{}
		for i := 0; i+1 < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return func(k string) string { return m[k] }
	}
	for i, tc := range []struct {
		env  func(string) string
		want bool
	}{
		{env(), false},
		{env("AWS_ACCESS_KEY_ID", "a"), false},
		{env("AWS_ACCESS_KEY_ID", "a", "AWS_SECRET_ACCESS_KEY", "b"), true},
		{env("AWS_PROFILE", "dev"), true},
		{env("AWS_BEARER_TOKEN_BEDROCK", "k"), true},
		{env("AWS_WEB_IDENTITY_TOKEN_FILE", "/t", "AWS_ROLE_ARN", "arn"), true},
		{env("AWS_CONTAINER_CREDENTIALS_RELATIVE_URI", "/v2/creds"), true},
		{env("AWS_REGION", "us-east-1"), false},
	} {
		if got := BedrockCredentialsInEnv(tc.env); got != tc.want {
			t.Errorf("case %d: got %v", i, got)
		}
	}
}

// TestBedrockManyCallsOnOneClient guards against connections closed under
// a streaming response: the SDK's request body returns io.EOF from
// WriteTo once closed, which net/http took for a write error (see
// readOnlyBodyClient). The loopback fake answers fast enough to hit that
// race within a few dozen calls.
func TestBedrockManyCallsOnOneClient(t *testing.T) {
	fakeAWSCredentials(t)
	s := bedrockfake.New(t)
	b := newTestBedrock(t, s)
	for i := range 200 {
		if _, err := b.Stream(context.Background(), simpleRequest(claude, "hi"), nil); err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
	}
}

// Inference profiles are addressed by ARN, slashes and colons included;
// the SDK escapes them into one path segment.
func TestBedrockModelARN(t *testing.T) {
	fakeAWSCredentials(t)
	const arn = "arn:aws:bedrock:us-east-1:123456789012:inference-profile/us.anthropic.claude-3-5-sonnet-20240620-v1:0"
	s := bedrockfake.New(t, bedrockfake.Rule{ModelID: arn, Responses: []bedrockfake.Response{{Content: "via profile"}}})
	resp, err := newTestBedrock(t, s).Stream(context.Background(), simpleRequest(arn, "hi"), nil)
	if err != nil || resp.Content != "via profile" {
		t.Fatalf("%+v %v", resp, err)
	}
	if c := s.Calls()[0]; c.ModelID != arn || !strings.Contains(c.Path, "%2F") {
		t.Fatalf("%+v", c)
	}
}

// TestBedrockConcurrentStreamsOnOneClient runs streams side by side on one
// region's client, each with its own scripted answer, which must arrive
// whole. Under -race it also guards freshProtocol: without it the SDK's
// shared event-stream codec is a data race.
func TestBedrockConcurrentStreamsOnOneClient(t *testing.T) {
	fakeAWSCredentials(t)
	const n = 16
	var rules []bedrockfake.Rule
	for i := range n {
		marker := fmt.Sprintf("request-%02d", i)
		rules = append(rules, bedrockfake.Rule{UserContains: marker, Responses: []bedrockfake.Response{{
			Content: strings.Repeat(marker+" ", 40), Reasoning: strings.Repeat("thinking about "+marker+" ", 10),
			ChunkSize: 3,
		}}})
	}
	s := bedrockfake.New(t, rules...)
	b := newTestBedrock(t, s)
	errs := make(chan error, n)
	for i := range n {
		go func() {
			marker := fmt.Sprintf("request-%02d", i)
			resp, err := b.Stream(context.Background(), simpleRequest(claude, marker), nil)
			switch {
			case err != nil:
				errs <- err
			case resp.Content != strings.Repeat(marker+" ", 40) || resp.Reasoning != strings.Repeat("thinking about "+marker+" ", 10):
				errs <- fmt.Errorf("%s got %q / %q", marker, resp.Content, resp.Reasoning)
			default:
				errs <- nil
			}
		}()
	}
	for range n {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
}
