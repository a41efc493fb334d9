// Package webhooks holds what the worker and the API share to deliver a
// tenant's run events to its webhook endpoints (issue 26, docs/webhooks.md):
// the Standard Webhooks signature, the guarded HTTP client that sends, and
// the Queue that hands a delivery to its (endpoint, run) workflow.
package webhooks

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"

	"go.temporal.io/sdk/client"

	"github.com/op-stack/executor/models"
	"github.com/op-stack/executor/tools"
)

// Defaults of the delivery timings (WEBHOOK_TIMEOUT, WEBHOOK_RETRY_FOR,
// WEBHOOK_RETRY_MAX_INTERVAL).
const (
	DefaultTimeout     = 10 * time.Second
	DefaultRetryFor    = 24 * time.Hour
	DefaultMaxInterval = 5 * time.Minute
)

// Sign is the webhook-signature header of a delivery: "v1," and the base64
// of HMAC-SHA256 over "<id>.<timestamp>.<body>", keyed with the bytes the
// secret's base64 (after "whsec_") encodes, as the Standard Webhooks spec
// defines it.
func Sign(secret, id string, timestamp int64, body []byte) (string, error) {
	key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(secret, "whsec_"))
	if err != nil {
		return "", errors.New("malformed webhook secret")
	}
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte(id + "." + strconv.FormatInt(timestamp, 10) + "."))
	mac.Write(body)
	return "v1," + base64.StdEncoding.EncodeToString(mac.Sum(nil)), nil
}

// NewHTTPClient returns the client deliveries are sent with: the network
// guard of http_get and MCP on every connection (unless allowPrivate), no
// proxy (the guard would judge the proxy's address), no redirect followed
// (a 3xx is an answer that is not a success), and timeout per request.
func NewHTTPClient(allowPrivate bool, timeout time.Duration) *http.Client {
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	dialer := tools.GuardedDialer(allowPrivate, timeout)
	return &http.Client{
		Timeout: timeout,
		Transport: &http.Transport{
			Proxy:                  nil,
			DialContext:            dialer.DialContext,
			TLSHandshakeTimeout:    timeout,
			ResponseHeaderTimeout:  timeout,
			MaxIdleConns:           32,
			IdleConnTimeout:        90 * time.Second,
			MaxResponseHeaderBytes: 16 << 10,
		},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

// Queue hands deliveries to their workflows: one per (endpoint, run),
// started by the first and signalled by the next, which delivers them one
// after the other in the order they were queued.
type Queue struct {
	Client    client.Client
	TaskQueue string
	// Timings of each delivery (defaults when zero).
	Timeout, RetryFor, MaxInterval time.Duration
}

// Enqueue queues delivery id of run's event to endpoint. It returns once
// Temporal has the signal: it never waits for the receiver.
func (q *Queue) Enqueue(ctx context.Context, endpointID, runID, deliveryID string) error {
	in := models.WebhookDeliveryInput{EndpointID: endpointID, RunID: runID,
		Timeout: q.Timeout, RetryFor: q.RetryFor, MaxInterval: q.MaxInterval}
	if in.Timeout <= 0 {
		in.Timeout = DefaultTimeout
	}
	if in.RetryFor <= 0 {
		in.RetryFor = DefaultRetryFor
	}
	if in.MaxInterval <= 0 {
		in.MaxInterval = DefaultMaxInterval
	}
	_, err := q.Client.SignalWithStartWorkflow(ctx, models.WebhookWorkflowID(endpointID, runID), models.SignalWebhookDelivery, deliveryID,
		client.StartWorkflowOptions{TaskQueue: q.TaskQueue}, models.WebhookDeliveryWorkflowName, in)
	return err
}
