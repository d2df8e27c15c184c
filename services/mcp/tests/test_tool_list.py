"""The tool list as an agent receives it: every tool once, in order, strict about its arguments, and
only the tools the connection's scopes allow."""

from __future__ import annotations

import pytest
from mcp_helpers import Service

from memvault_mcp.tools import ORDER, build_tools
from memvault_mcp.tools.registry import SPECS

NAMES = [
    "get_operating_guide",
    "recall",
    "remember",
    "propose_memory",
    "bulk_remember",
    "list_memories",
    "forget",
    "supersede",
    "invalidate",
    "audit_memory",
    "explain_memory",
    "track_source",
    "sources",
    "archive_search",
    "archive_read",
    "archive_write",
]
READ_ONLY = {
    "get_operating_guide",
    "recall",
    "list_memories",
    "audit_memory",
    "explain_memory",
    "archive_search",
    "archive_read",
}


@pytest.mark.unit
def test_every_declared_tool_is_listed_once_in_order_and_refuses_unknown_arguments() -> None:
    tools = build_tools()
    assert [t.name for t in tools] == NAMES
    assert set(ORDER) == set(SPECS)
    for tool in tools:
        assert tool.parameters["additionalProperties"] is False, tool.name
        assert tool.title and tool.description, tool.name
        assert tool.annotations is not None and tool.annotations.read_only_hint == (tool.name in READ_ONLY)


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_a_read_only_connection_is_listed_only_the_read_only_tools(service: Service, mode: str) -> None:
    async with service.agent(("read", "write"), mode=mode) as agent:
        assert [t.name for t in (await agent.client.list_tools()).tools] == NAMES
    async with service.agent(("read",), mode=mode) as agent:
        assert [t.name for t in (await agent.client.list_tools()).tools] == [n for n in NAMES if n in READ_ONLY]
        refused = await agent.error("forget", memory_id="00000000-0000-0000-0000-000000000001")
    assert "write" in refused
    assert service.vault.calls == []
