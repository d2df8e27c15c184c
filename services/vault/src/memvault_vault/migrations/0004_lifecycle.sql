-- Memory lifecycle: why a memory was retired or flagged, review marks, which change caused
-- which (so an import can be undone exactly), per-batch outcomes, and audit filtering.
-- depends: 0003_index_state

ALTER TABLE memory
    ADD COLUMN status_reason  text,           -- the words of whoever rejected or invalidated it
    ADD COLUMN flagged_reason text,           -- why it needs review; ids only, never memory text
    ADD COLUMN flagged_at     timestamptz,
    ADD COLUMN reviewed_at    timestamptz;
CREATE INDEX memory_depends_on ON memory USING gin (depends_on);
CREATE INDEX memory_similar_to ON memory USING gin (similar_to);
CREATE INDEX memory_superseded_by ON memory (superseded_by) WHERE superseded_by IS NOT NULL;
CREATE INDEX memory_review_due ON memory (vault_id, review_after) WHERE status IN ('active', 'proposed');

-- The memory whose change caused this one (the replacement that superseded it, the dependency
-- that changed), so undoing an import can find everything the import set off.
ALTER TABLE memory_history ADD COLUMN cause uuid;
CREATE INDEX memory_history_cause ON memory_history (cause) WHERE cause IS NOT NULL;

ALTER TABLE import_batch
    ADD COLUMN outcomes jsonb NOT NULL DEFAULT '{}',
    ADD COLUMN undone_by text;

CREATE INDEX audit_log_vault_id ON audit_log (vault_id, id DESC);
CREATE INDEX audit_log_vault_action ON audit_log (vault_id, action, id DESC);
