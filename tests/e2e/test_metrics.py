"""Prometheus metrics of every service after real traffic: the named series are there, label values
are templates and names the services declare (never a raw path, memory text, vault name or
token), and each endpoint answers only at its configured path."""

from __future__ import annotations

import asyncio
import secrets
import uuid
from collections import defaultdict

import httpx
import pytest
from e2e_helpers import call, call_error, eventually, mcp_session
from prometheus_client.parser import text_string_to_metric_families

from memvault_devstack.fixtures import StackStarter
from memvault_devstack.layout import SERVICES
from memvault_devstack.ports import free_ports
from memvault_devstack.stack import Stack

pytestmark = pytest.mark.e2e

Samples = dict[str, list[tuple[dict[str, str], float]]]


async def scrape(port: int, path: str = "/metrics") -> Samples:
    async with httpx.AsyncClient(timeout=10) as http:
        answer = await http.get(f"http://127.0.0.1:{port}{path}")
    assert answer.status_code == 200, answer.text
    assert answer.headers["content-type"].startswith("text/plain")
    found: Samples = defaultdict(list)
    for family in text_string_to_metric_families(answer.text):
        for sample in family.samples:
            found[sample.name].append((dict(sample.labels), sample.value))
    return found


def values(samples: Samples, name: str, **labels: str) -> list[float]:
    return [v for found, v in samples.get(name, []) if all(found.get(k) == w for k, w in labels.items())]


def label_values(samples: Samples, label: str) -> set[str]:
    return {found[label] for series in samples.values() for found, _ in series if label in found}


async def test_each_service_serves_its_series_after_real_traffic(fresh_stack: StackStarter) -> None:
    ports = dict(zip(SERVICES, free_ports(len(SERVICES)), strict=True))
    stack: Stack = await asyncio.to_thread(
        fresh_stack,
        service_env={
            name: {
                "MEMVAULT_METRICS__ENABLED": "true",
                "MEMVAULT_METRICS__PORT": str(port),
                "MEMVAULT_METRICS__PATH": "/metrics",
                "MEMVAULT_METRICS__SAMPLE_SECONDS": "0.5",
            }
            for name, port in ports.items()
        },
    )
    secret_text = f"The spare key hides under flowerpot {secrets.token_hex(6)}."
    token = "mvs_" + secrets.token_urlsafe(24)
    stranger_vault = f"vault-{secrets.token_hex(5)}"

    async with mcp_session(stack.mcp_url) as client:
        stored = await call(client, "remember", content=secret_text, tags=["home"])
        await call(client, "recall", query=secret_text)
        await call(client, "list_memories")
        assert "limit" in await call_error(client, "recall", query="x", limit=-1)
    # /api/v1 wants a session or a token even in dev mode: unauthenticated, the routes answer 401.
    async with httpx.AsyncClient(base_url=stack.gateway_url, timeout=30) as http:
        assert (await http.get("/api/v1/vaults/default/memories")).status_code == 401
        for _ in range(3):  # distinct raw paths, one route template
            missing = await http.get(f"/api/v1/vaults/default/memories/{uuid.uuid4()}")
            assert missing.status_code == 401
        assert (await http.get(f"/api/v1/vaults/{stranger_vault}/memories")).status_code == 401
        assert (await http.get(f"/no/such/{secrets.token_hex(4)}")).status_code == 404
        # A token the gateway does not know, in the header and in the query: neither becomes a label.
        refused = await http.get(f"/api/v1/me?access_token={token}", headers={"Authorization": f"Bearer {token}"})
        assert refused.status_code < 500

    async def indexed() -> Samples | None:
        vault = await scrape(ports["vault"])
        return vault if values(vault, "memvault_index_pending") == [0.0] else None

    async def acknowledged() -> bool:
        # The indexer acknowledges an event after the vault has marked it indexed, and samples
        # JetStream every half second: its gauge follows the vault's a moment later.
        return values(await scrape(ports["indexer"]), "memvault_indexer_events_pending") == [0.0]

    vault = await eventually(indexed, deadline=120)
    await eventually(acknowledged, deadline=30)
    gateway, mcp, indexer = [await scrape(ports[name]) for name in ("gateway", "mcp", "indexer")]

    # gateway: latency by route template, errors, its database pool
    assert values(gateway, "memvault_http_request_duration_seconds_count", route="/api/v1/vaults/{vault}/memories")
    memory_route = values(
        gateway,
        "memvault_http_request_duration_seconds_count",
        route="/api/v1/vaults/{vault}/memories/{memory_id}",
        status="401",
    )
    assert memory_route == [3.0]
    assert values(gateway, "memvault_http_request_duration_seconds_count", route="/mcp", method="POST")
    assert values(gateway, "memvault_http_request_duration_seconds_count", route="unmatched", status="404")
    assert values(gateway, "memvault_db_pool_connections", component="gateway", state="max") == [10.0]
    # mcp: latency by tool and outcome
    assert values(mcp, "memvault_tool_call_seconds_count", tool="remember", outcome="ok") == [1.0]
    assert values(mcp, "memvault_tool_call_seconds_count", tool="recall", outcome="ok") == [1.0]
    assert values(mcp, "memvault_tool_call_seconds_count", tool="recall", outcome="tool_error") == [1.0]
    assert values(mcp, "memvault_tool_call_seconds_count", tool="list_memories", outcome="ok") == [1.0]
    # vault: gRPC latency by method, outbox, index lag, dead letters, pool
    assert values(
        vault,
        "memvault_grpc_server_handling_seconds_count",
        component="vault",
        method="/memvault.vault.v1.VaultService/Remember",
        code="OK",
    )
    assert values(vault, "memvault_outbox_depth") == [0.0]
    assert values(vault, "memvault_outbox_oldest_age_seconds") == [0.0]
    assert values(vault, "memvault_index_lag_seconds") == [0.0]
    assert values(vault, "memvault_index_failed") == [0.0]
    assert values(vault, "memvault_db_pool_connections", component="vault", state="open")[0] >= 1
    # indexer: embedding time, events pending, dead letters, its gRPC calls
    assert values(indexer, "memvault_embedding_seconds_count")[0] >= 1
    assert values(indexer, "memvault_embedded_texts_total")[0] >= 1
    assert values(indexer, "memvault_indexer_events_pending") == [0.0]
    assert values(indexer, "memvault_dead_letters") == [0.0]
    assert values(indexer, "memvault_grpc_server_handling_seconds_count", component="indexer")

    # No server error in all that traffic; the counters are there from the start, at 0.
    for samples, component, where in (
        (gateway, "gateway", "http"),
        (mcp, "mcp", "tool"),
        (vault, "vault", "grpc"),
        (indexer, "indexer", "grpc"),
    ):
        assert values(samples, "memvault_errors_total", component=component, where=where) == [0.0], component

    every_label = set().union(
        *(
            label_values(s, label)
            for s in (gateway, mcp, vault, indexer)
            for label in ("route", "method", "tool", "outcome", "status", "code", "component", "state", "where")
        )
    )
    for forbidden in (secret_text, "flowerpot", token, stranger_vault, stored["id"], "no/such"):
        assert not any(forbidden in value for value in every_label), forbidden
    routes = label_values(gateway, "route")
    assert all(route == "unmatched" or route.startswith("/") for route in routes)
    assert not any(len(part) == 36 for route in routes for part in route.split("/")), routes  # no raw ids

    async with httpx.AsyncClient(timeout=10) as http:
        elsewhere = await http.get(f"http://127.0.0.1:{ports['vault']}/other")
    assert elsewhere.status_code == 404 and "/metrics" in elsewhere.text
