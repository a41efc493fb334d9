-- +goose Up
-- One row per hierarchy (spec 000 FR-009: global_supervisor_agent_id).
CREATE TABLE hierarchy_team (
    id                         VARCHAR(64)  PRIMARY KEY,
    name                       VARCHAR(255) NOT NULL,
    description                TEXT         NOT NULL DEFAULT '',
    global_supervisor_agent_id VARCHAR(100) NOT NULL,
    global_supervisor_name     VARCHAR(255) NOT NULL DEFAULT '',
    global_prompt              TEXT         NOT NULL,
    global_model               VARCHAR(200) NOT NULL DEFAULT '',
    global_temperature         DOUBLE PRECISION,
    global_max_tokens          INTEGER,
    execution_mode             VARCHAR(32)  NOT NULL DEFAULT 'sequential',
    enable_context_sharing     BOOLEAN      NOT NULL DEFAULT FALSE,
    max_iterations             INTEGER      NOT NULL DEFAULT 10,
    created_at                 TIMESTAMPTZ  NOT NULL,
    updated_at                 TIMESTAMPTZ  NOT NULL
);
CREATE INDEX idx_hierarchy_team_created_at ON hierarchy_team (created_at);

-- One row per team (FR-010: supervisor_agent_id).
CREATE TABLE team (
    id                      VARCHAR(64)  PRIMARY KEY,
    hierarchy_id            VARCHAR(64)  NOT NULL REFERENCES hierarchy_team (id) ON DELETE CASCADE,
    position                INTEGER      NOT NULL,
    name                    VARCHAR(255) NOT NULL,
    description             TEXT         NOT NULL DEFAULT '',
    supervisor_agent_id     VARCHAR(100) NOT NULL,
    supervisor_name         VARCHAR(255) NOT NULL DEFAULT '',
    supervisor_prompt       TEXT         NOT NULL,
    supervisor_model        VARCHAR(200) NOT NULL DEFAULT '',
    supervisor_temperature  DOUBLE PRECISION,
    supervisor_max_tokens   INTEGER,
    prevent_duplicate       BOOLEAN      NOT NULL DEFAULT FALSE,
    share_context           BOOLEAN      NOT NULL DEFAULT FALSE,
    UNIQUE (hierarchy_id, name)
);

-- One row per worker (FR-011: agent_id).
CREATE TABLE worker (
    id            VARCHAR(64)  PRIMARY KEY,
    team_id       VARCHAR(64)  NOT NULL REFERENCES team (id) ON DELETE CASCADE,
    hierarchy_id  VARCHAR(64)  NOT NULL REFERENCES hierarchy_team (id) ON DELETE CASCADE,
    position      INTEGER      NOT NULL,
    agent_id      VARCHAR(100) NOT NULL,
    name          VARCHAR(255) NOT NULL,
    role          VARCHAR(255) NOT NULL DEFAULT '',
    system_prompt TEXT         NOT NULL,
    model         VARCHAR(200) NOT NULL DEFAULT '',
    temperature   DOUBLE PRECISION,
    max_tokens    INTEGER,
    tools         TEXT         NOT NULL DEFAULT '[]',
    UNIQUE (hierarchy_id, agent_id)
);

-- A run of a hierarchy on a task.
CREATE TABLE execution (
    id            VARCHAR(64)  PRIMARY KEY,
    hierarchy_id  VARCHAR(64)  NOT NULL,
    workflow_id   VARCHAR(200) NOT NULL,
    task          TEXT         NOT NULL,
    status        VARCHAR(32)  NOT NULL,
    result        TEXT         NOT NULL DEFAULT '',
    error         TEXT         NOT NULL DEFAULT '',
    created_at    TIMESTAMPTZ  NOT NULL,
    started_at    TIMESTAMPTZ,
    completed_at  TIMESTAMPTZ,
    updated_at    TIMESTAMPTZ  NOT NULL
);
CREATE INDEX idx_execution_hierarchy_id ON execution (hierarchy_id, created_at);
CREATE INDEX idx_execution_status ON execution (status, created_at);

-- The ordered event log of a run (FR-013: agent_id), unique on (run_id, sequence).
CREATE TABLE execution_event (
    run_id     VARCHAR(64)  NOT NULL,
    sequence   BIGINT       NOT NULL,
    agent_id   VARCHAR(100),
    event_type VARCHAR(64)  NOT NULL,
    payload    TEXT         NOT NULL,
    created_at TIMESTAMPTZ  NOT NULL,
    PRIMARY KEY (run_id, sequence)
);
CREATE INDEX idx_execution_event_agent ON execution_event (run_id, agent_id);

-- +goose Down
DROP TABLE execution_event;
DROP TABLE execution;
DROP TABLE worker;
DROP TABLE team;
DROP TABLE hierarchy_team;
