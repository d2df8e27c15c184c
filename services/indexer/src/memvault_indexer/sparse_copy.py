"""Copy files and folders without filling their holes.

Qdrant Edge preallocates its storage files as sparse files: a 10,000-point shard is 166 MiB long
but takes 40 MiB of disk. `shutil.copytree` writes every byte of a copy, zeros included, so each
index build (which optimizes a copy of the shard, `EdgeVectorStore.optimize`) left the shard taking
its full length on disk. These copies write only the data: holes the filesystem reports
(SEEK_DATA / SEEK_HOLE) and runs of zeros stay unallocated in the copy.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

BLOCK = 64 * 1024


def copy_file(source: str, target: str) -> str:
    """`shutil.copy2` that leaves holes and zero blocks unallocated; returns `target`."""
    with open(source, "rb") as reading, open(target, "wb") as writing:
        size = os.fstat(reading.fileno()).st_size
        zeros = bytes(BLOCK)
        offset = 0
        while offset < size:
            try:
                start = os.lseek(reading.fileno(), offset, os.SEEK_DATA)
            except OSError:  # ENXIO: nothing but a hole from here to the end
                break
            end = os.lseek(reading.fileno(), start, os.SEEK_HOLE)
            reading.seek(start)
            position = start
            while position < end:
                block = reading.read(min(BLOCK, end - position))
                if not block:
                    break
                if block != zeros[: len(block)]:
                    writing.seek(position)
                    writing.write(block)
                position += len(block)
            offset = end
        writing.truncate(size)
    shutil.copystat(source, target)
    return target


def copy_tree(source: Path, target: Path) -> None:
    """`shutil.copytree` with `copy_file`."""
    shutil.copytree(source, target, copy_function=copy_file)
