-- A vault's deletion with a grace period: while `delete_after` is set the vault is read-only
-- (every write is refused, reads work), the owner can cancel, and the retention runner deletes
-- the vault (everything in it cascades) once `delete_after` has passed.
-- depends: 0015_vault_names_per_account
ALTER TABLE vault ADD COLUMN delete_after timestamptz;
ALTER TABLE vault ADD COLUMN deletion_requested_by text;
CREATE INDEX vault_pending_deletion ON vault (delete_after) WHERE delete_after IS NOT NULL;
