-- A source change keeps the extracted JSON value it replaced beside the new one, so the owner sees
-- both (still hashes and JSON values only, never the source's text). Older rows keep NULL.
-- depends: 0015_vault_names_per_account

ALTER TABLE source_change ADD COLUMN old_value jsonb;
