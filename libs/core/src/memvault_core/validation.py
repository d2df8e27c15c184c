"""Validation at the edges (the gateway's /api/v1 and the MCP tools): bounds that are checked and
advertised in one place, and one readable line per problem pydantic finds."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import GetCoreSchemaHandler, GetJsonSchemaHandler
from pydantic.json_schema import JsonSchemaValue
from pydantic_core import PydanticCustomError, core_schema


@dataclass(frozen=True)
class Between:
    """`Annotated[StrictInt, Between(1, 50)]`: refused outside low..high (inclusive) with
    'must be between 1 and 50', and published as JSON Schema minimum and maximum."""

    low: int | float
    high: int | float

    def __get_pydantic_core_schema__(self, source: Any, handler: GetCoreSchemaHandler) -> core_schema.CoreSchema:
        return core_schema.no_info_after_validator_function(self._check, handler(source))

    def __get_pydantic_json_schema__(
        self, schema: core_schema.CoreSchema, handler: GetJsonSchemaHandler
    ) -> JsonSchemaValue:
        json_schema = handler(schema)
        json_schema.update(minimum=self.low, maximum=self.high)
        return json_schema

    def _check(self, value: Any) -> Any:
        if not self.low <= value <= self.high:
            raise PydanticCustomError(
                "out_of_range", "must be between {low} and {high}", {"low": self.low, "high": self.high}
            )
        return value


_BOUNDS = {
    "greater_than_equal": "must be at least {ge}",
    "less_than_equal": "must be at most {le}",
    "greater_than": "must be above {gt}",
    "less_than": "must be below {lt}",
}


def field_name(location: Sequence[int | str]) -> str:
    """`items[1].content` from pydantic's location."""
    return "".join(f"[{part}]" if isinstance(part, int) else f".{part}" for part in location).lstrip(".")


def describe(problem: Mapping[str, Any]) -> str:
    """`limit must be between 1 and 50 (got 1000000000000)` from one pydantic error."""
    where = field_name(problem.get("loc", ())) or "arguments"
    template = _BOUNDS.get(problem["type"])
    if template is not None:
        message = template.format(**problem.get("ctx", {}))
    else:
        message = str(problem["msg"]).removeprefix("Value error, ")
        message = message[:1].lower() + message[1:]
    joined = f"{where} {message}" if message.startswith("must ") else f"{where}: {message}"
    if problem["type"] == "missing":
        return joined
    return f"{joined} (got {json.dumps(problem.get('input'), default=str)[:60]})"
