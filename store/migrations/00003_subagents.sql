-- +goose Up
-- Reusable sub-agent definitions (spec 003). Workers and other sub-agents
-- refer to them by name, so the name is unique; the id doubles as the
-- sub-agent's agent_id on the event stream and may be set by the caller,
-- hence VARCHAR(100) like every agent_id. tools and sub_agents are JSON
-- arrays of strings, as worker.tools is.
CREATE TABLE sub_agent (
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
CREATE INDEX idx_sub_agent_created_at ON sub_agent (created_at);

-- Workers may delegate to sub-agents (by name) and bound their own tool
-- rounds; 0 means the engine's default, so existing rows keep working.
ALTER TABLE worker ADD COLUMN sub_agents TEXT NOT NULL DEFAULT '[]';
ALTER TABLE worker ADD COLUMN max_iterations INTEGER NOT NULL DEFAULT 0;

-- +goose Down
ALTER TABLE worker DROP COLUMN max_iterations;
ALTER TABLE worker DROP COLUMN sub_agents;
DROP TABLE sub_agent;
