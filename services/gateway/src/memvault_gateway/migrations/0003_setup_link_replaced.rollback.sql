DELETE FROM gateway.setup_link WHERE replaced_at IS NOT NULL;
ALTER TABLE gateway.setup_link DROP COLUMN IF EXISTS replaced_at;
