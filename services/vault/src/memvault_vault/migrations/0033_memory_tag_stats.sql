-- The vault map (archive/vault_map.py) ranks a vault's tags by the active memories that carry each
-- combination of tags. Counting them on every view read every active memory (`GROUP BY tags`, about
-- 20 ms of CPU at 100,000 memories, the map's largest cost); statement triggers now keep the counts
-- exact, as vault_text_stats is kept (0010), so the map reads one row per combination. A row may
-- reach 0 and stay (the map skips it); there are no more of them than combinations ever used.
--
-- The map's newest items of a group are then read per combination through memory_active_tags: an
-- equality on the whole array, newest first, a few index entries each. Walking the vault's newest
-- memories for a tag's items, as before, read every newer memory when a large tag was an old one
-- (about 60 ms at 100,000 memories for a tag on the oldest 3,000). memory_vault_tags (0028) served
-- only the map's old count and goes.
-- depends: 0032_archive_lexeme_stats

CREATE TABLE memory_tag_stats (
    vault_id uuid NOT NULL REFERENCES vault (id) ON DELETE CASCADE,
    tags     text[] NOT NULL,
    active   integer NOT NULL,
    PRIMARY KEY (vault_id, tags)
);

-- One upsert per statement, ordered by key, so that concurrent writers lock the same rows in the
-- same order (as memvault_apply_lexemes does). Only rows that enter or leave `active`, or change
-- tags while active, move a count.
CREATE FUNCTION memvault_count_memory_tags() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        INSERT INTO memory_tag_stats AS s (vault_id, tags, active)
            SELECT r.vault_id, r.tags, count(*) FROM new_rows r
            WHERE r.status = 'active' AND EXISTS (SELECT 1 FROM vault WHERE vault.id = r.vault_id)
            GROUP BY r.vault_id, r.tags ORDER BY r.vault_id, r.tags
            ON CONFLICT (vault_id, tags) DO UPDATE SET active = s.active + EXCLUDED.active;
    ELSIF TG_OP = 'DELETE' THEN
        INSERT INTO memory_tag_stats AS s (vault_id, tags, active)
            SELECT r.vault_id, r.tags, -count(*) FROM old_rows r
            WHERE r.status = 'active' AND EXISTS (SELECT 1 FROM vault WHERE vault.id = r.vault_id)  -- not for a vault being deleted
            GROUP BY r.vault_id, r.tags ORDER BY r.vault_id, r.tags
            ON CONFLICT (vault_id, tags) DO UPDATE SET active = s.active + EXCLUDED.active;
    ELSE
        INSERT INTO memory_tag_stats AS s (vault_id, tags, active)
            SELECT c.vault_id, c.tags, sum(c.sign) FROM (
                SELECT o.vault_id, o.tags, -1 AS sign FROM old_rows o JOIN new_rows n ON n.id = o.id
                WHERE o.status = 'active'
                  AND (n.status <> 'active' OR n.tags IS DISTINCT FROM o.tags OR n.vault_id <> o.vault_id)
                UNION ALL
                SELECT n.vault_id, n.tags, 1 FROM old_rows o JOIN new_rows n ON n.id = o.id
                WHERE n.status = 'active'
                  AND (o.status <> 'active' OR n.tags IS DISTINCT FROM o.tags OR n.vault_id <> o.vault_id)
            ) AS c
            WHERE EXISTS (SELECT 1 FROM vault WHERE vault.id = c.vault_id)
            GROUP BY c.vault_id, c.tags HAVING sum(c.sign) <> 0 ORDER BY c.vault_id, c.tags
            ON CONFLICT (vault_id, tags) DO UPDATE SET active = s.active + EXCLUDED.active;
    END IF;
    RETURN NULL;
END
$$;

CREATE TRIGGER memory_tags_insert AFTER INSERT ON memory
    REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION memvault_count_memory_tags();
CREATE TRIGGER memory_tags_delete AFTER DELETE ON memory
    REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION memvault_count_memory_tags();
CREATE TRIGGER memory_tags_update AFTER UPDATE ON memory
    REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION memvault_count_memory_tags();

INSERT INTO memory_tag_stats (vault_id, tags, active)
    SELECT vault_id, tags, count(*) FROM memory WHERE status = 'active' GROUP BY vault_id, tags;

CREATE INDEX memory_active_tags ON memory (vault_id, tags, created_at DESC, id DESC) WHERE status = 'active';
DROP INDEX memory_vault_tags;
