-- +goose Up
-- Schedules (issue 26, item 2) live in Temporal (its Schedules keep their
-- spec, state and recent actions, and survive restarts); this table keeps
-- only what the API needs to answer without Temporal's eventually
-- consistent visibility: which tenant owns a schedule, which hierarchy it
-- runs, and its cron expressions as written. A scheduled run names its schedule in execution.schedule_id.
CREATE TABLE schedule (
    id VARCHAR(64) PRIMARY KEY,
    tenant_id VARCHAR(255) NOT NULL,
    hierarchy_id VARCHAR(64) NOT NULL,
    -- The cron expressions as given (JSON array): Temporal answers them
    -- compiled into calendars.
    cron TEXT NOT NULL DEFAULT '[]',
    created_at TIMESTAMP NOT NULL
);
CREATE INDEX idx_schedule_tenant ON schedule (tenant_id, created_at);
ALTER TABLE execution ADD COLUMN schedule_id VARCHAR(64) NOT NULL DEFAULT '';
CREATE INDEX idx_execution_schedule ON execution (schedule_id);

-- +goose Down
DROP INDEX idx_execution_schedule;
ALTER TABLE execution DROP COLUMN schedule_id;
DROP INDEX idx_schedule_tenant;
DROP TABLE schedule;
