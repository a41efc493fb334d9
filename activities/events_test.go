package activities

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/op-stack/executor/llm"
	"github.com/op-stack/executor/models"
)

// slowLLM is an in-process llm.Client for unit tests that streams n deltas
// of text, one every delay.
type slowLLM struct {
	n     int
	delay time.Duration
	text  string
	first time.Duration // before the first delta
}

func (s slowLLM) Stream(ctx context.Context, req llm.Request, onDelta func(llm.Delta)) (*llm.Response, error) {
	var all strings.Builder
	time.Sleep(s.first)
	for i := 0; i < s.n; i++ {
		if i > 0 {
			time.Sleep(s.delay)
		}
		onDelta(llm.Delta{Content: s.text})
		all.WriteString(s.text)
	}
	return &llm.Response{Content: all.String(), Model: req.Model}, nil
}

func TestPublisherCoalescesDeltas(t *testing.T) {
	sink := &fakeSink{}
	acts := &Activities{LLM: slowLLM{n: 30, delay: 10 * time.Millisecond, text: "tok "}, Events: sink, FlushInterval: 100 * time.Millisecond}
	in := models.RespondInput{
		RunID: "r1", Purpose: models.PurposeWorker, Task: "t",
		Agent:  models.Agent{AgentID: "w-1", Name: "writer"},
		Source: models.Source{AgentID: "w-1", AgentType: models.AgentTypeWorker, AgentName: "writer"},
	}
	res, err := acts.Respond(context.Background(), in)
	if err != nil {
		t.Fatal(err)
	}
	sink.mu.Lock()
	batches := append([]models.EventBatch(nil), sink.batches...)
	sink.mu.Unlock()
	// 30 deltas over ~300 ms: the first alone, then about one batch per
	// 100 ms, then the rest on finish — far fewer signals than deltas.
	if len(batches) < 3 || len(batches) > 8 {
		t.Errorf("30 deltas in %d batches; want the first alone and the rest coalesced per flush interval", len(batches))
	}
	if first := batches[0].Events; len(first) != 1 || first[0].Data["content"] != "tok " {
		t.Errorf("first batch = %+v; want the first delta alone", first)
	}
	var joined strings.Builder
	usages := 0
	for i, b := range batches {
		if b.Seq != i+1 || b.Producer != batches[0].Producer {
			t.Errorf("batch %d: producer %q seq %d", i, b.Producer, b.Seq)
		}
		for _, e := range b.Events {
			if e.Event.String() == "llm.usage" {
				// The call's usage follows its text.
				usages++
				if i != len(batches)-1 || e.Data["agent_id"] != "w-1" {
					t.Errorf("usage event = %+v in batch %d", e, i)
				}
				continue
			}
			if e.Event.String() != "llm.stream" || e.Data["agent_id"] != "w-1" || e.Source.AgentID != "w-1" {
				t.Errorf("event = %+v", e)
			}
			joined.WriteString(e.Data["content"].(string))
		}
	}
	if joined.String() != res.Output {
		t.Errorf("streamed %q, answered %q", joined.String(), res.Output)
	}
	if usages != 1 {
		t.Errorf("%d llm.usage events, want 1", usages)
	}
}

// A long stream's signals are paced: the flush interval for the first
// fastSignals, then a gap doubling every slowStep up to maxSignalGap, so a
// five-minute call at 100 ms sends some 800 signals, not 3,000.
func TestSignalGapBoundsALongStream(t *testing.T) {
	interval := 100 * time.Millisecond
	if g := signalGap(interval, 0); g != 0 {
		t.Errorf("gap before any signal = %v", g)
	}
	if g := signalGap(interval, fastSignals-1); g != 0 {
		t.Errorf("gap within the fast signals = %v", g)
	}
	if g := signalGap(interval, fastSignals); g != 2*interval {
		t.Errorf("first slow gap = %v, want %v", g, 2*interval)
	}
	if g := signalGap(interval, fastSignals+slowStep); g != 4*interval {
		t.Errorf("second slow gap = %v, want %v", g, 4*interval)
	}
	if g := signalGap(interval, 100000); g != maxSignalGap {
		t.Errorf("gap far out = %v, want the cap %v", g, maxSignalGap)
	}
	// Signals a call sending as fast as allowed for five minutes makes.
	for _, base := range []time.Duration{2 * time.Millisecond, 100 * time.Millisecond} {
		var elapsed time.Duration
		sent := 0
		for elapsed < 5*time.Minute {
			elapsed += max(base, signalGap(base, sent))
			sent++
		}
		if sent > 1500 {
			t.Errorf("flush every %v: %d signals in five minutes, want at most 1,500", base, sent)
		}
		t.Logf("flush every %v: %d signals in five minutes", base, sent)
	}
}
