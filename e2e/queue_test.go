package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/op-stack/executor/app"
	"github.com/op-stack/executor/config"
	"github.com/op-stack/executor/llm/llmfake"
	"github.com/op-stack/executor/models"
	"github.com/op-stack/executor/store"
	"github.com/op-stack/executor/store/storetest"
)

// queueHierarchy is one team of one worker whose supervisors' decisions
// follow from their prompts (so concurrent runs on one fake each take the
// same path); the worker answers in about delay.
func queueHierarchy(name string) map[string]any {
	return map[string]any{
		"name":                    name,
		"global_supervisor_agent": map[string]any{"agent_id": "gs-q", "system_prompt": "GS-QUEUE You lead."},
		"teams": []any{map[string]any{
			"name":                  "qteam",
			"team_supervisor_agent": map[string]any{"agent_id": "ts-q", "system_prompt": "TS-QUEUE You lead."},
			"workers":               []any{map[string]any{"agent_id": "w-q", "name": "qwriter", "system_prompt": "W-QUEUE You write."}},
		}},
	}
}

func queueRules(workerDelay time.Duration) []llmfake.Rule {
	one := func(content string) []llmfake.Response { return []llmfake.Response{{Content: content}} }
	return []llmfake.Rule{
		{Name: "gs finish", SystemContains: "GS-QUEUE", UserContains: "Already done: qteam\n", HasJSONSchema: true, Responses: one(decision("finish", "", ""))},
		{Name: "gs dispatch", SystemContains: "GS-QUEUE", HasJSONSchema: true, Responses: one(decision("dispatch", "qteam", "write it"))},
		{Name: "final", SystemContains: "GS-QUEUE", Responses: one("QUEUE FINAL")},
		{Name: "ts finish", SystemContains: "TS-QUEUE", UserContains: "Already done: qwriter\n", Responses: one(decision("finish", "", ""))},
		{Name: "ts dispatch", SystemContains: "TS-QUEUE", Responses: one(decision("dispatch", "qwriter", "write"))},
		{Name: "worker", SystemContains: "W-QUEUE", Responses: []llmfake.Response{{Content: "queued work done", ChunkSize: 4, TokenDelay: workerDelay / 4}}},
	}
}

// postTo posts body to the API at base (…/api/executor/v1) and returns the
// status, the envelope and the Retry-After header.
func postTo(t testing.TB, base, path string, body any) (int, envelope, string) {
	t.Helper()
	raw, _ := json.Marshal(body)
	resp, err := http.Post(base+path, "application/json", bytes.NewReader(raw))
	if err != nil {
		t.Fatalf("POST %s: %v", path, err)
	}
	defer resp.Body.Close()
	var env envelope
	if err := json.NewDecoder(resp.Body).Decode(&env); err != nil {
		t.Fatalf("POST %s: %v", path, err)
	}
	return resp.StatusCode, env, resp.Header.Get("Retry-After")
}

type startAnswer struct {
	ID            string `json:"id"`
	Status        string `json:"status"`
	QueuePosition int    `json:"queue_position"`
}

// lifecycleTimes reads the stored lifecycle.started and terminal
// lifecycle event times of run id, and whether it announced
// lifecycle.queued.
func (e *testEnv) lifecycleTimes(id string) (started, ended time.Time, queued bool) {
	for _, ev := range e.storedEvents(id) {
		if ev.Event.Category != models.CategoryLifecycle {
			continue
		}
		at, err := time.Parse(models.TimestampLayout, ev.Timestamp)
		if err != nil {
			e.t.Fatal(err)
		}
		switch ev.Event.Action {
		case models.ActionQueued:
			queued = true
		case models.ActionStarted:
			started = at
		case models.ActionCompleted, models.ActionFailed, models.ActionCancelled:
			ended = at
		}
	}
	return started, ended, queued
}

