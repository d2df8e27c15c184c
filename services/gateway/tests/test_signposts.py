"""Wrong turns: agents' addresses opened in a browser, unknown pages, foreign Host names, dev-mode texts."""

from __future__ import annotations

import asyncio
from urllib.parse import urlsplit

import pytest
from gateway_helpers import INITIALIZE, MCP_HEADERS, Browser, StartGateway, mcp_post

pytestmark = pytest.mark.integration

BROWSER_ACCEPT = "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"


@pytest.mark.parametrize("dev_mode", [False, True])
async def test_a_browser_opening_mcp_gets_a_page_pointing_to_connect_and_account(
    start_gateway: StartGateway, dev_mode: bool
) -> None:
    gateway = await start_gateway(gateway={"dev_mode": dev_mode})
    # A bound on the wait: forwarded to the mcp service, a GET can open an event stream that never ends.
    async with gateway.http() as http, asyncio.timeout(20):
        page = await http.get("/mcp", headers={"Accept": BROWSER_ACCEPT})
    assert page.status_code == 200
    assert page.headers["content-type"].startswith("text/html")
    assert "for your agents" in page.text
    assert f"href='{gateway.url}/connect'" in page.text
    assert f"href='{gateway.url}/account'" in page.text
    assert page.headers["x-frame-options"] == "DENY"


async def test_unknown_paths_get_html_for_browsers_and_a_problem_for_programs(start_gateway: StartGateway) -> None:
    gateway = await start_gateway()
    async with gateway.http() as http:
        page = await http.get("/no/such/page", headers={"Accept": BROWSER_ACCEPT})
        program = await http.get("/no/such/page", headers={"Accept": "application/json"})
        plain = await http.get("/api/v1/no-such-route")
    assert page.status_code == 404
    assert page.headers["content-type"].startswith("text/html")
    assert "Page not found" in page.text and f"href='{gateway.url}/account'" in page.text
    for answer in (program, plain):
        assert answer.status_code == 404
        assert answer.headers["content-type"] == "application/problem+json"
        assert f"{gateway.url}/mcp" in answer.json()["detail"]
        assert f"{gateway.url}/connect" in answer.json()["detail"]


async def test_mcp_answers_only_for_its_own_host_names(start_gateway: StartGateway) -> None:
    gateway = await start_gateway(gateway={"extra_hosts": ["memvault-gateway:8080", "memvault.lan"]})
    port = urlsplit(gateway.url).port
    refused = await mcp_post(gateway, INITIALIZE, Host=f"attacker.example:{port}")
    assert refused.status_code == 421
    assert "MEMVAULT_GATEWAY__EXTRA_HOSTS" in refused.json()["detail"]
    assert (await mcp_post(gateway, INITIALIZE, Host=f"127.0.0.1:{port + 1}")).status_code == 421
    assert (await mcp_post(gateway, INITIALIZE, Host="memvault-gateway:9999")).status_code == 421
    assert (await mcp_post(gateway, INITIALIZE, Host="")).status_code == 421
    async with gateway.http() as http:
        page = await http.get("/mcp", headers={"Accept": BROWSER_ACCEPT, "Host": "attacker.example"})
    assert page.status_code == 421 and page.headers["content-type"].startswith("text/html")
    assert "attacker.example" in page.text and "MEMVAULT_GATEWAY__EXTRA_HOSTS" in page.text
    # The public host and port, another loopback name for it, and the extra hosts reach the token check.
    for host in (f"127.0.0.1:{port}", f"localhost:{port}", "memvault-gateway:8080", "memvault.lan", "MEMVAULT.lan:1"):
        answer = await mcp_post(gateway, INITIALIZE, Host=host)
        assert answer.status_code == 401, host
        assert answer.headers["www-authenticate"].startswith("Bearer")


async def test_dev_mode_connect_and_account_pages_describe_no_sign_in(start_gateway: StartGateway) -> None:
    dev = await start_gateway(gateway={"dev_mode": True, "dev_subject": "owner"})
    normal = await start_gateway()
    async with dev.http() as http:
        dev_connect = (await http.get("/connect")).text
    async with normal.http() as http:
        oauth_connect = (await http.get("/connect")).text
    assert "Authenticate" not in dev_connect and "mcp login" not in dev_connect
    assert "without signing in" in dev_connect and "`owner`" in dev_connect
    assert f"{dev.url}/mcp" in dev_connect
    assert "Authenticate" in oauth_connect and "codex mcp login memvault" in oauth_connect
    assert "approves each app once" in oauth_connect

    for gateway, expected, absent in (
        (dev, "without signing in (dev mode", "each asks you here once"),
        (normal, "each asks you here once", "dev mode"),
    ):
        username, password = await gateway.create_user()
        browser = Browser(gateway)
        await browser.sign_in(username, password)
        account = await browser.http.get("/account")
        await browser.close()
        assert account.status_code == 200
        assert expected in account.text and absent not in account.text


async def test_agents_get_json_not_html(start_gateway: StartGateway) -> None:
    gateway = await start_gateway()
    async with gateway.http() as http:
        posted = await http.post("/mcp", json=INITIALIZE, headers=MCP_HEADERS)
        stream = await http.get("/mcp", headers={"Accept": "text/html, text/event-stream"})
    for answer in (posted, stream):
        assert answer.status_code == 401
        assert answer.headers["content-type"] == "application/problem+json"
