package e2e

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/op-stack/executor/config"
	"github.com/op-stack/executor/llm/llmfake"
	"github.com/op-stack/executor/models"
)

// verifyWebhook is docs/webhooks.md's Go example, copied as it is written
// there: the tests verify deliveries with the code users are given.
func verifyWebhook(secret string, h http.Header, body []byte, tolerance time.Duration) error {
	key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(secret, "whsec_"))
	if err != nil {
		return err
	}
	id, ts := h.Get("webhook-id"), h.Get("webhook-timestamp")
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		return errors.New("bad webhook-timestamp")
	}
	if age := time.Since(time.Unix(sec, 0)); age > tolerance || age < -tolerance {
		return errors.New("webhook-timestamp outside the tolerance")
	}
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte(id + "." + ts + "."))
	mac.Write(body)
	want := mac.Sum(nil)
	for _, sig := range strings.Fields(h.Get("webhook-signature")) {
		version, b64, ok := strings.Cut(sig, ",")
		if !ok || version != "v1" {
			continue
		}
		if got, err := base64.StdEncoding.DecodeString(b64); err == nil && hmac.Equal(got, want) {
			return nil
		}
	}
	return errors.New("no valid webhook-signature")
}

// receivedHook is one request a test receiver got.
type receivedHook struct {
	ID       string
	Type     string
	RunID    string
	Sequence int64
	Status   int // what the receiver answered
	Verified error
}

// hookReceiver is a webhook receiver: it records every request, verifies
// its signature, and answers what answer says.
type hookReceiver struct {
	mu     sync.Mutex
	secret string
	got    []receivedHook
	answer func() int
}

func (r *hookReceiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	body, _ := io.ReadAll(req.Body)
	var p struct {
		Type string       `json:"type"`
		Data models.Event `json:"data"`
	}
	_ = json.Unmarshal(body, &p)
	r.mu.Lock()
	status := r.answer()
	r.got = append(r.got, receivedHook{ID: req.Header.Get("webhook-id"), Type: p.Type, RunID: p.Data.RunID,
		Sequence: p.Data.Sequence, Status: status, Verified: verifyWebhook(r.secret, req.Header, body, 5*time.Minute)})
	r.mu.Unlock()
	w.WriteHeader(status)
}

func (r *hookReceiver) requests() []receivedHook {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]receivedHook(nil), r.got...)
}

// accepted is what the receiver accepted (2xx), once per webhook-id, in
// the order it first accepted each, and how many accepted requests were
// duplicates of an id (allowed by the spec, after a lost answer).
func (r *hookReceiver) accepted() (firsts []receivedHook, duplicates int) {
	seen := map[string]bool{}
	for _, h := range r.requests() {
		if h.Status/100 != 2 {
			continue
		}
		if seen[h.ID] {
			duplicates++
			continue
		}
		seen[h.ID] = true
		firsts = append(firsts, h)
	}
	return firsts, duplicates
}

func webhookSecretKey(t *testing.T) []byte {
	key := make([]byte, 32)
	if _, err := rand.Read(key); err != nil {
		t.Fatal(err)
	}
	return key
}

func (e *testEnv) createWebhook(url string, events ...string) models.WebhookEndpoint {
	e.t.Helper()
	if len(events) == 0 {
		events = models.WebhookEventTypes()
	}
	var ep models.WebhookEndpoint
	e.mustPost("/webhooks/create", map[string]any{"url": url, "events": events, "description": "test receiver"}, &ep)
	if !strings.HasPrefix(ep.Secret, "whsec_") {
		e.t.Fatalf("create answered secret %q", ep.Secret)
	}
	return ep
}

func (e *testEnv) webhookDeliveries(body map[string]any) []models.WebhookDelivery {
	e.t.Helper()
	var list models.WebhookDeliveryList
	e.mustPost("/webhooks/deliveries", body, &list)
	return list.Items
}

