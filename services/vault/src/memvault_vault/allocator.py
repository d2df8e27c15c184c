"""glibc's malloc told to hand large blocks straight back to the system (docs/benchmarks.md, archive-pipeline).

The vault moves uploaded parts of up to 3 MiB through gRPC, asyncpg and ijson. glibc serves a block of
128 KiB or more with mmap and unmaps it when freed, until the first such block is freed: from then on it
raises that threshold to the freed block's size, so the next parts come from the heap, where small
long-lived objects allocated between them keep the freed space from being returned. The vault's resident
memory then grew with the number of parts an import moved (20 MB of free heap held at 30,000 messages).
A fixed threshold keeps every large block in its own mapping, returned when freed.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import logging

log = logging.getLogger(__name__)

M_MMAP_THRESHOLD = -3
"""mallopt's parameter number in glibc's malloc.h."""
MMAP_THRESHOLD_BYTES = 128 * 1024
"""glibc's own default, kept fixed instead of rising with the largest block freed."""


def fix_mmap_threshold() -> bool:
    """Fix glibc's mmap threshold at its default; False where the C library is not glibc (nothing changes)."""
    name = ctypes.util.find_library("c")
    try:
        libc = ctypes.CDLL(name)
        mallopt = libc.mallopt
        libc.gnu_get_libc_version  # noqa: B018 (present in glibc only: musl has a mallopt that does nothing)
    except (OSError, AttributeError, TypeError):
        return False
    mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    if mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD_BYTES) != 1:
        log.warning("glibc refused to fix malloc's mmap threshold; large freed blocks may stay resident")
        return False
    return True
