"""glibc's mmap threshold, fixed at start-up: a large block freed no longer sends the next ones to the heap."""

from __future__ import annotations

import subprocess
import sys

import pytest

pytestmark = pytest.mark.unit

# In a process of its own: a heap that earlier tests left with large free chunks would serve the block
# from them whatever the threshold (the vault fixes it first thing in `serve`).
CHECK = """
import ctypes
from memvault_vault.allocator import fix_mmap_threshold

class Mallinfo2(ctypes.Structure):
    _fields_ = [(name, ctypes.c_size_t) for name in (
        "arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks", "fordblks", "keepcost")]

mallinfo2 = ctypes.CDLL("libc.so.6").mallinfo2
mallinfo2.restype = Mallinfo2
if {fixed}:
    assert fix_mmap_threshold()  # the vault's images and hosts run glibc
larger = bytearray(4 * 1024 * 1024)
del larger  # glibc's default would now serve blocks up to 4 MiB from the heap
before = mallinfo2().hblkhd
block = bytearray(1024 * 1024)
held = mallinfo2().hblkhd
del block
print(held - before, mallinfo2().hblkhd - before)
"""


def _mapped(fixed: bool) -> tuple[int, int]:
    """Bytes malloc held in blocks of their own mapping while a 1 MiB block lived, and after it was freed."""
    out = subprocess.run(
        [sys.executable, "-c", CHECK.format(fixed=fixed)], capture_output=True, text=True, check=True
    ).stdout.split()
    return int(out[0]), int(out[1])


def test_a_part_sized_block_is_mapped_and_returned_even_after_a_larger_one_was_freed() -> None:
    held, after = _mapped(fixed=True)
    assert held >= 1024 * 1024  # in a mapping of its own ...
    assert after <= 0  # ... given back when freed, not kept in the heap
    # glibc's default, for contrast: the block comes from the heap, where its space stays once freed.
    assert _mapped(fixed=False)[0] == 0
