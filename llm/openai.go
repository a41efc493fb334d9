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
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	openai "github.com/sashabaranov/go-openai"
)

// Base URLs used when a ProviderConfig leaves BaseURL empty.
const (
	OpenAIBaseURL     = "https://api.openai.com/v1"
	OpenRouterBaseURL = "https://openrouter.ai/api/v1"
)

// ProviderConfig describes one OpenAI-compatible endpoint.
type ProviderConfig struct {
	// Name labels the provider in responses, errors and logs: "openai",
	// "openrouter", "compatible".
	Name string
	// BaseURL ends before /chat/completions, e.g. https://api.openai.com/v1.
	// Empty means OpenAIBaseURL, or OpenRouterBaseURL for "openrouter".
	BaseURL string
	// APIKey is sent as a bearer token and scrubbed from every error text.
	// Empty sends no Authorization header (local servers).
	APIKey string
	// Key, when set, replaces APIKey: the key is read from it for every
	// request, so a key rotated in its file (Key.Reload) is sent from the
	// next request on.
	Key *Key
	// HTTPClient carries the calls; nil means a plain client. Leave its
	// Timeout at 0: it would cut long streams, while ctx already bounds
	// each call.
	HTTPClient *http.Client
}

// OpenAICompatible is a Client for OpenAI's chat completions API and the
// many endpoints that copy it (OpenRouter, vLLM, Ollama, LiteLLM...).
type OpenAICompatible struct {
	name   string
	key    *Key
	client *openai.Client
}

// streamKeepaliveLimit bounds the non-data lines go-openai tolerates
// between two chunks. Its default of 300 is too low for providers that
// send SSE comments as keepalives while a slow model thinks (OpenRouter's
// ": OPENROUTER PROCESSING"), which would fail healthy streams.
const streamKeepaliveLimit = 100000

// NewOpenAICompatible builds a client for one provider.
func NewOpenAICompatible(cfg ProviderConfig) *OpenAICompatible {
	base := baseURLFor(cfg)
	// Traced: the provider's request is a span under the call's chat span.
	hc := tracedHTTPClient(cfg.HTTPClient)
	key := cfg.Key
	if key == nil {
		key = NewKey(cfg.Name, cfg.APIKey)
	}
	// No token for go-openai, which would fix it for the client's life:
	// headerRecorder sets the key in use for each request.
	oc := openai.DefaultConfig("")
	oc.BaseURL = strings.TrimRight(base, "/")
	oc.HTTPClient = headerRecorder{next: hc, key: key}
	oc.EmptyMessagesLimit = streamKeepaliveLimit
	return &OpenAICompatible{name: cfg.Name, key: key, client: openai.NewClientWithConfig(oc)}
}

func baseURLFor(cfg ProviderConfig) string {
	switch {
	case cfg.BaseURL != "":
		return cfg.BaseURL
	case cfg.Name == "openrouter":
		return OpenRouterBaseURL
	default:
		return OpenAIBaseURL
	}
}

// Name is the provider name given at construction.
func (c *OpenAICompatible) Name() string { return c.name }

// responseInfo is what headerRecorder saw of the HTTP response to one
// call. go-openai's errors carry the status but not the headers, and
// Retry-After is only in the headers.
type responseInfo struct {
	mu         sync.Mutex
	status     int
	retryAfter time.Duration
}

type responseInfoKey struct{}

// headerRecorder wraps the HTTP client that go-openai calls (its
// ClientConfig.HTTPClient is an interface with Do) and copies the status
// and Retry-After of each response into the responseInfo found in the
// request's context, so concurrent calls never see each other's headers.
// It also sets the Authorization header from the provider's Key, read at
// each request, so a rotated key is used from the next request on.
type headerRecorder struct {
	next *http.Client
	key  *Key
}

func (h headerRecorder) Do(req *http.Request) (*http.Response, error) {
	if k := h.key.Get(); k != "" {
		req.Header.Set("Authorization", "Bearer "+k)
	}
	resp, err := h.next.Do(req)
	if err != nil {
		return resp, err
	}
	if info, ok := req.Context().Value(responseInfoKey{}).(*responseInfo); ok {
		info.mu.Lock()
		info.status = resp.StatusCode
		info.retryAfter = parseRetryAfter(resp.Header, time.Now())
		info.mu.Unlock()
	}
	return resp, nil
}

