-- +goose Up
-- Webhooks (issue 26): a tenant's endpoints that receive its runs'
-- lifecycle events, and one row per delivery of an event to an endpoint.
-- secret holds the endpoint's signing secret ("whsec_…"), sealed with
-- AES-256-GCM under MCP_SECRET_KEY: it must be read back to sign, so it
-- cannot be hashed. events is the JSON list of event types it wants.
-- run_id is '' for an endpoint of the whole tenant, or the key of the one
-- run whose runs/start named it (its one-off "webhook").
CREATE TABLE webhook_endpoint (
    id          VARCHAR(64)  PRIMARY KEY,
    tenant_id   VARCHAR(100) NOT NULL,
    run_id      VARCHAR(64)  NOT NULL DEFAULT '',
    url         TEXT         NOT NULL,
    description TEXT         NOT NULL DEFAULT '',
    events      TEXT         NOT NULL DEFAULT '[]',
    enabled     BOOLEAN      NOT NULL DEFAULT TRUE,
    secret      BYTEA        NOT NULL,
    created_at  TIMESTAMPTZ  NOT NULL,
    updated_at  TIMESTAMPTZ  NOT NULL
);
CREATE INDEX idx_webhook_endpoint_tenant ON webhook_endpoint (tenant_id, run_id);

-- A delivery's id is its webhook-id: derived from (endpoint, run, event
-- sequence), so storing it twice stores it once and a redelivery keeps it.
-- payload is the exact body sent; status is pending, delivered or failed.
CREATE TABLE webhook_delivery (
    id           VARCHAR(64)  PRIMARY KEY,
    tenant_id    VARCHAR(100) NOT NULL,
    endpoint_id  VARCHAR(64)  NOT NULL,
    run_id       VARCHAR(64)  NOT NULL,
    sequence     BIGINT       NOT NULL,
    event_type   VARCHAR(64)  NOT NULL,
    payload      TEXT         NOT NULL,
    status       VARCHAR(16)  NOT NULL,
    attempts     INTEGER      NOT NULL DEFAULT 0,
    last_error   TEXT         NOT NULL DEFAULT '',
    last_status  INTEGER      NOT NULL DEFAULT 0,
    created_at   TIMESTAMPTZ  NOT NULL,
    updated_at   TIMESTAMPTZ  NOT NULL,
    delivered_at TIMESTAMPTZ
);
CREATE INDEX idx_webhook_delivery_endpoint ON webhook_delivery (endpoint_id, created_at);
CREATE INDEX idx_webhook_delivery_tenant ON webhook_delivery (tenant_id, status);

-- +goose Down
DROP TABLE webhook_delivery;
DROP TABLE webhook_endpoint;
