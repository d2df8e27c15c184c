DROP INDEX IF EXISTS vault_pending_deletion;
ALTER TABLE vault DROP COLUMN IF EXISTS deletion_requested_by;
ALTER TABLE vault DROP COLUMN IF EXISTS delete_after;
