-- +goose Up
-- The run's hierarchy name (for listings), team count (for progress) and final answer; result keeps the
-- whole RunResult as JSON.
ALTER TABLE execution ADD COLUMN hierarchy_name VARCHAR(255) NOT NULL DEFAULT '';
ALTER TABLE execution ADD COLUMN final_answer TEXT NOT NULL DEFAULT '';
ALTER TABLE execution ADD COLUMN total_teams INTEGER NOT NULL DEFAULT 0;

-- One row per LLM call attempt: token usage and latency per agent and model.
-- id is the activity attempt plus the call's index within it, so a retried
-- write of the same call is ignored.
CREATE TABLE llm_call (
    id                VARCHAR(300) PRIMARY KEY,
    run_id            VARCHAR(64)  NOT NULL,
    agent_id          VARCHAR(100) NOT NULL,
    purpose           VARCHAR(32)  NOT NULL,
    model             VARCHAR(200) NOT NULL,
    provider          VARCHAR(64)  NOT NULL,
    attempt           INTEGER      NOT NULL,
    status            VARCHAR(16)  NOT NULL,
    prompt_tokens     INTEGER      NOT NULL DEFAULT 0,
    completion_tokens INTEGER      NOT NULL DEFAULT 0,
    total_tokens      INTEGER      NOT NULL DEFAULT 0,
    latency_ms        BIGINT       NOT NULL DEFAULT 0,
    first_token_ms    BIGINT       NOT NULL DEFAULT 0,
    error             TEXT         NOT NULL DEFAULT '',
    created_at        TIMESTAMPTZ  NOT NULL
);
CREATE INDEX idx_llm_call_run_id ON llm_call (run_id, created_at);

-- +goose Down
DROP TABLE llm_call;
ALTER TABLE execution DROP COLUMN total_teams;
ALTER TABLE execution DROP COLUMN final_answer;
ALTER TABLE execution DROP COLUMN hierarchy_name;
