-- +goose Up
-- An LLM call's cost in US dollars, from the price table (LLM_PRICES_FILE
-- over the built-in list prices); NULL for a failed call, a call stored
-- before costs, or one whose model has no price: unknown, never 0.
ALTER TABLE llm_call ADD COLUMN cost_usd DOUBLE PRECISION;

-- +goose Down
ALTER TABLE llm_call DROP COLUMN cost_usd;
