package llm

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/bedrockruntime"
	"github.com/aws/aws-sdk-go-v2/service/bedrockruntime/document"
	"github.com/aws/aws-sdk-go-v2/service/bedrockruntime/schemas"
	"github.com/aws/aws-sdk-go-v2/service/bedrockruntime/types"
	"github.com/aws/smithy-go"
	"github.com/aws/smithy-go/transport/http/protocol/restjson1"

	"github.com/op-stack/executor/models"
)

// ProviderBedrock is the provider name of AWS Bedrock.
const ProviderBedrock = "aws_bedrock"

// BedrockHint tells an operator how to configure Bedrock; it is the
// default missing-provider hint and part of credential errors.
const BedrockHint = "set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (or AWS_PROFILE, or a Bedrock API key in AWS_BEARER_TOKEN_BEDROCK) " +
	"and AWS_REGION; on EC2, ECS or EKS set AWS_BEDROCK_ENABLED=true to use the instance or task role"

// BedrockConfig configures the AWS Bedrock provider. Credentials always
// come from the AWS SDK's default chain (environment, shared config and
// credentials files and profiles, SSO, web identity, ECS and EC2 roles),
// or from Credentials when set; this package never sees them otherwise.
type BedrockConfig struct {
	// Region is the default region; empty means the AWS configuration's
	// (AWS_REGION, AWS_DEFAULT_REGION, the profile's region). A request's
	// Region overrides it.
	Region string
	// Endpoint overrides the endpoint of every region, e.g. a VPC
	// interface endpoint or a test fake; empty means AWS's regional
	// endpoint (https://bedrock-runtime.REGION.amazonaws.com).
	Endpoint string
	// HTTPClient carries the calls; nil means the SDK's default client,
	// which is best in production: it honours AWS_CA_BUNDLE (with a plain
	// *http.Client set, the SDK refuses to load when that variable is
	// set). Leave its Timeout at 0: it would cut long streams, while ctx
	// already bounds each call.
	HTTPClient *http.Client
	// Credentials replace the default credential chain when set (for
	// embedding and tests); nil means the chain.
	Credentials aws.CredentialsProvider
}

// Bedrock is a Client for AWS Bedrock's ConverseStream API. It keeps one
// SDK client per region, created on first use, and is safe for concurrent
// use.
type Bedrock struct {
	cfg BedrockConfig

	mu      sync.Mutex
	aws     *aws.Config // loaded on first use
	creds   *recordingCredentials
	clients map[string]*bedrockruntime.Client

	checkMu   sync.Mutex
	checkedAt time.Time
	checkErr  error
}

// maxBedrockRegions bounds the per-region client cache: regions come from
// hierarchy configurations, and a long-running service should not grow
// without limit if someone iterates over region names.
const maxBedrockRegions = 32

// regionPattern accepts AWS region names (us-east-1, us-gov-west-1,
// ap-southeast-3, …). A region becomes part of the endpoint's host name, so
// a caller-chosen value must never be able to carry a dot or a slash.
var regionPattern = regexp.MustCompile(`^[a-z]{2}(-[a-z]+)+-[0-9]{1,2}$`)

// NewBedrock builds the Bedrock provider. It reads no AWS configuration
// and retrieves no credentials yet: that happens on the first call (or
// CheckSetup), so a service that never uses Bedrock never touches the AWS
// chain.
func NewBedrock(cfg BedrockConfig) (*Bedrock, error) {
	if cfg.Endpoint != "" {
		u, err := url.Parse(cfg.Endpoint)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, errors.New("bedrock: the endpoint must be an absolute http(s) URL")
		}
	}
	if cfg.Region != "" && !regionPattern.MatchString(cfg.Region) {
		return nil, fmt.Errorf("bedrock: %q is not an AWS region name", cfg.Region)
	}
	return &Bedrock{cfg: cfg, clients: map[string]*bedrockruntime.Client{}}, nil
}

