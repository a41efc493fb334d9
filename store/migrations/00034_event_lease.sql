-- +goose Up
-- Leased event sequences (issue 28, docs/events.md "Leased sequences"):
-- the activity attempt that holds a run's event lease, the only one whose
-- event writes the store takes (InsertLeasedEvents). A later attempt of
-- the same activity claims the lease, which fences out an earlier attempt
-- still running after Temporal gave up on it; a first attempt claims it
-- with its first write, unless a later attempt of the same call (call_key)
-- has. One row per run at most.
CREATE TABLE event_lease (
    run_id     VARCHAR(64)  PRIMARY KEY,
    call_key   VARCHAR(512) NOT NULL,
    producer   VARCHAR(512) NOT NULL,
    from_seq   BIGINT       NOT NULL,
    updated_at TIMESTAMP    NOT NULL
);

-- +goose Down
DROP TABLE event_lease;
