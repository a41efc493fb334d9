-- +goose Up
-- Who an LLM call was made for, beyond its agent_id: the team it worked in
-- ('' for the global supervisor's calls and calls stored before this
-- column) and its agent's path from the global supervisor (a JSON array of
-- agent_ids; NULL for calls stored before it). A sub-agent's calls carry
-- the team of the worker that delegated to it, so a team's cost includes
-- its workers' sub-agents.
ALTER TABLE llm_call ADD COLUMN team_name TEXT NOT NULL DEFAULT '';
ALTER TABLE llm_call ADD COLUMN agent_path TEXT;

-- +goose Down
ALTER TABLE llm_call DROP COLUMN agent_path;
ALTER TABLE llm_call DROP COLUMN team_name;
