-- +goose Up
-- MCP servers (issue 24): a tenant's Model Context Protocol servers that
-- its agents may call. The name is unique in the tenant. secrets holds the
-- headers and bearer token a tenant gave, sealed with AES-256-GCM under
-- MCP_SECRET_KEY (NULL: none); secret_names lists which are set, so that
-- answers can say so without opening them. header_env and bearer_token_env
-- name environment variables of the workers instead: their values never
-- reach the database at all.
CREATE TABLE mcp_server (
    id               VARCHAR(64)  PRIMARY KEY,
    tenant_id        VARCHAR(100) NOT NULL,
    name             VARCHAR(64)  NOT NULL,
    url              TEXT         NOT NULL DEFAULT '',
    command          TEXT         NOT NULL DEFAULT '[]',
    header_env       TEXT         NOT NULL DEFAULT '{}',
    bearer_token_env VARCHAR(255) NOT NULL DEFAULT '',
    secrets          BYTEA,
    secret_names     TEXT         NOT NULL DEFAULT '[]',
    allowed_tools    TEXT         NOT NULL DEFAULT '[]',
    timeout_ms       BIGINT       NOT NULL DEFAULT 0,
    approval         VARCHAR(32)  NOT NULL DEFAULT '',
    created_at       TIMESTAMPTZ  NOT NULL,
    updated_at       TIMESTAMPTZ  NOT NULL
);
CREATE UNIQUE INDEX idx_mcp_server_name ON mcp_server (tenant_id, name);

-- +goose Down
DROP TABLE mcp_server;
