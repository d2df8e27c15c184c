"""Copying a shard for an index build keeps its holes: the copy is the same bytes on less disk."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import numpy as np
import qdrant_edge

from memvault_indexer import sparse_copy


def _allocated(path: Path) -> int:
    return sum(f.stat().st_blocks * 512 for f in path.rglob("*") if f.is_file())


def _same_files(a: Path, b: Path) -> None:
    names = sorted(p.relative_to(a) for p in a.rglob("*"))
    assert names == sorted(p.relative_to(b) for p in b.rglob("*"))
    for name in names:
        if (a / name).is_file():
            assert (a / name).read_bytes() == (b / name).read_bytes(), name


def test_a_copy_keeps_holes_zero_runs_and_every_byte(tmp_path: Path) -> None:
    source = tmp_path / "source"
    (source / "nested").mkdir(parents=True)
    sparse = source / "nested" / "sparse.dat"
    with open(sparse, "wb") as f:
        f.write(b"head" * 1000)
        f.seek(8 * 1024 * 1024)
        f.write(b"middle")
        f.truncate(32 * 1024 * 1024)  # a hole to the end, as a preallocated file has
    (source / "zeros.dat").write_bytes(bytes(4 * 1024 * 1024) + b"tail")  # written zeros, no hole
    (source / "small.txt").write_text("x")
    (source / "empty").write_bytes(b"")

    shutil.copytree(source, tmp_path / "dense")
    sparse_copy.copy_tree(source, tmp_path / "copy")

    _same_files(source, tmp_path / "copy")
    assert os.stat(tmp_path / "copy" / "nested" / "sparse.dat").st_size == 32 * 1024 * 1024
    # The written zeros become a hole too, so the copy takes less than the source.
    assert _allocated(tmp_path / "copy") < _allocated(source) < _allocated(tmp_path / "dense")
    assert _allocated(tmp_path / "copy") < 1024 * 1024


def test_a_qdrant_edge_shard_copied_for_an_index_build_takes_no_more_disk(tmp_path: Path) -> None:
    path = tmp_path / "shard"
    config = qdrant_edge.EdgeConfig(
        vectors={"dense": qdrant_edge.EdgeVectorParams(size=384, distance=qdrant_edge.Distance.Cosine)}
    )
    shard = qdrant_edge.EdgeShard.create(str(path), config)
    vectors = np.random.default_rng(7).standard_normal((2000, 384)).astype(np.float32)
    points = [
        qdrant_edge.Point(id=n + 1, vector={"dense": v.tolist()}, payload={"vault_id": "v", "n": n})
        for n, v in enumerate(vectors)
    ]
    shard.update(qdrant_edge.UpdateOperation.upsert_points(points))
    shard.flush()
    shard.close()

    sparse_copy.copy_tree(path, tmp_path / "copy")
    shutil.copytree(path, tmp_path / "dense")

    _same_files(path, tmp_path / "copy")
    assert _allocated(tmp_path / "copy") <= _allocated(path)
    assert _allocated(tmp_path / "copy") * 2 < _allocated(tmp_path / "dense")
    copy = qdrant_edge.EdgeShard.load(str(tmp_path / "copy"))
    try:
        assert copy.count(qdrant_edge.CountRequest(exact=True)) == 2000
    finally:
        copy.close()
