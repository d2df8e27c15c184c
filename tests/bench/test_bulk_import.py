"""The benchmarks import as memvault's importers do: 500 items a `bulk_remember` call, 2 calls in flight."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

import pytest

from tests.bench.run import IN_FLIGHT, bulk_remember_all

pytestmark = pytest.mark.unit


class CountingClient:
    """An MCP client stand-in that records how many calls overlap."""

    def __init__(self) -> None:
        self.open = 0
        self.most_open = 0
        self.sent: list[list[str]] = []

    async def call_tool(self, tool: str, arguments: dict[str, Any]) -> Any:
        assert tool == "bulk_remember"
        self.open += 1
        self.most_open = max(self.most_open, self.open)
        self.sent.append([item["content"] for item in arguments["items"]])
        await asyncio.sleep(0.01)
        self.open -= 1
        return SimpleNamespace(is_error=False, structured_content={"stored": len(arguments["items"])})


async def test_two_calls_stay_in_flight_and_every_text_goes_once_in_order() -> None:
    client = CountingClient()
    texts = [f"fact {n}" for n in range(2300)]
    answers = await bulk_remember_all(client, texts)
    assert IN_FLIGHT == 2 and client.most_open == 2
    assert [a["stored"] for a in answers] == [500, 500, 500, 500, 300]
    sent = [text for call in client.sent for text in call]
    assert sorted(sent, key=texts.index) == texts and len(sent) == len(texts)
