-- Revisions of the newer kinds stay, as full transcripts they are.
UPDATE archive_revision SET kind = 'replace' WHERE kind IN ('upsert', 'edit', 'copy');
ALTER TABLE archive_revision DROP CONSTRAINT archive_revision_kind_check;
ALTER TABLE archive_revision ADD CONSTRAINT archive_revision_kind_check
    CHECK (kind IN ('create', 'append', 'replace', 'import'));
ALTER TABLE archive_conversation DROP COLUMN IF EXISTS derived_from;
DROP INDEX IF EXISTS archive_message_key;
ALTER TABLE archive_message DROP COLUMN IF EXISTS message_key;
