"""The embedded vector store alone: the memory a process holds for points written but not yet built into
an index, and across an index build with writes arriving during it.

    python -m tests.bench.edge_store_rss --points 10000,100000 [--optimize]

For each size, a fresh process writes that many points (random unit vectors with the payload of an
archived message, in upserts of 1,000, as the indexer writes an import) into an `EdgeVectorStore` in a
temporary folder and reports its RSS: anonymous (RssAnon) and file-backed (RssFile). With `--optimize`
it then builds the index (`EdgeVectorStore.optimize`, the child process and the swap the indexer uses)
while 10 points are written every 0.2 s, samples RSS every 50 ms, and reports the highest sample,
the process's peak (VmHWM) and what a store opened again holds.
"""

from __future__ import annotations

import argparse
import asyncio
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

import numpy as np

from memvault_indexer.edge_store import EdgeVectorStore
from memvault_indexer.points import IndexedMemory


def status() -> tuple[float, float, float, float]:
    """VmRSS, RssAnon, RssFile and VmHWM of this process, MiB."""
    fields = dict(line.split(":", 1) for line in Path("/proc/self/status").read_text().splitlines() if ":" in line)
    rss, anonymous, file, peak = (int(fields[k].split()[0]) / 1024 for k in ("VmRSS", "RssAnon", "RssFile", "VmHWM"))
    return rss, anonymous, file, peak


def points(rng: np.random.Generator, vault: str, count: int) -> list[IndexedMemory]:
    vectors = rng.standard_normal((count, 384)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    return [
        IndexedMemory(
            uuid.uuid4(), vault, vectors[i], f"{i:064x}", kind="message", conversation_id=str(uuid.uuid4()), revision=1
        )
        for i in range(count)
    ]


def show(label: str, values: tuple[float, ...]) -> str:
    rss, anonymous, file, peak = values
    return f"{label}: RSS {rss:.0f} MiB ({anonymous:.0f} anonymous / {file:.0f} file-backed), peak {peak:.0f}"


async def measure(count: int, folder: Path, optimize: bool) -> None:
    rng = np.random.default_rng(1)
    vault = str(uuid.uuid4())
    store = EdgeVectorStore(folder, model="all-minilm-l6-v2", dimension=384)
    await store.ensure_collection()
    for start in range(0, count, 1000):
        await store.upsert(points(rng, vault, min(1000, count - start)))
    print(show(f"{count:,} points written", status()), flush=True)
    if not optimize:
        await store.close()
        return
    samples: list[tuple[float, ...]] = []
    stop = threading.Event()

    def sample() -> None:
        while not stop.is_set():
            samples.append(status())
            time.sleep(0.05)

    built = asyncio.Event()

    async def write_meanwhile() -> None:
        while not built.is_set():
            await store.upsert(points(rng, vault, 10))
            await asyncio.sleep(0.2)

    sampler = threading.Thread(target=sample)
    sampler.start()
    writer = asyncio.create_task(write_meanwhile())
    began = time.monotonic()
    await store.optimize()
    took = time.monotonic() - began
    built.set()
    await writer  # its last write is done before the store closes
    stop.set()
    sampler.join()
    print(show(f"index built in {took:.1f} s, highest sample", max(samples, key=lambda s: s[0])), flush=True)
    print(show("after the build", status()), flush=True)
    await store.close()
    reopened = EdgeVectorStore(folder, model="all-minilm-l6-v2", dimension=384)
    await reopened.ensure_collection()
    print(show("closed and opened again in the same process", status()), flush=True)
    await reopened.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--points", default="10000,100000", help="comma-separated sizes, one process each")
    parser.add_argument("--optimize", action="store_true", help="build the index with writes arriving meanwhile")
    parser.add_argument("--child", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child is not None:
        with tempfile.TemporaryDirectory() as folder:
            asyncio.run(measure(args.child, Path(folder), args.optimize))
        return
    for count in (int(size) for size in args.points.split(",")):
        command = [sys.executable, "-m", "tests.bench.edge_store_rss", "--child", str(count)]
        subprocess.run([*command, *(["--optimize"] if args.optimize else [])], check=True)


if __name__ == "__main__":
    main()
