"""`python -m tests.bench.lifecycle <suite>`: memory lifecycle numbers, written into docs/benchmarks.md.

- `secrets`: precision and recall of the secret detector on its corpus (no services).
- `similarity`: the duplicate and conflict thresholds on built pairs, with the bundled embedder
  in this process (the indexer's model; no services).
- `duplicates`: false near-duplicates on a generated corpus of distinct facts (`corpus.distinct_facts`),
  embedded with the bundled embedder in this process and decided by the vault's rule (no services).
- `imports`: import throughput over MCP with duplicate detection on (all four services), beside
  the same import with the indexer stopped (exact duplicates only).
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import os
import re
import secrets
import shutil
import sys
import time
from collections import Counter
from pathlib import Path
from types import ModuleType
from typing import Any
from unittest import mock

from memvault_vault.domain import duplicates
from memvault_vault.domain.memory import Status
from memvault_vault.domain.secrets import find_secret
from tests.bench import corpus, report, similarity_pairs

ROOT = Path(__file__).resolve().parents[2]


def _load(path: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location(path.stem, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def secrets_section() -> str:
    corpus = _load(ROOT / "services" / "vault" / "tests" / "secret_corpus.py")
    positives: list[tuple[str, str]] = corpus.POSITIVES
    negatives: list[tuple[str, str]] = corpus.NEGATIVES
    true_positive = sum(1 for _, text in positives if find_secret(text) is not None)
    false_positive = sum(1 for _, text in negatives if find_secret(text) is not None)
    right_kind = sum(1 for kind, text in positives if (f := find_secret(text)) is not None and f.kind == kind)
    precision = true_positive / (true_positive + false_positive) if true_positive + false_positive else 1.0
    recall = true_positive / len(positives)
    kinds = sorted({kind for kind, _ in positives})
    reasons: dict[str, int] = {}
    for why, _ in negatives:
        reasons[why] = reasons.get(why, 0) + 1
    return "\n".join(
        [
            f"The corpus (`services/vault/tests/secret_corpus.py`) holds {len(positives)} secrets of "
            f"{len(kinds)} kinds and {len(negatives)} look-alikes that must be stored "
            f"({', '.join(f'{n} {why}' for why, n in sorted(reasons.items()))}). "
            "Tokens are generated from a fixed seed, so the repository holds no real credential. "
            "The detector was written against this corpus, so these are training-set numbers: "
            "they show nothing regressed, not how it does on text it has never seen.",
            "",
            "| secrets | look-alikes | true positives | false positives | precision | recall | kind named right |",
            "|---|---|---|---|---|---|---|",
            f"| {len(positives)} | {len(negatives)} | {true_positive} | {false_positive} | {precision:.3f} "
            f"| {recall:.3f} | {right_kind}/{len(positives)} |",
            "",
            "Kinds: " + ", ".join(kinds) + ".",
        ]
    )


def _cosines(pairs: list[tuple[str, str]]) -> list[float]:
    import numpy as np

    from memvault_indexer.embedder import OnnxMiniLMEmbedder

    embedder = OnnxMiniLMEmbedder()
    first = np.asarray(embedder.embed([a for a, _ in pairs]))
    second = np.asarray(embedder.embed([b for _, b in pairs]))
    return [float(c) for c in (first * second).sum(axis=1)]


def calibration() -> dict[str, list[tuple[float, str, str, str | None]]]:
    """Each category's pairs with their cosine and `classify`'s outcome (the second text written after the first)."""
    scored: dict[str, list[tuple[float, str, str, str | None]]] = {}
    for name, (pairs, _) in similarity_pairs.CATEGORIES.items():
        cosines = _cosines(pairs)
        scored[name] = [(c, a, b, duplicates.classify(c, b, a)) for c, (a, b) in zip(cosines, pairs, strict=True)]
    return scored


def similarity_section() -> str:
    load = _load(os.getloadavg())
    rows = [
        "| pairs | n | cosine min | median | max | skipped as near-duplicate | linked as similar | stored unlinked "
        "| right |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    scored = calibration()
    for name, (pairs, expected) in similarity_pairs.CATEGORIES.items():
        outcomes = [o for _, _, _, o in scored[name]]
        ordered = sorted(c for c, _, _, _ in scored[name])
        rows.append(
            f"| {name} | {len(pairs)} | {ordered[0]:.3f} | {ordered[len(ordered) // 2]:.3f} | {ordered[-1]:.3f} "
            f"| {outcomes.count('near-duplicate')} | {outcomes.count('similar')} | {outcomes.count(None)} "
            f"| {sum(o in expected for o in outcomes)}/{len(pairs)} |"
        )
    sweep = [
        "| near-duplicate cosine | rewordings skipped | changed facts, names, words, roles or negations skipped "
        "(must be 0) | changed names skipped without the names rule | changed words or swapped roles skipped "
        "without the wording rule |",
        "|---|---|---|---|---|",
    ]
    rewordings = [row for name, rows in scored.items() if name.startswith("rewording") for row in rows]
    names = scored["changed name (person, place, product, email, URL, host, path)"]
    words = (
        scored["changed ordinary word (team, role, room, drink, project)"]
        + scored["same names and words, roles swapped"]
    )
    changed = scored["changed number, date, version or address"] + names + words + scored["negation"]
    for threshold in (0.85, 0.90, 0.93, 0.95, 0.97):
        skipped = sum(1 for c, a, b, _ in rewordings if c >= threshold and duplicates.same_facts(a, b))
        wrong = sum(1 for c, a, b, _ in changed if c >= threshold and duplicates.same_facts(a, b))
        without_facts = sum(1 for c, _, _, _ in changed if c >= threshold)
        without_names = sum(1 for c, a, b, _ in names if c >= threshold and duplicates.same_values(a, b))
        without_wording = sum(
            1
            for c, a, b, _ in words
            if c >= threshold and duplicates.same_values(a, b) and duplicates.same_identifiers(a, b)
        )
        sweep.append(
            f"| {threshold:.2f} | {skipped}/{len(rewordings)} | {wrong} (without the facts rule: {without_facts}) "
            f"| {without_names}/{len(names)} | {without_wording}/{len(words)} |"
        )
    linked = [
        "| similar cosine | changed facts linked | negations linked | related pairs linked (should be 0) |",
        "|---|---|---|---|",
    ]
    facts = scored["changed number, date, version or address"]
    negations = scored["negation"]
    related = scored["related (same topic, different fact)"]
    for threshold in (0.60, 0.70, 0.75, 0.80, 0.85, 0.90):
        linked.append(
            f"| {threshold:.2f} "
            f"| {sum(c >= threshold for c, _, _, _ in facts)}/{len(facts)} "
            f"| {sum(c >= threshold for c, _, _, _ in negations)}/{len(negations)} "
            f"| {sum(c >= threshold for c, _, _, _ in related)}/{len(related)} |"
        )
    return "\n".join(
        [
            f"Pairs from `tests/bench/similarity_pairs.py`, embedded with the bundled all-MiniLM-L6-v2 (the "
            f"indexer's default model). Rules (`services/vault/src/memvault_vault/domain/duplicates.py`): "
            f"near-duplicate at cosine ≥ {duplicates.NEAR_DUPLICATE_COSINE} with the same numbers, versions, "
            f"addresses, dates, negations and names (people, places, products, emails, URLs, hostnames, paths), "
            "and not the same sentence with an ordinary word changed or two parts swapped (`domain/wording.py`); "
            f"similar at ≥ {duplicates.SIMILAR_COSINE}, or ≥ {duplicates.NEGATED_SIMILAR_COSINE} when one text "
            "negates the other. A changed name or word and swapped roles are right when they are not skipped "
            f"(linked as similar, or stored unlinked when they score below the similar bar). Load average (1, 5, "
            f"15 min) {load} at the start (the numbers are scores, not times).",
            "",
            *rows,
            "",
            "A changed number scores like a rewording (0.88–1.00), and so do a changed name or word and swapped roles, "
            "so cosine alone cannot tell an update or a fact about someone else from a repeat; the facts rule does. "
            "Negations score "
            "lower than changed numbers, hence their lower bar. Rewordings that fall below the near-duplicate bar, "
            'that add a name the other text lacks ("British" → "British English"), or that only trade a word for a '
            'synonym ("prefers" → "likes": without a dictionary it cannot be told from another word) are linked as '
            "similar, which costs the owner a review, never a lost fact.",
            "",
            *sweep,
            "",
            *linked,
        ]
    )


def _nearest_earlier(vectors: Any, top: int, floor: float, block: int = 512) -> list[list[tuple[int, float]]]:
    """For each row, the `top` most similar earlier rows at cosine >= `floor` (exact search), closest first."""
    import numpy as np

    nearest: list[list[tuple[int, float]]] = []
    for start in range(0, len(vectors), block):
        stop = min(start + block, len(vectors))
        cosines = vectors[start:stop] @ vectors[:stop].T
        for row in range(stop - start):
            earlier = cosines[row, : start + row]
            pick = np.argpartition(-earlier, top)[:top] if len(earlier) > top else np.arange(len(earlier))
            found = [(int(j), float(earlier[j])) for j in pick if earlier[j] >= floor]
            nearest.append(sorted(found, key=lambda n: -n[1]))
    return nearest


def _load(averages: tuple[float, float, float]) -> str:
    return " / ".join(f"{a:.1f}" for a in averages)


def _never_changed(a: str, b: str) -> bool:
    """The wording check switched off, for the baseline (a plain function: a mock's call would cost more)."""
    return False


def _decide_all(texts: list[str], nearest: list[list[tuple[int, float]]]) -> tuple[list[tuple[str, str]], int, float]:
    """Each text decided in turn against its nearest earlier ones: the skipped (text, repeated) pairs, the number
    linked as similar, and the seconds it took (with the rule's per-text caches emptied first)."""
    for cached in (duplicates.facts, duplicates.identifiers, duplicates.wording.tokens):
        cached.cache_clear()
    began = time.perf_counter()
    skipped: list[tuple[str, str]] = []
    linked = 0
    for position, found in enumerate(nearest):
        matches = [duplicates.Match(str(j), cosine, texts[j], Status.ACTIVE) for j, cosine in found]
        (decision,) = duplicates.decide([texts[position]], [matches], [{}])
        if decision.kind == "duplicate":
            skipped.append((texts[position], texts[int(decision.duplicate_of)]))
        linked += decision.kind == "similar"
    return skipped, linked, time.perf_counter() - began


def duplicates_section(count: int, seed: int) -> str:
    import numpy as np

    from memvault_indexer.embedder import OnnxMiniLMEmbedder

    texts = corpus.distinct_facts(count, seed=seed)
    load_before = os.getloadavg()
    began = time.perf_counter()
    vectors = np.asarray(OnnxMiniLMEmbedder(threads=2).embed(texts))
    embed_seconds = time.perf_counter() - began
    began = time.perf_counter()
    nearest = _nearest_earlier(vectors, duplicates.SIMILAR_PER_TEXT, duplicates.lowest_cosine())
    search_seconds = time.perf_counter() - began
    # The rule's own time, against the same rule without its wording check in the same run (caches emptied,
    # each twice in turn, the faster of the two kept: the host is shared).
    baseline: list[float] = []
    timed: list[float] = []
    for _ in range(2):
        with mock.patch.object(duplicates.wording, "changed_in_place", new=_never_changed):
            baseline.append(_decide_all(texts, nearest)[2])
        skipped, linked, seconds = _decide_all(texts, nearest)
        timed.append(seconds)
    baseline_seconds, decide_seconds = min(baseline), min(timed)
    # Every earlier fact this close, not only the ten nearest: how many a cosine alone, and the rule without
    # names, would have skipped.
    close = [[(j, c) for j, c in found if c >= duplicates.NEAR_DUPLICATE_COSINE] for found in nearest]
    by_cosine = sum(1 for found in close if found)
    without_names = sum(
        1
        for position, found in enumerate(close)
        if any(duplicates.same_values(texts[position], texts[j]) for j, _ in found)
    )
    without_wording = sum(
        1
        for position, found in enumerate(close)
        if any(
            duplicates.same_values(texts[position], texts[j]) and duplicates.same_identifiers(texts[position], texts[j])
            for j, _ in found
        )
    )
    # Which false duplicates differ in a name, judged from the generator's name lists (not by the rule itself).
    names = corpus.name_words()

    def words(text: str) -> set[str]:
        return set(re.findall(r"\w+", text.lower()))

    def in_order(text: str) -> list[str]:
        return [w for w in re.findall(r"\w+", text.lower()) if w in names]

    by_name = [(a, b) for a, b in skipped if (words(a) ^ words(b)) & names]
    swapped = [(a, b) for a, b in skipped if (a, b) not in by_name and in_order(a) != in_order(b)]
    ordinary = [(a, b) for a, b in skipped if (a, b) not in by_name and (a, b) not in swapped]
    changes = Counter(
        f"{' '.join(sorted(words(a) - words(b)))} / {' '.join(sorted(words(b) - words(a)))}" for a, b in ordinary
    )
    for a, b in skipped[:20]:
        print(f"false duplicate: {a!r} as a repeat of {b!r}", file=sys.stderr)
    return "\n".join(
        [
            f"{count:,} distinct short facts from `tests.bench.corpus.distinct_facts` (seed {seed}; 13 templates, each "
            "said once per combination of its slots: people, places, organisations, products, emails, URLs, hosts, "
            "paths, numbers, times; many pairs differ in nothing but one name), embedded with the bundled "
            f"all-MiniLM-L6-v2 in this process ({embed_seconds:.0f} s on 2 threads). Each fact is decided in turn "
            "by the vault's rule (`duplicates.decide`) against the ten nearest earlier facts at cosine ≥ "
            f"{duplicates.lowest_cosine()}, as the vault asks the indexer for, found here by an exact search over "
            f"all earlier vectors instead of the indexer's Qdrant Edge index ({search_seconds:.0f} s). The rule "
            f"took {decide_seconds:.1f} s for all of them, {decide_seconds / baseline_seconds:.2f}× the "
            f"{baseline_seconds:.1f} s of the same rule without its wording check in the same run (the faster of two "
            "runs each"
            + (
                "; below 1× only because the shared host's load moved between the runs: the check's cost does not "
                "show at this scale"
                if decide_seconds < baseline_seconds
                else ""
            )
            + f"). Load average (1, 5, 15 min) {_load(load_before)} at the start, {_load(os.getloadavg())} at "
            "the end, on a host shared with other engineers' work. Measured on "
            "the model's vectors directly, not through the services: importing this many through gateway, mcp, "
            "vault and indexer would take the shared 2-core machine for most of an hour.",
            "",
            "| measure | facts | goal |",
            "|---|---|---|",
            f"| false duplicates on a generated corpus of {count:,} distinct facts (skipped as a near-duplicate) "
            f"| {len(skipped):,} | 0 |",
            f"| … of them differing in a name or identifier (a word of the corpus's name lists) | {len(by_name):,} "
            "| 0 |",
            f"| … of them with the same names in another order (who does what swapped) | {len(swapped):,} | 0 |",
            "| … of them differing only in ordinary words"
            + (": " + ", ".join(f"{change} × {n}" for change, n in changes.most_common(6)) if ordinary else "")
            + f" | {len(ordinary):,} | 0 |",
            f"| linked as similar (stored, for review) | {linked:,} | – |",
            f"| with an earlier fact at cosine ≥ {duplicates.NEAR_DUPLICATE_COSINE} (a cosine alone would skip them) "
            f"| {by_cosine:,} | – |",
            f"| skipped by the rule without its names check (numbers, dates, negations only) | {without_names:,} | – |",
            f"| skipped by the rule without its wording check (numbers, dates, negations and names) "
            f"| {without_wording:,} | – |",
            "",
            "The names check stops every fact that names someone or something the earlier one does not. The wording "
            'check stops the rest: the same sentence with an ordinary word changed ("the security team" / "the '
            'support team", a role, a project), and the same names swapping roles ("from Lisbon to Porto" / "from '
            'Porto to Lisbon"); in a long sentence such a change moves the vector less than the '
            f"{duplicates.NEAR_DUPLICATE_COSINE} bar allows, so cosine alone would skip them.",
        ]
    )


async def _import(
    client: Any, items: list[Any], label: str
) -> tuple[float, list[float], list[dict[str, Any]], dict[str, int], list[str]]:
    from tests.e2e.e2e_helpers import call

    calls: list[float] = []
    outcomes: list[dict[str, Any]] = []
    checks: dict[str, int] = {}
    notices: list[str] = []
    start = time.perf_counter()
    for offset in range(0, len(items), 500):
        chunk = items[offset : offset + 500]
        began = time.perf_counter()
        answer = await call(client, "bulk_remember", items=[{"content": i.content} for i in chunk], source=label)
        calls.append(time.perf_counter() - began)
        outcomes += answer["items"]
        checks[answer["duplicate_check"]] = checks.get(answer["duplicate_check"], 0) + 1
        notices += answer.get("notices", [])
    return time.perf_counter() - start, calls, outcomes, checks, notices


async def imports_section(total: int, exact_only_total: int) -> str:
    from memvault_devstack.postgres import create_database, drop_database
    from memvault_devstack.stack import Stack
    from tests.e2e import import_mix
    from tests.e2e.e2e_helpers import mcp_session

    data_dir = ROOT / "build" / "bench" / secrets.token_hex(3)
    server = os.environ.get("MEMVAULT_TEST_POSTGRES_DSN")
    database = f"memvault_bench_{secrets.token_hex(3)}"
    dsn = create_database(server, database, exist_ok=False) if server else None
    stack = Stack(data_dir, postgres_dsn=dsn, nats_url=os.environ.get("MEMVAULT_TEST_NATS_URL"), log_level="WARNING")
    rows: list[str] = []
    try:
        await asyncio.to_thread(stack.start)
        runs = [
            ("all four services: exact, near-duplicate and similar", total, 5),
            ("indexer stopped", exact_only_total, 9),
        ]
        for name, count, seed in runs:
            if name == "indexer stopped":
                await asyncio.to_thread(stack.stop_service, "indexer")
            items = import_mix.build(count, seed=seed)
            async with mcp_session(stack.mcp_url) as client:
                elapsed, calls, outcomes, checks, notices = await _import(client, items, name)
            check = ", ".join(f"`{name}` × {n}" for name, n in sorted(checks.items()))
            wrong = import_mix.check(items, outcomes) if set(checks) == {"semantic"} else []
            for notice in dict.fromkeys(notices):
                print(f"{name}: {notice}", file=sys.stderr)
            for problem in wrong[:10]:
                print(f"{name}: wrong outcome {problem}", file=sys.stderr)
            counts: dict[str, int] = {}
            for outcome in outcomes:
                counts[str(outcome["outcome"])] = counts.get(str(outcome["outcome"]), 0) + 1
            rows.append(
                f"| {name} | {check} | {count:,} | {elapsed:.1f} | {count / elapsed:,.0f} "
                f"| {report.percentile([c * 1000 for c in calls], 50):,.0f} "
                f"| {report.percentile([c * 1000 for c in calls], 95):,.0f} "
                f"| {', '.join(f'{k} {v:,}' for k, v in sorted(counts.items()))} | {len(wrong)} |"
            )
    finally:
        await asyncio.to_thread(stack.stop)
        if server:
            drop_database(server, database)
        if os.environ.get("MEMVAULT_BENCH_KEEP_LOGS"):
            print(f"logs kept in {data_dir / 'logs'}", file=sys.stderr)
        else:
            shutil.rmtree(data_dir, ignore_errors=True)
    return "\n".join(
        [
            "Mixed imports (`tests/e2e/import_mix.py`: 70% new memories, the rest exact repeats, near-duplicates, "
            "updates with a changed number, secrets and invalid items) through `bulk_remember` over MCP "
            "(gateway → mcp → vault → indexer), 500 items per call, one client, into a fresh vault. With the "
            "indexer each call embeds its texts for the Similar call and compares them with the previous call's "
            "memories too, sent as text while the index does not hold them yet; indexing the stored ones reuses those "
            "embeddings (the indexer's cache). With the indexer stopped, each call tries it twice (0.5 s apart) before answering "
            '`exact-only`. "Wrong outcomes" counts items whose outcome differs from the one built in (a '
            "changed-number update counts as right when it is linked to its original, or to ten memories at "
            "least as close: the templated data has many).",
            "",
            "| run | duplicate check (calls) | items | seconds | items/s | p50 ms per call | p95 ms per call | outcomes "
            "| wrong outcomes |",
            "|---|---|---|---|---|---|---|---|---|",
            *rows,
            "",
            "Wrong outcomes are counted only when every call compared semantically.",
        ]
    )


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m tests.bench.lifecycle", description=__doc__)
    parser.add_argument(
        "suite", choices=["secrets", "similarity", "duplicates", "imports"], help="which numbers to measure"
    )
    parser.add_argument("--facts", type=int, default=50_600, help="duplicates: distinct facts (50,600)")
    parser.add_argument("--seed", type=int, default=19, help="duplicates: the corpus seed (19)")
    parser.add_argument("--items", type=int, default=10_000, help="imports: items with the indexer (10,000)")
    parser.add_argument("--exact-only-items", type=int, default=5_000, help="imports: items without it (5,000)")
    args = parser.parse_args()
    command = f"python -m tests.bench.lifecycle {' '.join(sys.argv[1:])}"
    if args.suite == "secrets":
        body = secrets_section()
        report.write_section("secrets", body, command)
        print(body)
    if args.suite == "similarity":
        body = similarity_section()
        report.write_section("similarity", body, command)
        print(body)
    if args.suite == "duplicates":
        body = duplicates_section(args.facts, args.seed)
        report.write_section("duplicates", body, command)
        print(body)
    if args.suite == "imports":
        body = asyncio.run(imports_section(args.items, args.exact_only_items))
        report.write_section("imports", body, command)
        print(body)
    sys.stdout.flush()


if __name__ == "__main__":
    main()
