"""The SQL fragments keyword ranking shares between recall (memories, recall/store.py) and archive search
(messages, archive/keyword_sql.py): the query's lexemes weighed by BM25's idf from the vault's own
counts (kept exact by triggers), a document's rank as the sum of idf × ts_rank over them, and which
lexemes take part in the match. See docs/research-fusion.md."""

from __future__ import annotations

from typing import Final

KEYWORD_RANK_BUDGET: Final = 5000
"""Above this many (estimated) rows, only documents with two query lexemes or a rare one are ranked."""
RARE_LEXEME_DOCS: Final = 100
"""A lexeme in at most this many documents of the vault is rare: one is enough to be ranked."""

_STATS: Final = {
    "memory": ("vault_text_stats", "vault_lexeme_stats"),
    "archive": ("archive_text_stats", "archive_lexeme_stats"),
}


def terms(documents: str) -> str:
    """`terms`, a CTE of the query's ($2) lexemes in vault $1 of `documents` ("memory" or "archive"): each
    with its literal, tsquery, document count (df), the vault's document total and its idf. MATERIALIZED
    keeps Postgres from running the list again for every row ranked."""
    text_stats, lexeme_stats = _STATS[documents]
    return f"""
    terms AS MATERIALIZED (
        SELECT q.lexeme, quote_literal(q.lexeme) AS literal, quote_literal(q.lexeme)::tsquery AS query,
               coalesce(s.ndoc, 0) AS df, total.n AS total,
               ln(1 + (greatest(total.n, coalesce(s.ndoc, 0)) - coalesce(s.ndoc, 0) + 0.5)
                      / (coalesce(s.ndoc, 0) + 0.5)) AS idf
        FROM (SELECT DISTINCT unnest(tsvector_to_array(to_tsvector('english', $2))) AS lexeme) AS q
        CROSS JOIN (SELECT coalesce(max(ndoc), 0) AS n FROM {text_stats} WHERE vault_id = $1) AS total
        LEFT JOIN {lexeme_stats} AS s ON s.vault_id = $1 AND s.lexeme = q.lexeme
    )
"""  # noqa: S608 - table names from the constant table above


RANK: Final = "coalesce((SELECT sum(terms.idf * ts_rank(m.search, terms.query)) FROM terms), 0)"
"""The keyword rank of row `m` (its `search` vector) against `terms`."""

CUT: Final = """
    cut AS (
        SELECT terms.lexeme, literal, df, words.n AS word FROM terms
        LEFT JOIN (
            SELECT DISTINCT w.n, l.lexeme
            FROM regexp_split_to_table($2, '[[:space:]]+') WITH ORDINALITY AS w (word, n),
                 unnest(tsvector_to_array(to_tsvector('english', w.word))) AS l (lexeme)
        ) AS words ON words.lexeme = terms.lexeme
        WHERE df > 0 AND (df <= greatest(0.1 * total, 100) OR df = (SELECT min(df) FROM terms WHERE df > 0))
    )
"""
"""`cut`, the lexemes of `terms` that take part in the match, each with the number of the query's word it
came from: those in more than a tenth of the vault's documents (and more than 100) are left out, unless
the query has nothing rarer, so a query of common words still finds something. (The lexemes of one word,
like 'backup-drive' -> backup-dr, backup, drive, share its number: a pair of them narrows nothing.)"""
