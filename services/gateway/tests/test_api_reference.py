"""The API reference: /api/v1/openapi.json names every /api/v1 route and the problems each can answer."""

from __future__ import annotations

from typing import Any

import pytest
from fastapi import FastAPI
from fastapi.routing import APIRoute
from gateway_helpers import Browser, StartGateway

from memvault_core.identity import IdentitySigner
from memvault_gateway.app import create_app

pytestmark = pytest.mark.integration

PROBLEM = {"$ref": "#/components/schemas/Problem"}


def served_api_routes(app: FastAPI) -> set[tuple[str, str]]:
    """(method, path) of every route the app serves under /api/v1, however its routers were included."""
    found: set[tuple[str, str]] = set()
    pending: list[Any] = list(app.routes)
    while pending:
        route = pending.pop()
        if isinstance(route, APIRoute):
            if route.path.startswith("/api/v1") and route.include_in_schema:
                found |= {(method.lower(), route.path) for method in route.methods or ()}
        elif hasattr(route, "original_router"):
            pending.extend(route.original_router.routes)
        elif hasattr(route, "routes"):
            pending.extend(route.routes)
    return found


def problem_statuses(operation: dict[str, Any]) -> set[int]:
    return {
        int(status)
        for status, answer in operation["responses"].items()
        if answer.get("content", {}).get("application/problem+json", {}).get("schema") == PROBLEM
    }


async def test_openapi_names_every_api_route_and_its_problem_answers(start_gateway: StartGateway) -> None:
    gateway = await start_gateway()
    async with gateway.http() as http:
        answer = await http.get("/api/v1/openapi.json")  # no sign-in: it holds no one's data
    assert answer.status_code == 200 and answer.headers["content-type"] == "application/json"
    document = answer.json()
    assert document["openapi"].startswith("3.")

    served = served_api_routes(create_app(gateway.settings, IdentitySigner("x" * 32)))
    documented = {(method, path) for path, item in document["paths"].items() for method in item}
    assert len(served) > 25
    assert documented == served
    assert all(path.startswith("/api/v1/") for path in document["paths"])  # not /token, /mcp or the pages

    for (method, path), operation in ((key, document["paths"][key[1]][key[0]]) for key in sorted(documented)):
        statuses = problem_statuses(operation)
        assert {400, 401, 403, 422, 503} <= statuses, (method, path)
        # A vault named in the body (POST /bulk) can be missing too, and so can what a DELETE names in
        # its query (DELETE /clients?client_id=).
        assert (404 in statuses) == ("{" in path or path == "/api/v1/bulk" or method == "delete"), (method, path)
        assert ({409, 413} <= statuses) == (method in ("post", "put", "patch", "delete")), (method, path)
        assert 429 not in operation["responses"], "/api/v1 has no rate limits"
    problem = document["components"]["schemas"]["Problem"]
    assert set(problem["properties"]) == {"type", "title", "status", "detail"}
    remember = document["paths"]["/api/v1/vaults/{vault}/memories"]["post"]
    assert remember["requestBody"]["content"]["application/json"]["schema"] == {
        "$ref": "#/components/schemas/RememberIn"
    }
    assert "RememberIn" in document["components"]["schemas"]


async def test_documented_problems_are_what_the_routes_answer(start_gateway: StartGateway) -> None:
    gateway = await start_gateway()
    async with gateway.http() as http:
        document = (await http.get("/api/v1/openapi.json")).json()
        unauthenticated = await http.get("/api/v1/vaults/default/memories")
        too_large = await http.post("/api/v1/bulk", content=b"x" * (5 * 1024 * 1024))
    problem_fields = set(document["components"]["schemas"]["Problem"]["properties"])
    for answer, status in ((unauthenticated, 401), (too_large, 413)):
        assert answer.status_code == status
        assert answer.headers["content-type"] == "application/problem+json"
        assert set(answer.json()) == problem_fields and answer.json()["status"] == status


async def test_a_vault_named_in_the_body_that_is_not_there_is_a_documented_404(start_gateway: StartGateway) -> None:
    """Found by the schema fuzzer (tests/e2e/test_api_fuzz.py): POST /bulk answered an undocumented 404."""
    gateway = await start_gateway()
    browser = Browser(gateway)
    assert (await browser.sign_in((await gateway.create_user())[0])).status_code == 303
    answer = await browser.api("POST", "/api/v1/bulk", json={"vault": "no-such-vault", "text": "a fact"})
    assert answer.status_code == 404, answer.text
    assert "no-such-vault" in answer.json()["detail"]
    async with gateway.http() as http:
        document = (await http.get("/api/v1/openapi.json")).json()
    assert "404" in document["paths"]["/api/v1/bulk"]["post"]["responses"]