// Endpoint is the configured endpoint override, "" when AWS's is used.
func (b *Bedrock) Endpoint() string { return b.cfg.Endpoint }

// recordingCredentials remembers the last credentials it handed out so
// that error messages can be scrubbed of them without asking the chain
// again (which could block on a failing source).
type recordingCredentials struct {
	next aws.CredentialsProvider
	mu   sync.Mutex
	last aws.Credentials
}

func (r *recordingCredentials) Retrieve(ctx context.Context) (aws.Credentials, error) {
	c, err := r.next.Retrieve(ctx)
	if err == nil {
		r.mu.Lock()
		r.last = c
		r.mu.Unlock()
	}
	return c, err
}

// IsCredentialsProvider lets the SDK see through the wrapper, as it does
// through its own credentials cache (it checks for anonymous credentials).
func (r *recordingCredentials) IsCredentialsProvider(p aws.CredentialsProvider) bool {
	return aws.IsCredentialsProvider(r.next, p)
}

// ProviderSources passes the wrapped provider's sources on to the SDK's
// user agent, as if it were not wrapped.
func (r *recordingCredentials) ProviderSources() []aws.CredentialSource {
	if s, ok := r.next.(aws.CredentialProviderSource); ok {
		return s.ProviderSources()
	}
	return nil
}

func (r *recordingCredentials) secrets() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return []string{r.last.AccessKeyID, r.last.SecretAccessKey, r.last.SessionToken}
}

// awsConfig loads the shared AWS configuration once. A failure is not
// cached, so fixing a profile takes effect without a restart.
func (b *Bedrock) awsConfig(ctx context.Context) (aws.Config, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.aws != nil {
		return *b.aws, nil
	}
	opts := []func(*awsconfig.LoadOptions) error{
		// Temporal owns retries: one SDK attempt per activity attempt,
		// or retries would multiply and hide throttling from the policy.
		awsconfig.WithRetryer(func() aws.Retryer { return aws.NopRetryer{} }),
	}
	if b.cfg.HTTPClient != nil {
		opts = append(opts, awsconfig.WithHTTPClient(b.cfg.HTTPClient))
	}
	if b.cfg.Credentials != nil {
		opts = append(opts, awsconfig.WithCredentialsProvider(b.cfg.Credentials))
	}
	cfg, err := awsconfig.LoadDefaultConfig(ctx, opts...)
	if err != nil {
		return aws.Config{}, &loadError{fmt.Errorf("loading the AWS configuration: %w", err)}
	}
	if cfg.Credentials != nil {
		b.creds = &recordingCredentials{next: cfg.Credentials}
		cfg.Credentials = b.creds
	}
	// Wrapped after loading, so that the SDK still sees (and configures,
	// e.g. for AWS_CA_BUNDLE) its own client; nil means the client the SDK
	// would have built.
	var hc aws.HTTPClient = awshttp.NewBuildableClient()
	if cfg.HTTPClient != nil {
		hc = cfg.HTTPClient
	}
	// Traced: the provider's request is a span under the call's chat span.
	cfg.HTTPClient = readOnlyBodyClient{next: newTracedDoer(hc)}
	b.aws = &cfg
	return cfg, nil
}

// readOnlyBodyClient hides the request body's WriteTo method from
// net/http. The SDK wraps bodies in a closer whose WriteTo returns io.EOF
// once the SDK has closed it, which it does as soon as the response
// headers arrive; net/http's writer, still checking the body for extra
// bytes, then takes that EOF for a write error and closes the connection
// under the streaming response ("use of closed network connection"). A
// plain Read returning io.EOF is a normal end.
type readOnlyBodyClient struct{ next aws.HTTPClient }

func (c readOnlyBodyClient) Do(req *http.Request) (*http.Response, error) {
	if req.Body != nil && req.Body != http.NoBody {
		req.Body = readCloserOnly{req.Body}
	}
	return c.next.Do(req)
}

