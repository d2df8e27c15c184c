"""The bundled embedder alone on two kinds of text: what a text costs and how much memory a process keeps.

    python -m tests.bench.embed_batches [--before DIR] [--rounds 3] [--call 256]

Each run is a fresh process (onnxruntime's CPU arena keeps the largest batch it has seen, so memory is
only comparable from a fresh start), embedding its texts in calls of `--call` texts on two threads, as
the indexer does with one fetch of events:

- memories: 2,000 memory texts (tests/bench/corpus.py, about 25 tokens each);
- messages: 1,200 chat messages (tests/bench/archive_corpus.py: users 1 to 3 sentences, assistants up
  to 14, so some are cut at the model's 256 tokens).

Per run: CPU ms per text (both threads), texts/s, anonymous memory (RssAnon) after a warm-up call and
after the run, and the process's peak (VmHWM). With `--before DIR` (a checkout of another commit) the
two take turns, run by run, so a drifting host affects both alike.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

CHILD = """
import sys, time
sys.path.insert(0, sys.argv[2])
from memvault_indexer.embedder import OnnxMiniLMEmbedder

def status():
    fields = dict(line.split(":", 1) for line in open("/proc/self/status") if ":" in line)
    return int(fields["RssAnon"].split()[0]) / 1024, int(fields["VmHWM"].split()[0]) / 1024

workload, call = sys.argv[1], int(sys.argv[3])
if workload == "memories":
    from tests.bench.corpus import memories
    texts = memories(2000, seed=5)
else:
    from tests.bench.archive_corpus import Generator
    generator = Generator(seed=23)
    topic = generator.topic()
    texts = [generator.message(topic, "user" if n % 2 == 0 else "assistant") for n in range(1200)]
embedder = OnnxMiniLMEmbedder(threads=2)
embedder.embed(texts[:16])
anon_before, _ = status()
cpu, wall = time.process_time(), time.perf_counter()
for start in range(0, len(texts), call):
    embedder.embed(texts[start : start + call])
cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
anon_after, peak = status()
print(f"{1000 * cpu / len(texts):.2f} {len(texts) / wall:.1f} {anon_before:.0f} {anon_after:.0f} {peak:.0f}")
"""


def run(checkout: Path, workload: str, call: int) -> list[float]:
    env = {**os.environ, "PYTHONPATH": f"{checkout / 'services' / 'indexer' / 'src'}{os.pathsep}{ROOT}"}
    done = subprocess.run(
        [sys.executable, "-c", CHILD, workload, str(checkout / "services" / "indexer" / "src"), str(call)],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
        timeout=1800,
    )
    return [float(x) for x in done.stdout.split()]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--before", type=Path, help="a checkout of another commit, run in turns with this one")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--call", type=int, default=256, help="texts per embed call (the indexer's fetch)")
    args = parser.parse_args()
    sides = [("before", args.before.resolve())] if args.before else []
    sides.append(("after" if args.before else "this", ROOT))
    print("| workload | side | round | CPU ms per text | texts/s | anonymous MiB: warm → after | peak (VmHWM) MiB |")
    print("|---|---|---:|---:|---:|---|---:|")
    for workload in ("messages", "memories"):
        for round_ in range(1, args.rounds + 1):
            for side, checkout in sides if round_ % 2 else reversed(sides):
                cpu, rate, before, after, peak = run(checkout, workload, args.call)
                print(
                    f"| {workload} | {side} | {round_} | {cpu:.2f} | {rate:.1f} | {before:.0f} → {after:.0f} | {peak:.0f} |"
                )
                sys.stdout.flush()


if __name__ == "__main__":
    main()
