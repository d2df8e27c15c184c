"""The API reference: an OpenAPI 3.1 document of every /api/v1 route, served at `/api/v1/openapi.json`.

FastAPI describes each route's parameters and bodies from its code. The problem answers
(RFC 9457, `application/problem+json`) come from the edge and the vault rather than from a route's
signature, so they are added here by what a route can meet: every route can be refused as
unauthenticated (401) or forbidden (403: scope, role, or a missing CSRF token), can name an
argument the vault refuses (400) or fail validation here (422), and answers 503 while the vault
is away; a route with a path parameter, that names a vault in its query or body, or that deletes (it
names what to delete, e.g. `DELETE /api/v1/clients?client_id=`), answers 404 for a vault, memory,
grant, client or person that is not there or not the caller's; a route that changes state can meet a conflict (409) and a body over
`max_request_bytes` (413). /api/v1 has no rate limits, so it never answers 429.
"""

from __future__ import annotations

import copy
from typing import Any

from fastapi import APIRouter, FastAPI, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, Field

PREFIX = "/api/v1"
OPENAPI_PATH = f"{PREFIX}/openapi.json"

router = APIRouter()

_CACHE_KEY = "api_openapi"
_STATE_CHANGING = frozenset({"POST", "PUT", "PATCH", "DELETE"})


class Problem(BaseModel):
    """An RFC 9457 problem answer; `detail` tells the caller what to do next."""

    type: str = Field(default="about:blank", examples=["about:blank"])
    title: str = Field(examples=["Not found"])
    status: int = Field(examples=[404])
    detail: str = Field(examples=["no vault named 'work' is open to you; your vaults: default"])


_MEANINGS = {
    400: "The vault refused an argument (the detail names it and what it accepts).",
    401: "No browser session and no bearer token for this API, or the token is not valid; a bearer token's"
    " answer carries a `WWW-Authenticate` challenge.",
    403: "Signed in, but not allowed: the token lacks the scope, the person lacks the role, or a change"
    " came without the session's `X-CSRF-Token`.",
    404: "No such vault, memory, grant, batch, client, source or person open to the caller (the same answer whether it is"
    " missing or someone else's).",
    409: "The change conflicts with the current state (a name taken, a stale `expected_version`, ...).",
    413: "The body is larger than `max_request_bytes`, or a list in it is longer than the vault takes.",
    422: "The request does not validate here: the detail names each field and what it accepts.",
    503: "The vault cannot be reached; try again shortly.",
}


def problem_statuses(method: str, path: str, names_vault: bool = False) -> list[int]:
    """The problem answers an operation can give (see the module's docstring)."""
    statuses = {400, 401, 403, 422, 503}
    if "{" in path or names_vault or method == "DELETE":
        statuses.add(404)
    if method in _STATE_CHANGING:
        statuses |= {409, 413}
    return sorted(statuses)


def _refs(node: Any) -> set[str]:
    """The component schemas `node` refers to, directly."""
    if isinstance(node, dict):
        found = {node["$ref"].rsplit("/", 1)[-1]} if isinstance(node.get("$ref"), str) else set()
        return found.union(*(_refs(v) for v in node.values()))
    if isinstance(node, list):
        return set().union(*(_refs(v) for v in node))
    return set()


def _names_vault(operation: dict[str, Any], schemas: dict[str, Any]) -> bool:
    """Whether the operation takes a vault's name in its query or in its JSON body."""
    if any(p.get("name") == "vault" and p.get("in") == "query" for p in operation.get("parameters", [])):
        return True
    body = operation.get("requestBody", {}).get("content", {}).get("application/json", {}).get("schema", {})
    seen: set[str] = set()
    pending = [body]
    while pending:
        node = pending.pop()
        if isinstance(node, dict):
            ref = node.get("$ref")
            if isinstance(ref, str) and (name := ref.rsplit("/", 1)[-1]) not in seen:
                seen.add(name)
                pending.append(schemas.get(name, {}))
            if "vault" in node.get("properties", {}):
                return True
            for combined in ("anyOf", "oneOf", "allOf"):
                pending.extend(node.get(combined, []))
    return False


def openapi_document(app: FastAPI) -> dict[str, Any]:
    """The /api/v1 part of `app`'s OpenAPI, with the problem answers of each operation."""
    full = copy.deepcopy(app.openapi())
    paths = {path: item for path, item in full["paths"].items() if path.startswith(PREFIX)}
    schemas = full.get("components", {}).get("schemas", {})
    for path, item in paths.items():
        for method, operation in item.items():
            responses = operation.setdefault("responses", {})
            # FastAPI's own 422 schema is pydantic's; this gateway answers 422 as a problem.
            responses.pop("422", None)
            for status in problem_statuses(method.upper(), path, _names_vault(operation, schemas)):
                responses[str(status)] = {
                    "description": _MEANINGS[status],
                    "content": {"application/problem+json": {"schema": {"$ref": "#/components/schemas/Problem"}}},
                }
    every = dict(full.get("components", {}).get("schemas", {}))
    every["Problem"] = Problem.model_json_schema(ref_template="#/components/schemas/{model}")
    wanted: set[str] = set()
    pending = _refs(paths)
    while pending:
        name = pending.pop()
        if name in every and name not in wanted:
            wanted.add(name)
            pending |= _refs(every[name])
    return {
        "openapi": full["openapi"],
        "info": {
            "title": "memvault /api/v1",
            "version": app.version,
            "summary": "The owner's JSON API: grants, service tokens, vaults, members, accounts and memories.",
            "description": (
                "Authenticate with the owner's browser session (changes need its `X-CSRF-Token`, read from"
                " `GET /api/v1/me`) or `Authorization: Bearer` with a service token or an OAuth access token"
                " issued for `<public_url>/api/v1`. Errors are RFC 9457 problems (`application/problem+json`)."
            ),
        },
        "paths": paths,
        "components": {"schemas": {name: every[name] for name in sorted(wanted)}},
    }


@router.get(OPENAPI_PATH, include_in_schema=False)
async def openapi(request: Request) -> JSONResponse:
    """The API reference as OpenAPI 3.1 JSON (no sign-in needed: it holds no one's data)."""
    state = request.app.state
    document = getattr(state, _CACHE_KEY, None)
    if document is None:
        document = openapi_document(request.app)
        setattr(state, _CACHE_KEY, document)
    return JSONResponse(document)
