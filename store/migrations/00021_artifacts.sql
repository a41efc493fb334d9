-- +goose Up
-- Artifacts (spec 001 §4): files agents produced, kept in the database
-- (BYTEA; BLOB on SQLite) so that every API replica serves what any worker
-- stored, with nothing shared but the database. tenant_id is the run's.
-- producer names the activity that stored the file (workflow, Temporal run
-- and activity ids) and attempt its attempt: a later attempt of the same
-- activity replaces the files of earlier ones.
CREATE TABLE artifact (
    id          VARCHAR(64)  PRIMARY KEY,
    tenant_id   VARCHAR(100) NOT NULL,
    run_id      VARCHAR(64)  NOT NULL,
    agent_id    VARCHAR(100) NOT NULL DEFAULT '',
    agent_name  VARCHAR(255) NOT NULL DEFAULT '',
    team_name   VARCHAR(255) NOT NULL DEFAULT '',
    source      VARCHAR(16)  NOT NULL,
    tool_name   VARCHAR(200) NOT NULL DEFAULT '',
    name        VARCHAR(255) NOT NULL,
    media_type  VARCHAR(255) NOT NULL,
    size        BIGINT       NOT NULL,
    sha256      CHAR(64)     NOT NULL,
    content     BYTEA        NOT NULL,
    producer    VARCHAR(300) NOT NULL DEFAULT '',
    attempt     INTEGER      NOT NULL DEFAULT 1,
    created_at  TIMESTAMPTZ  NOT NULL
);
CREATE INDEX idx_artifact_run ON artifact (run_id, created_at);
CREATE INDEX idx_artifact_producer ON artifact (producer, attempt);

-- +goose Down
DROP TABLE artifact;