func (i *responseInfo) get() (int, time.Duration) {
	i.mu.Lock()
	defer i.mu.Unlock()
	return i.status, i.retryAfter
}

// parseRetryAfter reads Retry-After as seconds or an HTTP date, preferring
// the millisecond header some OpenAI deployments add. Unparseable or past
// values count as absent.
func parseRetryAfter(h http.Header, now time.Time) time.Duration {
	if ms := strings.TrimSpace(h.Get("Retry-After-Ms")); ms != "" {
		if v, err := strconv.ParseFloat(ms, 64); err == nil && v > 0 {
			return time.Duration(v * float64(time.Millisecond))
		}
	}
	v := strings.TrimSpace(h.Get("Retry-After"))
	if v == "" {
		return 0
	}
	if secs, err := strconv.ParseFloat(v, 64); err == nil {
		if secs <= 0 {
			return 0
		}
		return time.Duration(secs * float64(time.Second))
	}
	if at, err := http.ParseTime(v); err == nil && at.After(now) {
		return at.Sub(now)
	}
	return 0
}

// tinyTemperature stands in for 0: go-openai's Temperature is a float32
// tagged omitempty, so a real 0 would be dropped and the provider would use
// its default (1). 1e-6 decodes exactly as greedily as 0.
const tinyTemperature = 1e-6

func (c *OpenAICompatible) buildRequest(req Request) (openai.ChatCompletionRequest, error) {
	out := openai.ChatCompletionRequest{
		Model:         req.Model,
		Stream:        true,
		StreamOptions: &openai.StreamOptions{IncludeUsage: true},
	}
	for _, m := range req.Messages {
		om := openai.ChatCompletionMessage{Role: m.Role, Content: m.Content, ToolCallID: m.ToolCallID}
		for _, tc := range m.ToolCalls {
			om.ToolCalls = append(om.ToolCalls, openai.ToolCall{
				ID: tc.ID, Type: openai.ToolTypeFunction,
				Function: openai.FunctionCall{Name: tc.Name, Arguments: tc.Arguments},
			})
		}
		out.Messages = append(out.Messages, om)
	}
	if req.Temperature != nil {
		out.Temperature = float32(*req.Temperature)
		if out.Temperature == 0 {
			out.Temperature = tinyTemperature
		}
	}
	if req.MaxTokens != nil && *req.MaxTokens > 0 {
		out.MaxTokens = *req.MaxTokens
		// max_tokens is what compatible endpoints understand, but OpenAI's
		// reasoning models (o-series, gpt-5...) refuse it, and go-openai
		// knows which those are: ask its validator instead of keeping a
		// list here.
		if errors.Is(openai.NewReasoningValidator().Validate(out), openai.ErrReasoningModelMaxTokensDeprecated) {
			out.MaxTokens, out.MaxCompletionTokens = 0, *req.MaxTokens
		}
	}
	for _, t := range req.Tools {
		params := t.Parameters
		if len(params) == 0 {
			// Providers reject "parameters": null; an empty object schema
			// means "no arguments".
			params = json.RawMessage(`{"type":"object","properties":{}}`)
		}
		if !json.Valid(params) {
			return out, fmt.Errorf("tool %q: parameters are not valid JSON", t.Name)
		}
		out.Tools = append(out.Tools, openai.Tool{Type: openai.ToolTypeFunction, Function: &openai.FunctionDefinition{
			Name: t.Name, Description: t.Description, Parameters: params,
		}})
	}
	if js := req.JSONSchema; js != nil {
		if !json.Valid(js.Schema) {
			return out, fmt.Errorf("json schema %q is not valid JSON", js.Name)
		}
		name := js.Name
		if name == "" {
			name = "response" // OpenAI requires a name
		}
		out.ResponseFormat = &openai.ChatCompletionResponseFormat{
			Type: openai.ChatCompletionResponseFormatTypeJSONSchema,
			JSONSchema: &openai.ChatCompletionResponseFormatJSONSchema{
				Name: name, Schema: js.Schema, Strict: js.Strict,
			},
		}
	}
	return out, nil
}

