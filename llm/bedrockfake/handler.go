package bedrockfake

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/aws/aws-sdk-go-v2/aws/protocol/eventstream"

	"github.com/op-stack/executor/llm/internal/fakeserver"
)

// fake is the HTTP handler behind Server and ListenAndServe, around the
// shared script (rules, default answer, recorded calls).
type fake struct {
	*fakeserver.Script[Rule, Response, Call]
}

// hooks tell the shared script about this fake's rules and calls.
var hooks = fakeserver.Hooks[Rule, Response, Call]{
	Match:     func(rule *Rule, c *Call) bool { return rule.matches(c) },
	Responses: func(rule *Rule) (string, []Response) { return rule.Name, rule.Responses },
	Number: func(c *Call, index, rule int, name string) {
		c.Index, c.Rule, c.RuleName = index, rule, name
	},
	Copy: func(c Call) Call {
		c.Messages = append([]Message(nil), c.Messages...)
		c.System = append([]SystemBlock(nil), c.System...)
		return c
	},
}

func newFake(opts Options) *fake {
	def := Response{Content: DefaultContent}
	if opts.Default != nil {
		def = *opts.Default
	}
	return &fake{Script: fakeserver.NewScript(hooks, opts.Rules, def)}
}

const (
	modelPrefix  = "/model/"
	streamSuffix = "/converse-stream"
)

func (f *fake) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	// The escaped path keeps a model ARN's %2F apart from real slashes.
	escaped := r.URL.EscapedPath()
	switch {
	case strings.HasPrefix(escaped, modelPrefix) && strings.HasSuffix(escaped, streamSuffix):
		if r.Method != http.MethodPost {
			writeAWSError(w, http.StatusMethodNotAllowed, "UnknownOperationException", "use POST")
			return
		}
		id, err := url.PathUnescape(strings.TrimSuffix(strings.TrimPrefix(escaped, modelPrefix), streamSuffix))
		if err != nil || id == "" {
			writeAWSError(w, http.StatusBadRequest, "ValidationException", "bad model id in path")
			return
		}
		f.converseStream(w, r, id)
	default:
		if !f.ServeControl(w, r, escaped, func(w http.ResponseWriter, err error) {
			writeAWSError(w, http.StatusBadRequest, "ValidationException", "rules: "+err.Error())
		}) {
			writeAWSError(w, http.StatusNotFound, "UnknownOperationException", "the fake serves POST /model/{modelId}/converse-stream only")
		}
	}
}

// wireRequest is the ConverseStream request body.
type wireRequest struct {
	Messages        []Message        `json:"messages"`
	System          []SystemBlock    `json:"system"`
	InferenceConfig *InferenceConfig `json:"inferenceConfig"`
	ToolConfig      *ToolConfig      `json:"toolConfig"`
}

// parseAuth reads the SigV4 credential scope
// ("AWS4-HMAC-SHA256 Credential=AKID/20240101/us-east-1/bedrock/aws4_request, …")
// or notes a bearer token. The signature itself is not checked.
func parseAuth(c *Call, header string) {
	if strings.HasPrefix(header, "Bearer ") {
		c.BearerAuth = true
		return
	}
	_, rest, ok := strings.Cut(header, "Credential=")
	if !ok {
		return
	}
	scope, _, _ := strings.Cut(rest, ",")
	parts := strings.Split(strings.TrimSpace(scope), "/")
	if len(parts) >= 4 {
		c.AccessKeyID, c.Region, c.Service = parts[0], parts[2], parts[3]
	}
}

func (rule *Rule) matches(c *Call) bool {
	if rule.ModelID != "" && rule.ModelID != c.ModelID {
		return false
	}
	if rule.Region != "" && rule.Region != c.Region {
		return false
	}
	if rule.SystemContains != "" && !strings.Contains(c.SystemText(), rule.SystemContains) {
		return false
	}
	if rule.UserContains != "" {
		last := ""
		for _, m := range c.Messages {
			if m.Role == "user" {
				if t := m.Text(); t != "" {
					last = t
				}
			}
		}
		if !strings.Contains(last, rule.UserContains) {
			return false
		}
	}
	if rule.HasTools && len(c.ToolNames()) == 0 {
		return false
	}
	if rule.HasToolResult {
		found := false
		for _, m := range c.Messages {
			for _, b := range m.Content {
				found = found || b.ToolResult != nil
			}
		}
		if !found {
			return false
		}
	}
	return true
}

