-- +goose Up
-- Time travel (runs/fork): a run keeps the snapshot of the hierarchy it ran
-- and its execution_config (max_parallel_teams, budget), which a fork of it
-- starts from without the original's workflow history; a fork names the run
-- and the event it was forked from. Runs stored before keep '' (a fork of
-- one falls back to its hierarchy as stored now).
ALTER TABLE execution ADD COLUMN hierarchy_snapshot TEXT NOT NULL DEFAULT '';
ALTER TABLE execution ADD COLUMN execution_config TEXT NOT NULL DEFAULT '';
ALTER TABLE execution ADD COLUMN forked_from_run_id VARCHAR(64) NOT NULL DEFAULT '';
ALTER TABLE execution ADD COLUMN forked_from_sequence BIGINT NOT NULL DEFAULT 0;
CREATE INDEX idx_execution_forked_from ON execution (forked_from_run_id, created_at);

-- +goose Down
DROP INDEX idx_execution_forked_from;
ALTER TABLE execution DROP COLUMN forked_from_sequence;
ALTER TABLE execution DROP COLUMN forked_from_run_id;
ALTER TABLE execution DROP COLUMN execution_config;
ALTER TABLE execution DROP COLUMN hierarchy_snapshot;
