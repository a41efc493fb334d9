-- +goose Up
-- Spec 001's global_config beyond max_execution_time (enable_streaming,
-- output_format), as JSON, stored as sent so that GET echoes it; '{}' for
-- hierarchies that never sent one.
ALTER TABLE hierarchy_team ADD COLUMN global_config TEXT NOT NULL DEFAULT '{}';

-- +goose Down
ALTER TABLE hierarchy_team DROP COLUMN global_config;
