-- The canonical data: accounts, vaults, memories and their history, the operating
-- guide, settings, exclusions, import batches, audit log and the event outbox.

CREATE TABLE account (
    id           uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    subject      text NOT NULL UNIQUE,          -- who the gateway says this is
    display_name text NOT NULL DEFAULT '',
    created_at   timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE vault (
    id         uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    name       text NOT NULL UNIQUE CHECK (name ~ '^[a-z0-9][a-z0-9-]{0,62}$'),
    created_at timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE membership (
    vault_id   uuid NOT NULL REFERENCES vault (id) ON DELETE CASCADE,
    account_id uuid NOT NULL REFERENCES account (id) ON DELETE CASCADE,
    role       text NOT NULL CHECK (role IN ('owner', 'editor', 'viewer')),
    created_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (vault_id, account_id)
);
CREATE INDEX membership_account ON membership (account_id);

CREATE TABLE vault_settings (
    vault_id                 uuid PRIMARY KEY REFERENCES vault (id) ON DELETE CASCADE,
    approval_mode            text NOT NULL DEFAULT 'review' CHECK (approval_mode IN ('review', 'auto')),
    superseded_retention_days integer NOT NULL DEFAULT 365 CHECK (superseded_retention_days >= 0),
    rejected_retention_days  integer NOT NULL DEFAULT 30 CHECK (rejected_retention_days >= 0),
    audit_retention_days     integer NOT NULL DEFAULT 365 CHECK (audit_retention_days >= 0),
    updated_at               timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE import_batch (
    id           uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    vault_id     uuid NOT NULL REFERENCES vault (id) ON DELETE CASCADE,
    source       text NOT NULL DEFAULT '',
    actor        text NOT NULL,
    item_count   integer NOT NULL,
    stored_count integer NOT NULL,
    created_at   timestamptz NOT NULL DEFAULT now(),
    undone_at    timestamptz
);
CREATE INDEX import_batch_vault ON import_batch (vault_id, created_at DESC);

CREATE TABLE memory (
    id            uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    vault_id      uuid NOT NULL REFERENCES vault (id) ON DELETE CASCADE,
    content       text NOT NULL,
    content_hash  text NOT NULL,                -- sha256 of the normalised text
    type          text NOT NULL CHECK (type IN
                    ('fact', 'preference', 'decision', 'constraint', 'assumption', 'observation', 'instruction')),
    key           text,
    scope         text,
    tags          text[] NOT NULL DEFAULT '{}',
    source        text NOT NULL DEFAULT '',
    client        text NOT NULL DEFAULT '',
    trust         text NOT NULL CHECK (trust IN ('stated', 'inferred', 'imported', 'synced')),
    confidence    real CHECK (confidence IS NULL OR (confidence > 0 AND confidence <= 1)),
    status        text NOT NULL CHECK (status IN ('proposed', 'active', 'superseded', 'rejected', 'invalidated')),
    valid_from    timestamptz NOT NULL DEFAULT now(),
    valid_to      timestamptz,
    review_after  timestamptz,
    expires_at    timestamptz,
    depends_on    uuid[] NOT NULL DEFAULT '{}',
    supersedes    uuid REFERENCES memory (id) ON DELETE SET NULL,
    superseded_by uuid REFERENCES memory (id) ON DELETE SET NULL,
    similar_to    uuid[] NOT NULL DEFAULT '{}',
    batch_id      uuid REFERENCES import_batch (id) ON DELETE SET NULL,
    version       bigint NOT NULL DEFAULT 1,
    pinned        boolean NOT NULL DEFAULT false,
    created_at    timestamptz NOT NULL DEFAULT now(),
    updated_at    timestamptz NOT NULL DEFAULT now(),
    search        tsvector GENERATED ALWAYS AS (to_tsvector('english', content)) STORED,
    -- The same text (ignoring case and whitespace) is stored once per vault.
    UNIQUE (vault_id, content_hash)
);
CREATE INDEX memory_search ON memory USING gin (search);
CREATE INDEX memory_listing ON memory (vault_id, created_at DESC, id DESC);
CREATE INDEX memory_status ON memory (vault_id, status);
CREATE INDEX memory_key ON memory (vault_id, key, scope) WHERE key IS NOT NULL;
CREATE INDEX memory_batch ON memory (batch_id) WHERE batch_id IS NOT NULL;

-- Every change to a memory, as a snapshot of the row after the change.
CREATE TABLE memory_history (
    id         bigserial PRIMARY KEY,
    memory_id  uuid NOT NULL,
    vault_id   uuid NOT NULL REFERENCES vault (id) ON DELETE CASCADE,
    version    bigint NOT NULL,
    change     text NOT NULL,
    snapshot   jsonb NOT NULL,
    actor      text NOT NULL,
    changed_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX memory_history_memory ON memory_history (memory_id, version);

-- Text that was forgotten and must not be stored again.
CREATE TABLE exclusion (
    vault_id     uuid NOT NULL REFERENCES vault (id) ON DELETE CASCADE,
    content_hash text NOT NULL,
    reason       text NOT NULL DEFAULT 'forgotten',
    created_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (vault_id, content_hash)
);

CREATE TABLE operating_guide (
    vault_id           uuid PRIMARY KEY REFERENCES vault (id) ON DELETE CASCADE,
    text               text NOT NULL,
    version            bigint NOT NULL DEFAULT 1,
    default_revision   text NOT NULL,          -- which bundled default it started from
    updated_by         text NOT NULL,
    updated_at         timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE operating_guide_history (
    id         bigserial PRIMARY KEY,
    vault_id   uuid NOT NULL REFERENCES vault (id) ON DELETE CASCADE,
    version    bigint NOT NULL,
    text       text NOT NULL,
    updated_by text NOT NULL,
    updated_at timestamptz NOT NULL DEFAULT now(),
    UNIQUE (vault_id, version)
);

-- Who did what, when. Never the content of a memory or a secret.
CREATE TABLE audit_log (
    id       bigserial PRIMARY KEY,
    vault_id uuid REFERENCES vault (id) ON DELETE CASCADE,
    actor    text NOT NULL,
    action   text NOT NULL,
    target   text NOT NULL DEFAULT '',
    details  jsonb NOT NULL DEFAULT '{}',
    at       timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX audit_log_vault ON audit_log (vault_id, at DESC);

-- Events written in the same transaction as the change they describe; a relay
-- publishes them to NATS JetStream with Nats-Msg-Id = id.
CREATE TABLE outbox (
    id           uuid PRIMARY KEY,
    subject      text NOT NULL,
    payload      bytea NOT NULL,
    headers      jsonb NOT NULL DEFAULT '{}',
    created_at   timestamptz NOT NULL DEFAULT now(),
    published_at timestamptz,
    attempts     integer NOT NULL DEFAULT 0,
    last_error   text
);
CREATE INDEX outbox_pending ON outbox (created_at) WHERE published_at IS NULL;
