-- +goose Up
-- Caller-chosen ids are the tenant's own (issue 23, item 8): a message id
-- and a sub-agent id are unique within a tenant, so another tenant's use of
-- one is neither visible nor in the way. Both tables are rebuilt (SQLite
-- cannot change a primary key); these statements are valid on both
-- dialects. Constraint names are new ones, since the old tables still hold
-- theirs while the new ones are created.
--
-- message: tenant_id is its run's tenant ('default' for a message whose run
-- is not stored). A run's caller-set message_id is reserved when the run is
-- stored, by a row of agent_type 'reserved' that the run's final answer
-- later fills (item 3): the primary key makes the reservation atomic.
CREATE TABLE message_v17 (
    tenant_id         VARCHAR(100) NOT NULL DEFAULT 'default',
    id                VARCHAR(100) NOT NULL,
    run_id            VARCHAR(64)  NOT NULL,
    parent_message_id VARCHAR(100),
    agent_id          VARCHAR(100) NOT NULL,
    agent_type        VARCHAR(32)  NOT NULL,
    agent_name        VARCHAR(255) NOT NULL DEFAULT '',
    team_name         VARCHAR(255),
    depth             INTEGER      NOT NULL,
    path              TEXT         NOT NULL,
    content           TEXT         NOT NULL,
    created_at        TIMESTAMPTZ  NOT NULL,
    updated_at        TIMESTAMPTZ  NOT NULL,
    CONSTRAINT message_v17_pkey PRIMARY KEY (tenant_id, id)
);
INSERT INTO message_v17 (tenant_id, id, run_id, parent_message_id, agent_id, agent_type, agent_name, team_name,
                         depth, path, content, created_at, updated_at)
SELECT COALESCE((SELECT e.tenant_id FROM execution e WHERE e.id = m.run_id), 'default'),
       m.id, m.run_id, m.parent_message_id, m.agent_id, m.agent_type, m.agent_name, m.team_name,
       m.depth, m.path, m.content, m.created_at, m.updated_at
FROM message m;
DROP TABLE message;
ALTER TABLE message_v17 RENAME TO message;
CREATE INDEX idx_message_run_id ON message (run_id, created_at);

-- sub_agent: the key is (tenant_id, id); version counts the definition's
-- writes (spec 003 §7.2): 1 at create, +1 per update.
CREATE TABLE sub_agent_v17 (
    tenant_id      VARCHAR(100) NOT NULL DEFAULT 'default',
    id             VARCHAR(100) NOT NULL,
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
    settings       TEXT         NOT NULL DEFAULT '{}',
    version        INTEGER      NOT NULL DEFAULT 1,
    created_at     TIMESTAMPTZ  NOT NULL,
    updated_at     TIMESTAMPTZ  NOT NULL,
    CONSTRAINT sub_agent_v17_pkey PRIMARY KEY (tenant_id, id),
    CONSTRAINT sub_agent_v17_tenant_name_key UNIQUE (tenant_id, name)
);
INSERT INTO sub_agent_v17 (tenant_id, id, name, description, system_prompt, model, temperature, max_tokens,
                           tools, sub_agents, max_depth, max_iterations, enabled, settings, version, created_at, updated_at)
SELECT tenant_id, id, name, description, system_prompt, model, temperature, max_tokens,
       tools, sub_agents, max_depth, max_iterations, enabled, settings, 1, created_at, updated_at
FROM sub_agent;
DROP TABLE sub_agent;
ALTER TABLE sub_agent_v17 RENAME TO sub_agent;
CREATE INDEX idx_sub_agent_created_at ON sub_agent (created_at);
CREATE INDEX idx_sub_agent_tenant ON sub_agent (tenant_id, created_at);

-- +goose Down
-- Fails if two tenants use the same message or sub-agent id: delete or
-- rename one of them first. Reservations of runs that never answered go.
DELETE FROM message WHERE agent_type = 'reserved';
CREATE TABLE message_old (
    id                VARCHAR(100) PRIMARY KEY,
    run_id            VARCHAR(64)  NOT NULL,
    parent_message_id VARCHAR(100),
    agent_id          VARCHAR(100) NOT NULL,
    agent_type        VARCHAR(32)  NOT NULL,
    agent_name        VARCHAR(255) NOT NULL DEFAULT '',
    team_name         VARCHAR(255),
    depth             INTEGER      NOT NULL,
    path              TEXT         NOT NULL,
    content           TEXT         NOT NULL,
    created_at        TIMESTAMPTZ  NOT NULL,
    updated_at        TIMESTAMPTZ  NOT NULL
);
INSERT INTO message_old (id, run_id, parent_message_id, agent_id, agent_type, agent_name, team_name,
                         depth, path, content, created_at, updated_at)
SELECT id, run_id, parent_message_id, agent_id, agent_type, agent_name, team_name,
       depth, path, content, created_at, updated_at
FROM message;
DROP TABLE message;
ALTER TABLE message_old RENAME TO message;
CREATE INDEX idx_message_run_id ON message (run_id, created_at);

CREATE TABLE sub_agent_old (
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
    settings       TEXT         NOT NULL DEFAULT '{}',
    created_at     TIMESTAMPTZ  NOT NULL,
    updated_at     TIMESTAMPTZ  NOT NULL,
    CONSTRAINT sub_agent_old_tenant_name_key UNIQUE (tenant_id, name)
);
INSERT INTO sub_agent_old (id, tenant_id, name, description, system_prompt, model, temperature, max_tokens,
                           tools, sub_agents, max_depth, max_iterations, enabled, settings, created_at, updated_at)
SELECT id, tenant_id, name, description, system_prompt, model, temperature, max_tokens,
       tools, sub_agents, max_depth, max_iterations, enabled, settings, created_at, updated_at
FROM sub_agent;
DROP TABLE sub_agent;
ALTER TABLE sub_agent_old RENAME TO sub_agent;
CREATE INDEX idx_sub_agent_created_at ON sub_agent (created_at);
CREATE INDEX idx_sub_agent_tenant ON sub_agent (tenant_id, created_at);
