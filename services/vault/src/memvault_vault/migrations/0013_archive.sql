-- The conversation archive (docs/archive.md): conversations whose revisions never change once
-- written, their messages (every node of every branch, kept once and listed by each revision that
-- holds them), idempotency keys of archive writes, and raw uploads kept byte for byte in chunks
-- with the progress of their processing.
-- depends: 0012_gin_without_pending_list

CREATE TABLE archive_conversation (
    id             uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    vault_id       uuid NOT NULL REFERENCES vault (id) ON DELETE CASCADE,
    title          text,                                  -- null: the source gave none
    source         text NOT NULL DEFAULT 'api',           -- api | chatgpt
    external_id    text,                                  -- the source's conversation id
    head_revision  integer NOT NULL,
    tags           text[] NOT NULL DEFAULT '{}',
    tags_version   integer NOT NULL DEFAULT 1,
    created_by     text NOT NULL DEFAULT '',
    created_at     timestamptz NOT NULL DEFAULT now(),
    updated_at     timestamptz NOT NULL DEFAULT now(),
    source_created_at timestamptz,
    source_updated_at timestamptz
);
CREATE INDEX archive_conversation_vault ON archive_conversation (vault_id, updated_at DESC, id DESC);
CREATE UNIQUE INDEX archive_conversation_external ON archive_conversation (vault_id, source, external_id)
    WHERE external_id IS NOT NULL;
CREATE INDEX archive_conversation_tags ON archive_conversation USING gin (tags);

CREATE TABLE archive_revision (
    vault_id        uuid NOT NULL REFERENCES vault (id) ON DELETE CASCADE,
    conversation_id uuid NOT NULL REFERENCES archive_conversation (id) ON DELETE CASCADE,
    number          integer NOT NULL CHECK (number >= 1),
    parent          integer,                              -- the head it was written on
    kind            text NOT NULL CHECK (kind IN ('create', 'append', 'replace', 'import')),
    message_count   integer NOT NULL,
    content_sha256  text NOT NULL,                        -- over the ordered message hashes
    created_by      text NOT NULL DEFAULT '',
    created_at      timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (conversation_id, number)
);

CREATE TABLE archive_message (
    id              uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    vault_id        uuid NOT NULL REFERENCES vault (id) ON DELETE CASCADE,
    conversation_id uuid NOT NULL REFERENCES archive_conversation (id) ON DELETE CASCADE,
    node_id         text NOT NULL,
    parent_node_id  text,
    role            text NOT NULL,
    content_type    text NOT NULL,
    text            text NOT NULL,                        -- what search and readers see
    content         jsonb,                                -- the source's content object, whole
    metadata        jsonb,                                -- the source node's other fields, whole
    created_at      timestamptz,
    content_hash    text NOT NULL,
    search          tsvector GENERATED ALWAYS AS (to_tsvector('english', text)) STORED
);
CREATE INDEX archive_message_conversation ON archive_message (conversation_id, node_id);
CREATE INDEX archive_message_search ON archive_message USING gin (search) WITH (fastupdate = off);

-- Which messages a revision holds, in order; active marks the timeline the source shows.
CREATE TABLE archive_revision_message (
    vault_id        uuid NOT NULL REFERENCES vault (id) ON DELETE CASCADE,
    conversation_id uuid NOT NULL,
    revision        integer NOT NULL,
    position        integer NOT NULL,
    message_id      uuid NOT NULL REFERENCES archive_message (id) ON DELETE CASCADE,
    active          boolean NOT NULL,
    PRIMARY KEY (conversation_id, revision, position),
    FOREIGN KEY (conversation_id, revision) REFERENCES archive_revision (conversation_id, number) ON DELETE CASCADE
);
CREATE INDEX archive_revision_message_message ON archive_revision_message (message_id);

CREATE TABLE archive_idempotency (
    vault_id     uuid NOT NULL REFERENCES vault (id) ON DELETE CASCADE,
    key          text NOT NULL,
    request_hash text NOT NULL,
    receipt      jsonb NOT NULL,
    created_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (vault_id, key)
);

CREATE TABLE archive_import (
    id          uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    vault_id    uuid NOT NULL REFERENCES vault (id) ON DELETE CASCADE,
    format      text NOT NULL,
    filename    text NOT NULL DEFAULT '',
    size        bigint NOT NULL,
    sha256      text NOT NULL,
    state       text NOT NULL CHECK (state IN ('uploading', 'queued', 'running', 'done', 'failed', 'duplicate')),
    duplicate_of uuid,
    parts       integer NOT NULL DEFAULT 0,
    received    bigint NOT NULL DEFAULT 0,
    total       integer NOT NULL DEFAULT 0,
    next_index  integer NOT NULL DEFAULT 0,              -- the checkpoint: conversations before it are done
    imported    integer NOT NULL DEFAULT 0,
    updated     integer NOT NULL DEFAULT 0,
    duplicates  integer NOT NULL DEFAULT 0,
    failed      integer NOT NULL DEFAULT 0,
    error       text NOT NULL DEFAULT '',
    created_by  text NOT NULL DEFAULT '',
    created_at  timestamptz NOT NULL DEFAULT now(),
    updated_at  timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX archive_import_vault ON archive_import (vault_id, sha256);
CREATE INDEX archive_import_pending ON archive_import (updated_at) WHERE state IN ('queued', 'running');

CREATE TABLE archive_import_chunk (
    import_id uuid NOT NULL REFERENCES archive_import (id) ON DELETE CASCADE,
    vault_id  uuid NOT NULL REFERENCES vault (id) ON DELETE CASCADE,
    part      integer NOT NULL,
    data      bytea NOT NULL,
    PRIMARY KEY (import_id, part)
);

CREATE TABLE archive_import_failure (
    import_id       uuid NOT NULL REFERENCES archive_import (id) ON DELETE CASCADE,
    vault_id        uuid NOT NULL REFERENCES vault (id) ON DELETE CASCADE,
    conversation_ref text NOT NULL,
    error           text NOT NULL,
    PRIMARY KEY (import_id, conversation_ref)
);
