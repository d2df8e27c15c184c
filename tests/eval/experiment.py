"""In-process fusion experiments on a LoCoMo-format file (retrieval only, no LLM).

    .venv/bin/python -m tests.eval.experiment [--data PATH] [--out build/eval-fusion.json]

Runs the BM25 and dense baselines, Postgres full-text ranks (needs a Postgres at
MEMVAULT_EVAL_PG_DSN, default postgresql://postgres@127.0.0.1:5432/postgres; a scratch database
is created and dropped) and the fusion variants, on the turns and the facts tracks, and prints
markdown tables. Embeddings are cached under build/eval-cache/ (keyed by text and model).
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from numpy.typing import NDArray

from memvault_indexer.embedder import Embedder, OnnxMiniLMEmbedder
from tests.eval import documents, locomo
from tests.eval.fusion import dense_ranking, reciprocal_rank_fusion, score_fusion
from tests.eval.keyword import Bm25, PostgresFullText
from tests.eval.metrics import METRICS, FactCovers, Judged, mean, per_category, score_ranking, turn_covers

ROOT = Path(__file__).resolve().parents[2]
CACHE = ROOT / "build" / "eval-cache"
HEADLINE = frozenset({1, 2, 3, 4})
TOP = 50
KEYWORD_DEPTH = 100

KeywordHits = list[tuple[int, float]]


def embed_cached(embedder: Embedder, texts: Sequence[str]) -> NDArray[np.float32]:
    """Embeddings of `texts`, from build/eval-cache when the same texts were embedded before."""
    digest = hashlib.sha256(("\x1e".join([embedder.name, *texts])).encode()).hexdigest()[:24]
    path = CACHE / f"{digest}.npy"
    if path.exists():
        cached: NDArray[np.float32] = np.load(path)
        return cached
    vectors = embedder.embed(list(texts))
    CACHE.mkdir(parents=True, exist_ok=True)
    np.save(path, vectors)
    return vectors


@dataclass
class Track:
    """One track of one conversation: documents, how they cover gold ids, and the questions."""

    name: str
    doc_ids: list[str]
    covers: Callable[[str], frozenset[str]]
    questions: list[locomo.Question]
    dense_texts: dict[str, list[str]]
    keyword_texts: dict[str, tuple[list[str], list[str] | None]]
    cosines: dict[str, NDArray[np.float32]] = field(default_factory=dict)
    keyword: dict[str, list[KeywordHits]] = field(default_factory=dict)


def build_tracks(conversations: list[locomo.Conversation]) -> dict[str, list[Track]]:
    """Documents of both tracks in every variant the report compares."""
    turns: list[Track] = []
    facts: list[Track] = []
    for conv in conversations:
        content = documents.turn_texts(conv.turns, dated=False)
        dated = documents.turn_texts(conv.turns, dated=True)
        previous = documents.previous_turns(conv.turns)
        turns.append(
            Track(
                name=conv.sample_id,
                doc_ids=[t.dia_id for t in conv.turns],
                covers=turn_covers,
                questions=conv.questions,
                dense_texts={
                    "content": content,
                    "dated": dated,
                    "content+prev": documents.join_context(content, previous),
                    "dated+prev": documents.join_context(dated, previous),
                },
                keyword_texts={
                    "content": (content, None),
                    "dated": (dated, None),
                    "content+prevD": (content, previous),
                    "dated+prevD": (dated, previous),
                },
            )
        )
        fact_content = documents.fact_texts(conv.facts, dated=False)
        fact_dated = documents.fact_texts(conv.facts, dated=True)
        facts.append(
            Track(
                name=conv.sample_id,
                doc_ids=[f.fact_id for f in conv.facts],
                covers=FactCovers({f.fact_id: f.dia_ids for f in conv.facts}),
                questions=conv.questions,
                dense_texts={"content": fact_content, "dated": fact_dated},
                keyword_texts={"content": (fact_content, None), "dated": (fact_dated, None)},
            )
        )
    return {"turns": turns, "facts": facts}


def compute_dense(tracks: list[Track], embedder: Embedder) -> None:
    for track in tracks:
        queries = embed_cached(embedder, [q.text for q in track.questions])
        for variant, texts in track.dense_texts.items():
            docs = embed_cached(embedder, texts)
            track.cosines[variant] = queries @ docs.T


def compute_bm25(tracks: list[Track]) -> None:
    for track in tracks:
        for variant, (main, context) in track.keyword_texts.items():
            texts = [f"{m} {c}" for m, c in zip(main, context, strict=True)] if context else main
            index = Bm25(texts)
            track.keyword[f"bm25:{variant}"] = [index.search(q.text, KEYWORD_DEPTH) for q in track.questions]


# Candidates are found only through lexemes in at most 10% of the vault's memories (or the
# query's rarest lexeme); every lexeme still counts in the rank. Same quality, bounded cost.
MAX_DF_FRACTION = 0.1
PG_RANKS = [("ts_rank", 0, False), ("ts_rank", 0, True), ("ts_rank_cd", 0, False)]


async def compute_postgres(all_tracks: dict[str, list[Track]], dsn: str) -> None:
    async with PostgresFullText(dsn) as pg:
        for track_name, tracks in all_tracks.items():
            for track in tracks:
                for variant, (main, context) in track.keyword_texts.items():
                    collection = f"{track_name}:{track.name}:{variant}"
                    await pg.load(collection, main, context)
                    for function, normalization, idf in PG_RANKS:
                        name = f"pg:{function}{'+idf' if idf else ''}/{normalization}:{variant}"
                        track.keyword[name] = [
                            await pg.search(
                                collection,
                                q.text,
                                KEYWORD_DEPTH,
                                function=function,
                                normalization=normalization,
                                idf=idf,
                                max_df_fraction=MAX_DF_FRACTION,
                            )
                            for q in track.questions
                        ]


Ranker = Callable[[Track, int], list[int]]


def judge(tracks: list[Track], ranker: Ranker) -> list[Judged]:
    judged: list[Judged] = []
    for track in tracks:
        for qi, question in enumerate(track.questions):
            ranking = [track.doc_ids[i] for i in ranker(track, qi)[:TOP]]
            judged.append(Judged(question.category, score_ranking(ranking, question.evidence, track.covers)))
    return judged


def dense_ranker(variant: str) -> Ranker:
    return lambda track, qi: dense_ranking(track.cosines[variant][qi], TOP)


def keyword_ranker(method: str) -> Ranker:
    return lambda track, qi: [i for i, _ in track.keyword[method][qi]]


def fusion_ranker(
    dense: str, keyword: str, alpha: float, n_dense: int = 50, n_keyword: int = 50, missing: str = "exact"
) -> Ranker:
    def rank(track: Track, qi: int) -> list[int]:
        return score_fusion(
            track.cosines[dense][qi],
            track.keyword[keyword][qi],
            alpha=alpha,
            n_dense=n_dense,
            n_keyword=n_keyword,
            limit=TOP,
            missing_cosine="floor" if missing == "floor" else "exact",
        )

    return rank


def rrf_ranker(dense: str, keyword: str, n_dense: int = 50, n_keyword: int = 50) -> Ranker:
    return lambda track, qi: reciprocal_rank_fusion(
        track.cosines[dense][qi], track.keyword[keyword][qi], n_dense=n_dense, n_keyword=n_keyword, limit=TOP
    )


def paired_bootstrap(
    a: Sequence[float], b: Sequence[float], *, samples: int = 10_000, seed: int = 7
) -> tuple[float, float, float, float]:
    """Mean of a − b, its 95% interval, and the share of resamples where a ≤ b."""
    diff = np.asarray(a, dtype=np.float64) - np.asarray(b, dtype=np.float64)
    rng = np.random.default_rng(seed)
    means = diff[rng.integers(0, len(diff), size=(samples, len(diff)))].mean(axis=1)
    low, high = np.percentile(means, [2.5, 97.5])
    return float(diff.mean()), float(low), float(high), float((means <= 0).mean())


def table(rows: dict[str, dict[str, float]]) -> str:
    header = "| method | " + " | ".join(METRICS) + " | n |"
    lines = [header, "|" + "---|" * (len(METRICS) + 2)]
    for name, values in rows.items():
        cells = " | ".join(f"{values[m]:.3f}" for m in METRICS)
        lines.append(f"| {name} | {cells} | {int(values['n'])} |")
    return "\n".join(lines)


def leave_one_out(tracks: list[Track], candidates: dict[str, Ranker], metric: str) -> dict[str, float]:
    """Pick the best candidate on five conversations, score it on the sixth; repeat for each."""
    per_conv = {name: [judge([t], ranker) for t in tracks] for name, ranker in candidates.items()}
    held_out: list[Judged] = []
    picks: list[str] = []
    for k in range(len(tracks)):

        def train_score(name: str, k: int = k) -> float:
            rows = [j for i, js in enumerate(per_conv[name]) if i != k for j in js]
            return mean(rows, HEADLINE)[metric]

        best = max(candidates, key=train_score)
        picks.append(best)
        held_out.extend(per_conv[best][k])
    result = mean(held_out, HEADLINE)
    print(f"leave-one-conversation-out on {metric}: picks {picks}")
    return result


RECIPE_ALPHA = 0.75
IDF_RANK = "pg:ts_rank+idf/0"
PLAIN_RANK = "pg:ts_rank/0"


def turn_methods() -> dict[str, Ranker]:
    """Baselines, the recommended recipe and its ablations on the turns track."""
    a = RECIPE_ALPHA
    return {
        "bm25 (baseline: BM25 over the memory text)": keyword_ranker("bm25:content"),
        "dense (baseline: MiniLM cosine over the memory text)": dense_ranker("content"),
        "memvault (recipe)": fusion_ranker("dated+prev", f"{IDF_RANK}:dated+prevD", a),
        "— keyword side alone (ts_rank+idf, dated+prev@D)": keyword_ranker(f"{IDF_RANK}:dated+prevD"),
        "— dense side alone (dated+prev)": dense_ranker("dated+prev"),
        "— plain ts_rank, no idf": fusion_ranker("dated+prev", f"{PLAIN_RANK}:dated+prevD", a),
        "— plain ts_rank, no idf, alpha 0.6": fusion_ranker("dated+prev", f"{PLAIN_RANK}:dated+prevD", 0.6),
        "— no previous turn (either side)": fusion_ranker("dated", f"{IDF_RANK}:dated", a),
        "— previous turn on the keyword side only": fusion_ranker("dated", f"{IDF_RANK}:dated+prevD", a),
        "— no date on the dense side (content + previous)": fusion_ranker("content+prev", f"{IDF_RANK}:dated+prevD", a),
        "— no date (either side)": fusion_ranker("content+prev", f"{IDF_RANK}:content+prevD", a),
        "— ts_rank_cd instead of ts_rank (no idf)": fusion_ranker("dated+prev", "pg:ts_rank_cd/0:dated+prevD", a),
        "— keyword-only hits get the dense floor, not their cosine": fusion_ranker(
            "dated+prev", f"{IDF_RANK}:dated+prevD", a, missing="floor"
        ),
        "— reciprocal rank fusion (k=60)": rrf_ranker("dated+prev", f"{IDF_RANK}:dated+prevD"),
        "— candidates 20 + 20": fusion_ranker("dated+prev", f"{IDF_RANK}:dated+prevD", a, 20, 20),
        "— candidates 100 + 100": fusion_ranker("dated+prev", f"{IDF_RANK}:dated+prevD", a, 100, 100),
        "ref: prototype 0.75·cos + 0.25·BM25/max (memory text)": fusion_ranker("content", "bm25:content", 0.75),
        "ref: BM25 over dated text + previous turn": keyword_ranker("bm25:dated+prevD"),
    }


def fact_methods() -> dict[str, Ranker]:
    a = RECIPE_ALPHA
    return {
        "bm25 (baseline: BM25 over the memory text)": keyword_ranker("bm25:content"),
        "dense (baseline: MiniLM cosine over the memory text)": dense_ranker("content"),
        "memvault (recipe)": fusion_ranker("dated", f"{IDF_RANK}:dated", a),
        "— keyword side alone (ts_rank+idf, dated)": keyword_ranker(f"{IDF_RANK}:dated"),
        "— dense side alone (dated)": dense_ranker("dated"),
        "— plain ts_rank, no idf": fusion_ranker("dated", f"{PLAIN_RANK}:dated", a),
        "— no date (either side)": fusion_ranker("content", f"{IDF_RANK}:content", a),
        "— reciprocal rank fusion (k=60)": rrf_ranker("dated", f"{IDF_RANK}:dated"),
        "ref: prototype 0.75·cos + 0.25·BM25/max (memory text)": fusion_ranker("content", "bm25:content", 0.75),
    }


RECIPES: dict[str, tuple[str, str]] = {
    "turns": ("dated+prev", f"{IDF_RANK}:dated+prevD"),
    "facts": ("dated", f"{IDF_RANK}:dated"),
}
ALPHAS = (0.5, 0.6, 0.7, 0.75, 0.8, 0.85, 0.9)


def by_question(tracks: list[Track], ranker: Ranker, metric: str) -> list[float]:
    return [j.scores[metric] for j in judge(tracks, ranker) if j.category in HEADLINE]


def report_track(name: str, tracks: list[Track], methods: dict[str, Ranker]) -> dict[str, dict[str, float]]:
    print(f"\n## {name}: categories 1–4\n")
    judged = {method: judge(tracks, ranker) for method, ranker in methods.items()}
    rows = {method: mean(js, HEADLINE) for method, js in judged.items()}
    print(table(rows))
    print(f"\n### {name}: category 5 (adversarial), reported apart\n")
    print(table({m: mean(judged[m], frozenset({5})) for m in list(methods)[:3]}))
    print(f"\n### {name}: per category (recall_any@10 / mrr)\n")
    categories = sorted({j.category for js in judged.values() for j in js})
    print("| method | " + " | ".join(f"cat {c}" for c in categories) + " |")
    print("|---|" + "---|" * len(categories))
    for method in list(methods)[:3]:
        cells = per_category(judged[method])
        print(
            f"| {method} | "
            + " | ".join(f"{cells[c]['recall_any@10']:.3f} / {cells[c]['mrr']:.3f}" for c in categories)
            + " |"
        )
    print(f"\n### {name}: per conversation, categories 1–4 (recall_any@10 / mrr)\n")
    print("| method | " + " | ".join(t.name for t in tracks) + " |")
    print("|---|" + "---|" * len(tracks))
    for method in list(methods)[:3]:
        per_conversation = [mean(judge([t], methods[method]), HEADLINE) for t in tracks]
        print(
            f"| {method} | " + " | ".join(f"{c['recall_any@10']:.3f} / {c['mrr']:.3f}" for c in per_conversation) + " |"
        )
    dense, keyword = RECIPES[name]
    print(f"\n### {name}: alpha sweep of the recipe (score = alpha·cosine + (1−alpha)·keyword/best)\n")
    print(table({f"alpha {a}": mean(judge(tracks, fusion_ranker(dense, keyword, a)), HEADLINE) for a in ALPHAS}))
    candidates = {f"alpha {a}": fusion_ranker(dense, keyword, a) for a in ALPHAS}
    for metric in ("recall_any@10", "mrr"):
        held_out = leave_one_out(tracks, candidates, metric)
        print(f"held-out (choose alpha on 5 conversations, score the 6th), by {metric}: " + _short(held_out))
    print(f"\n### {name}: paired bootstrap, memvault − baseline (10,000 resamples of the questions)\n")
    print("| versus | metric | mean difference | 95% interval | share of resamples ≤ 0 |")
    print("|---|---|---|---|---|")
    system = methods["memvault (recipe)"]
    for baseline in list(methods)[:2]:
        for metric in ("recall_any@10", "mrr"):
            diff, low, high, p = paired_bootstrap(
                by_question(tracks, system, metric), by_question(tracks, methods[baseline], metric)
            )
            print(f"| {baseline.split(' ')[0]} | {metric} | {diff:+.3f} | [{low:+.3f}, {high:+.3f}] | {p:.4f} |")
    return rows


def _short(values: dict[str, float]) -> str:
    return ", ".join(f"{m} {values[m]:.3f}" for m in METRICS)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path, default=locomo.DEFAULT_PATH)
    parser.add_argument("--out", type=Path, default=ROOT / "build" / "eval-fusion.json")
    parser.add_argument("--threads", type=int, default=2, help="onnxruntime threads for embedding")
    args = parser.parse_args()
    dsn = os.environ.get("MEMVAULT_EVAL_PG_DSN", "postgresql://postgres@127.0.0.1:5432/postgres")

    started = time.perf_counter()
    conversations = locomo.load(args.data)
    all_tracks = build_tracks(conversations)
    embedder = OnnxMiniLMEmbedder(threads=args.threads, batch_size=32)
    for tracks in all_tracks.values():
        compute_dense(tracks, embedder)
        compute_bm25(tracks)
    asyncio.run(compute_postgres(all_tracks, dsn))
    questions = sum(len(t.questions) for t in all_tracks["turns"])
    print(
        f"{len(conversations)} conversations, {questions} questions; prepared in {time.perf_counter() - started:.0f} s"
    )

    report = {
        "turns": report_track("turns", all_tracks["turns"], turn_methods()),
        "facts": report_track("facts", all_tracks["facts"], fact_methods()),
    }
    summary = {
        track: {short: rows[long] for short, long in zip(("bm25", "dense", "memvault"), list(rows)[:3], strict=True)}
        for track, rows in report.items()
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({**summary, "all_methods": report}, indent=1))
    print(f"\nwritten {args.out}; total {time.perf_counter() - started:.0f} s")


if __name__ == "__main__":
    main()
