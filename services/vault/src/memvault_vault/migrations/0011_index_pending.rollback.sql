DROP TRIGGER IF EXISTS memory_pending_insert ON memory;
DROP TRIGGER IF EXISTS memory_pending_update ON memory;
DROP FUNCTION IF EXISTS memvault_mark_pending();
DROP TABLE IF EXISTS index_pending;
