-- Fails (and changes nothing) while two vaults share a name: rename or remove one first.
DROP INDEX vault_name;
ALTER TABLE vault ADD CONSTRAINT vault_name_key UNIQUE (name);
DROP TRIGGER membership_vault_name ON membership;
DROP FUNCTION memvault_membership_vault_name();
ALTER TABLE membership DROP CONSTRAINT membership_one_vault_name_per_account;
ALTER TABLE membership DROP COLUMN vault_name;
