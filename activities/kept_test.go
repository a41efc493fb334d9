package activities

import (
	"context"
	"fmt"
	"testing"

	"github.com/op-stack/executor/llm"
	"github.com/op-stack/executor/models"
	"github.com/op-stack/executor/store"
	"github.com/op-stack/executor/store/storetest"
)

// keptCallKey is the activity the attempts below belong to.
const keptCallKey = "run-r1/temporal-run-1/7"

// keptAttempt runs one attempt of an LLM activity (as Respond does, with
// its writes deferred) and returns its answer, its usage records and the
// events it published.
func keptAttempt(t *testing.T, acts *Activities, attempt int32, question string) (*llm.Response, []models.LLMCallRecord, []models.Event) {
	t.Helper()
	sink := &fakeSink{}
	acts.Events = sink
	ctx := context.Background()
	pub := acts.newPublisher(ctx, "r1")
	pub.callKey, pub.attempt, pub.producer = keptCallKey, attempt, fmt.Sprintf("%s/%d", keptCallKey, attempt)
	pub.deferWrites = true
	source := models.Source{AgentID: "w-1", AgentType: models.AgentTypeWorker, AgentName: "writer"}
	req := llm.Request{Model: "m", Messages: []llm.Message{{Role: llm.RoleUser, Content: question}}}
	resp, err := acts.completeWithFallback(ctx, pub, source, models.PurposeWorker, req, nil, nil)
	if err != nil {
		t.Fatalf("attempt %d: %v", attempt, err)
	}
	records := pub.records
	pub.close()
	return resp, records, sink.events(models.CategoryLLM)
}

// An attempt whose answer arrived but whose completion was lost costs one
// request: the next attempt announces itself, streams the kept answer
// again and returns it with the first request's usage record, which is
// stored once; the model is not asked again.
func TestALaterAttemptUsesTheKeptAnswer(t *testing.T) {
	storetest.ForEachDialect(t, func(t *testing.T, st *store.Store) {
		ctx := context.Background()
		model := &fakeLLM{answers: []string{"the first answer", "a second answer"}}
		acts := &Activities{Store: st, LLM: model}

		first, firstRecs, _ := keptAttempt(t, acts, 1, "q")
		if first.Content != "the first answer" || len(firstRecs) != 1 {
			t.Fatalf("attempt 1: %+v %+v", first, firstRecs)
		}
		// The attempt's completion is lost: the workflow never stores its
		// records. The request is recorded all the same.
		if calls, _ := st.LLMCalls(ctx, "r1"); len(calls) != 1 || calls[0].ID != firstRecs[0].ID {
			t.Fatalf("llm_call rows after attempt 1 = %+v", calls)
		}

		second, recs, events := keptAttempt(t, acts, 2, "q")
		if len(model.requests) != 1 {
			t.Fatalf("the model was asked %d times, want 1", len(model.requests))
		}
		if second.Content != "the first answer" || second.Usage.TotalTokens != 5 {
			t.Errorf("attempt 2 answered %+v", second)
		}
		if len(recs) != 1 || recs[0].ID != firstRecs[0].ID || recs[0].Attempt != 1 {
			t.Errorf("attempt 2 records = %+v, want attempt 1's", recs)
		}
		var kinds []string
		for _, e := range events {
			kinds = append(kinds, e.Event.Action)
		}
		if fmt.Sprint(kinds) != "[retry stream usage]" {
			t.Fatalf("attempt 2 events = %v", kinds)
		}
		if events[0].Data["previous_attempt"] != int32(1) || events[1].Data["content"] != "the first answer" || events[1].Data["attempt"] != int32(2) {
			t.Errorf("retry, stream = %+v, %+v", events[0].Data, events[1].Data)
		}
		if u := events[2].Data; u["kept"] != true || u["llm_call_id"] != firstRecs[0].ID || u["total_tokens"] != 5 {
			t.Errorf("llm.usage = %+v", u)
		}

		// The workflow stores what attempt 2 returned: one row, and the
		// kept answer goes.
		if err := st.SaveAnswer(ctx, models.AnswerRecord{RunID: "r1", Calls: recs}); err != nil {
			t.Fatal(err)
		}
		if calls, _ := st.LLMCalls(ctx, "r1"); len(calls) != 1 {
			t.Errorf("llm_call rows = %d, want 1 (one request)", len(calls))
		}
		if n, _ := st.KeptAnswers(ctx, "r1"); n != 0 {
			t.Errorf("kept answers after SaveAnswer = %d", n)
		}
	})
}

// A kept answer answers its own request only: an attempt whose request
// differs asks the model, and a first attempt never reads.
func TestAKeptAnswerIsForItsRequestOnly(t *testing.T) {
	storetest.ForEachDialect(t, func(t *testing.T, st *store.Store) {
		model := &fakeLLM{answers: []string{"about q", "about another q"}}
		acts := &Activities{Store: st, LLM: model}
		keptAttempt(t, acts, 1, "q")
		resp, _, _ := keptAttempt(t, acts, 2, "another q")
		if len(model.requests) != 2 || resp.Content != "about another q" {
			t.Errorf("requests = %d, answer %q", len(model.requests), resp.Content)
		}
	})
}
