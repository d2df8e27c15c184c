-- depends: 0001_initial
-- Audit entries about an account rather than one vault (sign-ins, grants to agents,
-- revocations), so each person can read their own trail.

ALTER TABLE audit_log ADD COLUMN account_id uuid REFERENCES account (id) ON DELETE CASCADE;
CREATE INDEX audit_log_account ON audit_log (account_id, id DESC) WHERE account_id IS NOT NULL;
