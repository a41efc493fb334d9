package webhooks

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/op-stack/executor/models"
	"github.com/op-stack/executor/store"
)

// Dispatch records and queues a delivery for every event of events (one
// run's, already stored) that an enabled endpoint of the run's tenant
// wants. It waits for the database and Temporal only, never for a
// receiver. Dispatching an event twice (a retried activity, two API
// replicas reconciling one run) records it once and delivers it once: the
// delivery's id is derived from (endpoint, run, sequence), and the
// delivery activity skips one that is delivered.
func Dispatch(ctx context.Context, st *store.Store, q *Queue, events []models.Event) error {
	if q == nil || len(events) == 0 {
		return nil
	}
	var hits []models.Event
	for _, ev := range events {
		if models.WebhookEventType(ev) != "" {
			hits = append(hits, ev)
		}
	}
	if len(hits) == 0 {
		return nil
	}
	run, err := st.GetRun(ctx, hits[0].RunID)
	if err != nil {
		return err
	}
	endpoints, err := st.WebhookEndpointsFor(ctx, run.TenantID, run.ID)
	if err != nil || len(endpoints) == 0 {
		return err
	}
	for _, ep := range endpoints {
		for _, ev := range hits {
			typ := models.WebhookEventType(ev)
			if !slices.Contains(ep.Events, typ) {
				continue
			}
			ev.RunID = run.PublicID
			body, err := json.Marshal(models.WebhookPayload{Type: typ, Timestamp: ev.Timestamp, Data: ev})
			if err != nil {
				return err
			}
			d := &store.WebhookDelivery{ID: store.WebhookDeliveryID(ep.ID, run.PublicID, ev.Sequence), TenantID: run.TenantID,
				EndpointID: ep.ID, RunID: run.PublicID, Sequence: ev.Sequence, EventType: typ, Payload: string(body)}
			if err := st.InsertWebhookDelivery(ctx, d); err != nil {
				return fmt.Errorf("record webhook delivery: %w", err)
			}
			if err := q.Enqueue(ctx, ep.ID, run.PublicID, d.ID); err != nil {
				return fmt.Errorf("queue webhook delivery: %w", err)
			}
		}
	}
	return nil
}
