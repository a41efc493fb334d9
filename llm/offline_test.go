package llm

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"
)

func routingRequest(task string, in RoutingInput) Request {
	return Request{
		Model: "offline",
		Messages: []Message{
			{Role: RoleSystem, Content: "You lead the theory group. Keep it short."},
			{Role: RoleUser, Content: "Task: " + task + "\n\nAvailable workers:\n- a\n- b\n\n" + FormatRoutingInput(in) + "\nChoose the next worker."},
		},
		JSONSchema: &JSONSchema{Name: "routing_decision", Schema: json.RawMessage(`{"type":"object"}`), Strict: true},
	}
}

func decide(t *testing.T, o *Offline, req Request) RoutingDecision {
	t.Helper()
	var c collect
	resp, err := o.Stream(context.Background(), req, c.on)
	if err != nil {
		t.Fatal(err)
	}
	if joined, _ := c.joined(); joined != resp.Content || len(c.deltas) < 3 {
		t.Fatalf("not streamed in pieces: %d deltas", len(c.deltas))
	}
	if !resp.Offline || resp.Provider != OfflineProvider {
		t.Fatalf("%+v", resp)
	}
	var d RoutingDecision
	if err := json.Unmarshal([]byte(resp.Content), &d); err != nil {
		t.Fatalf("not JSON: %q", resp.Content)
	}
	return d
}

func TestOfflineDecisions(t *testing.T) {
	o := NewOffline(0)
	task := "Derive the dispersion relation for waves in a cold plasma"
	d := decide(t, o, routingRequest(task, RoutingInput{Options: []string{"theorist", "critic"}, AllowFinish: false}))
	if d.Action != "dispatch" || d.Target != "theorist" || !strings.Contains(d.Instruction, "dispersion relation") || d.Reason == "" {
		t.Fatalf("%+v", d)
	}
	d = decide(t, o, routingRequest(task, RoutingInput{Options: []string{"theorist", "critic"}, Completed: []string{"theorist"}, AllowFinish: true}))
	if d.Action != "dispatch" || d.Target != "critic" {
		t.Fatalf("%+v", d)
	}
	d = decide(t, o, routingRequest(task, RoutingInput{Options: []string{"theorist", "critic"}, Completed: []string{"critic", "theorist"}, AllowFinish: true}))
	if d != (RoutingDecision{Action: "finish", Reason: "offline model: every option has been used"}) {
		t.Fatalf("%+v", d)
	}
	d = decide(t, o, routingRequest(task, RoutingInput{}))
	if d.Action != "finish" {
		t.Fatalf("no options: %+v", d)
	}
}

func TestOfflineReadsTheLastOptionsBlock(t *testing.T) {
	text := "Earlier context:\n```json\n{\"options\":[\"old\"],\"completed\":[]}\n```\n" +
		"An unrelated block:\n```json\n{\"x\":1}\n```\n" +
		"Current:\n```json\n{\"options\":[\"new1\",\"new2\"],\"completed\":[\"new1\"],\"allow_finish\":true}\n```\n" +
		"A trailing block:\n```json\n{\"y\":2}\n```"
	in, ok := ParseRoutingInput(text)
	if !ok || strings.Join(in.Options, ",") != "new1,new2" || !in.AllowFinish {
		t.Fatalf("%v %+v", ok, in)
	}
	req := Request{Messages: []Message{{Role: RoleUser, Content: text}}, JSONSchema: &JSONSchema{Name: "d"}}
	if d := decide(t, NewOffline(0), req); d.Target != "new2" {
		t.Fatalf("%+v", d)
	}
	if _, ok := ParseRoutingInput("no block here"); ok {
		t.Fatal("found a block in plain text")
	}
}

func TestOfflineText(t *testing.T) {
	o := NewOffline(0)
	user := "Summarise the main results of the three papers on superconductivity in twisted bilayer graphene and their open questions."
	req := Request{Model: "gpt-4o", Messages: []Message{
		{Role: RoleSystem, Content: "You are a theorist. You like equations."},
		{Role: RoleUser, Content: "an earlier question"},
		{Role: RoleAssistant, Content: "an earlier answer"},
		{Role: RoleUser, Content: user},
	}}
	var c collect
	resp, err := o.Stream(context.Background(), req, c.on)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(resp.Content, "[offline model]") ||
		!strings.Contains(resp.Content, "You are a theorist.") || strings.Contains(resp.Content, "equations") ||
		!strings.Contains(resp.Content, user[:80]) || strings.Contains(resp.Content, user[:100]) {
		t.Fatalf("content %q", resp.Content)
	}
	words := strings.Fields(resp.Content)
	if len(c.deltas) != len(words) || resp.Usage.CompletionTokens != len(words) || resp.Usage.PromptTokens == 0 ||
		resp.Usage.TotalTokens != resp.Usage.PromptTokens+resp.Usage.CompletionTokens {
		t.Fatalf("%d deltas, %d words, usage %+v", len(c.deltas), len(words), resp.Usage)
	}
	if resp.Model != "gpt-4o" || !resp.Offline || resp.FinishReason != "stop" {
		t.Fatalf("%+v", resp)
	}
	again, _ := o.Stream(context.Background(), req, nil)
	if again.Content != resp.Content {
		t.Fatal("not deterministic")
	}
}

func TestOfflineHonoursCancellation(t *testing.T) {
	o := NewOffline(time.Hour)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := o.Stream(ctx, Request{Messages: []Message{{Role: RoleUser, Content: "hi"}}}, nil)
	if !errors.Is(err, context.DeadlineExceeded) || time.Since(start) > 5*time.Second {
		t.Fatalf("%v after %v", err, time.Since(start))
	}

	ctx, cancel = context.WithCancel(context.Background())
	cancel()
	if _, err := NewOffline(0).Stream(ctx, Request{}, nil); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled context: %v", err)
	}
}

func TestOfflineTokenDelayPacesWords(t *testing.T) {
	o := NewOffline(2 * time.Millisecond)
	start := time.Now()
	resp, err := o.Stream(context.Background(), Request{Messages: []Message{{Role: RoleUser, Content: "hi"}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if min := time.Duration(len(strings.Fields(resp.Content))) * 2 * time.Millisecond; time.Since(start) < min {
		t.Fatalf("streamed faster than the token delay allows: %v < %v", time.Since(start), min)
	}
}
