-- +goose Up
-- Access control: every hierarchy, run and sub-agent belongs to a tenant
-- (rows stored before tenants existed belong to 'default'), API keys are
-- stored as SHA-256 hashes, run-scoped stream tokens likewise, and requests
-- made with an Idempotency-Key keep their response for a while.
ALTER TABLE hierarchy_team ADD COLUMN tenant_id VARCHAR(100) NOT NULL DEFAULT 'default';
CREATE INDEX idx_hierarchy_team_tenant ON hierarchy_team (tenant_id, created_at);
ALTER TABLE execution ADD COLUMN tenant_id VARCHAR(100) NOT NULL DEFAULT 'default';
CREATE INDEX idx_execution_tenant ON execution (tenant_id, created_at);

-- Sub-agent names become unique per tenant. SQLite cannot drop the inline
-- UNIQUE (name) of 00003, so the table is rebuilt; these statements are
-- valid on both dialects. No foreign key references sub_agent (workers and
-- sub-agents refer to sub-agents by name, in JSON). On PostgreSQL the
-- primary key keeps the name sub_agent_new_pkey.
CREATE TABLE sub_agent_new (
    id             VARCHAR(100) PRIMARY KEY,
    tenant_id      VARCHAR(100) NOT NULL DEFAULT 'default',
    name           VARCHAR(255) NOT NULL,
    description    TEXT         NOT NULL DEFAULT '',
    system_prompt  TEXT         NOT NULL,
    model          VARCHAR(200) NOT NULL DEFAULT '',
    temperature    DOUBLE PRECISION,
    max_tokens     INTEGER,
    tools          TEXT         NOT NULL DEFAULT '[]',
    sub_agents     TEXT         NOT NULL DEFAULT '[]',
    max_depth      INTEGER      NOT NULL DEFAULT 3,
    max_iterations INTEGER      NOT NULL DEFAULT 10,
    enabled        BOOLEAN      NOT NULL DEFAULT TRUE,
    created_at     TIMESTAMPTZ  NOT NULL,
    updated_at     TIMESTAMPTZ  NOT NULL,
    CONSTRAINT sub_agent_tenant_name_key UNIQUE (tenant_id, name)
);
INSERT INTO sub_agent_new (id, tenant_id, name, description, system_prompt, model, temperature, max_tokens,
                           tools, sub_agents, max_depth, max_iterations, enabled, created_at, updated_at)
SELECT id, 'default', name, description, system_prompt, model, temperature, max_tokens,
       tools, sub_agents, max_depth, max_iterations, enabled, created_at, updated_at
FROM sub_agent;
DROP TABLE sub_agent;
ALTER TABLE sub_agent_new RENAME TO sub_agent;
CREATE INDEX idx_sub_agent_created_at ON sub_agent (created_at);
CREATE INDEX idx_sub_agent_tenant ON sub_agent (tenant_id, created_at);

-- API keys issued by `executor apikeys create`. hash is the SHA-256 (hex)
-- of the key, which is never stored; prefix is the key's first 12
-- characters, shown in listings to tell keys apart. scopes is a
-- comma-separated list.
CREATE TABLE api_key (
    id          VARCHAR(64)  PRIMARY KEY,
    hash        CHAR(64)     NOT NULL UNIQUE,
    prefix      VARCHAR(16)  NOT NULL,
    tenant_id   VARCHAR(100) NOT NULL,
    scopes      TEXT         NOT NULL DEFAULT '',
    description TEXT         NOT NULL DEFAULT '',
    created_at  TIMESTAMPTZ  NOT NULL,
    expires_at  TIMESTAMPTZ,
    revoked_at  TIMESTAMPTZ
);
CREATE INDEX idx_api_key_tenant ON api_key (tenant_id, created_at);

-- Short-lived tokens that let a browser's EventSource (which cannot send
-- headers) stream one run; stored hashed like API keys.
CREATE TABLE stream_token (
    hash       CHAR(64)     PRIMARY KEY,
    run_id     VARCHAR(64)  NOT NULL,
    tenant_id  VARCHAR(100) NOT NULL,
    expires_at TIMESTAMPTZ  NOT NULL,
    created_at TIMESTAMPTZ  NOT NULL
);
CREATE INDEX idx_stream_token_expires_at ON stream_token (expires_at);

-- Requests made with an Idempotency-Key: claimed (done = FALSE) while the
-- first request is served, then holding its response. response_body is the
-- response's bytes in base64.
CREATE TABLE idempotency_key (
    tenant_id     VARCHAR(100) NOT NULL,
    scope         VARCHAR(100) NOT NULL,
    key           VARCHAR(255) NOT NULL,
    request_hash  CHAR(64)     NOT NULL,
    done          BOOLEAN      NOT NULL DEFAULT FALSE,
    status_code   INTEGER      NOT NULL DEFAULT 0,
    response_body TEXT         NOT NULL DEFAULT '',
    created_at    TIMESTAMPTZ  NOT NULL,
    expires_at    TIMESTAMPTZ  NOT NULL,
    PRIMARY KEY (tenant_id, scope, key)
);
CREATE INDEX idx_idempotency_key_expires_at ON idempotency_key (expires_at);

-- +goose Down
-- Fails if two tenants hold sub-agents of the same name: rename or delete
-- one of them first.
DROP TABLE idempotency_key;
DROP TABLE stream_token;
DROP TABLE api_key;

CREATE TABLE sub_agent_old (
    id             VARCHAR(100) PRIMARY KEY,
    name           VARCHAR(255) NOT NULL UNIQUE,
    description    TEXT         NOT NULL DEFAULT '',
    system_prompt  TEXT         NOT NULL,
    model          VARCHAR(200) NOT NULL DEFAULT '',
    temperature    DOUBLE PRECISION,
    max_tokens     INTEGER,
    tools          TEXT         NOT NULL DEFAULT '[]',
    sub_agents     TEXT         NOT NULL DEFAULT '[]',
    max_depth      INTEGER      NOT NULL DEFAULT 3,
    max_iterations INTEGER      NOT NULL DEFAULT 10,
    enabled        BOOLEAN      NOT NULL DEFAULT TRUE,
    created_at     TIMESTAMPTZ  NOT NULL,
    updated_at     TIMESTAMPTZ  NOT NULL
);
INSERT INTO sub_agent_old (id, name, description, system_prompt, model, temperature, max_tokens,
                           tools, sub_agents, max_depth, max_iterations, enabled, created_at, updated_at)
SELECT id, name, description, system_prompt, model, temperature, max_tokens,
       tools, sub_agents, max_depth, max_iterations, enabled, created_at, updated_at
FROM sub_agent;
DROP TABLE sub_agent;
ALTER TABLE sub_agent_old RENAME TO sub_agent;
CREATE INDEX idx_sub_agent_created_at ON sub_agent (created_at);

DROP INDEX idx_execution_tenant;
ALTER TABLE execution DROP COLUMN tenant_id;
DROP INDEX idx_hierarchy_team_tenant;
ALTER TABLE hierarchy_team DROP COLUMN tenant_id;
