package llmfake

import (
	"encoding/json"
	"fmt"
	"time"
)

// The structs below copy OpenAI's chunk and completion objects field for
// field, nulls included, so clients are tested against the real shape.

type wireChunk struct {
	ID                string          `json:"id"`
	Object            string          `json:"object"`
	Created           int64           `json:"created"`
	Model             string          `json:"model"`
	SystemFingerprint string          `json:"system_fingerprint"`
	Choices           []wireChoice    `json:"choices"`
	Usage             json.RawMessage `json:"usage,omitempty"` // null on every chunk but the last when asked for
}

type wireChoice struct {
	Index        int            `json:"index"`
	Delta        map[string]any `json:"delta"`
	Logprobs     *struct{}      `json:"logprobs"`
	FinishReason *string        `json:"finish_reason"`
}

type wireToolCall struct {
	Index    *int             `json:"index,omitempty"`
	ID       string           `json:"id,omitempty"`
	Type     string           `json:"type,omitempty"`
	Function wireFunctionCall `json:"function"`
}

type wireFunctionCall struct {
	Name      string `json:"name,omitempty"`
	Arguments string `json:"arguments"`
}

func (r *Response) chunkSize() int {
	if r.ChunkSize > 0 {
		return r.ChunkSize
	}
	return 4
}

func (r *Response) reasoningField() string {
	if r.ReasoningField != "" {
		return r.ReasoningField
	}
	return "reasoning_content"
}

func (r *Response) finishReason() string {
	switch {
	case r.FinishReason != "":
		return r.FinishReason
	case len(r.ToolCalls) > 0:
		return "tool_calls"
	default:
		return "stop"
	}
}

func (r *Response) toolCallID(i int) string {
	if id := r.ToolCalls[i].ID; id != "" {
		return id
	}
	return fmt.Sprintf("call_fake_%d", i)
}

// split cuts s into pieces of n runes, so multi-byte text never splits
// inside a character.
func split(s string, n int) []string {
	var out []string
	runes := []rune(s)
	for len(runes) > 0 {
		k := min(n, len(runes))
		out = append(out, string(runes[:k]))
		runes = runes[k:]
	}
	return out
}

// usage is the scripted usage, or an estimate at four characters a token.
func (r *Response) usage(wr *wireRequest) Usage {
	if r.Usage != (Usage{}) {
		return r.Usage
	}
	prompt := 0
	for _, m := range wr.Messages {
		prompt += len(contentText(m.Content))
	}
	completion := len(r.Content) + len(r.Reasoning)
	for _, tc := range r.ToolCalls {
		completion += len(tc.Name) + len(tc.Arguments)
	}
	u := Usage{PromptTokens: (prompt + 3) / 4, CompletionTokens: (completion + 3) / 4}
	u.TotalTokens = u.PromptTokens + u.CompletionTokens
	return u
}

// buildChunks renders the whole stream, except the final [DONE], as the
// JSON payloads of its data lines: a role chunk, reasoning, content, tool
// calls, the finish chunk and, when include_usage was asked, a usage chunk.
func buildChunks(idx int, wr *wireRequest, r *Response) [][]byte {
	includeUsage := wr.StreamOptions != nil && wr.StreamOptions.IncludeUsage && !r.OmitUsage
	created := time.Now().Unix()
	var out [][]byte
	add := func(choices []wireChoice, usage json.RawMessage) {
		c := wireChunk{
			ID:                fmt.Sprintf("chatcmpl-fake-%d", idx),
			Object:            "chat.completion.chunk",
			Created:           created,
			Model:             wr.Model,
			SystemFingerprint: "fp_fake",
			Choices:           choices,
		}
		if includeUsage {
			c.Usage = json.RawMessage("null")
			if usage != nil {
				c.Usage = usage
			}
		}
		b, _ := json.Marshal(c)
		out = append(out, b)
	}
	delta := func(d map[string]any) {
		add([]wireChoice{{Delta: d}}, nil)
	}

	delta(map[string]any{"role": "assistant", "content": ""})
	n := r.chunkSize()
	for _, piece := range split(r.Reasoning, n) {
		delta(map[string]any{r.reasoningField(): piece})
	}
	for _, piece := range split(r.Content, n) {
		delta(map[string]any{"content": piece})
	}
	for i, tc := range r.ToolCalls {
		index := i
		delta(map[string]any{"tool_calls": []wireToolCall{{
			Index: &index, ID: r.toolCallID(i), Type: "function",
			Function: wireFunctionCall{Name: tc.Name, Arguments: ""},
		}}})
		for _, piece := range split(tc.Arguments, n) {
			delta(map[string]any{"tool_calls": []wireToolCall{{
				Index: &index, Function: wireFunctionCall{Arguments: piece},
			}}})
		}
	}
	finish := r.finishReason()
	add([]wireChoice{{Delta: map[string]any{}, FinishReason: &finish}}, nil)
	if includeUsage {
		u, _ := json.Marshal(r.usage(wr))
		add([]wireChoice{}, u)
	}
	return out
}

// buildCompletion renders a non-streaming chat.completion object.
func buildCompletion(idx int, wr *wireRequest, r *Response) []byte {
	msg := map[string]any{"role": "assistant", "content": r.Content, "refusal": nil}
	if r.Reasoning != "" {
		msg[r.reasoningField()] = r.Reasoning
	}
	if len(r.ToolCalls) > 0 {
		if r.Content == "" {
			msg["content"] = nil
		}
		var calls []wireToolCall
		for i, tc := range r.ToolCalls {
			calls = append(calls, wireToolCall{
				ID: r.toolCallID(i), Type: "function",
				Function: wireFunctionCall{Name: tc.Name, Arguments: tc.Arguments},
			})
		}
		msg["tool_calls"] = calls
	}
	obj := map[string]any{
		"id":                 fmt.Sprintf("chatcmpl-fake-%d", idx),
		"object":             "chat.completion",
		"created":            time.Now().Unix(),
		"model":              wr.Model,
		"system_fingerprint": "fp_fake",
		"choices": []map[string]any{{
			"index": 0, "message": msg, "logprobs": nil, "finish_reason": r.finishReason(),
		}},
		"usage": r.usage(wr),
	}
	if r.OmitUsage {
		delete(obj, "usage")
	}
	b, _ := json.Marshal(obj)
	return b
}