type readCloserOnly struct{ rc io.ReadCloser }

func (r readCloserOnly) Read(p []byte) (int, error) { return r.rc.Read(p) }
func (r readCloserOnly) Close() error               { return r.rc.Close() }

// region picks the request's region, else the configured default, else
// the AWS configuration's.
func (b *Bedrock) region(ctx context.Context, requested string) (string, error) {
	region := requested
	if region == "" {
		region = b.cfg.Region
	}
	if region == "" {
		cfg, err := b.awsConfig(ctx)
		if err != nil {
			return "", err
		}
		region = cfg.Region
	}
	if region == "" {
		return "", errNoRegion
	}
	if !regionPattern.MatchString(region) {
		return "", fmt.Errorf("%q is not an AWS region name", region)
	}
	return region, nil
}

var errNoRegion = errors.New("no AWS region: set AWS_REGION (or give the agent a region)")

// client returns the SDK client of a region, creating it on first use.
func (b *Bedrock) client(ctx context.Context, region string) (*bedrockruntime.Client, error) {
	cfg, err := b.awsConfig(ctx)
	if err != nil {
		return nil, err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if c, ok := b.clients[region]; ok {
		return c, nil
	}
	c := bedrockruntime.NewFromConfig(cfg, func(o *bedrockruntime.Options) {
		o.Region = region
		if b.cfg.Endpoint != "" {
			o.BaseEndpoint = aws.String(b.cfg.Endpoint)
		}
		o.Retryer = aws.NopRetryer{}
		o.RetryMaxAttempts = 0 // else AWS_MAX_ATTEMPTS would wrap the retryer again
	})
	if len(b.clients) < maxBedrockRegions {
		b.clients[region] = c
	}
	return c, nil
}

// freshProtocol gives one call a protocol instance of its own. The SDK's
// restJson1 protocol holds an event-stream codec whose decode state is
// shared by every stream of a client (smithy-go v1.28: an unsynchronised
// lazily created decoder and payload buffer); concurrent agents streaming
// on one client race on it. Only a restJson1 protocol is replaced, so an
// SDK that moves Bedrock to another protocol keeps its own.
func freshProtocol(o *bedrockruntime.Options) {
	if _, ok := o.Protocol.(*restjson1.Protocol); ok {
		o.Protocol = restjson1.New(schemas.AmazonBedrockFrontendService)
	}
}

// credentialCheckTTL is how long a failed credential check is remembered:
// long enough that validating many agents does not hammer a slow source
// (the EC2 metadata service times out), short enough that fixing the
// environment is noticed.
const credentialCheckTTL = 30 * time.Second

// CheckSetup tells whether a call to region (empty: the default region)
// could be signed, without calling Bedrock: the AWS configuration loads, a
// region is known and credentials can be retrieved (the chain is asked
// once, with a short timeout; success is remembered, failure for 30s). It
// returns a *models.Error with CodeMissingAPIKey or CodeInvalidConfig.
func (b *Bedrock) CheckSetup(ctx context.Context, region string) error {
	if _, err := b.region(ctx, region); err != nil {
		if errors.Is(err, errNoRegion) {
			return &models.Error{Code: models.CodeMissingAPIKey, Message: "provider aws_bedrock has no region: set AWS_REGION (or AWS_DEFAULT_REGION), or give the agent a region"}
		}
		var le *loadError
		if errors.As(err, &le) {
			return &models.Error{Code: models.CodeMissingAPIKey, Message: "provider aws_bedrock: the AWS configuration does not load: " + b.scrub(err.Error()), Err: err}
		}
		return &models.Error{Code: models.CodeInvalidConfig, Message: "provider aws_bedrock: " + err.Error()}
	}
	if err := b.checkCredentials(ctx); err != nil {
		return &models.Error{Code: models.CodeMissingAPIKey,
			Message: "provider aws_bedrock has no usable AWS credentials: " + BedrockHint, Err: errors.New(b.scrub(err.Error()))}
	}
	return nil
}

type loadError struct{ err error }

func (e *loadError) Error() string { return e.err.Error() }
func (e *loadError) Unwrap() error { return e.err }

func (b *Bedrock) checkCredentials(ctx context.Context) error {
	b.checkMu.Lock()
	defer b.checkMu.Unlock()
	if !b.checkedAt.IsZero() && (b.checkErr == nil || time.Since(b.checkedAt) < credentialCheckTTL) {
		return b.checkErr
	}
	b.checkErr = b.retrieveCredentials(ctx)
	b.checkedAt = time.Now()
	return b.checkErr
}

func (b *Bedrock) retrieveCredentials(ctx context.Context) error {
	// The SDK signs with a Bedrock API key instead when this is set.
	if bearerToken() != "" {
		return nil
	}
	cfg, err := b.awsConfig(ctx)
	if err != nil {
		return err
	}
	if cfg.Credentials == nil {
		return errors.New("no credential provider")
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	_, err = cfg.Credentials.Retrieve(ctx)
	return err
}

// Stream runs one ConverseStream call. See Client.
//
// Requests map to Converse as follows: system messages become the system
// prompt; user and tool messages become user turns (tool messages as
// toolResult blocks) and assistant messages assistant turns (tool calls as
// toolUse blocks), consecutive turns of one role merged because Converse
// requires them to alternate. A JSONSchema request gets an instruction in
// the system prompt, since Converse has no portable json_schema response
// format; the caller parses the answer tolerantly.
func (b *Bedrock) Stream(ctx context.Context, req Request, onDelta func(Delta)) (*Response, error) {
	if onDelta == nil {
		onDelta = func(Delta) {}
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	region, err := b.region(ctx, req.Region)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, b.newError(req.Model, false, err.Error())
	}
	input, err := buildConverseInput(req)
	if err != nil {
		return nil, b.newError(req.Model, false, err.Error())
	}
	client, err := b.client(ctx, region)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, b.newError(req.Model, false, err.Error())
	}
	out, err := client.ConverseStream(ctx, input, freshProtocol)
	if err != nil {
		return nil, b.classify(ctx, req.Model, err)
	}
	stream := out.GetStream()
	defer stream.Close()

	var (
		content, reasoning strings.Builder
		calls              []ToolCall
		byIndex            = map[int32]int{} // content block index -> position in calls
		finish             string
		stopped            bool
		usage              *types.TokenUsage
	)
	for ev := range stream.Events() {
		switch v := ev.(type) {
		case *types.ConverseStreamOutputMemberContentBlockStart:
			if tu, ok := v.Value.Start.(*types.ContentBlockStartMemberToolUse); ok {
				calls = append(calls, ToolCall{ID: aws.ToString(tu.Value.ToolUseId), Name: aws.ToString(tu.Value.Name)})
				byIndex[aws.ToInt32(v.Value.ContentBlockIndex)] = len(calls) - 1
			}
		case *types.ConverseStreamOutputMemberContentBlockDelta:
			switch d := v.Value.Delta.(type) {
			case *types.ContentBlockDeltaMemberText:
				if d.Value != "" {
					content.WriteString(d.Value)
					onDelta(Delta{Content: d.Value})
				}
			case *types.ContentBlockDeltaMemberReasoningContent:
				// Signatures and redacted reasoning are opaque: nothing
				// to show.
				if t, ok := d.Value.(*types.ReasoningContentBlockDeltaMemberText); ok && t.Value != "" {
					reasoning.WriteString(t.Value)
					onDelta(Delta{Reasoning: t.Value})
				}
			case *types.ContentBlockDeltaMemberToolUse:
				idx := aws.ToInt32(v.Value.ContentBlockIndex)
				pos, ok := byIndex[idx]
				if !ok { // a delta without its start: keep the input anyway
					calls = append(calls, ToolCall{})
					pos = len(calls) - 1
					byIndex[idx] = pos
				}
				calls[pos].Arguments += aws.ToString(d.Value.Input)
			}
		case *types.ConverseStreamOutputMemberMessageStop:
			stopped = true
			finish = finishReason(v.Value.StopReason)
		case *types.ConverseStreamOutputMemberMetadata:
			usage = v.Value.Usage
		}
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := stream.Err(); err != nil {
		return nil, b.classify(ctx, req.Model, err)
	}
	if !stopped {
		// The SDK reads a cut connection as a clean end of stream; without
		// messageStop the answer may be incomplete.
		return nil, b.newError(req.Model, true, "the stream ended before messageStop")
	}
	for i := range calls {
		if calls[i].ID == "" {
			calls[i].ID = fmt.Sprintf("call_%d", i)
		}
		if strings.TrimSpace(calls[i].Arguments) == "" {
			calls[i].Arguments = "{}" // a tool without input sends no delta
		}
	}
	resp := &Response{
		Content:      content.String(),
		Reasoning:    reasoning.String(),
		ToolCalls:    calls,
		FinishReason: finish,
		Model:        req.Model,
		Provider:     ProviderBedrock,
	}
	if usage != nil {
		resp.Usage = Usage{
			PromptTokens:     int(aws.ToInt32(usage.InputTokens)),
			CompletionTokens: int(aws.ToInt32(usage.OutputTokens)),
			TotalTokens:      int(aws.ToInt32(usage.TotalTokens)),
			CachedTokens:     int(aws.ToInt32(usage.CacheReadInputTokens)),
			CacheWriteTokens: int(aws.ToInt32(usage.CacheWriteInputTokens)),
		}
		if cache := resp.Usage.CachedTokens + resp.Usage.CacheWriteTokens; cache > 0 {
			// Bedrock's inputTokens leaves out the tokens read from and
			// written to the cache; as with OpenAI, the prompt's count
			// holds them, and the total is the prompt's and the answer's.
			resp.Usage.PromptTokens += cache
			resp.Usage.TotalTokens = resp.Usage.PromptTokens + resp.Usage.CompletionTokens
		}
		if resp.Usage.TotalTokens == 0 {
			resp.Usage.TotalTokens = resp.Usage.PromptTokens + resp.Usage.CompletionTokens
		}
	} else {
		resp.Usage = estimateUsage(req, resp)
	}
	return resp, nil
}

// finishReason maps Bedrock's stop reasons to the OpenAI names the rest of
// the service uses; unknown ones pass through.
func finishReason(r types.StopReason) string {
	switch r {
	case types.StopReasonEndTurn, types.StopReasonStopSequence:
		return "stop"
	case types.StopReasonToolUse:
		return "tool_calls"
	case types.StopReasonMaxTokens, types.StopReasonModelContextWindowExceeded:
		return "length"
	case types.StopReasonGuardrailIntervened, types.StopReasonContentFiltered:
		return "content_filter"
	}
	return string(r)
}

// jsonInstruction asks for JSON in the system prompt: Converse's
// structured output (outputConfig.textFormat) only works on some models
// and fails the others with a ValidationException.
func jsonInstruction(js *JSONSchema) string {
	name := js.Name
	if name == "" {
		name = "response"
	}
	return fmt.Sprintf("Answer with a single JSON object and nothing else: no prose, no Markdown code fences. "+
		"The object must match this JSON schema (%s):\n%s", name, string(js.Schema))
}

// emptyPlaceholder stands in for text Converse would refuse: it rejects
// blank text blocks and conversations that do not start with a user turn.
const emptyPlaceholder = "(empty)"

func buildConverseInput(req Request) (*bedrockruntime.ConverseStreamInput, error) {
	in := &bedrockruntime.ConverseStreamInput{ModelId: aws.String(req.Model)}
	if req.Model == "" {
		return nil, errors.New("no model id")
	}
	for _, m := range req.Messages {
		if m.Role == RoleSystem && strings.TrimSpace(m.Content) != "" {
			in.System = append(in.System, &types.SystemContentBlockMemberText{Value: m.Content})
		}
	}
	if js := req.JSONSchema; js != nil {
		if !json.Valid(js.Schema) {
			return nil, fmt.Errorf("json schema %q is not valid JSON", js.Name)
		}
		in.System = append(in.System, &types.SystemContentBlockMemberText{Value: jsonInstruction(js)})
	}

	// Converse refuses toolUse and toolResult blocks without a toolConfig;
	// a request that offers no tools but carries tool history gets that
	// history as text instead.
	toolsOffered := len(req.Tools) > 0
	var msgs []types.Message
	add := func(role types.ConversationRole, blocks ...types.ContentBlock) {
		if len(blocks) == 0 {
			return
		}
		if n := len(msgs); n > 0 && msgs[n-1].Role == role {
			msgs[n-1].Content = append(msgs[n-1].Content, blocks...)
			return
		}
		msgs = append(msgs, types.Message{Role: role, Content: blocks})
	}
	for _, m := range req.Messages {
		switch m.Role {
		case RoleSystem:
		case RoleAssistant:
			var blocks []types.ContentBlock
			if strings.TrimSpace(m.Content) != "" {
				blocks = append(blocks, &types.ContentBlockMemberText{Value: m.Content})
			}
			for i, tc := range m.ToolCalls {
				if !toolsOffered {
					blocks = append(blocks, &types.ContentBlockMemberText{Value: fmt.Sprintf("[called tool %s with %s]", tc.Name, tc.Arguments)})
					continue
				}
				id := tc.ID
				if id == "" {
					id = fmt.Sprintf("call_%d", i)
				}
				blocks = append(blocks, &types.ContentBlockMemberToolUse{Value: types.ToolUseBlock{
					ToolUseId: aws.String(id), Name: aws.String(tc.Name), Input: document.NewLazyDocument(toolInput(tc.Arguments)),
				}})
			}
			add(types.ConversationRoleAssistant, blocks...)
		case RoleTool:
			text := m.Content
			if strings.TrimSpace(text) == "" {
				text = emptyPlaceholder
			}
			if !toolsOffered || m.ToolCallID == "" {
				add(types.ConversationRoleUser, &types.ContentBlockMemberText{Value: "[tool result] " + text})
				continue
			}
			add(types.ConversationRoleUser, &types.ContentBlockMemberToolResult{Value: types.ToolResultBlock{
				ToolUseId: aws.String(m.ToolCallID),
				Content:   []types.ToolResultContentBlock{&types.ToolResultContentBlockMemberText{Value: text}},
			}})
		default: // user, and any role Converse does not know
			if strings.TrimSpace(m.Content) != "" {
				add(types.ConversationRoleUser, &types.ContentBlockMemberText{Value: m.Content})
			}
		}
	}
	if len(msgs) == 0 || msgs[0].Role != types.ConversationRoleUser {
		msgs = append([]types.Message{{Role: types.ConversationRoleUser, Content: []types.ContentBlock{
			&types.ContentBlockMemberText{Value: emptyPlaceholder},
		}}}, msgs...)
	}
	in.Messages = msgs

	if req.Temperature != nil || (req.MaxTokens != nil && *req.MaxTokens > 0) {
		ic := &types.InferenceConfiguration{}
		if req.Temperature != nil {
			ic.Temperature = aws.Float32(float32(*req.Temperature))
		}
		if req.MaxTokens != nil && *req.MaxTokens > 0 {
			ic.MaxTokens = aws.Int32(int32(min(*req.MaxTokens, 1<<31-1)))
		}
		in.InferenceConfig = ic
	}
	if toolsOffered {
		tc := &types.ToolConfiguration{}
		for _, t := range req.Tools {
			params := t.Parameters
			if len(params) == 0 {
				params = json.RawMessage(`{"type":"object","properties":{}}`)
			}
			var schema any
			if err := json.Unmarshal(params, &schema); err != nil {
				return nil, fmt.Errorf("tool %q: parameters are not valid JSON", t.Name)
			}
			spec := types.ToolSpecification{
				Name:        aws.String(t.Name),
				InputSchema: &types.ToolInputSchemaMemberJson{Value: document.NewLazyDocument(schema)},
			}
			if t.Description != "" {
				spec.Description = aws.String(t.Description)
			}
			tc.Tools = append(tc.Tools, &types.ToolMemberToolSpec{Value: spec})
		}
		in.ToolConfig = tc
	}
	return in, nil
}

// toolInput turns a tool call's argument text back into the JSON object
// Converse wants. Models do write broken JSON now and then; sending it
// back as a string keeps the conversation valid instead of failing every
// later call with a ValidationException.
func toolInput(args string) any {
	if strings.TrimSpace(args) == "" {
		return map[string]any{}
	}
	var v any
	if err := json.Unmarshal([]byte(args), &v); err == nil {
		if obj, ok := v.(map[string]any); ok {
			return obj
		}
	}
	return map[string]any{"raw_arguments": args}
}

func (b *Bedrock) newError(model string, retryable bool, msg string) *Error {
	return &Error{Provider: ProviderBedrock, Model: model, Retryable: retryable, Message: b.scrub(msg)}
}

// Error codes of Bedrock and the AWS front end, by whether trying again
// can help. Codes in neither list are judged by HTTP status.
var (
	bedrockRetryableCodes = map[string]bool{
		"ThrottlingException": true, "TooManyRequestsException": true, "ServiceUnavailableException": true,
		"ServiceUnavailable": true, "InternalServerException": true, "InternalFailure": true,
		"ModelNotReadyException": true, "ModelTimeoutException": true, "ModelStreamErrorException": true,
		"RequestTimeout": true, "RequestTimeoutException": true,
	}
	bedrockPermanentCodes = map[string]bool{
		"ValidationException": true, "AccessDeniedException": true, "ResourceNotFoundException": true,
		"ModelErrorException": true, "ServiceQuotaExceededException": true, "UnrecognizedClientException": true,
		"InvalidSignatureException": true, "IncompleteSignature": true, "MissingAuthenticationToken": true,
		"ExpiredTokenException": true, "SerializationException": true, "UnknownOperationException": true,
	}
)

// classify turns what the SDK returned into an *Error, or into ctx.Err()
// when the caller gave up.
func (b *Bedrock) classify(ctx context.Context, model string, err error) error {
	if ctxErr := ctx.Err(); ctxErr != nil {
		return ctxErr
	}
	e := &Error{Provider: ProviderBedrock, Model: model}
	var respErr *awshttp.ResponseError
	requestID := ""
	if errors.As(err, &respErr) {
		e.StatusCode = respErr.HTTPStatusCode()
		requestID = respErr.ServiceRequestID()
		if respErr.Response != nil {
			e.RetryAfter = parseRetryAfter(respErr.Response.Header, time.Now())
		}
	}
	var apiErr smithy.APIError
	var paramsErr smithy.InvalidParamsError
	var serErr *smithy.SerializationError
	var netErr net.Error
	msg := err.Error()
	switch {
	case errors.As(err, &apiErr):
		code := apiErr.ErrorCode()
		msg = code + ": " + apiErr.ErrorMessage()
		if requestID != "" {
			// AWS support asks for it.
			msg += " (request id " + requestID + ")"
		}
		switch {
		case bedrockRetryableCodes[code]:
			e.Retryable = true
		case bedrockPermanentCodes[code]:
		case e.StatusCode != 0:
			e.Retryable = RetryableStatus(e.StatusCode)
		default:
			// An unmodelled exception inside a stream that had started
			// fine: assume a passing upstream failure, as openai.go does.
			e.Retryable = true
		}
	case e.StatusCode != 0:
		e.Retryable = RetryableStatus(e.StatusCode)
	case isCredentialError(err):
		msg = "no usable AWS credentials (" + BedrockHint + "): " + msg
	case errors.As(err, &paramsErr), errors.As(err, &serErr):
		msg = "request refused before sending: " + msg
	case strings.Contains(msg, "failed to resolve service endpoint"):
		msg = "bad endpoint or region: " + msg
	case errors.Is(err, io.ErrUnexpectedEOF):
		msg, e.Retryable = "connection dropped mid-stream: "+msg, true
	case errors.As(err, &netErr) && netErr.Timeout():
		msg, e.Retryable = "timeout: "+msg, true
	default:
		// The network or a broken stream: worth another try.
		e.Retryable = true
	}
	e.Message = b.scrub(msg)
	return e
}

// isCredentialError spots the SDK's failures to find or refresh
// credentials, which carry no type of their own; retrying cannot help
// until someone fixes the environment.
func isCredentialError(err error) bool {
	s := err.Error()
	return strings.Contains(s, "get identity") || strings.Contains(s, "retrieve credentials") ||
		strings.Contains(s, "refresh cached credentials") || strings.Contains(s, "bearer token")
}

// accessKeyPattern matches AWS access key ids (AKIA… long-term, ASIA…
// temporary), which some AWS errors quote.
var accessKeyPattern = regexp.MustCompile(`\b(AKIA|ASIA|AIDA|AROA)[A-Z0-9]{12,}\b`)

// scrub removes credentials from text that may echo them and bounds its
// length, like OpenAICompatible.scrub.
func (b *Bedrock) scrub(msg string) string {
	secrets := []string{bearerToken()}
	b.mu.Lock()
	if b.creds != nil {
		secrets = append(secrets, b.creds.secrets()...)
	}
	b.mu.Unlock()
	for _, s := range secrets {
		if len(s) >= 8 {
			msg = strings.ReplaceAll(msg, s, "[redacted]")
		}
	}
	msg = accessKeyPattern.ReplaceAllString(msg, "[redacted]")
	return boundMessage(msg)
}

// bearerToken is the Bedrock API key the SDK reads from the environment.
func bearerToken() string { return strings.TrimSpace(os.Getenv("AWS_BEARER_TOKEN_BEDROCK")) }

// BedrockCredentialsInEnv tells whether the environment names AWS
// credentials the default chain will find without asking the network:
// access keys, a profile, a Bedrock API key, a web identity token (EKS)
// or a container credentials endpoint (ECS). The service enables
// aws_bedrock by default only then, so a machine without AWS never waits
// for the EC2 metadata service.
func BedrockCredentialsInEnv(lookup func(string) string) bool {
	set := func(name string) bool { return strings.TrimSpace(lookup(name)) != "" }
	return (set("AWS_ACCESS_KEY_ID") && set("AWS_SECRET_ACCESS_KEY")) ||
		set("AWS_PROFILE") || set("AWS_BEARER_TOKEN_BEDROCK") ||
		(set("AWS_WEB_IDENTITY_TOKEN_FILE") && set("AWS_ROLE_ARN")) ||
		set("AWS_CONTAINER_CREDENTIALS_RELATIVE_URI") || set("AWS_CONTAINER_CREDENTIALS_FULL_URI")
}

// bedrockPublicEndpoint is AWS's own endpoint of a region: a per-agent
// base URL naming it just means "Bedrock".
func bedrockPublicEndpoints(region string) []string {
	return []string{
		"https://bedrock-runtime." + region + ".amazonaws.com",
		"https://bedrock-runtime." + region + ".amazonaws.com.cn",
	}
}
