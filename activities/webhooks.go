package activities

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	neturl "net/url"
	"strconv"
	"time"

	"go.temporal.io/sdk/temporal"

	"github.com/op-stack/executor/models"
	"github.com/op-stack/executor/store"
	"github.com/op-stack/executor/tools"
	"github.com/op-stack/executor/webhooks"
)

// Webhooks delivers runs' events to their tenants' webhook endpoints
// (docs/webhooks.md).
type Webhooks struct {
	// Queue starts or signals the delivery workflows.
	Queue *webhooks.Queue
	// HTTP sends the deliveries (webhooks.NewHTTPClient).
	HTTP *http.Client
}

// queueWebhooks records and queues the webhook deliveries of events,
// which PersistEvents has just stored (see webhooks.Dispatch).
func (a *Activities) queueWebhooks(ctx context.Context, events []models.Event) error {
	if a.Webhooks == nil {
		return nil
	}
	return webhooks.Dispatch(ctx, a.Store, a.Webhooks.Queue, events)
}

// DeliverWebhook sends delivery id to its endpoint once: signed, within
// the client's timeout, following no redirect. A 2xx answer delivers it;
// anything else is an error the workflow's retry policy retries, but for a
// refusal retrying cannot help (non-retryable). Every attempt is counted
// in the delivery's row. A delivery already delivered is not sent again.
func (a *Activities) DeliverWebhook(ctx context.Context, id string) error {
	d, err := a.Store.GetWebhookDelivery(ctx, "", id)
	if err != nil {
		if models.ErrorCode(err) == models.CodeWebhookNotFound {
			return temporal.NewNonRetryableApplicationError("the delivery was deleted", models.ErrWebhookRefused, nil)
		}
		return err
	}
	if d.Status == store.WebhookDelivered {
		return nil
	}
	ep, err := a.Store.GetWebhookEndpoint(ctx, "", d.EndpointID)
	if err != nil {
		if models.ErrorCode(err) == models.CodeWebhookNotFound {
			return temporal.NewNonRetryableApplicationError("the endpoint was deleted", models.ErrWebhookRefused, nil)
		}
		return err
	}
	if !ep.Enabled {
		msg := "the endpoint is disabled"
		_ = a.Store.RecordWebhookAttempt(ctx, id, false, 0, msg)
		return temporal.NewNonRetryableApplicationError(msg, models.ErrWebhookRefused, nil)
	}
	secret, err := a.Store.WebhookSecret(ctx, ep.ID)
	if err != nil {
		return err
	}
	status, sendErr := a.sendWebhook(ctx, ep.URL, secret, d)
	msg := ""
	if sendErr != nil {
		msg = sendErr.Error()
	}
	if err := a.Store.RecordWebhookAttempt(ctx, id, sendErr == nil, status, msg); err != nil {
		// Delivered but not recorded: the retry sends it again with the
		// same webhook-id, which the receiver may deduplicate.
		return err
	}
	if sendErr != nil {
		a.logger(ctx).Info("webhook delivery attempt failed", "delivery_id", id, "endpoint_id", ep.ID, "run_id", d.RunID, "status", status, "error", msg)
		if tools.IsBlocked(sendErr) {
			return temporal.NewNonRetryableApplicationError(msg, models.ErrWebhookRefused, nil)
		}
		return temporal.NewApplicationError(msg, models.ErrWebhookFailed)
	}
	return nil
}

// sendWebhook posts d's payload to url, signed with secret; it returns the
// receiver's status (0 without an answer) and an error unless it is 2xx.
func (a *Activities) sendWebhook(ctx context.Context, url, secret string, d *store.WebhookDelivery) (int, error) {
	now := time.Now().Unix()
	sig, err := webhooks.Sign(secret, d.ID, now, []byte(d.Payload))
	if err != nil {
		return 0, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader([]byte(d.Payload)))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "op-stack-executor-webhooks")
	req.Header.Set("webhook-id", d.ID)
	req.Header.Set("webhook-timestamp", strconv.FormatInt(now, 10))
	req.Header.Set("webhook-signature", sig)
	client := a.Webhooks.HTTP
	if client == nil {
		client = webhooks.NewHTTPClient(false, 0)
	}
	resp, err := client.Do(req)
	if err != nil {
		// Without the URL, which may carry a token of the tenant's, into
		// the logs and the delivery's last_error.
		var ue *neturl.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return 0, err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return resp.StatusCode, fmt.Errorf("the receiver answered %s", resp.Status)
	}
	return resp.StatusCode, nil
}

// FailWebhookDelivery records that delivery id exhausted its retries (or
// was refused): it stays visible as failed and can be redelivered.
func (a *Activities) FailWebhookDelivery(ctx context.Context, id, reason string) error {
	return a.Store.FailWebhookDelivery(ctx, id, reason)
}