// chunkExtras reads what go-openai's chunk type does not: OpenRouter's
// "reasoning" delta (go-openai decodes only "reasoning_content") and an
// "error" object some providers put in a chunk when the upstream model
// fails mid-stream.
type chunkExtras struct {
	Choices []struct {
		Delta struct {
			Reasoning *string `json:"reasoning"`
		} `json:"delta"`
	} `json:"choices"`
	Error *openai.APIError `json:"error"`
}

// Stream runs one streamed chat completion. See Client.
//
// Usage: when the provider reports none (some compatible servers ignore
// stream_options.include_usage), it is estimated at four characters a
// token and Usage.Estimated is set.
func (c *OpenAICompatible) Stream(ctx context.Context, req Request, onDelta func(Delta)) (*Response, error) {
	if onDelta == nil {
		onDelta = func(Delta) {}
	}
	oreq, err := c.buildRequest(req)
	if err != nil {
		return nil, c.newError(req.Model, 0, false, err.Error())
	}
	info := &responseInfo{}
	callCtx := context.WithValue(ctx, responseInfoKey{}, info)

	stream, err := c.client.CreateChatCompletionStream(callCtx, oreq)
	if err != nil {
		return nil, c.classify(ctx, req.Model, err, info)
	}
	defer stream.Close()

	var (
		content, reasoning strings.Builder
		calls              []ToolCall
		byIndex            = map[int]int{} // tool call index -> position in calls
		finish             string
		usage              *openai.Usage
		chunks             int
	)
	for {
		raw, err := stream.RecvRaw()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, c.classify(ctx, req.Model, err, info)
		}
		var chunk openai.ChatCompletionStreamResponse
		var extras chunkExtras
		if err := json.Unmarshal(raw, &chunk); err != nil {
			return nil, c.newError(req.Model, 0, true, "malformed stream chunk: "+err.Error())
		}
		_ = json.Unmarshal(raw, &extras) // best effort: the fields are optional
		if extras.Error != nil && extras.Error.Message != "" {
			return nil, c.classify(ctx, req.Model, extras.Error, info)
		}
		chunks++
		if chunk.Usage != nil {
			usage = chunk.Usage
		}
		for i, ch := range chunk.Choices {
			if ch.Index != 0 {
				continue // n is never set, so only choice 0 exists
			}
			r := ch.Delta.ReasoningContent
			if r == "" && i < len(extras.Choices) && extras.Choices[i].Delta.Reasoning != nil {
				r = *extras.Choices[i].Delta.Reasoning
			}
			if r != "" {
				reasoning.WriteString(r)
				onDelta(Delta{Reasoning: r})
			}
			// A refusal is the model's answer; surface it as content so it
			// is not silently lost.
			if text := ch.Delta.Content + ch.Delta.Refusal; text != "" {
				content.WriteString(text)
				onDelta(Delta{Content: text})
			}
			for _, d := range ch.Delta.ToolCalls {
				calls = mergeToolCall(calls, byIndex, d)
			}
			if ch.FinishReason != "" {
				finish = string(ch.FinishReason)
			}
		}
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if chunks == 0 {
		// A body with no data line at all is not an answer; most likely a
		// proxy that ignored stream:true or cut the response.
		return nil, c.newError(req.Model, 0, true, "the stream ended before any chunk arrived")
	}
	for i := range calls {
		if calls[i].ID == "" {
			// Some providers (Gemini through OpenRouter) omit ids; tool
			// results must still name the call they answer.
			calls[i].ID = fmt.Sprintf("call_%d", i)
		}
	}
	resp := &Response{
		Content:      content.String(),
		Reasoning:    reasoning.String(),
		ToolCalls:    calls,
		FinishReason: finish,
		Model:        req.Model,
		Provider:     c.name,
	}
	if usage != nil {
		resp.Usage = Usage{PromptTokens: usage.PromptTokens, CompletionTokens: usage.CompletionTokens, TotalTokens: usage.TotalTokens}
		if d := usage.PromptTokensDetails; d != nil {
			resp.Usage.CachedTokens = d.CachedTokens
		}
		if d := usage.CompletionTokensDetails; d != nil {
			resp.Usage.ReasoningTokens = d.ReasoningTokens
		}
		if resp.Usage.TotalTokens == 0 {
			resp.Usage.TotalTokens = resp.Usage.PromptTokens + resp.Usage.CompletionTokens
		}
	} else {
		resp.Usage = estimateUsage(req, resp)
	}
	return resp, nil
}

