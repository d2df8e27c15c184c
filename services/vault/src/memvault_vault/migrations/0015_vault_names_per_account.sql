-- Vault names are unique per account, not per installation: two accounts may each have a vault
-- named "work". Each membership carries the vault's name (vaults are never renamed; a trigger
-- fills it in), and an account holds at most one vault of a name, its own or shared with it.
-- depends: 0012_gin_without_pending_list

ALTER TABLE membership ADD COLUMN vault_name text;
UPDATE membership m SET vault_name = v.name FROM vault v WHERE v.id = m.vault_id;
ALTER TABLE membership ALTER COLUMN vault_name SET NOT NULL;
ALTER TABLE membership ADD CONSTRAINT membership_one_vault_name_per_account UNIQUE (account_id, vault_name);

CREATE FUNCTION memvault_membership_vault_name() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    NEW.vault_name := (SELECT name FROM vault WHERE id = NEW.vault_id);
    RETURN NEW;
END
$$;
CREATE TRIGGER membership_vault_name BEFORE INSERT OR UPDATE OF vault_id ON membership
    FOR EACH ROW EXECUTE FUNCTION memvault_membership_vault_name();

ALTER TABLE vault DROP CONSTRAINT vault_name_key;
CREATE INDEX vault_name ON vault (name);
