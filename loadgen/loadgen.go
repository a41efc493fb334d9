// Package loadgen is `executor bench`: a load generator that drives any
// deployment of the executor over its public HTTP API, as a user's client
// does. It creates a hierarchy, starts runs at a chosen concurrency, reads
// every run's SSE stream from its start, checks each stream against the
// run's stored log (gap-free, equal, no duplicate) and reports what a user
// measures: wall time, orchestration overhead per LLM call, token-to-client
// and first-token latency, runs per second, CPU-seconds per LLM call of the
// service's processes on this machine, and efficiency against the model
// time on each run's critical path. Its model is the FakeModel it serves
// over HTTP (or a real provider), so the figures need nothing but the
// binary. See docs/performance.md.
package loadgen

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	sse "github.com/tmaxmax/go-sse"

	"github.com/op-stack/executor/client"
	"github.com/op-stack/executor/models"
)

// Shapes of the benchmark's hierarchy.
const (
	// ShapeReference is the README's hierarchy: a global supervisor, team
	// "research" (2 workers) and team "writing" (1 worker); 11 LLM calls
	// per run with the fake model, all one after another.
	ShapeReference = "reference"
	// ShapeSequential is one team of Workers workers, dispatched one after
	// another: 2×Workers + 4 LLM calls per run.
	ShapeSequential = "sequential"
	// ShapeTeams is Teams teams of Workers workers each:
	// Teams + 2 + Teams×(2×Workers + 1) LLM calls per run.
	ShapeTeams = "teams"
)

// Config is one benchmark.
type Config struct {
	// URL is the API's base address (http://127.0.0.1:8080), APIKey its
	// bearer key ("" without access control).
	URL, APIKey string
	// Shape, Teams and Workers choose the hierarchy (Shape* constants).
	Shape          string
	Teams, Workers int
	// Runs are started, Concurrency at a time (both at least 1); Warmup
	// runs go first, one at a time, checked but left out of the figures.
	Runs, Concurrency, Warmup int
	// Agents' model: with ModelBaseURL set (the fake model's URL as the
	// deployment reaches it), every agent's llm_config names
	// AgentProvider, Model and that base URL; without it, only Model (and
	// AgentProvider when set), for a real provider.
	AgentProvider, Model, ModelBaseURL string
	// Fake is the fake model the agents call, if any: its records give
	// the model time of each call.
	Fake *FakeModel
	// Procs selects the service's processes whose CPU time is measured.
	Procs ProcSelector
	// RunTimeout bounds one run, from runs/start to its stored log
	// checked (0: 10 minutes).
	RunTimeout time.Duration
	// HTTPClient is used for every request (nil: a client without
	// timeout, with enough idle connections for Concurrency streams).
	HTTPClient *http.Client
}

// RunResult is one run as the benchmark saw it.
type RunResult struct {
	ID     string `json:"id"`
	Status string `json:"status"` // the terminal event's action: completed, failed, cancelled ("" if none arrived)
	// WallMS is runs/start sent → the terminal event read from the stream.
	WallMS float64 `json:"wall_ms"`
	// ModelMS is the model time on the run's critical path: the time some
	// LLM call of the run was being answered (fake model only).
	ModelMS float64 `json:"model_ms"`
	// Calls is the run's LLM calls (its llm.usage events).
	Calls int `json:"calls"`
	// Events is the number of events the stream carried.
	Events int `json:"events"`
	// TokensExpected is Calls × the fake's tokens per answer; Tokens the
	// distinct stamped tokens the stream carried, TokensDuplicated those
	// it carried more than once: the model's every token should reach the
	// client once.
	TokensExpected   int `json:"tokens_expected,omitempty"`
	Tokens           int `json:"tokens"`
	TokensDuplicated int `json:"tokens_duplicated,omitempty"`
	// MissingTokens names the first missing tokens, "call.index" (the
	// fake's call number, the token's place in its answer).
	MissingTokens []string `json:"missing_tokens,omitempty"`
	Reconnects    int      `json:"reconnects,omitempty"`
	Retries       int      `json:"start_retries,omitempty"`
	CheckError    string   `json:"check_error,omitempty"`
	Error         string   `json:"error,omitempty"`

	tokens, first []float64 // ms
	warmup        bool
}

