"""Fixtures for the MCP service's tests (helpers in mcp_helpers.py)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from mcp_helpers import Service, running_service


@pytest.fixture
async def service() -> AsyncIterator[Service]:
    """The MCP app over HTTP in front of a stand-in vault that answers as each test tells it."""
    async with running_service() as running:
        yield running
