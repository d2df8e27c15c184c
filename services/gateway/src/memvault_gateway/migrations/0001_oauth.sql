-- The gateway's own state, in schema `gateway`: who may sign in, their sessions, the
-- OAuth clients agents registered, the grants owners approved, and the tokens issued
-- for them. Every credential is stored as a SHA-256 hash (passwords as argon2id).

CREATE SCHEMA IF NOT EXISTS gateway;

-- A person who signs in to approve agents. `subject` names their account in the vault.
CREATE TABLE gateway.user_account (
    id            uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    subject       text NOT NULL UNIQUE,
    username      text UNIQUE,        -- local sign-in name; NULL for people who sign in elsewhere
    password_hash text,               -- argon2id; NULL until a setup link is used
    display_name  text NOT NULL DEFAULT '',
    is_admin      boolean NOT NULL DEFAULT false,
    created_at    timestamptz NOT NULL DEFAULT now(),
    disabled_at   timestamptz
);

-- Who an identity provider (OIDC issuer) or the forward-auth proxy says someone is.
CREATE TABLE gateway.external_identity (
    provider         text NOT NULL,
    external_subject text NOT NULL,
    user_id          uuid NOT NULL REFERENCES gateway.user_account (id) ON DELETE CASCADE,
    created_at       timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (provider, external_subject)
);

-- One-time links that let a person set their password (the first owner's comes from the CLI).
CREATE TABLE gateway.setup_link (
    token_hash text PRIMARY KEY,
    user_id    uuid NOT NULL REFERENCES gateway.user_account (id) ON DELETE CASCADE,
    created_at timestamptz NOT NULL DEFAULT now(),
    expires_at timestamptz NOT NULL,
    used_at    timestamptz
);

CREATE TABLE gateway.session (
    id_hash      text PRIMARY KEY,
    user_id      uuid NOT NULL REFERENCES gateway.user_account (id) ON DELETE CASCADE,
    csrf_token   text NOT NULL,
    method       text NOT NULL,       -- password, oidc, forward-auth
    created_at   timestamptz NOT NULL DEFAULT now(),
    expires_at   timestamptz NOT NULL,
    last_seen_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX session_by_user ON gateway.session (user_id);

-- An OIDC sign-in in progress: state -> nonce, PKCE verifier and where to go afterwards.
CREATE TABLE gateway.login_state (
    state_hash    text PRIMARY KEY,
    nonce         text NOT NULL,
    code_verifier text NOT NULL,
    next_path     text NOT NULL,
    expires_at    timestamptz NOT NULL
);

-- Agents' apps: registered through RFC 7591, or known by their metadata document URL.
CREATE TABLE gateway.oauth_client (
    client_id                  text PRIMARY KEY,
    kind                       text NOT NULL CHECK (kind IN ('registered', 'metadata_document')),
    client_name                text NOT NULL,
    redirect_uris              text[] NOT NULL,
    token_endpoint_auth_method text NOT NULL
        CHECK (token_endpoint_auth_method IN ('none', 'client_secret_basic', 'client_secret_post')),
    secret_hash                text,
    metadata                   jsonb NOT NULL DEFAULT '{}',
    created_at                 timestamptz NOT NULL DEFAULT now(),
    refreshed_at               timestamptz NOT NULL DEFAULT now()
);

-- What an owner allowed: an agent's app (kind oauth) or a script's service token (kind service),
-- with the scopes and vaults it reaches. Revoking it invalidates every token issued under it.
CREATE TABLE gateway.access_grant (
    id             uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    user_id        uuid NOT NULL REFERENCES gateway.user_account (id) ON DELETE CASCADE,
    kind           text NOT NULL CHECK (kind IN ('oauth', 'service')),
    client_id      text REFERENCES gateway.oauth_client (client_id) ON DELETE CASCADE,
    name           text NOT NULL,     -- the client's name when approved, or the service token's name
    scopes         text[] NOT NULL,
    vaults         text[] NOT NULL,
    created_at     timestamptz NOT NULL DEFAULT now(),
    last_used_at   timestamptz,
    expires_at     timestamptz,
    revoked_at     timestamptz,
    revoked_reason text,
    CHECK ((kind = 'oauth') = (client_id IS NOT NULL))
);
CREATE INDEX access_grant_user ON gateway.access_grant (user_id, created_at DESC);

CREATE TABLE gateway.authorization_code (
    code_hash      text PRIMARY KEY,
    grant_id       uuid NOT NULL REFERENCES gateway.access_grant (id) ON DELETE CASCADE,
    client_id      text NOT NULL,
    redirect_uri   text NOT NULL,
    code_challenge text NOT NULL,
    resource       text NOT NULL,
    scopes         text[] NOT NULL,
    created_at     timestamptz NOT NULL DEFAULT now(),
    expires_at     timestamptz NOT NULL,
    used_at        timestamptz
);

CREATE TABLE gateway.token (
    token_hash text PRIMARY KEY,
    grant_id   uuid NOT NULL REFERENCES gateway.access_grant (id) ON DELETE CASCADE,
    kind       text NOT NULL CHECK (kind IN ('access', 'refresh', 'service')),
    resource   text NOT NULL,         -- the audience: the URL this token may be used at
    scopes     text[] NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    expires_at timestamptz,           -- NULL: until revoked (service tokens without an expiry)
    used_at    timestamptz,           -- refresh tokens: when exchanged (each is good once)
    revoked_at timestamptz
);
CREATE INDEX token_grant ON gateway.token (grant_id);
