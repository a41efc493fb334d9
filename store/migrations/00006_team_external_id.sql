-- +goose Up
-- Callers set team ids (spec 001's sub_teams[].id, e.g. "team_a7b9c2d4e5f6"),
-- and two hierarchies may use the same ones: team rows get their own key,
-- and the caller's id is unique within its hierarchy only.
ALTER TABLE team ADD COLUMN external_id VARCHAR(64) NOT NULL DEFAULT '';
UPDATE team SET external_id = id;
CREATE UNIQUE INDEX idx_team_hierarchy_external_id ON team (hierarchy_id, external_id);

-- +goose Down
DROP INDEX idx_team_hierarchy_external_id;
ALTER TABLE team DROP COLUMN external_id;
