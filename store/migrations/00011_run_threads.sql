-- +goose Up
-- Follow-up runs (runs/start's previous_run_id): every run belongs to a
-- thread, named by the id of its first run, and a follow-up names the run
-- it follows. Runs stored before threads are threads of their own.
ALTER TABLE execution ADD COLUMN thread_id VARCHAR(64) NOT NULL DEFAULT '';
ALTER TABLE execution ADD COLUMN previous_run_id VARCHAR(64) NOT NULL DEFAULT '';
UPDATE execution SET thread_id = id WHERE thread_id = '';
CREATE INDEX idx_execution_thread ON execution (thread_id, created_at);

-- +goose Down
DROP INDEX idx_execution_thread;
ALTER TABLE execution DROP COLUMN previous_run_id;
ALTER TABLE execution DROP COLUMN thread_id;
