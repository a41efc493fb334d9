package models

import (
	"time"
)

// Webhook event types (docs/webhooks.md): what an endpoint subscribes to,
// and the "type" of the body it receives. Each is one event of the run's
// log (see WebhookEventType).
const (
	WebhookRunStarted         = "run.started"
	WebhookRunCompleted       = "run.completed"
	WebhookRunFailed          = "run.failed"
	WebhookRunCancelled       = "run.cancelled"
	WebhookRunTimedOut        = "run.timed_out"
	WebhookRunWaitingApproval = "run.waiting_approval"
	WebhookRunBudgetReached   = "run.budget_reached"
)

// WebhookEventTypes lists the event types in the order docs/webhooks.md
// documents them.
func WebhookEventTypes() []string {
	return []string{WebhookRunStarted, WebhookRunCompleted, WebhookRunFailed, WebhookRunCancelled,
		WebhookRunTimedOut, WebhookRunWaitingApproval, WebhookRunBudgetReached}
}

// WebhookEventType is the webhook event type of a run's log event, or ""
// for an event no webhook carries: lifecycle.started, completed, failed
// (timed_out when its error_code is EXECUTION_TIMEOUT), cancelled,
// approval.requested and system.budget.
func WebhookEventType(ev Event) string {
	switch ev.Event.Category + "." + ev.Event.Action {
	case CategoryLifecycle + "." + ActionStarted:
		return WebhookRunStarted
	case CategoryLifecycle + "." + ActionCompleted:
		return WebhookRunCompleted
	case CategoryLifecycle + "." + ActionFailed:
		if code, _ := ev.Data["error_code"].(string); code == CodeExecutionTimeout.Name {
			return WebhookRunTimedOut
		}
		return WebhookRunFailed
	case CategoryLifecycle + "." + ActionCancelled:
		return WebhookRunCancelled
	case CategoryApproval + "." + ActionRequested:
		return WebhookRunWaitingApproval
	case CategorySystem + "." + ActionBudget:
		return WebhookRunBudgetReached
	}
	return ""
}

// WebhookPayload is the body of a delivery, as Standard Webhooks shapes
// it: the type, when the event happened, and the run's event as the
// stream carries it (with the run's id as its tenant knows it).
type WebhookPayload struct {
	Type      string `json:"type"`
	Timestamp string `json:"timestamp"`
	Data      Event  `json:"data"`
}

// WebhookDeliveryWorkflowName is the workflow type that delivers one run's
// webhook events to one endpoint, in order. It is started apart from the
// run (signal-with-start from the activity that stores the run's events),
// so that a slow receiver never slows a run.
const WebhookDeliveryWorkflowName = "WebhookDeliveryWorkflow"

// SignalWebhookDelivery queues a delivery on its (endpoint, run) workflow.
const SignalWebhookDelivery = "webhook-delivery"

// WebhookWorkflowID is the workflow id of the deliveries of run (its
// tenant's id for it) to endpoint; endpoint ids are global and belong to
// one tenant, so it is unique.
func WebhookWorkflowID(endpointID, runID string) string {
	return "webhook-" + endpointID + "-" + runID
}

// WebhookDeliveryInput starts a delivery workflow. It holds ids and
// timings only: the URL, the secret and the body stay in the database.
type WebhookDeliveryInput struct {
	EndpointID string `json:"endpoint_id"`
	RunID      string `json:"run_id"`
	// RetryFor bounds the retries of one delivery (from its first
	// attempt); MaxInterval caps the backoff between attempts; Timeout
	// bounds one attempt.
	RetryFor    time.Duration `json:"retry_for"`
	MaxInterval time.Duration `json:"max_interval"`
	Timeout     time.Duration `json:"timeout"`
	// Pending carries the queue over a continue-as-new.
	Pending []string `json:"pending,omitempty"`
}

// WebhookEndpointInput is the body of webhooks/create and webhooks/update.
type WebhookEndpointInput struct {
	// ID names the endpoint on update.
	ID          string   `json:"id,omitempty"`
	URL         string   `json:"url"`
	Description string   `json:"description,omitempty"`
	Events      []string `json:"events"`
	// Enabled defaults to true on create and to the stored value on
	// update.
	Enabled *bool `json:"enabled,omitempty"`
	// RotateSecret (update) makes a new secret, returned once.
	RotateSecret bool `json:"rotate_secret,omitempty"`
}

// RunWebhookInput is runs/start's optional "webhook": an endpoint of that
// run only, signed with a secret the caller chose (so that no answer has
// to carry one).
type RunWebhookInput struct {
	URL string `json:"url"`
	// Secret is a Standard Webhooks secret: "whsec_" and the base64 of 24
	// to 64 random bytes.
	Secret string `json:"secret"`
	// Events defaults to every event type.
	Events []string `json:"events,omitempty"`
}

// WebhookEndpoint is an endpoint as the API shows it. Secret is set only
// in the answer of create (and of update with rotate_secret).
type WebhookEndpoint struct {
	ID          string    `json:"id"`
	Tenant      string    `json:"tenant"`
	URL         string    `json:"url"`
	Description string    `json:"description"`
	Events      []string  `json:"events"`
	Enabled     bool      `json:"enabled"`
	Secret      string    `json:"secret,omitempty"`
	CreatedAt   time.Time `json:"created_at"`
	UpdatedAt   time.Time `json:"updated_at"`
}

// WebhookEndpointList answers webhooks/list.
type WebhookEndpointList struct {
	Items []WebhookEndpoint `json:"items"`
	Total int               `json:"total"`
}

// WebhookDelivery is one delivery as webhooks/deliveries shows it.
type WebhookDelivery struct {
	ID          string     `json:"id"`
	EndpointID  string     `json:"endpoint_id"`
	RunID       string     `json:"run_id"`
	Sequence    int64      `json:"sequence"`
	EventType   string     `json:"event_type"`
	Status      string     `json:"status"`
	Attempts    int        `json:"attempts"`
	LastError   string     `json:"last_error"`
	LastStatus  int        `json:"last_status"`
	CreatedAt   time.Time  `json:"created_at"`
	UpdatedAt   time.Time  `json:"updated_at"`
	DeliveredAt *time.Time `json:"delivered_at"`
}

// WebhookDeliveryList answers webhooks/deliveries.
type WebhookDeliveryList struct {
	Items []WebhookDelivery `json:"items"`
	Total int               `json:"total"`
}
