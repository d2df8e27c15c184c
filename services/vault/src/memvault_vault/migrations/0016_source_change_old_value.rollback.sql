ALTER TABLE source_change DROP COLUMN IF EXISTS old_value;
