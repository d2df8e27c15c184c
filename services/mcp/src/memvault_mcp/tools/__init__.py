"""The MCP tools. Each is one function, a thin call to the vault: validate the shape, call, shape the
answer. They live by what they do to memories (`guide`, `reading`, `writing`, `changes`); shared
arguments in `arguments`, declaration and the vault call in `registry`."""

from __future__ import annotations

from mcp.server.mcpserver.tools.base import Tool

from memvault_mcp.tools import changes, guide, reading, sources, writing
from memvault_mcp.tools.registry import SPECS, ToolFunction

# The order tools/list shows them in: the guide first, then the way an agent usually goes.
ORDER: tuple[ToolFunction, ...] = (
    guide.get_operating_guide,
    reading.recall,
    writing.remember,
    writing.propose_memory,
    writing.bulk_remember,
    reading.list_memories,
    changes.forget,
    changes.supersede,
    changes.invalidate,
    reading.audit_memory,
    reading.explain_memory,
    sources.track_source,
    sources.sources,
)


def build_tools() -> list[Tool]:
    """Every tool, as the MCP server lists it."""
    tools = []
    for fn in ORDER:
        spec = SPECS[fn]
        tool = Tool.from_function(
            fn, name=fn.__name__, title=spec.title, description=spec.description, annotations=spec.annotations
        )
        # A misspelt argument must fail loudly, not be dropped (see ArgumentsMiddleware).
        tool.parameters["additionalProperties"] = False
        tools.append(tool)
    return tools
