-- The flagged memories the review queue page lists beside the proposals (memory audit, kind 'flagged'),
-- found from a small partial index rather than by reading every memory of the vault: at 100,000
-- memories the listing and its count each scanned the whole table (tests/bench/pages.py).
-- depends: 0020_retention_runs

CREATE INDEX memory_flagged ON memory (vault_id, id) WHERE flagged_reason IS NOT NULL;