// TestWebhooksReachADownReceiverInOrder: a receiver that answers 503 for
// its first 30 seconds still gets every event of two runs (started, budget
// reached, completed or failed), each signed (verified with the documented
// Go code), in the order of each run's log, with a webhook-id that stays
// the same across the retries; the runs end without waiting for it.
func TestWebhooksReachADownReceiverInOrder(t *testing.T) {
	e := newEnv(t, budgetRules(), withConfig(func(c *config.Config) {
		c.MCPSecretKey, c.WebhooksAllowPrivate = webhookSecretKey(t), true
		c.WebhookTimeout, c.WebhookRetryMaxInterval = 2*time.Second, 2*time.Second
	}))
	upAt := time.Now().Add(30 * time.Second) // down for the 30 seconds
	recv := &hookReceiver{answer: func() int {
		if time.Now().Before(upAt) {
			return http.StatusServiceUnavailable
		}
		return http.StatusNoContent
	}}
	srv := httptest.NewServer(recv)
	t.Cleanup(srv.Close)
	ep := e.createWebhook(srv.URL + "/hooks")
	recv.mu.Lock()
	recv.secret = ep.Secret
	recv.mu.Unlock()

	// The secret is shown once: get and list never show it.
	var got models.WebhookEndpoint
	e.mustPost("/webhooks/get", map[string]any{"id": ep.ID}, &got)
	var list models.WebhookEndpointList
	e.mustPost("/webhooks/list", map[string]any{}, &list)
	if got.Secret != "" || len(list.Items) != 1 || list.Items[0].Secret != "" || got.URL != srv.URL+"/hooks" || !got.Enabled {
		t.Fatalf("get = %+v, list = %+v", got, list)
	}

	hid := e.createHierarchy(referenceHierarchy())
	start := func(onExceeded string) string {
		e.fake.SetRules(budgetRules()...)
		var out struct {
			ID string `json:"id"`
		}
		e.mustPost("/runs/start", map[string]any{"hierarchy_id": hid, "task": "budget", "execution_config": map[string]any{
			"budget": map[string]any{"max_tokens": 200, "on_exceeded": onExceeded},
		}}, &out)
		return out.ID
	}
	runs := map[string][]string{}
	ids := []string{}
	for _, c := range []struct{ onExceeded, status, last string }{
		{models.BudgetFinish, models.RunCompleted, models.WebhookRunCompleted},
		{models.BudgetFail, models.RunFailed, models.WebhookRunFailed},
	} {
		id := start(c.onExceeded)
		if v := e.waitRun(id, time.Minute); v.Status != c.status {
			t.Fatalf("run %s ended %s, want %s: %s", id, v.Status, c.status, v.Error)
		}
		runs[id] = []string{models.WebhookRunStarted, models.WebhookRunBudgetReached, c.last}
		ids = append(ids, id)
	}
	if time.Now().After(upAt) {
		t.Fatalf("the runs ended after the receiver came up: the test proves nothing about a down receiver")
	}

	waitFor(t, 90*time.Second, "every event accepted", func() bool {
		firsts, _ := recv.accepted()
		return len(firsts) >= 6
	})
	firsts, dups := recv.accepted()
	t.Logf("%d requests, %d events accepted, %d duplicates", len(recv.requests()), len(firsts), dups)
	if len(firsts) != 6 {
		t.Fatalf("accepted %d events, want 6: %+v", len(firsts), firsts)
	}
	perRun := map[string][]receivedHook{}
	for _, h := range firsts {
		perRun[h.RunID] = append(perRun[h.RunID], h)
	}
	for _, id := range ids {
		hs := perRun[id]
		if len(hs) != 3 {
			t.Fatalf("run %s: accepted %+v", id, hs)
		}
		for i, h := range hs {
			if h.Type != runs[id][i] {
				t.Errorf("run %s: event %d is %s, want %s (order %+v)", id, i, h.Type, runs[id][i], hs)
			}
			if i > 0 && h.Sequence <= hs[i-1].Sequence {
				t.Errorf("run %s: sequence %d after %d", id, h.Sequence, hs[i-1].Sequence)
			}
		}
	}
	// Every request is signed, and an id names one event through all of
	// its retries.
	byID := map[string]receivedHook{}
	refused := 0
	for _, h := range recv.requests() {
		if h.Verified != nil {
			t.Errorf("request %s: %v", h.ID, h.Verified)
		}
		if h.Status == http.StatusServiceUnavailable {
			refused++
		}
		if prev, ok := byID[h.ID]; ok && (prev.RunID != h.RunID || prev.Sequence != h.Sequence || prev.Type != h.Type) {
			t.Errorf("webhook-id %s named %+v and then %+v", h.ID, prev, h)
		}
		byID[h.ID] = h
	}
	if refused == 0 {
		t.Error("the receiver refused nothing: nothing was retried")
	}
	// A tampered body does not verify.
	h := http.Header{}
	h.Set("webhook-id", "msg_x")
	h.Set("webhook-timestamp", strconv.FormatInt(time.Now().Unix(), 10))
	if err := verifyWebhook(ep.Secret, h, []byte(`{}`), time.Minute); err == nil {
		t.Error("an unsigned request verified")
	}

	// The deliveries are recorded as delivered (the activity records an
	// attempt after the receiver's answer, so a moment after it).
	var ds []models.WebhookDelivery
	waitFor(t, 10*time.Second, "every delivery recorded as delivered", func() bool {
		ds = e.webhookDeliveries(map[string]any{"endpoint_id": ep.ID, "status": "delivered"})
		return len(ds) >= 6
	})
	if len(ds) != 6 {
		t.Fatalf("deliveries = %+v", ds)
	}
	for _, d := range ds {
		if d.Status != "delivered" || d.DeliveredAt == nil || d.Attempts < 1 {
			t.Errorf("delivery %+v", d)
		}
		if _, ok := byID[d.ID]; !ok {
			t.Errorf("delivery %s was never received", d.ID)
		}
	}
	if ds := e.webhookDeliveries(map[string]any{"run_id": ids[0], "status": "delivered"}); len(ds) != 3 {
		t.Errorf("run %s's deliveries = %+v", ids[0], ds)
	}
}