// mergeToolCall folds one streamed tool-call delta into calls. Deltas
// name their call by index; the first carries id and name, the rest carry
// pieces of the arguments. Providers that omit the index are handled by
// treating a delta with a new id as a new call and anything else as a
// continuation of the last one.
func mergeToolCall(calls []ToolCall, byIndex map[int]int, d openai.ToolCall) []ToolCall {
	pos := -1
	if d.Index != nil {
		if p, ok := byIndex[*d.Index]; ok {
			pos = p
		}
	} else if len(calls) > 0 && (d.ID == "" || d.ID == calls[len(calls)-1].ID) {
		pos = len(calls) - 1
	}
	if pos < 0 {
		calls = append(calls, ToolCall{})
		pos = len(calls) - 1
		if d.Index != nil {
			byIndex[*d.Index] = pos
		}
	}
	tc := &calls[pos]
	if d.ID != "" {
		tc.ID = d.ID
	}
	if name := d.Function.Name; name != "" && name != tc.Name {
		tc.Name += name
	}
	tc.Arguments += d.Function.Arguments
	return calls
}

// estimateUsage guesses token counts at four characters a token.
func estimateUsage(req Request, resp *Response) Usage {
	prompt := 0
	for _, m := range req.Messages {
		prompt += len(m.Content)
		for _, tc := range m.ToolCalls {
			prompt += len(tc.Name) + len(tc.Arguments)
		}
	}
	completion := len(resp.Content) + len(resp.Reasoning)
	for _, tc := range resp.ToolCalls {
		completion += len(tc.Name) + len(tc.Arguments)
	}
	u := Usage{PromptTokens: (prompt + 3) / 4, CompletionTokens: (completion + 3) / 4, Estimated: true}
	u.TotalTokens = u.PromptTokens + u.CompletionTokens
	return u
}

// RetryableStatus tells whether an HTTP status is worth retrying: request
// timeout, conflict, too early, rate limits and server errors. Other 4xx
// mean the request itself is wrong and will fail again.
func RetryableStatus(code int) bool {
	switch code {
	case http.StatusRequestTimeout, http.StatusConflict, http.StatusTooEarly, http.StatusTooManyRequests:
		return true
	}
	return code >= 500
}

// maxMessageLen keeps a provider's HTML error page out of logs and
// workflow histories.
const maxMessageLen = 500

func (c *OpenAICompatible) newError(model string, status int, retryable bool, msg string) *Error {
	return &Error{
		Provider:   c.name,
		Model:      model,
		StatusCode: status,
		Retryable:  retryable,
		Message:    c.scrub(msg),
	}
}

// scrub removes the API key, and the keys it replaced, from text that may
// echo it (some providers quote the key they rejected) and bounds its
// length.
func (c *OpenAICompatible) scrub(msg string) string {
	return boundMessage(c.key.scrub(msg))
}

// boundMessage trims msg and cuts it to maxMessageLen bytes on a rune
// boundary.
func boundMessage(msg string) string {
	msg = strings.TrimSpace(msg)
	if len(msg) > maxMessageLen {
		cut := maxMessageLen
		for cut > 0 && !utf8.RuneStart(msg[cut]) {
			cut--
		}
		msg = msg[:cut] + "…"
	}
	return msg
}

// clientSideErrors are go-openai's refusals to send a request; sending the
// same request again fails the same way.
var clientSideErrors = []error{
	openai.ErrChatCompletionInvalidModel,
	openai.ErrContentFieldsMisused,
	openai.ErrReasoningEffortUnsupported,
	openai.ErrReasoningToolsRequireResponses,
	openai.ErrReasoningSamplingUnsupported,
	openai.ErrReasoningModelMaxTokensDeprecated,
	openai.ErrReasoningModelLimitationsLogprobs,
	openai.ErrReasoningModelLimitationsOther,
	openai.ErrO1BetaLimitationsMessageTypes,
	openai.ErrO1BetaLimitationsTools,
}

