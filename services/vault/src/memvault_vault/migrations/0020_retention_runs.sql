-- When retention last ran over the whole installation, by which runner (the vault's in-process loop
-- or the `memvault-vault retention` command, e.g. a CronJob), so the dashboard can say when it last
-- ran and when it runs next. One row per runner, overwritten by each run.
-- And two indexes for the overview's counts at 100,000 memories (tests/bench/pages.py): by status
-- and type from the index alone (it also serves every lookup by status, so it replaces
-- memory_status), and the index's state without reading the memories' text.
-- depends: 0015_vault_names_per_account

CREATE TABLE retention_run (
    runner text PRIMARY KEY CHECK (runner IN ('in-process', 'command')),
    ran_at timestamptz NOT NULL,
    memories bigint NOT NULL DEFAULT 0,
    audit_entries bigint NOT NULL DEFAULT 0
);

CREATE INDEX memory_status_type ON memory (vault_id, status, type);
DROP INDEX memory_status;
CREATE INDEX memory_index_hash ON memory (vault_id, id, index_hash);
