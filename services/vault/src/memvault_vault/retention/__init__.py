"""Retention: delete what each vault's settings say to keep no longer.

Per vault (settings `rejected_retention_days`, `superseded_retention_days`, `audit_retention_days`;
0 keeps forever), counted from a memory's last change:

- rejected memories are deleted and their text becomes an exclusion, so the owner's "no" still
  stands: the same text is not stored again;
- superseded and invalidated memories are deleted with their history (their replacements and
  dependents stay; links to them are dropped, `explain_memory` lists a missing dependency);
- audit log entries older than the period are deleted.

The SQL is `retention/store.py`. The vault service runs it every
`MEMVAULT_VAULT__RETENTION_INTERVAL_SECONDS`;
`memvault-vault retention --dry-run` shows what it would delete. One purge runs at a time across
replicas (an advisory lock), and each vault it touches is locked against writes while it runs.
"""