// classify turns whatever go-openai or the network returned into an
// *Error, or into ctx.Err() when the caller gave up, so that callers can
// tell their own cancellation from a provider failure.
func (c *OpenAICompatible) classify(ctx context.Context, model string, err error, info *responseInfo) error {
	if ctxErr := ctx.Err(); ctxErr != nil {
		return ctxErr
	}
	seenStatus, retryAfter := info.get()

	var apiErr *openai.APIError
	var reqErr *openai.RequestError
	var e *Error
	switch {
	case errors.As(err, &reqErr) && reqErr.HTTPStatusCode != 0:
		// The error body was not OpenAI's JSON: keep a slice of it.
		msg := strings.TrimSpace(string(reqErr.Body))
		if msg == "" {
			msg = http.StatusText(reqErr.HTTPStatusCode)
		}
		e = c.newError(model, reqErr.HTTPStatusCode, RetryableStatus(reqErr.HTTPStatusCode), msg)
	case errors.As(err, &apiErr):
		status := apiErr.HTTPStatusCode
		msg := apiErr.Message
		if t, ok := apiErr.Code.(string); ok && t != "" {
			msg += " (" + t + ")"
		} else if apiErr.Type != "" {
			msg += " (" + apiErr.Type + ")"
		}
		if status != 0 {
			e = c.newError(model, status, RetryableStatus(status), msg)
			break
		}
		// An error event inside a stream that had started fine. Providers
		// that relay an upstream failure put its HTTP status in code;
		// without one, assume a passing upstream failure.
		retryable := true
		if code, ok := apiErr.Code.(int); ok && code >= 400 && code < 600 {
			retryable = RetryableStatus(code)
		}
		e = c.newError(model, 0, retryable, "error in stream: "+msg)
	default:
		e = c.classifyTransport(model, err)
	}
	if e.StatusCode == 0 && seenStatus >= 400 {
		e.StatusCode = seenStatus
		e.Retryable = RetryableStatus(seenStatus)
	}
	if e.StatusCode != 0 || seenStatus >= 400 {
		e.RetryAfter = retryAfter
	}
	return e
}

// classifyTransport handles errors that are not an HTTP answer: requests
// that could not be built or sent, and streams that broke.
func (c *OpenAICompatible) classifyTransport(model string, err error) *Error {
	for _, ce := range clientSideErrors {
		if errors.Is(err, ce) {
			return c.newError(model, 0, false, "request refused before sending: "+err.Error())
		}
	}
	var urlErr *url.Error
	if errors.As(err, &urlErr) && urlErr.Op == "parse" {
		return c.newError(model, 0, false, "bad base URL: "+err.Error())
	}
	var marshalErr *json.MarshalerError
	var unsupported *json.UnsupportedValueError
	if errors.As(err, &marshalErr) || errors.As(err, &unsupported) {
		return c.newError(model, 0, false, "request could not be encoded: "+err.Error())
	}
	msg := err.Error()
	var netErr net.Error
	switch {
	case errors.Is(err, io.ErrUnexpectedEOF):
		msg = "connection dropped mid-stream: " + msg
	case errors.As(err, &netErr) && netErr.Timeout():
		msg = "timeout: " + msg
	case errors.Is(err, openai.ErrTooManyEmptyStreamMessages):
		msg = "stream stalled with too many empty messages: " + msg
	}
	// Everything else is the network or a broken stream: worth another try.
	return c.newError(model, 0, true, msg)
}

// CheckKey asks the provider whether it accepts the key, with its
// cheapest authenticated request (GET /models, which costs no tokens). It
// returns nil when the provider answered 2xx; an *Error whose KeyRejected
// is true when it refused the key (401, 403); another *Error when the
// check says nothing about the key (no /models on a compatible server, a
// 5xx, the network), which callers should report as "could not check"
// rather than as a bad key.
func (c *OpenAICompatible) CheckKey(ctx context.Context) error {
	info := &responseInfo{}
	callCtx := context.WithValue(ctx, responseInfoKey{}, info)
	if _, err := c.client.ListModels(callCtx); err != nil {
		return c.classify(ctx, "", err, info)
	}
	return nil
}
