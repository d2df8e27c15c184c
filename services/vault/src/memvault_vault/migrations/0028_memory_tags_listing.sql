-- The vault map (archive/vault_map.py) counts the active memories of a vault by their combination of
-- tags in one pass; this index answers that pass from the index alone (an index-only scan of a few
-- MB) rather than reading every memory's row (content, search vector) at 100,000 memories.
-- depends: 0024_flagged_memories

CREATE INDEX memory_vault_tags ON memory (vault_id, status) INCLUDE (tags);
