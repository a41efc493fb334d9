-- +goose Up
-- Answers an LLM activity received, kept until the workflow has its
-- result: a later attempt of the same activity (workflow id, Temporal run
-- id and activity id, which Temporal keeps across attempts) uses the kept
-- answer instead of asking the model again, when the first attempt could
-- not report its completion (a Temporal outage, a worker killed after the
-- answer arrived). ordinal is the answer's place among the activity's
-- answers (a decision asked again has several); fingerprint is a hash of
-- the request, so an answer is only used for the same request; call_id is
-- the llm_call row of the request that produced it. Rows go when the
-- workflow has stored the answer (SaveAnswer) or the run ends.
CREATE TABLE llm_answer (
    call_key    VARCHAR(400) NOT NULL,
    ordinal     INTEGER      NOT NULL,
    run_id      VARCHAR(64)  NOT NULL,
    fingerprint VARCHAR(64)  NOT NULL,
    call_id     VARCHAR(300) NOT NULL,
    response    TEXT         NOT NULL,
    record      TEXT         NOT NULL,
    created_at  TIMESTAMPTZ  NOT NULL,
    PRIMARY KEY (call_key, ordinal)
);
CREATE INDEX idx_llm_answer_run_id ON llm_answer (run_id);
CREATE INDEX idx_llm_answer_call_id ON llm_answer (call_id);

-- +goose Down
DROP TABLE llm_answer;
