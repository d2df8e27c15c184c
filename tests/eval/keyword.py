"""Keyword retrieval for the evaluation: a true Okapi BM25 baseline and Postgres full-text ranks.

`PostgresFullText` reproduces the vault's keyword side exactly (english configuration, the OR
of the query's lexemes, `ts_rank` / `ts_rank_cd`) in a scratch database it creates and drops.
"""

from __future__ import annotations

import math
import re
import uuid
from collections import Counter
from collections.abc import Sequence
from types import TracebackType

import asyncpg
import numpy as np
from numpy.typing import NDArray

_WORD = re.compile(r"[a-z0-9]+(?:'[a-z]+)?")
# A short, conventional English stop list (the function words of Lucene's default set and a few
# more); BM25's IDF already discounts common words, this only keeps "the"/"a" out of short queries.
STOPWORDS = frozenset(
    [
        "a",
        "an",
        "and",
        "are",
        "as",
        "at",
        "be",
        "but",
        "by",
        "did",
        "do",
        "does",
        "for",
        "from",
        "had",
        "has",
        "have",
        "he",
        "her",
        "his",
        "how",
        "i",
        "if",
        "in",
        "into",
        "is",
        "it",
        "its",
        "me",
        "my",
        "no",
        "not",
        "of",
        "on",
        "or",
        "our",
        "she",
        "so",
        "such",
        "that",
        "the",
        "their",
        "them",
        "then",
        "there",
        "these",
        "they",
        "this",
        "to",
        "was",
        "we",
        "were",
        "what",
        "when",
        "where",
        "which",
        "who",
        "whom",
        "why",
        "will",
        "with",
        "would",
        "you",
        "your",
    ]
)


def tokenize(text: str) -> list[str]:
    """Lower-cased word tokens without stop words (no stemming: plain BM25)."""
    return [token for token in _WORD.findall(text.lower()) if token not in STOPWORDS]


class Bm25:
    """Okapi BM25 (k1 = 1.2, b = 0.75, non-negative Lucene IDF) over a fixed list of documents."""

    def __init__(self, documents: Sequence[str], *, k1: float = 1.2, b: float = 0.75) -> None:
        self._docs = [Counter(tokenize(doc)) for doc in documents]
        lengths = np.array([sum(doc.values()) for doc in self._docs], dtype=np.float64)
        average = float(lengths.mean()) if len(lengths) else 1.0
        self._norm = k1 * (1.0 - b + b * lengths / max(average, 1e-9))
        self._k1 = k1
        df: Counter[str] = Counter()
        for doc in self._docs:
            df.update(doc.keys())
        n = len(self._docs)
        self._idf = {term: math.log(1.0 + (n - count + 0.5) / (count + 0.5)) for term, count in df.items()}
        self._postings: dict[str, list[tuple[int, int]]] = {}
        for index, doc in enumerate(self._docs):
            for term, tf in doc.items():
                self._postings.setdefault(term, []).append((index, tf))

    def scores(self, query: str) -> NDArray[np.float64]:
        """BM25 score of every document for `query` (0 where no term matches)."""
        out = np.zeros(len(self._docs), dtype=np.float64)
        for term in set(tokenize(query)):
            idf = self._idf.get(term)
            if idf is None:
                continue
            for index, tf in self._postings[term]:
                out[index] += idf * tf * (self._k1 + 1.0) / (tf + self._norm[index])
        return out

    def search(self, query: str, limit: int) -> list[tuple[int, float]]:
        """The best `limit` documents with a positive score, as (index, score), best first."""
        scores = self.scores(query)
        order = np.argsort(-scores, kind="stable")[:limit]
        return [(int(i), float(scores[i])) for i in order if scores[i] > 0.0]


# The vault's keyword query: the OR of the query's english lexemes. Casting the joined lexemes
# straight to tsquery avoids stemming them a second time.
OR_QUERY_SQL = (
    "(SELECT coalesce(string_agg(quote_literal(lexeme), ' | '), '')::tsquery"
    " FROM unnest(tsvector_to_array(to_tsvector('english', $2))) AS lexeme)"
)

# The IDF-weighted rank: sum over the query's lexemes of idf(lexeme) × ts_rank of that lexeme
# alone, over the documents that match any of them. idf = ln(1 + (N − df + 0.5) / (df + 0.5)) is
# BM25's, with df and N read from per-collection statistics (the vault keeps the same per vault,
# refreshed by a maintenance job; a lexeme missing from the statistics counts as df = 0).
IDF_RANK_SQL = """
WITH terms AS MATERIALIZED (
    SELECT quote_literal(query_lexemes.lexeme) AS literal,
           coalesce(df.n, 0) AS df,
           size.n AS total,
           ln(1 + (size.n - coalesce(df.n, 0) + 0.5) / (coalesce(df.n, 0) + 0.5)) AS idf
    FROM (SELECT DISTINCT unnest(tsvector_to_array(to_tsvector('english', $2))) AS lexeme) AS query_lexemes
    CROSS JOIN (SELECT n FROM collection_size WHERE collection = $1) AS size
    LEFT JOIN lexeme_df AS df ON df.collection = $1 AND df.lexeme = query_lexemes.lexeme
),
matching AS MATERIALIZED (
    SELECT coalesce(string_agg(literal, ' | '), '')::tsquery AS q
    FROM terms
    WHERE df <= $6::float8 * total OR df = (SELECT min(df) FROM terms)
)
SELECT doc.id,
       (SELECT sum(terms.idf * {function}($3::float4[], doc.tsv, terms.literal::tsquery, $4::int)) FROM terms)
           AS rank
FROM doc, matching
WHERE doc.collection = $1 AND doc.tsv @@ matching.q
ORDER BY rank DESC, doc.id LIMIT $5
"""