// Run runs the benchmark and returns its report. The report's OK is false
// when a run failed or a stream's check failed; the error is for a
// benchmark that could not run at all (a hierarchy refused, say).
func Run(ctx context.Context, cfg Config) (*Report, error) {
	if cfg.Runs < 1 {
		cfg.Runs = 1
	}
	if cfg.Concurrency < 1 {
		cfg.Concurrency = 1
	}
	if cfg.RunTimeout <= 0 {
		cfg.RunTimeout = 10 * time.Minute
	}
	if cfg.HTTPClient == nil {
		tr := http.DefaultTransport.(*http.Transport).Clone()
		tr.MaxIdleConnsPerHost = cfg.Concurrency*2 + 4
		cfg.HTTPClient = &http.Client{Transport: tr}
	}
	c, err := client.New(cfg.URL, cfg.APIKey, cfg.HTTPClient)
	if err != nil {
		return nil, err
	}
	body, err := Hierarchy(cfg)
	if err != nil {
		return nil, err
	}
	hid, err := c.CreateHierarchy(ctx, body)
	if err != nil {
		return nil, fmt.Errorf("hierarchies/create: %w", err)
	}
	b := &bench{cfg: cfg, c: c, hid: hid}
	for i := 0; i < cfg.Warmup; i++ {
		r := b.run(ctx, fmt.Sprintf("warmup %d", i))
		r.warmup = true
		b.warmups = append(b.warmups, r)
	}
	cpu0 := cfg.Procs.Snapshot()
	start := time.Now()
	results := make([]RunResult, cfg.Runs)
	next := make(chan int)
	var wg sync.WaitGroup
	for w := 0; w < cfg.Concurrency; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				results[i] = b.run(ctx, fmt.Sprintf("run %d", i))
			}
		}()
	}
	for i := 0; i < cfg.Runs; i++ {
		next <- i
	}
	close(next)
	wg.Wait()
	wall := time.Since(start)
	cpu1 := cfg.Procs.Snapshot()
	procs, cpu := cpu1.CPUSince(cpu0)
	return newReport(cfg, hid, results, b.warmups, wall, procs, cpu), nil
}

type bench struct {
	cfg     Config
	c       *client.Client
	hid     string
	warmups []RunResult
}

// run starts one run, reads its stream to the end, and checks it.
func (b *bench) run(parent context.Context, task string) RunResult {
	ctx, cancel := context.WithTimeout(parent, b.cfg.RunTimeout)
	defer cancel()
	var r RunResult
	start := time.Now()
	started, retries, err := b.start(ctx, "executor bench: "+task)
	r.Retries = retries
	if err != nil {
		r.Error = "runs/start: " + err.Error()
		return r
	}
	r.ID = started.ID
	var stream []models.Event
	var stamps []Stamp
	var arrivals []time.Time
	carry := map[string]string{}
	var end time.Time
	r.Reconnects, err = b.follow(ctx, r.ID, func(ev models.Event, at time.Time) {
		stream = append(stream, ev)
		if ev.Event.Category == models.CategoryLLM && ev.Event.Action == models.ActionStream {
			content, _ := ev.Data["content"].(string)
			n := len(stamps)
			stamps, carry[ev.Source.AgentID] = ParseStamps(carry[ev.Source.AgentID]+content, stamps)
			for range stamps[n:] {
				arrivals = append(arrivals, at)
			}
		}
		if client.IsTerminal(ev) {
			end = at
			r.Status = ev.Event.Action
		}
	})
	r.Events = len(stream)
	if err != nil {
		r.Error = "stream: " + err.Error()
	}
	if !end.IsZero() {
		r.WallMS = ms(end.Sub(start))
	}
	calls := map[int64]bool{}
	type token struct {
		call  int64
		index int
	}
	seenTokens := map[token]bool{}
	for i, s := range stamps {
		calls[s.Call] = true
		if seenTokens[token{s.Call, s.Index}] {
			r.TokensDuplicated++
			continue
		}
		seenTokens[token{s.Call, s.Index}] = true
		r.Tokens++
		lat := ms(arrivals[i].Sub(s.Sent))
		r.tokens = append(r.tokens, lat)
		if s.Index == 0 {
			r.first = append(r.first, lat)
		}
	}
	if b.cfg.Fake != nil {
		var spans []Interval
		for id := range calls {
			if mc, ok := b.cfg.Fake.Call(id); ok && !mc.Finished.IsZero() {
				spans = append(spans, Interval{mc.Received, mc.Finished})
			}
		}
		r.ModelMS = ms(Covered(spans))
	}
	for _, ev := range stream {
		if ev.Event.Category == models.CategoryLLM && ev.Event.Action == models.ActionUsage {
			r.Calls++
		}
	}
	if r.Calls == 0 {
		r.Calls = len(calls)
	}
	if b.cfg.Fake != nil {
		r.TokensExpected = r.Calls * b.cfg.Fake.opts.Tokens
		ids := make([]int64, 0, len(calls))
		for id := range calls {
			ids = append(ids, id)
		}
		sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
		for _, id := range ids {
			for i := 0; i < b.cfg.Fake.opts.Tokens && len(r.MissingTokens) < 10; i++ {
				if !seenTokens[token{id, i}] {
					r.MissingTokens = append(r.MissingTokens, fmt.Sprintf("%d.%d", id, i))
				}
			}
		}
	}
	if end.IsZero() {
		if r.Error == "" {
			r.Error = "the stream ended without the run's terminal event"
		}
		return r
	}
	stored, err := b.stored(ctx, r.ID, stream[len(stream)-1].Sequence)
	if err != nil {
		r.Error = "runs/events: " + err.Error()
		return r
	}
	if err := CheckStream(stream, stored); err != nil {
		r.CheckError = err.Error()
	}
	return r
}