// maxOverlap is the most intervals that were open at one instant.
func maxOverlap(spans [][2]time.Time) int {
	type edge struct {
		at    time.Time
		delta int
	}
	var edges []edge
	for _, s := range spans {
		edges = append(edges, edge{s[0], 1}, edge{s[1], -1})
	}
	sort.Slice(edges, func(i, j int) bool {
		if edges[i].at.Equal(edges[j].at) {
			return edges[i].delta < edges[j].delta // an end before a start at the same instant
		}
		return edges[i].at.Before(edges[j].at)
	})
	n, most := 0, 0
	for _, e := range edges {
		n += e.delta
		most = max(most, n)
	}
	return most
}

// TestAdmissionQueueAcrossReplicas: 100 runs started at once on two API
// replicas sharing one PostgreSQL database and one Temporal server, with a
// limit of 10 runs per tenant: none is refused, every one completes, and
// at most 10 were at work at once, measured from the runs' stored
// lifecycle.started and lifecycle.completed events (each inside the span
// the run held its place). The runs over the limit announced
// lifecycle.queued.
func TestAdmissionQueueAcrossReplicas(t *testing.T) {
	const n, limit = 100, 10
	dbURL := storetest.PostgresURL(t)
	e := newEnv(t, queueRules(400*time.Millisecond), withDatabase(dbURL), withConfig(func(c *config.Config) {
		c.MaxConcurrentRunsPerTenant = limit
		c.RateLimitRPS = 0
	}))
	// The second replica: its own store (connection pool) on the same
	// database, its own API server, the same Temporal server.
	st2, err := store.Open(dbURL, "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st2.Close() })
	router, err := app.NewLLM(e.cfg)
	if err != nil {
		t.Fatal(err)
	}
	api2 := httptest.NewServer(app.NewAPI(e.cfg, e.log, st2, e.temporal, router).Handler())
	t.Cleanup(api2.Close)
	replicas := []string{e.apiURL, api2.URL + "/api/executor/v1"}

	hid := e.createHierarchy(queueHierarchy("admission"))
	ids := make([]string, n)
	statuses := make([]int, n)
	queued := make([]bool, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			status, env, _ := postTo(t, replicas[i%2], "/runs/start", map[string]any{"hierarchy_id": hid, "task": fmt.Sprintf("admission task %d", i)})
			statuses[i] = status
			var a startAnswer
			if status == http.StatusOK && json.Unmarshal(env.Data, &a) == nil {
				ids[i], queued[i] = a.ID, a.Status == models.RunQueued
			}
		}()
	}
	wg.Wait()
	nQueued := 0
	for i, s := range statuses {
		if s != http.StatusOK || ids[i] == "" {
			t.Fatalf("start %d answered %d", i, s)
		}
		if queued[i] {
			nQueued++
		}
	}
	if nQueued < n-limit {
		t.Errorf("%d starts answered queued, want at least %d", nQueued, n-limit)
	}
	waitFor(t, 6*time.Minute, "every run to end", func() bool {
		for _, id := range ids {
			r, err := e.store.GetTenantRun(context.Background(), "", "", id)
			if err != nil || !models.IsTerminal(r.Status) {
				return false
			}
		}
		return true
	})
	var spans [][2]time.Time
	announced := 0
	for _, id := range ids {
		r, err := e.store.GetTenantRun(context.Background(), "", "", id)
		if err != nil || r.Status != models.RunCompleted {
			t.Fatalf("run %s: %+v, %v, want completed", id, r, err)
		}
		started, ended, wasQueued := e.lifecycleTimes(id)
		if started.IsZero() || ended.IsZero() {
			t.Fatalf("run %s has no lifecycle.started or end event", id)
		}
		spans = append(spans, [2]time.Time{started, ended})
		if wasQueued {
			announced++
		}
	}
	most := maxOverlap(spans)
	t.Logf("%d runs, %d queued at start, %d announced lifecycle.queued, at most %d at work at once (limit %d)", n, nQueued, announced, most, limit)
	if most > limit {
		t.Errorf("%d runs were at work at once, more than the limit %d", most, limit)
	}
	if most < 2 {
		t.Errorf("at most %d run at once: the queue admitted nothing in parallel", most)
	}
	if announced != nQueued {
		t.Errorf("%d runs announced lifecycle.queued, %d were queued", announced, nQueued)
	}
}

