-- +goose Up
-- One row per agent turn's final output (spec 003): top-level agents and
-- sub-agents. The id is set by the application before the turn streams and
-- is on the turn's llm.stream events as message_id; writes are upserts on
-- it, so retries and replays never duplicate a message.
CREATE TABLE message (
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
CREATE INDEX idx_message_run_id ON message (run_id, created_at);

-- +goose Down
DROP TABLE message;