// start calls runs/start, retrying while the API answers 429 or 503 (as a
// client should, after its Retry-After).
func (b *bench) start(ctx context.Context, task string) (client.Started, int, error) {
	for retries := 0; ; retries++ {
		s, err := b.c.StartRun(ctx, client.StartRequest{HierarchyID: b.hid, Task: task})
		var apiErr *client.APIError
		if err == nil || !errors.As(err, &apiErr) || (apiErr.Status != http.StatusTooManyRequests && apiErr.Status != http.StatusServiceUnavailable) || retries >= 20 {
			return s, retries, err
		}
		select {
		case <-ctx.Done():
			return s, retries, ctx.Err()
		case <-time.After(time.Duration(250*(retries+1)) * time.Millisecond):
		}
	}
}

// follow reads the run's contract 002 SSE stream from its start to the
// terminal event, reconnecting after the last sequence read when the
// connection drops early. fn sees every event as it arrived, duplicates
// included: the check must see them.
func (b *bench) follow(ctx context.Context, id string, fn func(models.Event, time.Time)) (reconnects int, err error) {
	var last int64
	for {
		done, err := b.followOnce(ctx, id, &last, fn)
		if done {
			return reconnects, nil
		}
		if ctx.Err() != nil {
			return reconnects, ctx.Err()
		}
		var apiErr *client.APIError
		if errors.As(err, &apiErr) && apiErr.Status/100 == 4 && apiErr.Status != http.StatusTooManyRequests {
			return reconnects, err
		}
		if reconnects >= 10 {
			if err == nil {
				err = client.ErrStreamEnded
			}
			return reconnects, err
		}
		reconnects++
		select {
		case <-ctx.Done():
			return reconnects, ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func (b *bench) followOnce(ctx context.Context, id string, last *int64, fn func(models.Event, time.Time)) (bool, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, b.c.BaseURL()+client.Prefix+"/runs/"+url.PathEscape(id)+"/stream", nil)
	if err != nil {
		return false, err
	}
	req.Header.Set("Accept", "text/event-stream")
	if *last > 0 {
		req.Header.Set("Last-Event-ID", strconv.FormatInt(*last, 10))
	}
	if b.cfg.APIKey != "" {
		req.Header.Set("Authorization", "Bearer "+b.cfg.APIKey)
	}
	resp, err := b.cfg.HTTPClient.Do(req)
	if err != nil {
		return false, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		raw, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		e := &client.APIError{Status: resp.StatusCode}
		if json.Unmarshal(raw, e) != nil || e.Message == "" {
			e.Message = strings.TrimSpace(string(raw))
		}
		return false, e
	}
	for msg, rerr := range sse.Read(bufio.NewReaderSize(resp.Body, 64<<10), &sse.ReadConfig{MaxEventSize: 16 << 20}) {
		if rerr != nil {
			return false, rerr
		}
		if msg.Data == "" {
			continue
		}
		at := time.Now()
		var ev models.Event
		if err := json.Unmarshal([]byte(msg.Data), &ev); err != nil {
			return false, fmt.Errorf("event %s: %w", msg.LastEventID, err)
		}
		fn(ev, at)
		if ev.Sequence > *last {
			*last = ev.Sequence
		}
		if client.IsTerminal(ev) {
			return true, nil
		}
	}
	return false, nil
}

// stored reads the run's whole stored log, waiting (up to 30 s) until it
// reaches sequence last: the log is persisted in batches, and the last
// may land just after the stream delivered it.
func (b *bench) stored(ctx context.Context, id string, last int64) ([]models.Event, error) {
	deadline := time.Now().Add(30 * time.Second)
	for {
		var all []models.Event
		var after int64
		for {
			page, err := b.c.Events(ctx, id, client.EventFilter{After: after, Limit: 1000})
			if err != nil {
				return nil, err
			}
			all = append(all, page.Events...)
			if !page.HasMore || len(page.Events) == 0 {
				break
			}
			after = page.NextAfter
		}
		if (len(all) > 0 && all[len(all)-1].Sequence >= last) || time.Now().After(deadline) {
			return all, nil
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// Hierarchy is the body of hierarchies/create for cfg's shape and model.
func Hierarchy(cfg Config) (json.RawMessage, error) {
	llmConfig := map[string]any{}
	if cfg.Model != "" {
		llmConfig["model"] = cfg.Model
	}
	if cfg.AgentProvider != "" {
		llmConfig["provider"] = cfg.AgentProvider
	}
	if cfg.ModelBaseURL != "" {
		llmConfig["base_url"] = cfg.ModelBaseURL
	}
	agent := func(m map[string]any) map[string]any {
		if len(llmConfig) > 0 {
			m["llm_config"] = llmConfig
		}
		return m
	}
	worker := func(team, name string) map[string]any {
		return agent(map[string]any{"agent_id": "w-" + team + "-" + name, "name": name, "role": name,
			"system_prompt": "You are the " + name + " of team " + team + "."})
	}
	team := func(name string, workers []any) map[string]any {
		return map[string]any{"name": name,
			"team_supervisor_agent": agent(map[string]any{"agent_id": "ts-" + name, "system_prompt": "You lead team " + name + "."}),
			"workers":               workers}
	}
	var teams []any
	switch cfg.Shape {
	case ShapeReference, "":
		// As e2e's reference hierarchy: the research team ends its turn
		// without asking once both its workers have worked.
		research := team("research", []any{worker("research", "searcher"), worker("research", "analyst")})
		research["prevent_duplicate"], research["share_context"] = true, true
		teams = []any{research, team("writing", []any{worker("writing", "writer")})}
	case ShapeSequential, ShapeTeams:
		nt, nw := cfg.Teams, cfg.Workers
		if cfg.Shape == ShapeSequential {
			nt = 1
		}
		if nt < 1 || nw < 1 || nt*nw > 200 {
			return nil, fmt.Errorf("shape %s: want 1 to 200 agents in 1 or more teams of 1 or more workers, got %d teams of %d", cfg.Shape, nt, nw)
		}
		for t := 1; t <= nt; t++ {
			var ws []any
			for w := 1; w <= nw; w++ {
				ws = append(ws, worker(fmt.Sprintf("t%d", t), fmt.Sprintf("worker%d", w)))
			}
			teams = append(teams, team(fmt.Sprintf("t%d", t), ws))
		}
	default:
		return nil, fmt.Errorf("unknown shape %q (want %s, %s or %s)", cfg.Shape, ShapeReference, ShapeSequential, ShapeTeams)
	}
	h := map[string]any{
		"name":                    "executor-bench-" + models.NewID(),
		"global_supervisor_agent": agent(map[string]any{"agent_id": "gs", "system_prompt": "You lead the benchmark's teams."}),
		"teams":                   teams,
		"enable_context_sharing":  true,
	}
	return json.Marshal(h)
}

// ExpectedCalls is the number of LLM calls a run of cfg's shape makes with
// the fake model (0 when unknown).
func ExpectedCalls(cfg Config) int {
	switch cfg.Shape {
	case ShapeReference, "":
		return 11
	case ShapeSequential:
		return 2*cfg.Workers + 4
	case ShapeTeams:
		return cfg.Teams + 2 + cfg.Teams*(2*cfg.Workers+1)
	}
	return 0
}
