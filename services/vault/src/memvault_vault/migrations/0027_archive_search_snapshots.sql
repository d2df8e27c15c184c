-- Snapshots of archive search results (docs/archive.md#search): the ranked hit list of a search's
-- first page, kept while its cursor may be used, so the next pages read that list instead of
-- searching again (a message written between pages never shifts, repeats or skips a hit). Bound to
-- the vault and to a keyed hash of the caller (account and client) the cursor was issued to;
-- expired rows are deleted as new snapshots are written.
-- depends: 0024_flagged_memories

CREATE TABLE archive_search_snapshot (
    id          uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    vault_id    uuid NOT NULL REFERENCES vault (id) ON DELETE CASCADE,
    caller      text NOT NULL,
    query       text NOT NULL,
    tags_all    text[] NOT NULL DEFAULT '{}',
    tags_any    text[] NOT NULL DEFAULT '{}',
    mode        text NOT NULL,
    hits        jsonb NOT NULL,                -- [[message id, conversation id, revision, position, score], ...]
    created_at  timestamptz NOT NULL DEFAULT now(),
    expires_at  timestamptz NOT NULL
);
CREATE INDEX archive_search_snapshot_expiry ON archive_search_snapshot (expires_at);
