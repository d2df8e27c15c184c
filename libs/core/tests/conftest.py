"""Fixtures the core library's tests share."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

from memvault_devstack.postgres import create_database, drop_database


@pytest.fixture
def fresh_dsn(postgres_dsn: str) -> Iterator[str]:
    """An empty database of this test's own."""
    name = f"plumbing_{uuid.uuid4().hex[:10]}"
    dsn = create_database(postgres_dsn, name, exist_ok=False)
    try:
        yield dsn
    finally:
        drop_database(postgres_dsn, name)
