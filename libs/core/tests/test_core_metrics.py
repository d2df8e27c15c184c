"""The metrics endpoint: served at its path only, refusing a taken port in one line; route templates
as labels."""

from __future__ import annotations

import socket
import urllib.error
import urllib.request
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families
from starlette.applications import Starlette
from starlette.responses import PlainTextResponse
from starlette.routing import Route
from starlette.testclient import TestClient

from memvault_core.metrics import HTTP_SECONDS, HttpMetrics, MetricsSettings, serve_metrics

pytestmark = pytest.mark.unit


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_metrics_are_served_at_their_path_only() -> None:
    port = free_port()
    server = serve_metrics("test", MetricsSettings(enabled=True, port=port, path="/internal/metrics"))
    assert server is not None
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/internal/metrics", timeout=5) as answer:
            names = {family.name for family in text_string_to_metric_families(answer.read().decode())}
        assert "memvault_grpc_server_handling_seconds" in names
        with pytest.raises(urllib.error.HTTPError) as elsewhere:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5)
        assert elsewhere.value.code == 404 and b"/internal/metrics" in elsewhere.value.read()
    finally:
        server.stop()


def test_off_by_default_and_a_taken_port_is_one_line() -> None:
    assert serve_metrics("test", MetricsSettings()) is None
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(SystemExit) as stopped:
            serve_metrics("vault", MetricsSettings(enabled=True, port=port))
    assert str(stopped.value).startswith(f"memvault-vault: cannot serve metrics on 127.0.0.1:{port}")
    assert "MEMVAULT_METRICS__PORT" in str(stopped.value)


def test_requests_are_labelled_by_route_template_not_by_path() -> None:
    async def item(request: Any) -> PlainTextResponse:
        return PlainTextResponse("ok")

    app = HttpMetrics(Starlette(routes=[Route("/things/{thing_id}", item)]), "unit-test")
    with TestClient(app) as client:
        for thing in ("a1", "b2", "secret-c3"):
            assert client.get(f"/things/{thing}").status_code == 200
        assert client.get("/nowhere/secret-d4").status_code == 404
    samples = [
        s.labels
        for family in HTTP_SECONDS.collect()
        for s in family.samples
        if s.name.endswith("_count") and s.labels["component"] == "unit-test"
    ]
    assert {(s["route"], s["status"]) for s in samples} == {("/things/{thing_id}", "200"), ("unmatched", "404")}
    assert not any("secret" in value for s in samples for value in s.values())
