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
