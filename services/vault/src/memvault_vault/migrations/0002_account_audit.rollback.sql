DROP INDEX IF EXISTS audit_log_account;
ALTER TABLE audit_log DROP COLUMN IF EXISTS account_id;
