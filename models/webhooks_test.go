package models

import "testing"

// TestWebhookEventType maps each log event webhooks carry to its type, a
// timed-out failure to run.timed_out, and everything else to nothing.
func TestWebhookEventType(t *testing.T) {
	ev := func(cat, act string, data map[string]any) Event {
		return Event{Event: EventKind{Category: cat, Action: act}, Data: data}
	}
	for _, c := range []struct {
		ev   Event
		want string
	}{
		{ev(CategoryLifecycle, ActionStarted, nil), WebhookRunStarted},
		{ev(CategoryLifecycle, ActionCompleted, nil), WebhookRunCompleted},
		{ev(CategoryLifecycle, ActionFailed, map[string]any{"error_code": CodeExecutionFailed.Name}), WebhookRunFailed},
		{ev(CategoryLifecycle, ActionFailed, map[string]any{"error_code": CodeExecutionTimeout.Name}), WebhookRunTimedOut},
		{ev(CategoryLifecycle, ActionCancelled, nil), WebhookRunCancelled},
		{ev(CategoryApproval, ActionRequested, nil), WebhookRunWaitingApproval},
		{ev(CategorySystem, ActionBudget, nil), WebhookRunBudgetReached},
		{ev(CategoryLifecycle, ActionPaused, nil), ""},
		{ev(CategoryApproval, "resolved", nil), ""},
		{ev("llm", ActionStream, nil), ""},
		{ev(CategorySystem, ActionError, nil), ""},
	} {
		if got := WebhookEventType(c.ev); got != c.want {
			t.Errorf("%s.%s %v: %q, want %q", c.ev.Event.Category, c.ev.Event.Action, c.ev.Data, got, c.want)
		}
	}
	if n := len(WebhookEventTypes()); n != 7 {
		t.Errorf("%d event types", n)
	}
}
