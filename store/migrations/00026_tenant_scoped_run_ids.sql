-- +goose Up
-- A run's id as its tenant knows it (issue 23, item 8): public_id is unique
-- within a tenant, so a caller-chosen run id that another tenant uses is
-- neither refused nor revealed. The key (execution.id) stays globally
-- unique: it names the run's workflow (run-<id>) and keys the run's events,
-- calls, messages and tokens. A run with a generated id has public_id = id;
-- a run with a caller-chosen id gets a generated key. Runs stored before
-- this migration keep their id as both.
--
-- thread_id, previous_run_id and forked_from_run_id name runs of the same
-- tenant by their public ids; for every stored run these equal the keys.
ALTER TABLE execution ADD COLUMN public_id VARCHAR(64);
UPDATE execution SET public_id = id;
CREATE UNIQUE INDEX idx_execution_tenant_public_id ON execution (tenant_id, public_id);

-- +goose Down
-- A run whose public id is not its key is then known by its key (the
-- workflow id's run-<key>) only.
DROP INDEX idx_execution_tenant_public_id;
ALTER TABLE execution DROP COLUMN public_id;
