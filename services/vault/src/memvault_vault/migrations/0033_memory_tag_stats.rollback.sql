CREATE INDEX IF NOT EXISTS memory_vault_tags ON memory (vault_id, status) INCLUDE (tags);
DROP INDEX IF EXISTS memory_active_tags;
DROP TRIGGER IF EXISTS memory_tags_insert ON memory;
DROP TRIGGER IF EXISTS memory_tags_delete ON memory;
DROP TRIGGER IF EXISTS memory_tags_update ON memory;
DROP FUNCTION IF EXISTS memvault_count_memory_tags();
DROP TABLE IF EXISTS memory_tag_stats;
