"""The MCP tools. Each is one function, a thin call to the vault: validate the shape, call, shape the
answer. They live by what they do to memories (`guide`, `reading`, `writing`, `changes`); shared
arguments in `arguments`, declaration and the vault call in `registry`."""

from __future__ import annotations

from typing import Any

from mcp.server.mcpserver.tools.base import Tool

from memvault_mcp.tools import archive, archive_writing, changes, guide, reading, sources, writing
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
    archive.archive_search,
    archive.archive_read,
    archive_writing.archive_write,
)


def _untitled(schema: Any) -> Any:
    """The schema without pydantic's generated `title`s ("Conversation Id" beside `conversation_id`):
    they repeat the names and cost the tool list kilobytes. Properties named `title` stay."""
    if isinstance(schema, dict):
        return {k: _untitled(v) for k, v in schema.items() if not (k == "title" and isinstance(v, str))}
    if isinstance(schema, list):
        return [_untitled(v) for v in schema]
    return schema


def build_tools() -> list[Tool]:
    """Every tool, as the MCP server lists it."""
    tools = []
    for fn in ORDER:
        spec = SPECS[fn]
        tool = Tool.from_function(
            fn, name=fn.__name__, title=spec.title, description=spec.description, annotations=spec.annotations
        )
        tool.parameters = _untitled(tool.parameters)
        # A misspelt argument must fail loudly, not be dropped (see ArgumentsMiddleware).
        tool.parameters["additionalProperties"] = False
        tools.append(tool)
    return tools
