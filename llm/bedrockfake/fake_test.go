package bedrockfake

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws/protocol/eventstream"
)

// These tests speak raw HTTP and decode the event stream by hand, so the
// fake's wire format is checked independently of the SDK (the llm
// package's tests run the SDK against it).

const body = `{"messages":[{"role":"user","content":[{"text":"hello"}]}],"system":[{"text":"be brief"}],` +
	`"inferenceConfig":{"maxTokens":50,"temperature":0.5},` +
	`"toolConfig":{"tools":[{"toolSpec":{"name":"now","inputSchema":{"json":{"type":"object"}}}}]}}`

func post(t *testing.T, s *Server, modelID, auth string) *http.Response {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, s.URL()+"/model/"+url.PathEscape(modelID)+"/converse-stream", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

type decoded struct {
	messageType, eventType string
	payload                map[string]any
}

func decodeAll(t *testing.T, r io.Reader) []decoded {
	t.Helper()
	dec := eventstream.NewDecoder()
	var out []decoded
	for {
		msg, err := dec.Decode(r, nil)
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		d := decoded{messageType: msg.Headers.Get(":message-type").String()}
		if v := msg.Headers.Get(":event-type"); v != nil {
			d.eventType = v.String()
		} else if v := msg.Headers.Get(":exception-type"); v != nil {
			d.eventType = v.String()
		}
		if err := json.Unmarshal(msg.Payload, &d.payload); err != nil {
			t.Fatal(err)
		}
		out = append(out, d)
	}
}

func TestStreamEncoding(t *testing.T) {
	s := New(t, Rule{ModelID: "arn:aws:bedrock:us-east-1:123:inference-profile/us.anthropic.claude", Responses: []Response{{
		Reasoning: "hmm", Content: "hi there", ToolUses: []ToolUse{{ID: "t1", Name: "now", Input: `{"tz":"UTC"}`}},
		ChunkSize: 100, Usage: Usage{InputTokens: 1, OutputTokens: 2, TotalTokens: 3},
	}}})
	resp := post(t, s, "arn:aws:bedrock:us-east-1:123:inference-profile/us.anthropic.claude",
		"AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20240101/eu-west-1/bedrock/aws4_request, SignedHeaders=host, Signature=abc")
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "application/vnd.amazon.eventstream" {
		t.Fatalf("%d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	evs := decodeAll(t, resp.Body)
	var types []string
	for _, e := range evs {
		if e.messageType != "event" {
			t.Fatalf("%+v", e)
		}
		types = append(types, e.eventType)
	}
	want := "messageStart contentBlockDelta contentBlockDelta contentBlockStop contentBlockDelta contentBlockStop " +
		"contentBlockStart contentBlockDelta contentBlockStop messageStop metadata"
	if got := strings.Join(types, " "); got != want {
		t.Fatalf("events\n%s\nwant\n%s", got, want)
	}
	if r := evs[1].payload["delta"].(map[string]any)["reasoningContent"].(map[string]any)["text"]; r != "hmm" {
		t.Fatalf("%v", evs[1].payload)
	}
	if tx := evs[4].payload["delta"].(map[string]any)["text"]; tx != "hi there" || evs[4].payload["contentBlockIndex"] != 1.0 {
		t.Fatalf("%v", evs[4].payload)
	}
	start := evs[6].payload["start"].(map[string]any)["toolUse"].(map[string]any)
	if start["toolUseId"] != "t1" || start["name"] != "now" || evs[7].payload["delta"].(map[string]any)["toolUse"].(map[string]any)["input"] != `{"tz":"UTC"}` {
		t.Fatalf("%v %v", evs[6].payload, evs[7].payload)
	}
	if evs[9].payload["stopReason"] != "tool_use" || evs[10].payload["usage"].(map[string]any)["totalTokens"] != 3.0 {
		t.Fatalf("%v %v", evs[9].payload, evs[10].payload)
	}

	c := s.Calls()[0]
	if c.Rule != 0 || c.AccessKeyID != "AKIDEXAMPLE" || c.Region != "eu-west-1" || c.Service != "bedrock" || c.Events != len(evs) {
		t.Fatalf("%+v", c)
	}
	if c.Messages[0].Text() != "hello" || c.SystemText() != "be brief" || *c.InferenceConfig.MaxTokens != 50 ||
		*c.InferenceConfig.Temperature != 0.5 || strings.Join(c.ToolNames(), ",") != "now" {
		t.Fatalf("%+v", c)
	}
}

func TestErrorsAndExceptions(t *testing.T) {
	s := New(t, Rule{Responses: []Response{
		{Status: 429},
		{Status: 400, ErrorMessage: "bad input"},
		{Content: "abcdefgh", StreamException: "ThrottlingException", ExceptionAfterEvents: 2},
	}})
	resp := post(t, s, "m", "")
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 429 || resp.Header.Get("X-Amzn-Errortype") != "ThrottlingException" || !bytes.Contains(b, []byte(`"message"`)) {
		t.Fatalf("%d %v %s", resp.StatusCode, resp.Header, b)
	}
	resp = post(t, s, "m", "")
	b, _ = io.ReadAll(resp.Body)
	if resp.StatusCode != 400 || resp.Header.Get("X-Amzn-Errortype") != "ValidationException" || !bytes.Contains(b, []byte("bad input")) {
		t.Fatalf("%d %v %s", resp.StatusCode, resp.Header, b)
	}
	evs := decodeAll(t, post(t, s, "m", "").Body)
	if len(evs) != 3 || evs[2].messageType != "exception" || evs[2].eventType != "throttlingException" {
		t.Fatalf("%+v", evs)
	}
	if got := s.Calls(); len(got) != 3 || got[0].Status != 429 {
		t.Fatalf("%+v", got)
	}
}

func TestControlEndpoints(t *testing.T) {
	s := New(t)
	post(t, s, "m", "Bearer some-key")
	resp, err := http.Get(s.URL() + "/fake/calls")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var calls []Call
	if err := json.NewDecoder(resp.Body).Decode(&calls); err != nil || len(calls) != 1 || !calls[0].BearerAuth || calls[0].ModelID != "m" {
		t.Fatalf("%+v %v", calls, err)
	}
	rules, _ := json.Marshal([]Rule{{Responses: []Response{{Status: 503}}}})
	req, _ := http.NewRequest(http.MethodPut, s.URL()+"/fake/rules", bytes.NewReader(rules))
	if r, err := http.DefaultClient.Do(req); err != nil || r.StatusCode != http.StatusNoContent {
		t.Fatalf("%v %v", r, err)
	}
	if r := post(t, s, "m", ""); r.StatusCode != 503 || r.Header.Get("X-Amzn-Errortype") != "ServiceUnavailableException" {
		t.Fatalf("%d", r.StatusCode)
	}
	if r, err := http.Post(s.URL()+"/fake/reset", "", nil); err != nil || r.StatusCode != http.StatusNoContent || len(s.Calls()) != 0 {
		t.Fatalf("%v %v", r, err)
	}
	if r, _ := http.Get(s.URL() + "/model/m/converse"); r.StatusCode != http.StatusNotFound {
		t.Fatalf("%d", r.StatusCode)
	}
}
