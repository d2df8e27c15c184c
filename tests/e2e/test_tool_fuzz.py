"""Property-based arguments for every MCP tool, sent through the gateway with the official MCP client.

For each tool in `tools/list`, hypothesis-jsonschema draws arguments that fit its input schema,
and plain hypothesis draws arguments that do not (the schema's own argument names with values of
any JSON type, and names it lacks). Every call must end in a result or in a tool error that says
what went wrong: never the SDK's bare "Error executing tool <name>" (a crash inside the tool), an
"internal error" from the vault, or a JSON-RPC internal error.

Bounded and seeded (`MEMVAULT_FUZZ_SEED`, `MEMVAULT_FUZZ_TOOL_EXAMPLES`), so CI sends the same
arguments each run; the failures list the tool and the arguments that broke it.
"""

from __future__ import annotations

import asyncio
import json
import os
from typing import Any

import pytest
from e2e_helpers import mcp_session
from hypothesis import HealthCheck, Phase, given, seed, settings
from hypothesis import strategies as st
from hypothesis_jsonschema import from_schema
from mcp.shared.exceptions import MCPError

from memvault_devstack.fixtures import StackStarter

pytestmark = pytest.mark.e2e

FUZZ_SEED = int(os.environ.get("MEMVAULT_FUZZ_SEED", "19"))
VALID_EXAMPLES = int(os.environ.get("MEMVAULT_FUZZ_TOOL_EXAMPLES", "20"))
INVALID_EXAMPLES = max(1, VALID_EXAMPLES // 2)
INTERNAL_JSON_RPC = -32603

any_json: st.SearchStrategy[Any] = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.integers(min_value=2**31 - 2, max_value=2**80)
    | st.floats()
    | st.text(max_size=30),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
    max_leaves=8,
)


def drawn(strategy: st.SearchStrategy[Any], count: int, salt: int) -> list[Any]:
    """`count` values of `strategy`, the same ones every run."""
    found: list[Any] = []

    @seed(FUZZ_SEED * 1000 + salt)
    @settings(
        max_examples=count,
        database=None,
        phases=[Phase.generate],
        suppress_health_check=list(HealthCheck),
        deadline=None,
    )
    @given(strategy)
    def collect(value: Any) -> None:
        found.append(value)

    collect()
    return found


def off_schema(schema: dict[str, Any]) -> st.SearchStrategy[dict[str, Any]]:
    """Arguments that mostly do not fit: the schema's names with values of any type, and other names."""
    names = sorted(schema.get("properties", {})) or ["x"]
    return st.dictionaries(st.sampled_from(names) | st.text(max_size=12), any_json, max_size=5)


def strings_in(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for k, v in value.items() for s in (*strings_in(k), *strings_in(v))]
    if isinstance(value, list):
        return [s for item in value for s in strings_in(item)]
    return []


def unclear(tool: str, text: str, arguments: dict[str, Any]) -> str | None:
    """Why a tool error's text would leave an agent guessing, or None when it says what went wrong."""
    if text.strip() == f"Error executing tool {tool}":
        return "the tool crashed (the SDK's bare message)"
    if not text.strip():
        return "empty"
    # What the caller sent may be quoted back ("expires_at 'exception' is not a date"): look past it.
    for echoed in sorted((s for s in strings_in(arguments) if s.strip()), key=len, reverse=True):
        text = text.replace(echoed, "")
    lowered = text.lower()
    for sign in ("internal error", "traceback", "exception", "see the vault log", "see its log"):
        if sign in lowered:
            return f"says {sign!r}"
    return None


async def test_every_tool_answers_any_arguments_with_a_result_or_a_clear_error(fresh_stack: StackStarter) -> None:
    stack = await asyncio.to_thread(fresh_stack)
    failures: list[str] = []
    calls = 0
    async with mcp_session(stack.mcp_url) as client:
        tools = (await client.list_tools()).tools
        assert len(tools) >= 15
        for number, tool in enumerate(tools):
            schema = dict(tool.input_schema)
            cases = drawn(from_schema(schema), VALID_EXAMPLES, number) + drawn(
                off_schema(schema), INVALID_EXAMPLES, 100 + number
            )
            for arguments in cases:
                calls += 1
                try:
                    result = await client.call_tool(tool.name, arguments)
                except MCPError as error:
                    if error.error.code == INTERNAL_JSON_RPC:
                        failures.append(f"{tool.name} {json.dumps(arguments)[:300]}: JSON-RPC internal error {error}")
                    continue
                if result.is_error:
                    text = result.content[0].text if result.content and hasattr(result.content[0], "text") else ""
                    if (why := unclear(tool.name, text, arguments)) is not None:
                        failures.append(f"{tool.name} {json.dumps(arguments)[:300]}: {why}: {text[:200]}")
    assert calls >= 15 * (VALID_EXAMPLES + INVALID_EXAMPLES) * 0.5
    assert not failures, f"{len(failures)} of {calls} calls:\n" + "\n".join(failures[:40])
