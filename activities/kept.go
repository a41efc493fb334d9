package activities

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"time"

	"github.com/op-stack/executor/llm"
	"github.com/op-stack/executor/models"
	"github.com/op-stack/executor/store"
)

// Answers are kept so that none is bought twice (docs/cost-and-budgets.md,
// "An answer is never bought twice").
//
// An attempt that received its answer may still fail to report its
// completion: the Temporal server is down or restarting, the worker is
// killed in between. Temporal then runs the activity again, and without
// the answer the new attempt would ask (and pay) the model again, while
// the first request was recorded nowhere. So every received answer is
// written to the database (llm_answer, with the llm_call row of its
// request) before the attempt goes on, keyed by the activity (which
// Temporal keeps across attempts) and the answer's place in it; a later
// attempt asks for it before it calls the model and, when it is there,
// streams it again and returns it without a request.

// keptAnswerTimeout bounds the database work of keeping or finding an
// answer: during a database outage the call goes on without it (a lost
// kept answer costs a repeated request only if the attempt's completion is
// lost too).
const keptAnswerTimeout = 2 * time.Second

// requestFingerprint identifies a request's content (not its model: a
// fallback model's answer answers the same request), so an answer is only
// used again for the request it answered.
func requestFingerprint(req llm.Request) string {
	raw, _ := json.Marshal(struct {
		Messages   []llm.Message   `json:"messages"`
		Tools      []llm.ToolDef   `json:"tools,omitempty"`
		JSONSchema *llm.JSONSchema `json:"json_schema,omitempty"`
	}{req.Messages, req.Tools, req.JSONSchema})
	sum := sha256.Sum256(raw)
	return hex.EncodeToString(sum[:])
}

// keptAnswer returns the answer an earlier attempt of this activity kept
// for the attempt's next answer, nil when there is none (always in a first
// attempt, which skips the read).
func (a *Activities) keptAnswer(ctx context.Context, pub *publisher, fingerprint string) (*llm.Response, *models.LLMCallRecord) {
	if a.Store == nil || pub.callKey == "" || pub.attempt <= 1 {
		return nil, nil
	}
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), keptAnswerTimeout)
	defer cancel()
	k, err := a.Store.KeptAnswerFor(rctx, pub.callKey, pub.answers+1)
	if err != nil {
		a.logger(ctx).Warn("read kept LLM answer; asking the model", "run_id", pub.runID, "error", err)
		return nil, nil
	}
	if k == nil {
		return nil, nil
	}
	if k.Fingerprint != fingerprint {
		a.logger(ctx).Warn("kept LLM answer is for another request; asking the model", "run_id", pub.runID, "call_id", k.Record.ID)
		return nil, nil
	}
	var resp llm.Response
	if err := json.Unmarshal([]byte(k.Response), &resp); err != nil {
		a.logger(ctx).Warn("kept LLM answer unreadable; asking the model", "run_id", pub.runID, "error", err)
		return nil, nil
	}
	return &resp, &k.Record
}

// keepAnswer stores a received answer and its usage record for later
// attempts of the activity. The write runs beside the rest of the attempt
// (its last events, its result) and the publisher's close waits for it, so
// it is done before the activity can report its completion without adding
// its latency to every call. A failure is logged: the answer is still
// returned, and only a lost completion on top of it would repeat the call.
func (a *Activities) keepAnswer(ctx context.Context, pub *publisher, fingerprint string, resp *llm.Response, rec models.LLMCallRecord) {
	if a.Store == nil || pub.callKey == "" {
		return
	}
	raw, err := json.Marshal(resp)
	if err != nil {
		return
	}
	k := store.KeptAnswer{
		CallKey: pub.callKey, Ordinal: pub.answers, RunID: pub.runID, Fingerprint: fingerprint, Response: string(raw), Record: rec,
	}
	if pub.keepWithLease(k) {
		return
	}
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), keptAnswerTimeout)
	pub.keeping.Add(1)
	go func() {
		defer pub.keeping.Done()
		defer cancel()
		if err := a.Store.KeepAnswer(wctx, k); err != nil {
			a.logger(ctx).Warn("keep LLM answer", "run_id", pub.runID, "llm_call_id", rec.ID, "error", err)
		}
	}()
}

// replayKept streams a kept answer to the run as this attempt's text (the
// llm.retry before it voided the earlier attempt's) in one delta per kind.
func (p *publisher) replayKept(source models.Source, resp *llm.Response, extra map[string]any) {
	first := true
	if resp.Reasoning != "" {
		p.delta(source, models.ActionReasoning, resp.Reasoning, extra, first)
		first = false
	}
	if resp.Content != "" {
		p.delta(source, models.ActionStream, resp.Content, extra, first)
	}
}
