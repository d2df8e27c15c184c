"""`python -m tests.bench.lifecycle <suite>`: memory lifecycle numbers, written into docs/benchmarks.md.

- `secrets`: precision and recall of the secret detector on its corpus (no services).
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
from pathlib import Path
from types import ModuleType

from memvault_vault.domain.secrets import find_secret
from tests.bench import report

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


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m tests.bench.lifecycle", description=__doc__)
    parser.add_argument("suite", choices=["secrets"], help="which numbers to measure")
    args = parser.parse_args()
    command = f"python -m tests.bench.lifecycle {args.suite}"
    if args.suite == "secrets":
        body = secrets_section()
        report.write_section("secrets", body, command)
        print(body)
    sys.stdout.flush()


if __name__ == "__main__":
    main()
