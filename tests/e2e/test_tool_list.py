"""What an agent loads into every conversation: the whole tool list, measured as the server sends it."""

from __future__ import annotations

import asyncio
import json

import pytest
from e2e_helpers import mcp_session

from memvault_devstack.fixtures import StackStarter

pytestmark = pytest.mark.e2e

# Every tool's name, description and schemas together, archive and sources included as they land.
TOOL_LIST_BUDGET = 32 * 1024


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_the_whole_tool_list_stays_under_32_kib(fresh_stack: StackStarter, mode: str) -> None:
    stack = await asyncio.to_thread(fresh_stack, services=("vault", "mcp", "gateway"))
    async with mcp_session(stack.mcp_url, mode) as client:
        tools = (await client.list_tools()).tools
    sent = json.dumps(
        [tool.model_dump(mode="json", by_alias=True, exclude_none=True) for tool in tools], separators=(",", ":")
    )
    size = len(sent.encode())
    print(f"{len(tools)} tools, {size} bytes")  # shown with -s
    assert size < TOOL_LIST_BUDGET, (
        f"the tool list is {size} bytes; trim descriptions or schemas below {TOOL_LIST_BUDGET}"
    )
