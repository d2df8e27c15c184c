"""glibc's mmap threshold, fixed at start-up: a large block freed no longer sends the next ones to the heap."""

from __future__ import annotations

import ctypes

import pytest

from memvault_vault.allocator import MMAP_THRESHOLD_BYTES, fix_mmap_threshold

pytestmark = pytest.mark.unit


class _Mallinfo2(ctypes.Structure):
    _fields_ = [
        (name, ctypes.c_size_t)
        for name in ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks", "fordblks")
    ] + [("keepcost", ctypes.c_size_t)]


def _mapped_bytes() -> int:
    """Bytes malloc holds in blocks of their own mapping (glibc's mallinfo2 `hblkhd`)."""
    mallinfo2 = ctypes.CDLL("libc.so.6").mallinfo2
    mallinfo2.restype = _Mallinfo2
    return int(mallinfo2().hblkhd)


def test_a_part_sized_block_is_mapped_and_returned_even_after_a_larger_one_was_freed() -> None:
    assert fix_mmap_threshold()  # the vault's images and hosts run glibc
    larger = bytearray(4 * 1024 * 1024)
    del larger  # glibc's default would now serve blocks up to 4 MiB from the heap
    before = _mapped_bytes()
    block = bytearray(1024 * 1024)
    held = _mapped_bytes()
    del block
    assert held - before >= 1024 * 1024 > MMAP_THRESHOLD_BYTES  # in a mapping of its own ...
    assert _mapped_bytes() <= before  # ... given back when freed, not kept in the heap
