-- Per-vault lexeme counts of archived messages, kept exact by statement triggers, so that archive
-- search ranks its keyword side as recall does (BM25's idf × ts_rank per query lexeme, recall/store.py)
-- instead of by raw cover density, where a common word weighs as much as a rare one. Counted over
-- every message row of the vault (old revisions' too), as recall counts every memory.
-- depends: 0017_archive_message_index

CREATE TABLE archive_lexeme_stats (
    vault_id uuid NOT NULL REFERENCES vault (id) ON DELETE CASCADE,
    lexeme   text NOT NULL,
    ndoc     integer NOT NULL,
    PRIMARY KEY (vault_id, lexeme)
);

CREATE TABLE archive_text_stats (
    vault_id uuid PRIMARY KEY REFERENCES vault (id) ON DELETE CASCADE,
    ndoc     integer NOT NULL
);

-- What new rows bring and old rows take away, in one upsert per table ordered by key, so that
-- concurrent writers lock the same rows in the same order (as memvault_apply_lexemes does).
CREATE FUNCTION memvault_archive_apply_lexemes(vault_ids uuid[], searches tsvector[], signs integer[]) RETURNS void
    LANGUAGE sql AS $$
    INSERT INTO archive_text_stats AS s (vault_id, ndoc)
        SELECT d.vault_id, sum(d.sign) FROM unnest(vault_ids, signs) AS d (vault_id, sign)
        WHERE EXISTS (SELECT 1 FROM vault WHERE vault.id = d.vault_id)  -- not for a vault being deleted
        GROUP BY d.vault_id ORDER BY d.vault_id
        ON CONFLICT (vault_id) DO UPDATE SET ndoc = s.ndoc + EXCLUDED.ndoc;
    INSERT INTO archive_lexeme_stats AS s (vault_id, lexeme, ndoc)
        SELECT d.vault_id, lexeme, sum(d.sign)
        FROM unnest(vault_ids, searches, signs) AS d (vault_id, search, sign),
             unnest(tsvector_to_array(d.search)) AS lexeme
        WHERE EXISTS (SELECT 1 FROM vault WHERE vault.id = d.vault_id)
        GROUP BY d.vault_id, lexeme
        ORDER BY d.vault_id, lexeme
        ON CONFLICT (vault_id, lexeme) DO UPDATE SET ndoc = s.ndoc + EXCLUDED.ndoc;
$$;

CREATE FUNCTION memvault_archive_count_lexemes() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        PERFORM memvault_archive_apply_lexemes(array_agg(vault_id), array_agg(search), array_agg(1)) FROM new_rows;
    ELSIF TG_OP = 'DELETE' THEN
        PERFORM memvault_archive_apply_lexemes(array_agg(vault_id), array_agg(search), array_agg(-1)) FROM old_rows;
    ELSE
        -- Messages are immutable in use; a repair that rewrites a text moves its lexemes, not the row count.
        PERFORM memvault_archive_apply_lexemes(array_agg(c.vault_id), array_agg(c.search), array_agg(c.sign))
        FROM (
            SELECT o.vault_id, o.search, -1 AS sign FROM old_rows o JOIN new_rows n ON n.id = o.id
            WHERE n.search IS DISTINCT FROM o.search
            UNION ALL
            SELECT n.vault_id, n.search, 1 FROM old_rows o JOIN new_rows n ON n.id = o.id
            WHERE n.search IS DISTINCT FROM o.search
        ) AS c;
        -- (the -1 and +1 of each changed row cancel in archive_text_stats)
    END IF;
    RETURN NULL;
END
$$;

CREATE TRIGGER archive_message_lexemes_insert AFTER INSERT ON archive_message
    REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION memvault_archive_count_lexemes();
CREATE TRIGGER archive_message_lexemes_delete AFTER DELETE ON archive_message
    REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION memvault_archive_count_lexemes();
CREATE TRIGGER archive_message_lexemes_update AFTER UPDATE ON archive_message
    REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION memvault_archive_count_lexemes();

INSERT INTO archive_lexeme_stats (vault_id, lexeme, ndoc)
    SELECT vault_id, lexeme, count(*) FROM archive_message, unnest(tsvector_to_array(search)) AS lexeme
    GROUP BY vault_id, lexeme;
INSERT INTO archive_text_stats (vault_id, ndoc) SELECT vault_id, count(*) FROM archive_message GROUP BY vault_id;
