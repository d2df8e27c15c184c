DROP TABLE IF EXISTS outbox, audit_log, operating_guide_history, operating_guide, exclusion,
    memory_history, memory, import_batch, vault_settings, membership, vault, account;
