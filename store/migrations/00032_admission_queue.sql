-- +goose Up
-- The admission queue (issue 26, items 3 and 4; docs/queue.md): a run
-- over its tenant's concurrency limit, or behind an unfinished run of its
-- thread, is stored with status 'queued' and queue_seq, its place in the
-- tenant's queue (decided under the tenant's admission lock, so it is
-- one order across API replicas). 0 for runs never queued.
ALTER TABLE execution ADD COLUMN queue_seq BIGINT NOT NULL DEFAULT 0;
CREATE INDEX idx_execution_tenant_status ON execution (tenant_id, status, queue_seq);

-- +goose Down
DROP INDEX idx_execution_tenant_status;
ALTER TABLE execution DROP COLUMN queue_seq;
