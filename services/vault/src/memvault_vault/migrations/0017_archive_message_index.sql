-- What the indexer has done with each archived message (docs/archive.md): the text (hash) and
-- model it embedded, or why it failed. A message without an 'indexed' row is pending. Messages
-- never change once written, so a row only goes stale when the model changes.
-- depends: 0015_vault_names_per_account

CREATE TABLE archive_message_index (
    message_id   uuid PRIMARY KEY REFERENCES archive_message (id) ON DELETE CASCADE,
    vault_id     uuid NOT NULL REFERENCES vault (id) ON DELETE CASCADE,
    content_hash text NOT NULL,
    model        text NOT NULL,
    state        text NOT NULL CHECK (state IN ('indexed', 'failed')),
    attempts     integer NOT NULL DEFAULT 0,
    last_error   text,
    updated_at   timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX archive_message_index_vault ON archive_message_index (vault_id, state);
CREATE INDEX archive_message_vault ON archive_message (vault_id, id);
CREATE INDEX archive_conversation_title ON archive_conversation (vault_id, title);

-- What search sees of a message, as of a memory imported in a sequence (0010_recall_documents.sql):
-- the keyword document is its date and text at weight A and the message before it (its parent
-- node's text, kept in `context` when the message is written) at weight D; the indexer embeds
-- memvault_index_text(text, context, created_at).
ALTER TABLE archive_message ADD COLUMN context text;
COMMENT ON COLUMN archive_message.context IS 'The text of the message before it (its parent node), when it was written';

CREATE FUNCTION memvault_archive_message_context() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    -- Earlier rows of the same INSERT are visible here, so a chain written at once finds its parents.
    IF NEW.context IS NULL AND NEW.parent_node_id IS NOT NULL THEN
        SELECT left(p.text, 4000) INTO NEW.context FROM archive_message p
        WHERE p.conversation_id = NEW.conversation_id AND p.node_id = NEW.parent_node_id LIMIT 1;
    END IF;
    NEW.context := coalesce(NEW.context, '');
    RETURN NEW;
END $$;
CREATE TRIGGER archive_message_context BEFORE INSERT ON archive_message
    FOR EACH ROW EXECUTE FUNCTION memvault_archive_message_context();

UPDATE archive_message m SET context = coalesce(
    (SELECT left(p.text, 4000) FROM archive_message p
     WHERE p.conversation_id = m.conversation_id AND p.node_id = m.parent_node_id LIMIT 1), '');

DROP INDEX archive_message_search;
ALTER TABLE archive_message DROP COLUMN search;
ALTER TABLE archive_message ADD COLUMN search tsvector GENERATED ALWAYS AS (
    setweight(to_tsvector('english', coalesce(memvault_date_words(created_at) || ' ', '') || text), 'A')
    || setweight(to_tsvector('english', coalesce(context, '')), 'D')
) STORED;
CREATE INDEX archive_message_search ON archive_message USING gin (search) WITH (fastupdate = off);
