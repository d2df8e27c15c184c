DROP TABLE IF EXISTS source_change;
DROP TABLE IF EXISTS tracked_source;
ALTER TABLE memory DROP COLUMN IF EXISTS metadata;
