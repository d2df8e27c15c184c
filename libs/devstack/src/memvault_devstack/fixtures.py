"""Pytest fixtures shared by every test in the repository (registered by the root conftest.py).

- `postgres_dsn` (session): a database of its own for this test session. On the server named by
  `MEMVAULT_TEST_POSTGRES_DSN` when set (a fresh `memvault_test_<random>` database, dropped at
  the end), else in a Postgres container where a Docker engine answers, else on an embedded
  Postgres in a temporary directory (the choice: `memvault_devstack.servers`).
- `nats_url` (session): `MEMVAULT_TEST_NATS_URL` when set, else a NATS container where a Docker
  engine answers, else an embedded nats-server with JetStream in a temporary directory.
- `start_stack` (per test): starts a `Stack` on those servers in a fresh data dir; every stack
  it started is stopped when the test ends.
- `fresh_stack` (per test): like `start_stack`, but each stack gets a database of its own on the
  test server (the dev owner and its `default` vault are fixed names), dropped after the test.
"""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Protocol

import pytest

from memvault_devstack import servers
from memvault_devstack.postgres import create_database, drop_database
from memvault_devstack.stack import Stack


@pytest.fixture(scope="session")
def postgres_dsn() -> Iterator[str]:
    """DSN of an empty database that lives for the whole test session."""
    with servers.postgres_database() as dsn:
        yield dsn


@pytest.fixture(scope="session")
def nats_url() -> Iterator[str]:
    """URL of a NATS server with JetStream for the whole test session."""
    with servers.nats_server() as url:
        yield url


class StackStarter(Protocol):
    def __call__(self, **options: Any) -> Stack: ...


@pytest.fixture
def start_stack(postgres_dsn: str, nats_url: str, tmp_path: Path) -> Iterator[StackStarter]:
    """Start a Stack (options as for `Stack`, data dir defaults to a fresh one under tmp_path).

    It uses the session's `postgres_dsn` and `nats_url` unless options name others, and blocks
    until every service is ready; in an async test wrap it: `await asyncio.to_thread(start_stack)`.
    """
    stacks: list[Stack] = []

    def start(**options: Any) -> Stack:
        options.setdefault("postgres_dsn", postgres_dsn)
        options.setdefault("nats_url", nats_url)
        data_dir = options.pop("data_dir", tmp_path / f"stack-{len(stacks)}")
        stack = Stack(data_dir, **options)
        stacks.append(stack)
        return stack.start()

    yield start
    failures: list[Exception] = []
    for stack in reversed(stacks):
        try:
            stack.stop()
        except Exception as error:  # stop the others all the same
            failures.append(error)
    if failures:
        raise failures[0]


@pytest.fixture
def fresh_stack(start_stack: StackStarter, postgres_dsn: str) -> Iterator[StackStarter]:
    """Like `start_stack`, but every stack it starts uses a fresh database on the test server (unless
    the options name a `postgres_dsn`); the databases are dropped after their stacks stop."""
    created: list[str] = []
    stacks: list[Stack] = []

    def start(**options: Any) -> Stack:
        if "postgres_dsn" not in options:
            name = f"memvault_stack_{secrets.token_hex(4)}"
            options["postgres_dsn"] = create_database(postgres_dsn, name, exist_ok=False)
            created.append(name)
        stacks.append(start_stack(**options))
        return stacks[-1]

    yield start
    try:
        for stack in reversed(stacks):
            stack.stop()  # before its database goes; `start_stack` stopping it again is harmless
    finally:
        for name in created:
            drop_database(postgres_dsn, name)
