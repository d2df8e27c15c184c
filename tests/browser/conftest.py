"""Browser tests drive the stack as processes with OAuth on (not dev mode), in Chromium.

`oauth_stack` starts vault, mcp and gateway on a database of their own; every test in this folder
is marked `browser`. Helpers the tests share are in browser_helpers.py.
"""

from __future__ import annotations

import asyncio
import os
import secrets
from collections.abc import Iterator
from typing import Any

import pytest
from browser_helpers import OAuthStack

from memvault_devstack.fixtures import StackStarter
from memvault_devstack.postgres import create_database, drop_database
from memvault_devstack.stack import Stack


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "tests/browser/" in str(item.path).replace(os.sep, "/"):
            item.add_marker(pytest.mark.browser)


@pytest.fixture
def fresh_stacks(start_stack: StackStarter, postgres_dsn: str) -> Iterator[StackStarter]:
    """Stacks on databases of their own (the owner and its 'default' vault are fixed names)."""
    created: list[str] = []
    stacks: list[Stack] = []

    def start(**options: Any) -> Stack:
        name = f"memvault_browser_{secrets.token_hex(4)}"
        options["postgres_dsn"] = create_database(postgres_dsn, name, exist_ok=False)
        created.append(name)
        stacks.append(start_stack(**options))
        return stacks[-1]

    yield start
    for stack in stacks:
        stack.stop()
    for name in created:
        drop_database(postgres_dsn, name)


@pytest.fixture
def oauth_stack(fresh_stacks: StackStarter) -> OAuthStack:
    """`await oauth_stack(**gateway_env)`: vault, mcp and gateway with sign-in and OAuth on."""

    async def start(services: tuple[str, ...] = ("vault", "mcp", "gateway"), **gateway_env: str) -> Stack:
        return await asyncio.to_thread(
            fresh_stacks,
            services=services,
            service_env={"gateway": {"MEMVAULT_GATEWAY__DEV_MODE": "false", **gateway_env}},
        )

    return start
