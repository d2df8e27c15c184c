-- Archive writes beyond create/append/replace (docs/archive.md): messages may carry a stable key
-- (upserted by it), a conversation copied from another vault names where it came from, and the
-- revision kinds of key upserts, in-place edits and copies.
-- depends: 0015_vault_names_per_account

ALTER TABLE archive_message ADD COLUMN message_key text;
CREATE INDEX archive_message_key ON archive_message (conversation_id, message_key) WHERE message_key IS NOT NULL;

-- {"vault": name, "vault_id": uuid, "conversation_id": uuid, "revision": n} of the copied revision.
ALTER TABLE archive_conversation ADD COLUMN derived_from jsonb;

ALTER TABLE archive_revision DROP CONSTRAINT archive_revision_kind_check;
ALTER TABLE archive_revision ADD CONSTRAINT archive_revision_kind_check
    CHECK (kind IN ('create', 'append', 'replace', 'import', 'upsert', 'edit', 'copy'));
