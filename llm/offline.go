package llm

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode/utf8"
)

// OfflineProvider is the provider name of the built-in offline model.
const OfflineProvider = "offline"

// Offline is a deterministic stand-in model that needs no network: it lets
// the whole service run, demo and be tested on a machine with no provider
// key. It answers routing decisions (requests with a JSONSchema) by
// dispatching to each offered option in turn and then finishing, and
// anything else with a short placeholder text that names the agent and the
// request, streamed a word at a time.
type Offline struct {
	tokenDelay time.Duration
}

// NewOffline builds the offline model; tokenDelay is slept before each
// streamed word (or JSON piece), so the UI shows a live stream. 0 answers
// at once.
func NewOffline(tokenDelay time.Duration) *Offline {
	return &Offline{tokenDelay: tokenDelay}
}

// offlineLabel starts every offline text answer so nobody mistakes it for
// a model's work.
const offlineLabel = "[offline model]"

// RoutingInput is the block the offline model reads from a routing
// request: the caller puts it in the last user message as a ```json fenced
// block.
type RoutingInput struct {
	Options     []string `json:"options"`
	Completed   []string `json:"completed"`
	AllowFinish bool     `json:"allow_finish"`
}

// FormatRoutingInput renders in as the fenced block the offline model
// looks for, so a caller's routing prompt and the offline model agree.
func FormatRoutingInput(in RoutingInput) string {
	if in.Options == nil {
		in.Options = []string{}
	}
	if in.Completed == nil {
		in.Completed = []string{}
	}
	b, _ := json.Marshal(in)
	return "```json\n" + string(b) + "\n```"
}

// RoutingDecision is the offline model's answer to a routing request. Its
// JSON field names are the ones the supervisor's schema is expected to
// ask for.
type RoutingDecision struct {
	Action      string `json:"action"` // "dispatch" or "finish"
	Target      string `json:"target"`
	Instruction string `json:"instruction"`
	Reason      string `json:"reason"`
}

// Stream answers one request. See Client and Offline.
func (o *Offline) Stream(ctx context.Context, req Request, onDelta func(Delta)) (*Response, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if onDelta == nil {
		onDelta = func(Delta) {}
	}
	lastUser := lastMessage(req.Messages, RoleUser)
	var pieces []string
	if req.JSONSchema != nil {
		b, _ := json.Marshal(offlineDecision(lastUser))
		pieces = splitRunes(string(b), 8)
	} else {
		pieces = words(offlineText(firstSentence(lastMessage(req.Messages, RoleSystem)), lastUser))
	}

	var out strings.Builder
	for _, p := range pieces {
		if err := o.sleep(ctx); err != nil {
			return nil, err
		}
		out.WriteString(p)
		onDelta(Delta{Content: p})
	}

	model := req.Model
	if model == "" {
		model = OfflineProvider
	}
	prompt := 0
	for _, m := range req.Messages {
		prompt += len(strings.Fields(m.Content))
	}
	completion := len(strings.Fields(out.String()))
	return &Response{
		Content:      out.String(),
		FinishReason: "stop",
		Usage:        Usage{PromptTokens: prompt, CompletionTokens: completion, TotalTokens: prompt + completion},
		Model:        model,
		Provider:     OfflineProvider,
		Offline:      true,
	}, nil
}

func (o *Offline) sleep(ctx context.Context) error {
	if o.tokenDelay <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(o.tokenDelay)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// offlineDecision dispatches to the first option not yet completed, and
// finishes once none is left.
func offlineDecision(lastUser string) RoutingDecision {
	in, _ := ParseRoutingInput(lastUser)
	for _, opt := range in.Options {
		if slices.Contains(in.Completed, opt) {
			continue
		}
		task := taskSummary(lastUser)
		instruction := fmt.Sprintf("Do your part of the task: %s", task)
		if task == "" {
			instruction = "Do your part of the task."
		}
		return RoutingDecision{
			Action:      "dispatch",
			Target:      opt,
			Instruction: instruction,
			Reason:      "offline model: next option in order",
		}
	}
	return RoutingDecision{Action: "finish", Reason: "offline model: every option has been used"}
}

// ParseRoutingInput finds the last ```json fenced block in text that has
// an "options" key. It reports false when there is none.
func ParseRoutingInput(text string) (RoutingInput, bool) {
	blocks := fencedJSONBlocks(text)
	for i := len(blocks) - 1; i >= 0; i-- {
		var keys map[string]json.RawMessage
		if json.Unmarshal([]byte(blocks[i].body), &keys) != nil {
			continue
		}
		if _, ok := keys["options"]; !ok {
			continue
		}
		var in RoutingInput
		if json.Unmarshal([]byte(blocks[i].body), &in) != nil {
			continue
		}
		return in, true
	}
	return RoutingInput{}, false
}

type fencedBlock struct {
	start, end int // the whole fence, backticks included
	body       string
}

// fencedJSONBlocks lists the ```json ... ``` blocks of text in order.
func fencedJSONBlocks(text string) []fencedBlock {
	const open, fence = "```json", "```"
	var out []fencedBlock
	for pos := 0; ; {
		i := strings.Index(text[pos:], open)
		if i < 0 {
			return out
		}
		start := pos + i
		bodyStart := start + len(open)
		j := strings.Index(text[bodyStart:], fence)
		if j < 0 {
			return out
		}
		end := bodyStart + j + len(fence)
		out = append(out, fencedBlock{start: start, end: end, body: text[bodyStart : bodyStart+j]})
		pos = end
	}
}

// taskSummary is the request's "Task:" line if it has one, else the
// request text without its fenced blocks, on one line and cut to about 80
// characters.
func taskSummary(text string) string {
	for _, line := range strings.Split(text, "\n") {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(line), "Task:"); ok && strings.TrimSpace(rest) != "" {
			return truncate(strings.Join(strings.Fields(rest), " "), 80)
		}
	}
	var b strings.Builder
	pos := 0
	for _, blk := range fencedJSONBlocks(text) {
		b.WriteString(text[pos:blk.start])
		b.WriteString(" ")
		pos = blk.end
	}
	b.WriteString(text[pos:])
	return truncate(strings.Join(strings.Fields(b.String()), " "), 80)
}

func offlineText(agent, request string) string {
	if agent == "" {
		agent = "an agent without instructions."
	}
	req := truncate(strings.Join(strings.Fields(request), " "), 80)
	return fmt.Sprintf("%s Speaking as: %s I was asked: %q. "+
		"This is a placeholder answer from the built-in offline model, which runs without any provider. "+
		"Configure a model provider to get real work done.", offlineLabel, agent, req)
}

func lastMessage(msgs []Message, role string) string {
	for i := len(msgs) - 1; i >= 0; i-- {
		if msgs[i].Role == role {
			return msgs[i].Content
		}
	}
	return ""
}

// firstSentence is the text up to the first sentence end, on one line.
func firstSentence(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	for i, r := range s {
		if (r == '.' || r == '!' || r == '?') && (i+1 == len(s) || s[i+1] == ' ') {
			return s[:i+1]
		}
	}
	return truncate(s, 120)
}

func truncate(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	return string([]rune(s)[:n]) + "…"
}

// words splits text into streamable words, each but the last keeping its
// following space so the pieces join back to the text.
func words(text string) []string {
	fields := strings.Fields(text)
	for i := range len(fields) - 1 {
		fields[i] += " "
	}
	return fields
}

func splitRunes(s string, n int) []string {
	var out []string
	r := []rune(s)
	for len(r) > 0 {
		k := min(n, len(r))
		out = append(out, string(r[:k]))
		r = r[k:]
	}
	return out
}
