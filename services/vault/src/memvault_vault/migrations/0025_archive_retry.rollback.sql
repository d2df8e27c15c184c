ALTER TABLE archive_import DROP COLUMN IF EXISTS retry_next;
ALTER TABLE archive_import_failure DROP COLUMN IF EXISTS retry;
ALTER TABLE archive_import_failure DROP COLUMN IF EXISTS attempts;
ALTER TABLE archive_import_failure DROP COLUMN IF EXISTS position;
