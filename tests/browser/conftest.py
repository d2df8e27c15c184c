"""Browser tests drive the stack as processes with OAuth on (not dev mode), in Chromium.

`oauth_stack` starts vault, mcp and gateway on a database of their own (`fresh_stack` from
memvault_devstack.fixtures); every test in this folder
is marked `browser`. Helpers the tests share are in browser_helpers.py.
"""

from __future__ import annotations

import asyncio
import os

import pytest
from browser_helpers import OAuthStack

from memvault_devstack.fixtures import StackStarter
from memvault_devstack.stack import Stack


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "tests/browser/" in str(item.path).replace(os.sep, "/"):
            item.add_marker(pytest.mark.browser)


@pytest.fixture
def oauth_stack(fresh_stack: StackStarter) -> OAuthStack:
    """`await oauth_stack(**gateway_env)`: vault, mcp and gateway with sign-in and OAuth on."""

    async def start(services: tuple[str, ...] = ("vault", "mcp", "gateway"), **gateway_env: str) -> Stack:
        return await asyncio.to_thread(
            fresh_stack,
            services=services,
            service_env={"gateway": {"MEMVAULT_GATEWAY__DEV_MODE": "false", **gateway_env}},
        )

    return start
