-- +goose Up
-- Spec 001: team dependencies, the parallel limit and the time limit of a
-- hierarchy, and every agent's llm_config (provider, base_url, region,
-- timeout), user_prompt and, for supervisors, max_iterations, as JSON.
ALTER TABLE hierarchy_team ADD COLUMN dependencies TEXT NOT NULL DEFAULT '{}';
ALTER TABLE hierarchy_team ADD COLUMN max_parallel_teams INTEGER NOT NULL DEFAULT 0;
ALTER TABLE hierarchy_team ADD COLUMN max_execution_time INTEGER NOT NULL DEFAULT 0;
ALTER TABLE hierarchy_team ADD COLUMN global_settings TEXT NOT NULL DEFAULT '{}';
ALTER TABLE team ADD COLUMN supervisor_settings TEXT NOT NULL DEFAULT '{}';
ALTER TABLE worker ADD COLUMN settings TEXT NOT NULL DEFAULT '{}';

-- +goose Down
ALTER TABLE worker DROP COLUMN settings;
ALTER TABLE team DROP COLUMN supervisor_settings;
ALTER TABLE hierarchy_team DROP COLUMN global_settings;
ALTER TABLE hierarchy_team DROP COLUMN max_execution_time;
ALTER TABLE hierarchy_team DROP COLUMN max_parallel_teams;
ALTER TABLE hierarchy_team DROP COLUMN dependencies;
