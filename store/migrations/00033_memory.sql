-- +goose Up
-- Long-term memory (issue 29, docs/memory.md): a tenant's items, each
-- under a namespace path and a key, with a JSON value, the text full-text
-- search reads, an optional embedding (float32, little-endian) and an
-- optional expiry. The namespace is stored as its segments, each followed
-- by '/', so that a prefix of a path is a prefix of the column.
-- Lines between "-- postgres-only begin" and "-- postgres-only end" run on
-- PostgreSQL only; lines starting "-- sqlite: " on SQLite only (see
-- sqliteMigrations in store.go).
-- postgres-only begin
CREATE TABLE memory_item (
    id BIGSERIAL PRIMARY KEY,
    tenant_id VARCHAR(255) NOT NULL,
    namespace VARCHAR(1024) NOT NULL,
    item_key VARCHAR(255) NOT NULL,
    value TEXT NOT NULL,
    search_text TEXT NOT NULL DEFAULT '',
    embedding BYTEA,
    embedding_model VARCHAR(255) NOT NULL DEFAULT '',
    run_id VARCHAR(64) NOT NULL DEFAULT '',
    created_at TIMESTAMP NOT NULL,
    updated_at TIMESTAMP NOT NULL,
    expires_at TIMESTAMP,
    search_tsv tsvector GENERATED ALWAYS AS (to_tsvector('english', search_text)) STORED
);
CREATE INDEX idx_memory_item_tsv ON memory_item USING GIN (search_tsv);
-- postgres-only end
-- sqlite: CREATE TABLE memory_item (
-- sqlite:     id INTEGER PRIMARY KEY AUTOINCREMENT,
-- sqlite:     tenant_id VARCHAR(255) NOT NULL,
-- sqlite:     namespace VARCHAR(1024) NOT NULL,
-- sqlite:     item_key VARCHAR(255) NOT NULL,
-- sqlite:     value TEXT NOT NULL,
-- sqlite:     search_text TEXT NOT NULL DEFAULT '',
-- sqlite:     embedding BLOB,
-- sqlite:     embedding_model VARCHAR(255) NOT NULL DEFAULT '',
-- sqlite:     run_id VARCHAR(64) NOT NULL DEFAULT '',
-- sqlite:     created_at TIMESTAMP NOT NULL,
-- sqlite:     updated_at TIMESTAMP NOT NULL,
-- sqlite:     expires_at TIMESTAMP
-- sqlite: );
-- sqlite: CREATE VIRTUAL TABLE memory_item_fts USING fts5(search_text, content='memory_item', content_rowid='id', tokenize='porter unicode61');
-- sqlite: --statement-begin
-- sqlite: CREATE TRIGGER memory_item_fts_insert AFTER INSERT ON memory_item BEGIN
-- sqlite:     INSERT INTO memory_item_fts(rowid, search_text) VALUES (new.id, new.search_text);
-- sqlite: END;
-- sqlite: --statement-end
-- sqlite: --statement-begin
-- sqlite: CREATE TRIGGER memory_item_fts_delete AFTER DELETE ON memory_item BEGIN
-- sqlite:     INSERT INTO memory_item_fts(memory_item_fts, rowid, search_text) VALUES ('delete', old.id, old.search_text);
-- sqlite: END;
-- sqlite: --statement-end
-- sqlite: --statement-begin
-- sqlite: CREATE TRIGGER memory_item_fts_update AFTER UPDATE OF search_text ON memory_item BEGIN
-- sqlite:     INSERT INTO memory_item_fts(memory_item_fts, rowid, search_text) VALUES ('delete', old.id, old.search_text);
-- sqlite:     INSERT INTO memory_item_fts(rowid, search_text) VALUES (new.id, new.search_text);
-- sqlite: END;
-- sqlite: --statement-end
CREATE UNIQUE INDEX idx_memory_item_key ON memory_item (tenant_id, namespace, item_key);
CREATE INDEX idx_memory_item_expires ON memory_item (expires_at);
-- A search without query text lists the newest items.
CREATE INDEX idx_memory_item_recent ON memory_item (tenant_id, updated_at);
CREATE INDEX idx_memory_item_run ON memory_item (run_id);
-- The version of each namespace's items, bumped by every write: a process
-- keeps a namespace's vectors in memory and reloads them only when the
-- version moved (semantic search without a vector extension).
CREATE TABLE memory_namespace (
    tenant_id VARCHAR(255) NOT NULL,
    namespace VARCHAR(1024) NOT NULL,
    version BIGINT NOT NULL DEFAULT 0,
    updated_at TIMESTAMP NOT NULL,
    PRIMARY KEY (tenant_id, namespace)
);

-- +goose Down
DROP TABLE memory_namespace;
-- sqlite: DROP TRIGGER memory_item_fts_update;
-- sqlite: DROP TRIGGER memory_item_fts_delete;
-- sqlite: DROP TRIGGER memory_item_fts_insert;
-- sqlite: DROP TABLE memory_item_fts;
DROP TABLE memory_item;