func (f *fake) converseStream(w http.ResponseWriter, r *http.Request, modelID string) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return // the client went away while sending
	}
	var wr wireRequest
	if err := json.Unmarshal(body, &wr); err != nil {
		writeAWSError(w, http.StatusBadRequest, "SerializationException", "the fake could not parse the request body: "+err.Error())
		return
	}
	c := Call{
		Path:            r.URL.EscapedPath(),
		ModelID:         modelID,
		Messages:        wr.Messages,
		System:          wr.System,
		InferenceConfig: wr.InferenceConfig,
		ToolConfig:      wr.ToolConfig,
		Body:            json.RawMessage(body),
		ReceivedAt:      time.Now(),
	}
	parseAuth(&c, r.Header.Get("Authorization"))
	idx, resp := f.Record(c)
	status := 0
	defer func() {
		f.Update(idx, func(c *Call) {
			c.FinishedAt = time.Now()
			c.Status = status
			if r.Context().Err() != nil && !c.Dropped {
				c.Aborted = true
			}
		})
	}()

	ctx := r.Context()
	if resp.Hang {
		f.Wait(ctx, -1)
		fakeserver.Abort(w)
		return
	}
	w.Header().Set("X-Amzn-Requestid", fmt.Sprintf("fake-request-%d", idx))
	if resp.Status != 0 && resp.Status != http.StatusOK {
		status = resp.Status
		typ, msg := errorDefaults(resp)
		writeAWSError(w, resp.Status, typ, msg)
		return
	}

	events := buildEvents(idx, &wr, &resp)
	w.Header().Set("Content-Type", "application/vnd.amazon.eventstream")
	w.WriteHeader(http.StatusOK)
	status = http.StatusOK
	rc := http.NewResponseController(w)
	enc := eventstream.NewEncoder()
	for i, ev := range events {
		if i > 0 && resp.TokenDelay > 0 && !f.Wait(ctx, resp.TokenDelay) {
			return
		}
		if resp.StreamException != "" && i == resp.ExceptionAfterEvents {
			ev = exceptionMessage(resp)
		}
		var buf bytes.Buffer
		if err := enc.Encode(&buf, ev); err != nil {
			panic(err) // the fake built a message the encoder refuses: a bug here
		}
		if _, err := w.Write(buf.Bytes()); err != nil {
			return
		}
		if err := rc.Flush(); err != nil {
			return
		}
		f.Update(idx, func(c *Call) { c.Events++ })
		if resp.StreamException != "" && i == resp.ExceptionAfterEvents {
			return // an exception ends the stream
		}
		if resp.DropAfterEvents > 0 && i+1 >= resp.DropAfterEvents {
			f.Update(idx, func(c *Call) { c.Dropped = true })
			fakeserver.Abort(w)
			return
		}
		if resp.HangAfterEvents > 0 && i+1 >= resp.HangAfterEvents {
			f.Wait(ctx, -1)
			fakeserver.Abort(w)
			return
		}
	}
}

// event builds one event message. Bedrock pads each payload with a "p"
// field of varying length (so sizes do not leak token lengths); the fake
// does too, which checks that clients ignore unknown fields.
func event(eventType string, payload map[string]any) eventstream.Message {
	payload["p"] = strings.Repeat("abcdefghij", 1+len(eventType)%3)
	b, err := json.Marshal(payload)
	if err != nil {
		panic(err)
	}
	var m eventstream.Message
	m.Headers.Set(":event-type", eventstream.StringValue(eventType))
	m.Headers.Set(":content-type", eventstream.StringValue("application/json"))
	m.Headers.Set(":message-type", eventstream.StringValue("event"))
	m.Payload = b
	return m
}

// exceptionMessage is a modeled exception event, which the SDK turns into
// the stream's error (types.ThrottlingException and so on).
func exceptionMessage(resp Response) eventstream.Message {
	name := resp.StreamException
	if name != "" {
		// Accept "ThrottlingException" as well as the member name.
		name = strings.ToLower(name[:1]) + name[1:]
	}
	msg := resp.StreamExceptionMessage
	if msg == "" {
		msg = "The fake stream failed with " + name + "."
	}
	payload := map[string]any{"message": msg}
	if name == "modelStreamErrorException" {
		payload["originalStatusCode"] = 500
		payload["originalMessage"] = msg
	}
	b, _ := json.Marshal(payload)
	var m eventstream.Message
	m.Headers.Set(":exception-type", eventstream.StringValue(name))
	m.Headers.Set(":content-type", eventstream.StringValue("application/json"))
	m.Headers.Set(":message-type", eventstream.StringValue("exception"))
	m.Payload = b
	return m
}

