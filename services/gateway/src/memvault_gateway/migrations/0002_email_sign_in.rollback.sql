DROP TABLE IF EXISTS gateway.email_link;
DROP INDEX IF EXISTS gateway.user_account_email;
ALTER TABLE gateway.user_account DROP COLUMN IF EXISTS email;
