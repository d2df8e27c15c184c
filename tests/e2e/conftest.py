"""Each end-to-end test gets a database of its own: the dev owner and its vault are fixed names."""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from typing import Any

import pytest

from memvault_devstack.fixtures import StackStarter
from memvault_devstack.postgres import create_database, drop_database
from memvault_devstack.stack import Stack


@pytest.fixture
def stack_starter(start_stack: StackStarter, postgres_dsn: str) -> Iterator[StackStarter]:
    """Like `start_stack`, but every stack it starts uses a fresh database on the test server."""
    created: list[str] = []
    stacks: list[Stack] = []

    def start(**options: Any) -> Stack:
        if "postgres_dsn" not in options:
            name = f"memvault_e2e_{secrets.token_hex(4)}"
            options["postgres_dsn"] = create_database(postgres_dsn, name, exist_ok=False)
            created.append(name)
        stacks.append(start_stack(**options))
        return stacks[-1]

    yield start
    for stack in stacks:
        stack.stop()  # before the database goes; stopping twice is harmless
    for name in created:
        drop_database(postgres_dsn, name)