// buildEvents renders a scripted answer as ConverseStream events, in the
// order Bedrock sends them: messageStart; per content block a start (tool
// use only), deltas and a stop; messageStop; metadata.
func buildEvents(idx int, wr *wireRequest, resp *Response) []eventstream.Message {
	size := resp.ChunkSize
	if size <= 0 {
		size = 4
	}
	evs := []eventstream.Message{event("messageStart", map[string]any{"role": "assistant"})}
	block := 0
	if resp.Reasoning != "" {
		for _, piece := range split(resp.Reasoning, size) {
			evs = append(evs, event("contentBlockDelta", map[string]any{
				"contentBlockIndex": block,
				"delta":             map[string]any{"reasoningContent": map[string]any{"text": piece}},
			}))
		}
		evs = append(evs, event("contentBlockDelta", map[string]any{
			"contentBlockIndex": block,
			"delta":             map[string]any{"reasoningContent": map[string]any{"signature": "fake-signature"}},
		}))
		evs = append(evs, event("contentBlockStop", map[string]any{"contentBlockIndex": block}))
		block++
	}
	if resp.Content != "" {
		for _, piece := range split(resp.Content, size) {
			evs = append(evs, event("contentBlockDelta", map[string]any{
				"contentBlockIndex": block,
				"delta":             map[string]any{"text": piece},
			}))
		}
		evs = append(evs, event("contentBlockStop", map[string]any{"contentBlockIndex": block}))
		block++
	}
	for i, tu := range resp.ToolUses {
		id := tu.ID
		if id == "" {
			id = fmt.Sprintf("tooluse_fake_%d_%d", idx, i)
		}
		evs = append(evs, event("contentBlockStart", map[string]any{
			"contentBlockIndex": block,
			"start":             map[string]any{"toolUse": map[string]any{"toolUseId": id, "name": tu.Name}},
		}))
		input := tu.Input
		if input == "" {
			input = "{}"
		}
		for _, piece := range split(input, size) {
			evs = append(evs, event("contentBlockDelta", map[string]any{
				"contentBlockIndex": block,
				"delta":             map[string]any{"toolUse": map[string]any{"input": piece}},
			}))
		}
		evs = append(evs, event("contentBlockStop", map[string]any{"contentBlockIndex": block}))
		block++
	}
	if !resp.OmitMessageStop {
		stop := resp.StopReason
		if stop == "" {
			stop = "end_turn"
			if len(resp.ToolUses) > 0 {
				stop = "tool_use"
			}
		}
		evs = append(evs, event("messageStop", map[string]any{"stopReason": stop}))
	}
	if !resp.OmitMetadata {
		u := resp.Usage
		if u == (Usage{}) {
			u = estimate(wr, resp)
		}
		usage := map[string]any{"inputTokens": u.InputTokens, "outputTokens": u.OutputTokens, "totalTokens": u.TotalTokens}
		if u.CacheReadInputTokens > 0 {
			usage["cacheReadInputTokens"] = u.CacheReadInputTokens
		}
		if u.CacheWriteInputTokens > 0 {
			usage["cacheWriteInputTokens"] = u.CacheWriteInputTokens
		}
		evs = append(evs, event("metadata", map[string]any{
			"usage":   usage,
			"metrics": map[string]any{"latencyMs": 42},
		}))
	}
	return evs
}

func estimate(wr *wireRequest, resp *Response) Usage {
	in := 0
	for _, s := range wr.System {
		in += len(s.Text)
	}
	for _, m := range wr.Messages {
		in += len(m.Text())
	}
	out := len(resp.Content) + len(resp.Reasoning)
	for _, tu := range resp.ToolUses {
		out += len(tu.Name) + len(tu.Input)
	}
	u := Usage{InputTokens: (in + 3) / 4, OutputTokens: (out + 3) / 4}
	u.TotalTokens = u.InputTokens + u.OutputTokens
	return u
}

// split cuts s into pieces of n runes.
func split(s string, n int) []string {
	var out []string
	for len(s) > 0 {
		cut, count := 0, 0
		for cut < len(s) && count < n {
			_, size := utf8.DecodeRuneInString(s[cut:])
			cut += size
			count++
		}
		out = append(out, s[:cut])
		s = s[cut:]
	}
	return out
}

func errorDefaults(resp Response) (typ, msg string) {
	var dType, dMsg string
	switch s := resp.Status; {
	case s == http.StatusTooManyRequests:
		dType, dMsg = "ThrottlingException", "Too many requests, please wait before trying again. (fake)"
	case s == http.StatusBadRequest:
		dType, dMsg = "ValidationException", "The provided request is not valid. (fake)"
	case s == http.StatusForbidden:
		dType, dMsg = "AccessDeniedException", "You don't have access to the model with the specified model ID. (fake)"
	case s == http.StatusNotFound:
		dType, dMsg = "ResourceNotFoundException", "The requested resource could not be found. (fake)"
	case s == http.StatusRequestTimeout:
		dType, dMsg = "ModelTimeoutException", "The model took too long to answer. (fake)"
	case s == http.StatusFailedDependency:
		dType, dMsg = "ModelErrorException", "The model failed to process the request. (fake)"
	case s == http.StatusServiceUnavailable:
		dType, dMsg = "ServiceUnavailableException", "The service is unavailable. (fake)"
	case s >= 500:
		dType, dMsg = "InternalServerException", "The fake server had an internal error."
	default:
		dType, dMsg = "ValidationException", fmt.Sprintf("The fake answered %d %s.", s, http.StatusText(s))
	}
	typ, msg = resp.ErrorType, resp.ErrorMessage
	if typ == "" {
		typ = dType
	}
	if msg == "" {
		msg = dMsg
	}
	return typ, msg
}

// writeAWSError answers in the restJson1 error shape the SDK decodes into
// its typed exceptions: the type in x-amzn-errortype, {"message": …}.
func writeAWSError(w http.ResponseWriter, status int, typ, msg string) {
	body, _ := json.Marshal(map[string]string{"message": msg})
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Amzn-Errortype", typ)
	w.WriteHeader(status)
	_, _ = w.Write(body)
}