// TestAdmissionQueue: with a limit of one run and a queue of three, the
// second to fourth starts queue (positions 1 to 3, listed with status
// queued, lifecycle.queued in their stream and stored log), a fifth is
// 429 with Retry-After, as is a start with on_limit reject; a queued run
// can be cancelled; the others run one after another in order.
func TestAdmissionQueue(t *testing.T) {
	e := newEnv(t, queueRules(1500*time.Millisecond), withConfig(func(c *config.Config) {
		c.MaxConcurrentRunsPerTenant = 1
		c.MaxQueuedRunsPerTenant = 3
		c.RateLimitRPS = 0
	}))
	hid := e.createHierarchy(queueHierarchy("queue"))
	start := func(task string, extra map[string]any) (int, startAnswer, envelope, string) {
		body := map[string]any{"hierarchy_id": hid, "task": task}
		for k, v := range extra {
			body[k] = v
		}
		status, env, retry := postTo(t, e.apiURL, "/runs/start", body)
		var a startAnswer
		_ = json.Unmarshal(env.Data, &a)
		return status, a, env, retry
	}
	_, a, _, _ := start("first", nil)
	_, b, _, _ := start("second", nil)
	_, c, _, _ := start("third", nil)
	_, d, _, _ := start("fourth", nil)
	if a.Status != models.RunPending || b.Status != models.RunQueued || b.QueuePosition != 1 || c.Status != models.RunQueued || c.QueuePosition != 2 || d.QueuePosition != 3 {
		t.Fatalf("starts = %+v %+v %+v %+v, want pending, queued 1, 2, 3", a, b, c, d)
	}
	if status, _, env, retry := start("fifth", nil); status != http.StatusTooManyRequests || retry == "" || !strings.Contains(env.Message, "queued") {
		t.Errorf("past the queue bound: %d %q Retry-After %q, want 429 with Retry-After", status, env.Message, retry)
	}
	if status, _, env, retry := start("rejected", map[string]any{"on_limit": "reject"}); status != http.StatusTooManyRequests || retry == "" {
		t.Errorf("on_limit reject: %d %q Retry-After %q, want 429", status, env.Message, retry)
	}
	if status, _, _, _ := start("bad", map[string]any{"on_limit": "wait"}); status != http.StatusBadRequest {
		t.Errorf("on_limit wait: %d, want 400", status)
	}
	if status, _, env, _ := start("bad", map[string]any{"multitask_strategy": "enqueue"}); status != http.StatusBadRequest || !strings.Contains(env.Message, "previous_run_id") {
		t.Errorf("multitask_strategy without previous_run_id: %d %q, want 400", status, env.Message)
	}
	// A queued run holds no place to pause.
	if status, env, _ := postTo(t, e.apiURL, "/runs/pause", map[string]any{"id": b.ID}); status != http.StatusConflict {
		t.Errorf("pausing a queued run: %d %q, want 409", status, env.Message)
	}
	var list struct {
		Items []struct {
			ID     string `json:"id"`
			Status string `json:"status"`
		} `json:"items"`
		Total int `json:"total"`
	}
	e.mustPost("/runs/list", map[string]any{"status": "queued"}, &list)
	if list.Total != 3 || len(list.Items) != 3 {
		t.Errorf("runs/list status queued = %+v, want the three queued runs", list)
	}
	// lifecycle.queued reaches a stream of the queued run and its stored
	// log at once (the run is idle).
	msgs, _ := e.readStream(e.openStream(b.ID, 0, true), func(m sseMessage) bool { return m.Event.Event.Action == models.ActionQueued })
	if last := msgs[len(msgs)-1].Event; last.Event.Category != models.CategoryLifecycle || last.Event.Action != models.ActionQueued || fmt.Sprint(last.Data["position"]) != "1" {
		t.Errorf("stream of the queued run: %+v", last)
	}
	waitFor(t, 10*time.Second, "lifecycle.queued stored", func() bool {
		_, _, q := e.lifecycleTimes(d.ID)
		return q
	})
	// The fourth is cancelled while it waits.
	var cancelled struct {
		Status string `json:"status"`
	}
	e.mustPost("/runs/cancel", map[string]any{"id": d.ID}, &cancelled)
	if v := e.waitRun(d.ID, 30*time.Second); v.Status != models.RunCancelled {
		t.Errorf("cancelled queued run ended %s", v.Status)
	}
	if started, _, _ := e.lifecycleTimes(d.ID); !started.IsZero() {
		t.Error("the run cancelled while queued started")
	}
	va, vb, vc := e.waitRun(a.ID, time.Minute), e.waitRun(b.ID, time.Minute), e.waitRun(c.ID, time.Minute)
	if va.Status != models.RunCompleted || vb.Status != models.RunCompleted || vc.Status != models.RunCompleted {
		t.Fatalf("runs ended %s, %s and %s", va.Status, vb.Status, vc.Status)
	}
	// In order, one at a time.
	aStarted, aEnded, _ := e.lifecycleTimes(a.ID)
	bStarted, bEnded, bQueued := e.lifecycleTimes(b.ID)
	cStarted, _, cQueued := e.lifecycleTimes(c.ID)
	if !bQueued || !cQueued || aStarted.IsZero() || bStarted.Before(aEnded) || cStarted.Before(bEnded) {
		t.Errorf("runs at %s–%s, %s–%s, from %s (queued announced %v, %v): want one after another in start order", aStarted, aEnded, bStarted, bEnded, cStarted, bQueued, cQueued)
	}
}

