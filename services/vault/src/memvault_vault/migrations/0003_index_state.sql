-- What the indexer has done with each memory: which text (hash) and model it indexed, or
-- why it failed. A memory with no 'indexed' row for its current hash is pending.
-- depends: 0001_initial

CREATE TABLE index_state (
    memory_id    uuid PRIMARY KEY REFERENCES memory (id) ON DELETE CASCADE,
    vault_id     uuid NOT NULL REFERENCES vault (id) ON DELETE CASCADE,
    content_hash text NOT NULL,
    model        text NOT NULL,
    state        text NOT NULL CHECK (state IN ('indexed', 'failed')),
    attempts     integer NOT NULL DEFAULT 0,
    last_error   text,
    updated_at   timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX index_state_vault ON index_state (vault_id, state);
