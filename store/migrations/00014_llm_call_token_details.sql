-- +goose Up
-- The parts of an LLM call's token counts priced at their own rates:
-- prompt tokens read from the provider's cache (OpenAI's
-- prompt_tokens_details.cached_tokens, Bedrock's cacheReadInputTokens) and
-- written to it (Bedrock's cacheWriteInputTokens), both inside
-- prompt_tokens, and reasoning tokens (OpenAI's
-- completion_tokens_details.reasoning_tokens), inside completion_tokens.
-- 0 for calls stored before these columns.
ALTER TABLE llm_call ADD COLUMN cached_tokens INTEGER NOT NULL DEFAULT 0;
ALTER TABLE llm_call ADD COLUMN cache_write_tokens INTEGER NOT NULL DEFAULT 0;
ALTER TABLE llm_call ADD COLUMN reasoning_tokens INTEGER NOT NULL DEFAULT 0;

-- +goose Down
ALTER TABLE llm_call DROP COLUMN reasoning_tokens;
ALTER TABLE llm_call DROP COLUMN cache_write_tokens;
ALTER TABLE llm_call DROP COLUMN cached_tokens;
