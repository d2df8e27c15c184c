"""No source file of a service or a library is over 500 lines, so a newcomer can read each one whole.

Generated protobuf code (`*_pb2*` files) is left out. A file that grows past the limit is split by
what its parts own (docs/architecture.md shows how the vault, devstack and indexer did it).
"""

from __future__ import annotations

from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[1]
MAX_LINES = 500


def too_long(root: Path, limit: int = MAX_LINES) -> list[str]:
    """'<path>: <n> lines ...' for each .py file under services/*/src or libs/*/src longer than `limit`."""
    found = []
    for pattern in ("services/*/src/**/*.py", "libs/*/src/**/*.py"):
        for path in sorted(root.glob(pattern)):
            if "_pb2" in path.name:
                continue
            lines = len(path.read_text(encoding="utf-8").splitlines())
            if lines > limit:
                found.append(
                    f"{path.relative_to(root)}: {lines} lines, over the limit of {limit}; split it by what its parts own"
                )
    return found


def test_no_source_file_is_over_500_lines() -> None:
    assert (ROOT / "services/vault/src/memvault_vault/__init__.py").exists()
    long = too_long(ROOT)
    assert not long, "\n".join(long)


def test_the_check_names_each_long_file_and_its_length(tmp_path: Path) -> None:
    source = tmp_path / "services/demo/src/memvault_demo"
    source.mkdir(parents=True)
    (source / "long.py").write_text("x = 1\n" * 501)
    (source / "fits.py").write_text("x = 1\n" * 500)
    (source / "demo_pb2.py").write_text("x = 1\n" * 900)  # generated: left out
    library = tmp_path / "libs/core/src/memvault_core"
    library.mkdir(parents=True)
    (library / "big.py").write_text("x = 1\n" * 620)
    (tmp_path / "services/demo/tests").mkdir(parents=True)
    (tmp_path / "services/demo/tests/test_long.py").write_text("x = 1\n" * 900)  # tests are not counted

    assert too_long(tmp_path) == [
        "services/demo/src/memvault_demo/long.py: 501 lines, over the limit of 500; split it by what its parts own",
        "libs/core/src/memvault_core/big.py: 620 lines, over the limit of 500; split it by what its parts own",
    ]