// TestWebhookReceiverThatNeverAnswers: a receiver that holds every request
// open does not slow a run (it ends in the time of the same run without
// webhooks); the delivery is retried until WEBHOOK_RETRY_FOR closes, then
// recorded as failed with why, and webhooks/redeliver sends it again with
// the same webhook-id once the receiver answers.
func TestWebhookReceiverThatNeverAnswers(t *testing.T) {
	e := newEnv(t, budgetRules(), withConfig(func(c *config.Config) {
		c.MCPSecretKey, c.WebhooksAllowPrivate = webhookSecretKey(t), true
		c.WebhookTimeout, c.WebhookRetryMaxInterval, c.WebhookRetryFor = time.Second, time.Second, 4*time.Second
	}))
	hid := e.createHierarchy(referenceHierarchy())
	timed := func() (string, time.Duration) {
		e.fake.SetRules(budgetRules()...)
		begin := time.Now()
		id := e.startRun(hid, "budget")
		if v := e.waitRun(id, time.Minute); v.Status != models.RunCompleted {
			t.Fatalf("run ended %s: %s", v.Status, v.Error)
		}
		return id, time.Since(begin)
	}
	_, baseline := timed()

	release := make(chan struct{})
	var hung sync.Once
	recv := &hookReceiver{answer: func() int { return http.StatusOK }}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
			return
		}
		recv.ServeHTTP(w, r)
	}))
	t.Cleanup(func() { hung.Do(func() { close(release) }); srv.Close() })
	ep := e.createWebhook(srv.URL, models.WebhookRunCompleted)
	recv.mu.Lock()
	recv.secret = ep.Secret
	recv.mu.Unlock()

	id, took := timed()
	t.Logf("run without webhooks %v, with a receiver that never answers %v", baseline, took)
	if took > baseline+3*time.Second {
		t.Errorf("the run took %v with a hanging receiver, %v without", took, baseline)
	}

	var failed []models.WebhookDelivery
	waitFor(t, 60*time.Second, "the delivery recorded as failed", func() bool {
		failed = e.webhookDeliveries(map[string]any{"run_id": id, "status": "failed"})
		return len(failed) == 1
	})
	d := failed[0]
	if d.EventType != models.WebhookRunCompleted || d.Attempts < 2 || !strings.Contains(d.LastError, "retries exhausted") {
		t.Errorf("failed delivery = %+v", d)
	}
	if len(recv.requests()) != 0 {
		t.Fatalf("the hanging receiver recorded requests: %+v", recv.requests())
	}

	// Redelivered once the receiver answers: same id, signed, delivered.
	hung.Do(func() { close(release) })
	var again models.WebhookDelivery
	e.mustPost("/webhooks/redeliver", map[string]any{"id": d.ID}, &again)
	if again.ID != d.ID || again.Status != "pending" {
		t.Errorf("redeliver answered %+v", again)
	}
	waitFor(t, 30*time.Second, "the redelivery", func() bool {
		ds := e.webhookDeliveries(map[string]any{"run_id": id})
		return len(ds) == 1 && ds[0].Status == "delivered"
	})
	reqs := recv.requests()
	// (A request that timed out may have been let through by the release
	// before its connection closed: the same id again, which is allowed.)
	if len(reqs) == 0 {
		t.Fatal("the receiver got nothing")
	}
	for _, r := range reqs {
		if r.ID != d.ID || r.Verified != nil || r.Type != models.WebhookRunCompleted || r.RunID != id {
			t.Errorf("receiver got %+v", r)
		}
	}
}

