-- Email sign-in: the address a person's sign-in links go to, and the links mailed to it.
-- Like setup links, only the token's SHA-256 is kept; a link works once, for 15 minutes.

-- Lower-cased by the gateway before it is stored or looked up. Set by an operator or an
-- administrator, or by the person once they open a confirmation link mailed to the new address.
ALTER TABLE gateway.user_account ADD COLUMN email text;
CREATE UNIQUE INDEX user_account_email ON gateway.user_account (email);

CREATE TABLE gateway.email_link (
    token_hash text PRIMARY KEY,
    user_id    uuid NOT NULL REFERENCES gateway.user_account (id) ON DELETE CASCADE,
    purpose    text NOT NULL CHECK (purpose IN ('sign_in', 'confirm')),
    next_path  text NOT NULL,        -- sign_in: a path on this site to continue to (checked again on use)
    email      text,                 -- confirm: the address that becomes the person's when the link is used
    created_at timestamptz NOT NULL DEFAULT now(),
    expires_at timestamptz NOT NULL,
    used_at    timestamptz,
    CHECK ((purpose = 'confirm') = (email IS NOT NULL))
);
CREATE INDEX email_link_by_user ON gateway.email_link (user_id);
