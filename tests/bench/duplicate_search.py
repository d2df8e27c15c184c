"""The duplicate check's search of the vector store alone: what one text's search costs in a vault of a given
size, and how much of what an exact search finds an HNSW search with a smaller `hnsw_ef` misses.

    python -m tests.bench.duplicate_search --points 9000,20000 [--queries 500]

For each size, the bundled model embeds that many memories of the benchmark corpus (tests/bench/corpus.py,
the texts `tests.bench.ab` imports) plus `--queries` more, and an `EdgeVectorStore` in a temporary folder
takes the first ones in upserts of 500 and builds its index (`optimize`, as the indexer does once writes
pause). Then the shard is opened on its own and searched as `search_many` searches it (batches of 64, ten
nearest, the vault's tenant filter) for the other texts, an import's new ones: exactly, and with each
`hnsw_ef`. Per setting: milliseconds of one search (best of three rounds), and the neighbours at or above
each cosine the duplicate rules read (domain/duplicates.py: 0.70 negated, 0.80 similar, 0.93 near
duplicate) that the exact search found and this one did not. The shard is searched on one thread, as the
indexer's (`search_threads` 1); Qdrant Edge searches a vault exactly anyway while its points take less
than `full_scan_threshold` (about 6,600 vectors of 384 floats), whatever `hnsw_ef` says.
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import numpy as np

from memvault_indexer.edge_store import EdgeVectorStore
from memvault_indexer.embedder import OnnxMiniLMEmbedder
from memvault_indexer.points import VECTOR_NAME, IndexedMemory
from tests.bench import corpus

CORPUS_SEED = 11
"""tests.bench.ab's."""
THRESHOLDS = (0.70, 0.80, 0.93)
BATCH = 64
LIMIT = 10
"""duplicates.SIMILAR_PER_TEXT."""


async def build(folder: Path, vault: str, vectors: np.ndarray) -> Path:
    store = EdgeVectorStore(folder, model="all-minilm-l6-v2", dimension=vectors.shape[1])
    await store.ensure_collection()
    for start in range(0, len(vectors), 500):
        part = vectors[start : start + 500]
        await store.upsert([IndexedMemory(uuid.uuid4(), vault, v, f"{start + i:064x}") for i, v in enumerate(part)])
    await store.optimize()
    await store.close()
    return store.path


def searches(shard: Any, vault: str, queries: np.ndarray, params: Any) -> tuple[float, list[list[Any]]]:
    from qdrant_edge import FieldCondition, Filter, MatchValue, Query, QueryBatchRequest, QueryRequest

    where = Filter(must=[FieldCondition("vault_id", match=MatchValue(vault))])
    batches = [
        QueryBatchRequest(
            [
                QueryRequest(
                    limit=LIMIT,
                    query=Query.Nearest(q.tolist(), using=VECTOR_NAME),
                    filter=where,
                    params=params,
                    with_payload=False,
                    with_vector=False,
                )
                for q in queries[start : start + BATCH]
            ]
        )
        for start in range(0, len(queries), BATCH)
    ]
    best, found = float("inf"), []
    for _ in range(4):  # the first round warms up
        started = time.perf_counter()
        found = [hits for batch in batches for hits in shard.query_batch(batch)]
        best = min(best, time.perf_counter() - started)
    return best / len(queries), found


def missed(exact: list[list[Any]], approximate: list[list[Any]], threshold: float) -> tuple[int, int]:
    wanted = missing = 0
    for want, got in zip(exact, approximate, strict=True):
        ids = {p.id for p in want if p.score >= threshold}
        wanted += len(ids)
        missing += len(ids - {p.id for p in got if p.score >= threshold})
    return missing, wanted


def measure(points: int, queries: int, efs: list[int], embedder: OnnxMiniLMEmbedder) -> None:
    from qdrant_edge import EdgeShard, SearchParams

    texts = corpus.memories(points + queries, seed=CORPUS_SEED)
    vectors = np.asarray(embedder.embed(texts), dtype=np.float32)
    vault = str(uuid.uuid4())
    with tempfile.TemporaryDirectory() as folder:
        path = asyncio.run(build(Path(folder), vault, vectors[:points]))
        shard = EdgeShard.load(str(path))
        settings = {"exact": SearchParams(exact=True), **{f"hnsw_ef {ef}": SearchParams(hnsw_ef=ef) for ef in efs}}
        results = {name: searches(shard, vault, vectors[points:], params) for name, params in settings.items()}
        shard.close()
    exact = results["exact"][1]
    for name, (seconds, found) in results.items():
        cells = [f"{seconds * 1000:.3f}"]
        for threshold in THRESHOLDS:
            missing, wanted = missed(exact, found, threshold)
            cells.append(f"{missing} of {wanted}")
        print(f"| {points:,} | {name} | " + " | ".join(cells) + " |", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m tests.bench.duplicate_search", description=__doc__)
    parser.add_argument("--points", default="9000,20000", help="vault sizes, comma-separated (9000,20000)")
    parser.add_argument("--queries", type=int, default=500, help="texts searched for, an import's (500)")
    parser.add_argument("--ef", default="128,64,32", help="hnsw_ef values (128, the indexer's, then 64 and 32)")
    args = parser.parse_args()
    embedder = OnnxMiniLMEmbedder(threads=2)
    missed_columns = " | ".join(f"missed of the exact search's ≥ {t}" for t in THRESHOLDS)
    print(f"| points | search | ms per text | {missed_columns} |")
    print("|---|---|---|---|---|---|")
    for points in (int(p) for p in args.points.split(",")):
        measure(points, args.queries, [int(e) for e in args.ef.split(",")], embedder)


if __name__ == "__main__":
    main()