// TestWebhookToAPrivateAddressIsRefused: without WEBHOOKS_ALLOW_PRIVATE, a
// delivery to a loopback receiver is refused by the network guard on its
// first attempt, not retried, recorded as failed with why, and the
// receiver gets nothing; the run is not affected.
func TestWebhookToAPrivateAddressIsRefused(t *testing.T) {
	e := newEnv(t, budgetRules(), withConfig(func(c *config.Config) { c.MCPSecretKey = webhookSecretKey(t) }))
	recv := &hookReceiver{answer: func() int { return http.StatusOK }}
	srv := httptest.NewServer(recv)
	t.Cleanup(srv.Close)
	e.createWebhook(srv.URL, models.WebhookRunStarted)
	id := e.startRun(e.createHierarchy(referenceHierarchy()), "budget")
	if v := e.waitRun(id, time.Minute); v.Status != models.RunCompleted {
		t.Fatalf("run ended %s: %s", v.Status, v.Error)
	}
	var failed []models.WebhookDelivery
	waitFor(t, 30*time.Second, "the delivery refused", func() bool {
		failed = e.webhookDeliveries(map[string]any{"run_id": id, "status": "failed"})
		return len(failed) == 1
	})
	if d := failed[0]; d.Attempts != 1 || !strings.Contains(d.LastError, "not allowed") {
		t.Errorf("refused delivery = %+v", d)
	}
	if got := recv.requests(); len(got) != 0 {
		t.Errorf("the private receiver got %+v", got)
	}
}

// TestWebhookOfATerminatedRun: a run whose workflow an operator terminates
// ends through the API's reconciliation, not its own code; its endpoint
// still gets run.started and then run.failed, once each, in order.
func TestWebhookOfATerminatedRun(t *testing.T) {
	e := newEnv(t, referenceRules(map[string][]llmfake.Response{"W-SEARCHER": {{Hang: true}}}), withConfig(func(c *config.Config) {
		c.MCPSecretKey, c.WebhooksAllowPrivate = webhookSecretKey(t), true
	}))
	recv := &hookReceiver{answer: func() int { return http.StatusOK }}
	srv := httptest.NewServer(recv)
	t.Cleanup(srv.Close)
	ep := e.createWebhook(srv.URL)
	recv.mu.Lock()
	recv.secret = ep.Secret
	recv.mu.Unlock()
	id := e.startRun(e.createHierarchy(referenceHierarchy()), "to be terminated")
	waitFor(t, 30*time.Second, "the searcher's call", func() bool { return len(callsMatching(e.fake.Calls(), "W-SEARCHER")) > 0 })
	out, err := exec.Command(temporalCLI, "workflow", "terminate", "--workflow-id", models.RunWorkflowID(id),
		"--reason", "operator stop", "--address", e.cfg.TemporalAddress).CombinedOutput()
	if err != nil {
		t.Fatalf("temporal workflow terminate: %v\n%s", err, out)
	}
	if v := e.waitRun(id, 30*time.Second); v.Status != models.RunFailed {
		t.Fatalf("run = %s %q", v.Status, v.Error)
	}
	e.getRun(id) // read again: reconciled once, announced once
	waitFor(t, 30*time.Second, "run.failed", func() bool {
		firsts, _ := recv.accepted()
		return len(firsts) >= 2
	})
	time.Sleep(time.Second) // nothing more comes
	firsts, dups := recv.accepted()
	if len(firsts) != 2 || firsts[0].Type != models.WebhookRunStarted || firsts[1].Type != models.WebhookRunFailed || dups != 0 {
		t.Fatalf("receiver accepted %+v (%d duplicates)", firsts, dups)
	}
	for _, h := range recv.requests() {
		if h.Verified != nil || h.RunID != id {
			t.Errorf("request %+v", h)
		}
	}
}

