"""The SQL of archive search's keyword side, ranked as recall ranks memories (recall/store.py, and
docs/research-fusion.md): each query lexeme weighs its BM25 idf from the vault's own message counts
(archive_lexeme_stats, kept exact by triggers, migration 0032) times its ts_rank in the message's
search vector (its date and text at weight A, the message before it at weight D). A word most
messages share barely counts; a rare one decides.

Parameters: $1 vault id, $2 query; then each statement's own."""

from __future__ import annotations

from typing import Final

from memvault_vault.recall import keyword_sql
from memvault_vault.recall.keyword_sql import CUT, KEYWORD_RANK_BUDGET, RANK, RARE_LEXEME_DOCS

TERMS: Final = keyword_sql.terms("archive")
FULL_RANK_BUDGET = KEYWORD_RANK_BUDGET
"""Messages (counted, an upper bound) of the rarest clauses whose every match is ranked ($6)."""
COMMON_WORD_SAMPLE = 1_000
"""Messages ranked of each clause beyond FULL_RANK_BUDGET ($7): its first matches, not its best."""
DENSE_SHARE = 0.08
"""A lexeme in at least this share of all archived messages ($8) is sampled by reading the table in
order until COMMON_WORD_SAMPLE messages hold it (about 1 / share rows a match), not through the full-text
index, which collects every match before it returns the first: at 1,000,000 messages a word in 200,000
of them took 31 ms that way and 4 ms this way (tests/bench/archive_search_sql.py)."""

# Which messages are ranked, as recall chooses memories: lexemes in more than a tenth of the vault's
# messages (and more than 100) are left out of the match unless the query has nothing rarer; when the
# lexemes left would still match more than KEYWORD_RANK_BUDGET messages, only those holding lexemes of two
# different query words, or one rare lexeme, are ranked (ranking reads every matched row).
#
# At scale (tests/bench/archive_search.py, 1,000,000 messages) even that may be hundreds of thousands
# of rows: a query of one common word, or pairs of common words. So the chosen clauses (a lexeme, or a
# pair of them) are taken rarest first by their exact counts (a pair counts as its rarer lexeme, an
# upper bound), and while those counts summed stay within FULL_RANK_BUDGET every message matching them
# is ranked; of each clause beyond it only COMMON_WORD_SAMPLE messages are. FULL_RANK_BUDGET is
# KEYWORD_RANK_BUDGET: wherever recall's rule above ranks every match with counts below it, so does this, and
# a vault whose query clauses match fewer messages than that ranks exactly as recall does.
_MATCHING = f"""
    {CUT},
    narrow AS MATERIALIZED (
        SELECT (SELECT coalesce(sum(df), 0) FROM (SELECT DISTINCT lexeme, df FROM cut) AS c) > {KEYWORD_RANK_BUDGET}
           AND (SELECT count(DISTINCT word) FROM cut) >= 2 AS pairs
    ),
    clauses AS (
        SELECT DISTINCT clause, bound, pair FROM (
            SELECT literal AS clause, df AS bound, false AS pair FROM cut, narrow WHERE NOT narrow.pairs
            UNION ALL
            SELECT '(' || a.literal || ' & ' || b.literal || ')', least(a.df, b.df), true
            FROM cut a JOIN cut b ON a.lexeme < b.lexeme AND a.word <> b.word, narrow WHERE narrow.pairs
            UNION ALL
            SELECT literal, df, false FROM cut, narrow WHERE narrow.pairs AND df <= {RARE_LEXEME_DOCS}
        ) AS c
    ),
    split AS MATERIALIZED (
        SELECT clause, clause::tsquery AS query, sum(bound) OVER (ORDER BY bound, clause) <= $6 AS whole,
               -- one lexeme in so many rows of the table that reading it in order finds a sample sooner
               NOT pair AND cardinality($3::text[]) = 0 AND cardinality($4::text[]) = 0
                 AND bound >= $8 * greatest((SELECT reltuples FROM pg_class WHERE oid = 'archive_message'::regclass),
                                       (SELECT max(total) FROM terms), 1)
                 AS dense
        FROM clauses
    ),
    every AS MATERIALIZED (SELECT (string_agg(clause, ' | ') FILTER (WHERE whole))::tsquery AS query FROM split)
"""  # noqa: S608 - constants only

