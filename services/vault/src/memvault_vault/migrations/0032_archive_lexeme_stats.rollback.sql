DROP TRIGGER IF EXISTS archive_message_lexemes_insert ON archive_message;
DROP TRIGGER IF EXISTS archive_message_lexemes_delete ON archive_message;
DROP TRIGGER IF EXISTS archive_message_lexemes_update ON archive_message;
DROP FUNCTION IF EXISTS memvault_archive_count_lexemes();
DROP FUNCTION IF EXISTS memvault_archive_apply_lexemes(uuid[], tsvector[], integer[]);
DROP TABLE IF EXISTS archive_text_stats, archive_lexeme_stats;
