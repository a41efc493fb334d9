-- +goose Up
-- The API key that issued a stream token (empty: a token issued to an
-- identity-provider caller, or with access control off). A token is only
-- valid while its key is: revoking the key ends its tokens and the streams
-- opened with them (issue 23 item 7).
ALTER TABLE stream_token ADD COLUMN key_id VARCHAR(64) NOT NULL DEFAULT '';

-- +goose Down
ALTER TABLE stream_token DROP COLUMN key_id;
