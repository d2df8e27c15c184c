-- Tracked sources: a memory linked to a file or URL it was taken from, checked on a schedule, and
-- the changes found there. A change record holds hashes and, for JSON, the extracted value; never
-- the source's text. Memories also carry free-form JSON metadata.
-- depends: 0012_gin_without_pending_list

ALTER TABLE memory ADD COLUMN metadata jsonb NOT NULL DEFAULT '{}'::jsonb;

CREATE TABLE tracked_source (
    id               uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    vault_id         uuid NOT NULL REFERENCES vault (id) ON DELETE CASCADE,
    memory_id        uuid NOT NULL REFERENCES memory (id) ON DELETE CASCADE,
    kind             text NOT NULL CHECK (kind IN ('json_file', 'json_url', 'text_file', 'text_url')),
    location         text NOT NULL,
    selector         text NOT NULL DEFAULT '',
    template         text NOT NULL DEFAULT '',
    mode             text NOT NULL CHECK (mode IN ('auto', 'review')),
    interval_seconds integer NOT NULL CHECK (interval_seconds > 0),
    baseline_hash    text NOT NULL,
    baseline_value   jsonb,
    tracked_by       text NOT NULL,                -- the account subject whose access a scheduled check uses
    actor            text NOT NULL,
    created_at       timestamptz NOT NULL DEFAULT now(),
    last_checked_at  timestamptz,
    next_check_at    timestamptz NOT NULL,
    last_error       text NOT NULL DEFAULT '',
    error_since      timestamptz,
    claimed_until    timestamptz                   -- a check in progress; expires if its process dies
);
CREATE INDEX tracked_source_due ON tracked_source (next_check_at);
CREATE INDEX tracked_source_memory ON tracked_source (vault_id, memory_id);

CREATE TABLE source_change (
    id             uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    vault_id       uuid NOT NULL REFERENCES vault (id) ON DELETE CASCADE,
    source_id      uuid NOT NULL REFERENCES tracked_source (id) ON DELETE CASCADE,
    memory_id      uuid NOT NULL,
    old_hash       text NOT NULL,
    new_hash       text NOT NULL,
    new_value      jsonb,                          -- the extracted JSON value; NULL for text sources
    status         text NOT NULL CHECK (status IN ('pending', 'applied', 'accepted', 'dismissed', 'reverted', 'replaced')),
    detected_at    timestamptz NOT NULL DEFAULT now(),
    resolved_at    timestamptz,
    resolved_by    text NOT NULL DEFAULT '',
    replacement_id uuid
);
CREATE UNIQUE INDEX source_change_one_pending ON source_change (source_id) WHERE status = 'pending';
CREATE INDEX source_change_vault ON source_change (vault_id, status, detected_at);
