-- What search sees of a memory (docs/research-fusion.md):
-- - the keyword document: its date and text at weight A, and the item before it in a
--   conversation or document import (its context) at weight D;
-- - the text the indexer embeds: the text alone, or for an item of an import that was sent as a
--   sequence, its date, text and context; index_hash identifies that text;
-- - per-vault lexeme counts, kept exact by statement triggers, for IDF-weighted keyword ranking.
-- depends: 0003_index_state

CREATE FUNCTION memvault_date_words(moment timestamptz) RETURNS text
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    -- "8 May 2023": how people write a date in a question. English month names, UTC.
    AS $$ SELECT to_char(moment AT TIME ZONE 'UTC', 'FMDD FMMonth YYYY') $$;

CREATE FUNCTION memvault_index_text(content text, context text, valid_from timestamptz) RETURNS text
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    AS $$ SELECT CASE WHEN context IS NULL THEN content
                      ELSE memvault_date_words(valid_from) || ' ' || content
                           || CASE WHEN context = '' THEN '' ELSE ' ' || context END END $$;

ALTER TABLE memory ADD COLUMN context text;
COMMENT ON COLUMN memory.context IS
    'The previous item of a sequence import (empty for its first item); NULL for memories written on their own';

DROP INDEX memory_search;
ALTER TABLE memory DROP COLUMN search;
ALTER TABLE memory ADD COLUMN search tsvector GENERATED ALWAYS AS (
    setweight(to_tsvector('english', memvault_date_words(valid_from) || ' ' || content), 'A')
    || setweight(to_tsvector('english', coalesce(context, '')), 'D')
) STORED;
CREATE INDEX memory_search ON memory USING gin (search);

ALTER TABLE memory ADD COLUMN index_hash text GENERATED ALWAYS AS (
    md5(memvault_index_text(content, context, valid_from))
) STORED;

CREATE TABLE vault_lexeme_stats (
    vault_id uuid NOT NULL REFERENCES vault (id) ON DELETE CASCADE,
    lexeme   text NOT NULL,
    ndoc     integer NOT NULL,
    PRIMARY KEY (vault_id, lexeme)
);

CREATE TABLE vault_text_stats (
    vault_id uuid PRIMARY KEY REFERENCES vault (id) ON DELETE CASCADE,
    ndoc     integer NOT NULL
);

-- Adds what new rows bring and takes away what old rows had, in one upsert ordered by lexeme so
-- that concurrent writers lock the same rows in the same order.
CREATE FUNCTION memvault_count_memories(vault_ids uuid[], sign integer) RETURNS void LANGUAGE sql AS $$
    INSERT INTO vault_text_stats AS s (vault_id, ndoc)
        SELECT v, count(*) * sign FROM unnest(vault_ids) AS v
        WHERE EXISTS (SELECT 1 FROM vault WHERE vault.id = v)  -- not for a vault being deleted
        GROUP BY v ORDER BY v
        ON CONFLICT (vault_id) DO UPDATE SET ndoc = s.ndoc + EXCLUDED.ndoc;
$$;

CREATE FUNCTION memvault_apply_lexemes(vault_ids uuid[], searches tsvector[], signs integer[]) RETURNS void
    LANGUAGE sql AS $$
    INSERT INTO vault_lexeme_stats AS s (vault_id, lexeme, ndoc)
        SELECT d.vault_id, lexeme, sum(d.sign)
        FROM unnest(vault_ids, searches, signs) AS d (vault_id, search, sign),
             unnest(tsvector_to_array(d.search)) AS lexeme
        WHERE EXISTS (SELECT 1 FROM vault WHERE vault.id = d.vault_id)  -- not for a vault being deleted
        GROUP BY d.vault_id, lexeme
        ORDER BY d.vault_id, lexeme
        ON CONFLICT (vault_id, lexeme) DO UPDATE SET ndoc = s.ndoc + EXCLUDED.ndoc;
$$;

CREATE FUNCTION memvault_count_lexemes() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        PERFORM memvault_apply_lexemes(array_agg(vault_id), array_agg(search), array_agg(1)) FROM new_rows;
        PERFORM memvault_count_memories(array_agg(vault_id), 1) FROM new_rows;
    ELSIF TG_OP = 'DELETE' THEN
        PERFORM memvault_apply_lexemes(array_agg(vault_id), array_agg(search), array_agg(-1)) FROM old_rows;
        PERFORM memvault_count_memories(array_agg(vault_id), -1) FROM old_rows;
    ELSE
        PERFORM memvault_apply_lexemes(array_agg(c.vault_id), array_agg(c.search), array_agg(c.sign))
        FROM (
            SELECT o.vault_id, o.search, -1 AS sign FROM old_rows o JOIN new_rows n ON n.id = o.id
            WHERE n.search IS DISTINCT FROM o.search
            UNION ALL
            SELECT n.vault_id, n.search, 1 FROM old_rows o JOIN new_rows n ON n.id = o.id
            WHERE n.search IS DISTINCT FROM o.search
        ) AS c;
    END IF;
    RETURN NULL;
END
$$;

CREATE TRIGGER memory_lexemes_insert AFTER INSERT ON memory
    REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION memvault_count_lexemes();
CREATE TRIGGER memory_lexemes_delete AFTER DELETE ON memory
    REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION memvault_count_lexemes();
CREATE TRIGGER memory_lexemes_update AFTER UPDATE ON memory
    REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION memvault_count_lexemes();

INSERT INTO vault_lexeme_stats (vault_id, lexeme, ndoc)
    SELECT vault_id, lexeme, count(*) FROM memory, unnest(tsvector_to_array(search)) AS lexeme
    GROUP BY vault_id, lexeme;
INSERT INTO vault_text_stats (vault_id, ndoc) SELECT vault_id, count(*) FROM memory GROUP BY vault_id;