// TestRunStartWebhook: runs/start's one-off "webhook" gets that run's
// events, signed with the secret its caller chose, and no other run's; it
// is not one of the tenant's endpoints (webhooks/list); its deliveries
// show by run. Bad input is a 400 naming the field, and starts no run.
func TestRunStartWebhook(t *testing.T) {
	e := newEnv(t, budgetRules(), withConfig(func(c *config.Config) {
		c.MCPSecretKey, c.WebhooksAllowPrivate = webhookSecretKey(t), true
	}))
	secret := "whsec_" + base64.StdEncoding.EncodeToString(webhookSecretKey(t))
	recv := &hookReceiver{secret: secret, answer: func() int { return http.StatusOK }}
	srv := httptest.NewServer(recv)
	t.Cleanup(srv.Close)
	hid := e.createHierarchy(referenceHierarchy())

	for _, bad := range []struct {
		webhook map[string]any
		field   string
	}{
		{map[string]any{"url": srv.URL, "secret": "not-a-secret"}, "webhook.secret"},
		{map[string]any{"url": srv.URL, "secret": "whsec_" + base64.StdEncoding.EncodeToString([]byte("short"))}, "webhook.secret"},
		{map[string]any{"url": "ftp://x", "secret": secret}, "webhook.url"},
		{map[string]any{"url": srv.URL, "secret": secret, "events": []string{"run.nope"}}, "webhook.events"},
	} {
		status, env := e.post("/runs/start", map[string]any{"hierarchy_id": hid, "task": "budget", "webhook": bad.webhook})
		if status != http.StatusBadRequest || env.ErrorCode != models.CodeInvalidParameters.Name || !strings.Contains(env.Message, bad.field) {
			t.Errorf("webhook %v: %d %+v, want 400 on %s", bad.webhook, status, env, bad.field)
		}
	}

	var out struct {
		ID string `json:"id"`
	}
	e.mustPost("/runs/start", map[string]any{"hierarchy_id": hid, "task": "budget", "webhook": map[string]any{
		"url": srv.URL, "secret": secret, "events": []string{models.WebhookRunStarted, models.WebhookRunCompleted},
	}}, &out)
	if v := e.waitRun(out.ID, time.Minute); v.Status != models.RunCompleted {
		t.Fatalf("run ended %s: %s", v.Status, v.Error)
	}
	e.fake.SetRules(budgetRules()...)
	other := e.startRun(hid, "budget") // no webhook: the receiver hears nothing of it
	e.waitRun(other, time.Minute)

	waitFor(t, 30*time.Second, "the run's two events", func() bool {
		firsts, _ := recv.accepted()
		return len(firsts) >= 2
	})
	time.Sleep(time.Second)
	firsts, _ := recv.accepted()
	if len(firsts) != 2 || firsts[0].Type != models.WebhookRunStarted || firsts[1].Type != models.WebhookRunCompleted {
		t.Fatalf("receiver accepted %+v", firsts)
	}
	for _, h := range recv.requests() {
		if h.Verified != nil || h.RunID != out.ID {
			t.Errorf("request %+v", h)
		}
	}
	var list models.WebhookEndpointList
	e.mustPost("/webhooks/list", map[string]any{}, &list)
	if len(list.Items) != 0 {
		t.Errorf("the run's webhook is listed as the tenant's: %+v", list.Items)
	}
	waitFor(t, 10*time.Second, "the deliveries recorded", func() bool {
		return len(e.webhookDeliveries(map[string]any{"run_id": out.ID, "status": "delivered"})) == 2
	})
}
