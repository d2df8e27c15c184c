DROP INDEX IF EXISTS memory_vault_tags;
