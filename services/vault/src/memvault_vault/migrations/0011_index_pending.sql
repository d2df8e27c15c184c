-- Memories whose current text (index_hash) the index does not hold yet. A trigger adds a memory
-- when it is written or its indexed text changes; the vault removes it when the indexer reports
-- that text indexed. Recall scores recent pending memories from their text, and finds them here
-- without comparing every recent memory with index_state.
-- depends: 0010_recall_documents

CREATE TABLE index_pending (
    memory_id  uuid PRIMARY KEY REFERENCES memory (id) ON DELETE CASCADE,
    vault_id   uuid NOT NULL,
    created_at timestamptz NOT NULL  -- the memory's
);
CREATE INDEX index_pending_vault ON index_pending (vault_id, created_at DESC);

CREATE FUNCTION memvault_mark_pending() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        INSERT INTO index_pending (memory_id, vault_id, created_at)
            SELECT id, vault_id, created_at FROM new_rows ORDER BY id
            ON CONFLICT DO NOTHING;
    ELSE
        INSERT INTO index_pending (memory_id, vault_id, created_at)
            SELECT n.id, n.vault_id, n.created_at FROM old_rows o JOIN new_rows n ON n.id = o.id
            WHERE n.index_hash IS DISTINCT FROM o.index_hash ORDER BY n.id
            ON CONFLICT DO NOTHING;
    END IF;
    RETURN NULL;
END
$$;

CREATE TRIGGER memory_pending_insert AFTER INSERT ON memory
    REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION memvault_mark_pending();
CREATE TRIGGER memory_pending_update AFTER UPDATE ON memory
    REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION memvault_mark_pending();

INSERT INTO index_pending (memory_id, vault_id, created_at)
    SELECT m.id, m.vault_id, m.created_at FROM memory m
    LEFT JOIN index_state s ON s.memory_id = m.id AND s.state = 'indexed' AND s.content_hash = m.index_hash
    WHERE s.memory_id IS NULL;