// startFollowUps starts two follow-ups of prev at once with strategy and
// returns their statuses and answers, in the order given.
func (e *testEnv) startFollowUps(hid, prev, strategy string) ([2]int, [2]startAnswer) {
	var statuses [2]int
	var answers [2]startAnswer
	var wg sync.WaitGroup
	for i := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			status, env, _ := postTo(e.t, e.apiURL, "/runs/start", map[string]any{"hierarchy_id": hid, "task": fmt.Sprintf("SECOND TASK %s %d", strategy, i), "previous_run_id": prev, "multitask_strategy": strategy})
			statuses[i] = status
			_ = json.Unmarshal(env.Data, &answers[i])
		}()
	}
	wg.Wait()
	return statuses, answers
}

// TestThreadPolicies: two concurrent follow-ups of a run still at work,
// under each multitask_strategy.
func TestThreadPolicies(t *testing.T) {
	e := newEnv(t, deleteRules(), withConfig(func(c *config.Config) { c.RateLimitRPS = 0 }))
	hid := e.createHierarchy(slowHierarchy())
	get := func(id string) (*store.Run, error) {
		return e.store.GetTenantRun(context.Background(), "", "", id)
	}

	t.Run("reject", func(t *testing.T) {
		first := e.startRun(hid, "reject: first")
		statuses, _ := e.startFollowUps(hid, first, models.MultitaskReject)
		if statuses != [2]int{http.StatusConflict, http.StatusConflict} {
			t.Errorf("follow-ups of a run at work = %v, want both 409", statuses)
		}
		e.waitRun(first, time.Minute)
		// Once it has ended, of two racing follow-ups one wins: the other
		// finds the winner at work.
		statuses, answers := e.startFollowUps(hid, first, models.MultitaskReject)
		won := -1
		for i, s := range statuses {
			if s == http.StatusOK {
				won = i
			}
		}
		if won < 0 || statuses[1-won] != http.StatusConflict {
			t.Fatalf("follow-ups of a finished run = %v, want one 200 and one 409", statuses)
		}
		e.waitRun(answers[won].ID, time.Minute)
	})

	t.Run("enqueue", func(t *testing.T) {
		first := e.startRun(hid, "enqueue: first")
		statuses, answers := e.startFollowUps(hid, first, models.MultitaskEnqueue)
		if statuses != [2]int{http.StatusOK, http.StatusOK} || answers[0].Status != models.RunQueued || answers[1].Status != models.RunQueued {
			t.Fatalf("follow-ups = %v %+v, want both queued", statuses, answers)
		}
		e.waitRun(first, time.Minute)
		v0, v1 := e.waitRun(answers[0].ID, 2*time.Minute), e.waitRun(answers[1].ID, 2*time.Minute)
		if v0.Status != models.RunCompleted || v1.Status != models.RunCompleted {
			t.Fatalf("follow-ups ended %s, %s", v0.Status, v1.Status)
		}
		// One after the other, both after the first, each following it.
		_, firstEnded, _ := e.lifecycleTimes(first)
		s0, e0, _ := e.lifecycleTimes(answers[0].ID)
		s1, e1, _ := e.lifecycleTimes(answers[1].ID)
		if s0.Before(firstEnded) || s1.Before(firstEnded) || (s1.Before(e0) && s0.Before(e1)) {
			t.Errorf("runs overlapped: first ended %s; follow-ups %s–%s and %s–%s", firstEnded, s0, e0, s1, e1)
		}
		for _, a := range answers {
			r, err := get(a.ID)
			if err != nil || r.PreviousRunID != first || r.ThreadID != first {
				t.Errorf("follow-up %s: %+v, %v, want previous and thread %s", a.ID, r, err, first)
			}
		}
		// The follow-up's supervisors saw the first run's answer, built
		// when it was admitted.
		if !anyCallShows(e.fake.Calls(), "SECOND TASK enqueue", "enqueue: first") {
			t.Error("no call of a follow-up showed the first run's task")
		}
	})

	t.Run("interrupt", func(t *testing.T) {
		first := e.startRun(hid, "interrupt: first")
		waitFor(t, 30*time.Second, "the first run at work", func() bool { return e.getRun(first).Status == models.RunRunning })
		statuses, answers := e.startFollowUps(hid, first, models.MultitaskInterrupt)
		if statuses != [2]int{http.StatusOK, http.StatusOK} {
			t.Fatalf("follow-ups = %v", statuses)
		}
		if v := e.waitRun(first, time.Minute); v.Status != models.RunCancelled {
			t.Errorf("interrupted run ended %s, want cancelled", v.Status)
		}
		v0, v1 := e.waitRun(answers[0].ID, 2*time.Minute), e.waitRun(answers[1].ID, 2*time.Minute)
		// The later follow-up interrupts the earlier (still queued): one
		// runs, following the interrupted run, whose record is kept.
		got := []string{v0.Status, v1.Status}
		sort.Strings(got)
		if got[0] != models.RunCancelled || got[1] != models.RunCompleted {
			t.Fatalf("follow-ups ended %v, want one cancelled, one completed", got)
		}
		if _, err := get(first); err != nil {
			t.Errorf("interrupted run is gone: %v", err)
		}
	})

	t.Run("rollback", func(t *testing.T) {
		first := e.startRun(hid, "rollback: first")
		waitFor(t, 30*time.Second, "the first run at work", func() bool { return e.getRun(first).Status == models.RunRunning })
		statuses, answers := e.startFollowUps(hid, first, models.MultitaskRollback)
		if statuses != [2]int{http.StatusOK, http.StatusOK} {
			t.Fatalf("follow-ups = %v", statuses)
		}
		// The first run is cancelled and deleted; so is the follow-up the
		// other one rolled back; the survivor follows no run (the first
		// was its thread's first) and completes.
		waitFor(t, time.Minute, "the first run deleted", func() bool {
			_, err := get(first)
			return models.ErrorCode(err) == models.CodeExecutionNotFound
		})
		var survivor string
		waitFor(t, 2*time.Minute, "one follow-up completed, the other deleted", func() bool {
			alive := 0
			for _, a := range answers {
				r, err := get(a.ID)
				if err == nil {
					alive++
					if r.Status == models.RunCompleted {
						survivor = a.ID
					}
				}
			}
			return alive == 1 && survivor != ""
		})
		if r, err := get(survivor); err != nil || r.PreviousRunID != "" {
			t.Errorf("survivor %+v, %v, want no previous run", r, err)
		}
	})
}

// anyCallShows tells whether some call's messages contain all of texts.
func anyCallShows(calls []llmfake.Call, texts ...string) bool {
	for _, c := range calls {
		var all strings.Builder
		for _, m := range c.Messages {
			all.WriteString(m.Content)
			all.WriteString("\n")
		}
		found := true
		for _, s := range texts {
			found = found && strings.Contains(all.String(), s)
		}
		if found {
			return true
		}
	}
	return false
}
