-- When retention last ran over the whole installation, by which runner (the vault's in-process loop
-- or the `memvault-vault retention` command, e.g. a CronJob), so the dashboard can say when it last
-- ran and when it runs next. One row per runner, overwritten by each run.
-- depends: 0015_vault_names_per_account

CREATE TABLE retention_run (
    runner text PRIMARY KEY CHECK (runner IN ('in-process', 'command')),
    ran_at timestamptz NOT NULL,
    memories bigint NOT NULL DEFAULT 0,
    audit_entries bigint NOT NULL DEFAULT 0
);
