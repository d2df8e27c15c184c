DROP TABLE IF EXISTS archive_import_failure;
DROP TABLE IF EXISTS archive_import_chunk;
DROP TABLE IF EXISTS archive_import;
DROP TABLE IF EXISTS archive_idempotency;
DROP TABLE IF EXISTS archive_revision_message;
DROP TABLE IF EXISTS archive_message;
DROP TABLE IF EXISTS archive_revision;
DROP TABLE IF EXISTS archive_conversation;
