DROP INDEX memory_index_hash;
CREATE INDEX memory_status ON memory (vault_id, status);
DROP INDEX memory_status_type;
DROP TABLE retention_run;