# Listed by a head revision whose conversation carries the tags ($3 all of them, $4 any of them).
# OFFSET 0 keeps it a probe of each matched message: a plan made for any parameters (asyncpg's prepared
# statements get one after five calls) otherwise turns it into a join starting from the conversations
# matching the tags, without tags every message of the vault (2.5 s at 200,000 messages for a word in
# 1,400 of them; tests/bench/archive_search_sql.py).
_ON_HEAD = """
    EXISTS (SELECT 1 FROM archive_revision_message rm
            JOIN archive_conversation c ON c.id = rm.conversation_id AND rm.revision = c.head_revision
            WHERE rm.message_id = {row}.id AND c.vault_id = $1 AND c.tags @> $3::text[]
              AND (cardinality($4::text[]) = 0 OR c.tags && $4::text[])
            OFFSET 0)
"""
_SAMPLED_ON_HEAD = f"(cardinality($3::text[]) = 0 AND cardinality($4::text[]) = 0 OR {_ON_HEAD.format(row='m')})"

KEYWORD_CANDIDATES: Final = f"""
    WITH {TERMS}, {_MATCHING},
    matched AS (
        SELECT m.id, {RANK} AS rank FROM archive_message m, every
        WHERE m.vault_id = $1 AND m.search @@ every.query
        UNION ALL
        SELECT s.id, s.rank FROM split CROSS JOIN LATERAL (
            SELECT m.id, {RANK} AS rank FROM archive_message m, every
            WHERE NOT split.whole AND NOT split.dense AND m.vault_id = $1 AND m.search @@ split.query
              AND NOT coalesce(m.search @@ every.query, false) AND {_SAMPLED_ON_HEAD}
            LIMIT $7
        ) AS s
        UNION ALL
        SELECT s.id, s.rank FROM split CROSS JOIN LATERAL (
            SELECT m.id, {RANK} AS rank FROM archive_message m, every
            WHERE NOT split.whole AND split.dense AND m.vault_id = $1 AND coalesce(m.search @@ split.query, false)
              AND NOT coalesce(m.search @@ every.query, false)
            LIMIT $7
        ) AS s
    ),
    -- Each match is ranked where it is read, so only (id, rank) is sorted, not its search vector. A message
    -- two sampled clauses both hold comes twice, with one rank: once sorted, its rows are neighbours.
    ranked AS (
        SELECT DISTINCT ON (rank, id) id, rank FROM matched
        ORDER BY rank DESC, id
        OFFSET 0
    ),
    best AS (SELECT r.id, r.rank FROM ranked r WHERE {_ON_HEAD.format(row="r")} LIMIT $5)
    SELECT r.id::text AS id, r.rank,
           CASE WHEN EXISTS (SELECT 1 FROM archive_message_index s WHERE s.message_id = m.id AND s.state = 'indexed')
                THEN NULL
                ELSE coalesce(memvault_index_text(m.text, coalesce(m.context, ''), m.created_at), m.text) END AS pending
    FROM best r JOIN archive_message m ON m.id = r.id
    ORDER BY r.rank DESC, r.id
"""  # noqa: S608 - joins constant SQL fragments, no input
"""(id, rank, text to embed when the index does not hold the message yet) of the best keyword matches;
$3 tags all, $4 tags any, $5 how many, $6 FULL_RANK_BUDGET, $7 COMMON_WORD_SAMPLE, $8 DENSE_SHARE.

Every match is ranked first, and only then are the best checked against head revisions and the tags,
in rank order until $5 pass (OFFSET 0 keeps the check above the sort): a probe for each of the first
few dozen instead of one for each of thousands of matches (9 ms of 18 for a word in 1,172 of
1,000,000 messages). A sampled clause keeps its check inside the sample when tags filter, so a rare
tag still finds its share of a common word."""
RANKED_HITS: Final = f"""
    WITH {TERMS}
    SELECT m.id::text AS id, m.text, m.role, h.conversation_id, h.title, h.head_revision, h.position,
           coalesce(m.created_at, h.created_at) AS created_at, {RANK} AS rank
    FROM unnest($5::uuid[]) AS wanted (id)
    JOIN archive_message m ON m.id = wanted.id AND m.vault_id = $1
    CROSS JOIN LATERAL (
        SELECT c.id::text AS conversation_id, c.title, c.head_revision, rm.position, c.created_at
        FROM archive_revision_message rm
        JOIN archive_conversation c ON c.id = rm.conversation_id AND rm.revision = c.head_revision
        WHERE rm.message_id = m.id AND c.vault_id = $1 AND c.tags @> $3::text[]
          AND (cardinality($4::text[]) = 0 OR c.tags && $4::text[])
        ORDER BY rm.position
        LIMIT 1
    ) AS h
"""  # noqa: S608 - joins constant SQL fragments, no input
"""These messages ($5) as hits of head revisions with the tags, each with its keyword rank (0 when it
shares no word with the query), as recall ranks the memories only its vector side found. Driven from
the ids, one message at a time (LATERAL): a plan made for any parameters (asyncpg's prepared statements
get one after five calls) otherwise starts from the conversations matching the tags, which without tags
is every message of the vault (seconds at 1,000,000). $5 must not repeat an id."""
