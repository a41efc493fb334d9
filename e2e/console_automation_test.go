package e2e

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/op-stack/executor/config"
	"github.com/op-stack/executor/models"
)

// TestConsoleSchedulesAndWebhooks drives the console's schedules and
// webhooks pages in headless Chromium (issue 26: the console shows
// schedules and webhook deliveries): a paused schedule, triggered once,
// shows its spec, overlap policy, state and action, and links to its run;
// a webhook endpoint shows its URL and events, and the run's deliveries
// their event, status and attempts. No script fails.
func TestConsoleSchedulesAndWebhooks(t *testing.T) {
	e := newEnv(t, accessRules(), withConfig(func(c *config.Config) {
		c.MCPSecretKey, c.WebhooksAllowPrivate = webhookSecretKey(t), true
	}))
	receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) }))
	defer receiver.Close()
	ep := e.createWebhook(receiver.URL, models.WebhookRunStarted, models.WebhookRunCompleted)
	hid := e.createHierarchy(accessHierarchy("console-nightly"))
	sc := e.createSchedule(map[string]any{"hierarchy_id": hid, "task": "console nightly", "cron": []string{"0 3 * * *"},
		"time_zone": "Europe/Paris", "overlap": "skip", "paused": true, "note": "console test"})
	e.mustPost("/schedules/trigger", map[string]any{"id": sc.ID}, nil)
	var runID string
	waitFor(t, time.Minute, "the triggered run to complete", func() bool {
		runs := e.scheduleRuns(sc.ID)
		if len(runs) == 1 && runs[0].Status == models.RunCompleted {
			runID = runs[0].ID
			return true
		}
		return false
	})
	waitFor(t, time.Minute, "both deliveries", func() bool {
		return len(e.webhookDeliveries(map[string]any{"run_id": runID, "status": "delivered"})) == 2
	})

	root := e.rootURL()
	b := newBrowser(t)
	b.do("open the schedules page", chromedp.Navigate(root+"/schedules"))
	b.waitJS("the schedules page", `document.body.dataset.ready === 'true'`, 30*time.Second)
	row := eval[map[string]string](b, `(() => { const r = document.querySelector('#schedule-list tr[data-schedule-id="`+sc.ID+`"]');
	  return r ? { task: r.querySelector('.task').textContent, spec: r.querySelector('.spec').textContent, overlap: r.querySelector('.overlap').textContent,
	    state: r.querySelector('.state').textContent, actions: r.querySelector('.actions').textContent,
	    current: document.querySelector('#nav-schedules.current') ? 'yes' : 'no' } : {}; })()`)
	if !strings.HasPrefix(row["task"], "console nightly") || row["spec"] != "0 3 * * * Europe/Paris" || row["overlap"] != "skip" ||
		row["state"] != "paused" || row["actions"] != "1" || row["current"] != "yes" {
		t.Errorf("schedule row = %v", row)
	}
	b.screenshot("console-schedules")
	b.do("open the schedule's runs", chromedp.Click(chromedp.CSS(`#schedule-list tr[data-schedule-id="`+sc.ID+`"] a[href^="/runs?schedule_id="]`)))
	b.waitJS("the schedule's runs", `document.querySelectorAll('#run-list tr[data-run-id]').length === 1`, 30*time.Second)
	if got := eval[string](b, `document.querySelector('#run-list tr[data-run-id]').dataset.runId`); got != runID {
		t.Errorf("the schedule's runs list %q, want %q", got, runID)
	}

	b.do("open the webhooks page", chromedp.Navigate(root+"/webhooks"))
	b.waitJS("the webhooks page", `document.body.dataset.ready === 'true'`, 30*time.Second)
	hook := eval[map[string]string](b, `(() => { const r = document.querySelector('#webhook-list tr[data-webhook-id="`+ep.ID+`"]');
	  return r ? { url: r.querySelector('.url').textContent, events: r.querySelector('.events').textContent, state: r.querySelector('.state').textContent } : {}; })()`)
	if hook["url"] != receiver.URL || hook["events"] != models.WebhookRunStarted+" "+models.WebhookRunCompleted || hook["state"] != "enabled" {
		t.Errorf("endpoint row = %v", hook)
	}
	type delivery struct{ Event, Status, Attempts string }
	ds := eval[[]delivery](b, `[...document.querySelectorAll('#webhook-deliveries tr[data-delivery-id]')].map((r) => ({
	  Event: r.querySelector('.event').textContent, Status: r.dataset.status, Attempts: r.querySelector('.num').textContent }))`)
	events := map[string]bool{}
	for _, d := range ds {
		if d.Status != "delivered" || d.Attempts != "1" {
			t.Errorf("delivery %+v: want delivered on its first attempt", d)
		}
		events[d.Event] = true
	}
	if len(ds) != 2 || !events[models.WebhookRunStarted] || !events[models.WebhookRunCompleted] {
		t.Errorf("deliveries shown = %+v", ds)
	}
	if strings.Contains(eval[string](b, `document.body.textContent`), "whsec_") {
		t.Error("the webhooks page shows a secret")
	}
	b.screenshot("console-webhooks")
	if errs := b.pageErrors(); len(errs) > 0 {
		t.Errorf("page errors: %v", errs)
	}
}
