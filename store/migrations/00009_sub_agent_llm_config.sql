-- +goose Up
-- A sub-agent's LLM settings beyond model and sampling (spec 003's model
-- settings, spec 001's llm_config: provider, base_url, region, timeout),
-- stored as JSON like a worker's settings. '{}' keeps existing rows as
-- they were (routed by the model table).
ALTER TABLE sub_agent ADD COLUMN settings TEXT NOT NULL DEFAULT '{}';

-- +goose Down
ALTER TABLE sub_agent DROP COLUMN settings;
