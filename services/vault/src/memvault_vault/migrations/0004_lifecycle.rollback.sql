DROP INDEX IF EXISTS audit_log_vault_action;
DROP INDEX IF EXISTS audit_log_vault_id;
ALTER TABLE import_batch DROP COLUMN IF EXISTS undone_by, DROP COLUMN IF EXISTS outcomes;
DROP INDEX IF EXISTS memory_history_cause;
ALTER TABLE memory_history DROP COLUMN IF EXISTS cause;
DROP INDEX IF EXISTS memory_review_due;
DROP INDEX IF EXISTS memory_superseded_by;
DROP INDEX IF EXISTS memory_similar_to;
DROP INDEX IF EXISTS memory_depends_on;
ALTER TABLE memory DROP COLUMN IF EXISTS reviewed_at, DROP COLUMN IF EXISTS flagged_at,
    DROP COLUMN IF EXISTS flagged_reason, DROP COLUMN IF EXISTS status_reason;
