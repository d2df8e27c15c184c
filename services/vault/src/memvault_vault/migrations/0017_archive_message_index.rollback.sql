DROP INDEX IF EXISTS archive_conversation_title;
DROP INDEX IF EXISTS archive_message_vault;
DROP TABLE IF EXISTS archive_message_index;