class PostgresFullText:
    """A scratch database holding keyword documents as weighted tsvectors, ranked like the vault."""

    def __init__(self, dsn: str = "postgresql://postgres@127.0.0.1:5432/postgres") -> None:
        self._admin_dsn = dsn
        self._database = f"eval_scratch_{uuid.uuid4().hex[:8]}"
        self._connection: asyncpg.Connection | None = None

    async def __aenter__(self) -> PostgresFullText:
        admin = await asyncpg.connect(self._admin_dsn)
        try:
            await admin.execute(f'CREATE DATABASE "{self._database}"')
        finally:
            await admin.close()
        base, _, _ = self._admin_dsn.rpartition("/")
        self._connection = await asyncpg.connect(f"{base}/{self._database}")
        await self._connection.execute(
            "CREATE TABLE doc (collection text, id int, tsv tsvector, PRIMARY KEY (collection, id))"
        )
        await self._connection.execute("CREATE INDEX doc_tsv ON doc USING gin (tsv)")
        await self._connection.execute(
            "CREATE TABLE lexeme_df (collection text, lexeme text, n int, PRIMARY KEY (collection, lexeme))"
        )
        await self._connection.execute("CREATE TABLE collection_size (collection text PRIMARY KEY, n int)")
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        if self._connection is not None:
            await self._connection.close()
        admin = await asyncpg.connect(self._admin_dsn)
        try:
            await admin.execute(f'DROP DATABASE IF EXISTS "{self._database}" WITH (FORCE)')
        finally:
            await admin.close()

    @property
    def connection(self) -> asyncpg.Connection:
        assert self._connection is not None, "use PostgresFullText as an async context manager"
        return self._connection

    async def load(self, collection: str, main: Sequence[str], context: Sequence[str] | None = None) -> None:
        """Store documents: `main` text at weight A, optional `context` text at weight D."""
        rows = [(collection, i, text, context[i] if context else "") for i, text in enumerate(main)]
        await self.connection.executemany(
            "INSERT INTO doc VALUES ($1, $2, setweight(to_tsvector('english', $3), 'A')"
            " || setweight(to_tsvector('english', $4), 'D'))",
            rows,
        )
        await self.connection.execute(
            "INSERT INTO lexeme_df SELECT collection, lexeme, count(*) FROM doc,"
            " unnest(tsvector_to_array(tsv)) AS lexeme WHERE collection = $1 GROUP BY collection, lexeme",
            collection,
        )
        await self.connection.execute(
            "INSERT INTO collection_size SELECT $1, count(*) FROM doc WHERE collection = $1", collection
        )

    async def search(
        self,
        collection: str,
        query: str,
        limit: int,
        *,
        function: str = "ts_rank",
        normalization: int = 0,
        weights: tuple[float, float, float, float] = (0.1, 0.2, 0.4, 1.0),
        idf: bool = False,
        max_df_fraction: float = 1.0,
    ) -> list[tuple[int, float]]:
        """The vault's keyword candidates: (index, rank), best first.

        With `idf=True` the rank is the sum over the query's lexemes of idf(lexeme) × rank of
        that lexeme alone: Postgres ranks have no document-frequency term, this adds one.
        `max_df_fraction` < 1 finds candidates only through lexemes in at most that share of the
        documents (or the query's rarest lexeme), which bounds the work on large vaults; every
        lexeme still counts in the rank of the candidates found.
        """
        if function not in {"ts_rank", "ts_rank_cd"}:
            raise ValueError(function)
        if idf:
            rows = await self.connection.fetch(
                IDF_RANK_SQL.format(function=function),
                collection,
                query,
                list(weights),
                normalization,
                limit,
                max_df_fraction,
            )
            return [(int(row["id"]), float(row["rank"])) for row in rows]
        rows = await self.connection.fetch(
            f"SELECT id, {function}($3::float4[], tsv, q, $4::int) AS rank FROM doc, {OR_QUERY_SQL} AS query(q)"  # noqa: S608
            " WHERE collection = $1 AND tsv @@ q ORDER BY rank DESC, id LIMIT $5",
            collection,
            query,
            list(weights),
            normalization,
            limit,
        )
        return [(int(row["id"]), float(row["rank"])) for row in rows]
