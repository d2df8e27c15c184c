"""Client ID metadata documents: an https client_id whose document the gateway fetches, within limits."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
import pytest_asyncio
from gateway_helpers import Agent, Browser, StartGateway, free_port, pkce, query_of, serve_asgi, stop_asgi
from limits import parse
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse, Response
from starlette.routing import Route

from memvault_gateway.web.throttle import RULES

pytestmark = pytest.mark.integration

CALLBACK = "http://127.0.0.1:33420/callback"


class DocumentHost:
    """Serves client metadata documents on loopback; `documents[path]` is what each path answers."""

    def __init__(self) -> None:
        self.documents: dict[str, Any] = {}
        self.fetches = 0
        self.base = ""

    async def serve(self, request: Request) -> Response:
        self.fetches += 1
        document = self.documents.get(request.url.path)
        if document is None:
            return Response(status_code=404)
        if isinstance(document, Response):
            return document
        return JSONResponse(document)

    def add(self, path: str, **fields: Any) -> str:
        url = f"{self.base}{path}"
        self.documents[path] = {
            "client_id": url,
            "client_name": "Metadata agent",
            "redirect_uris": [CALLBACK],
            "token_endpoint_auth_method": "none",
            "grant_types": ["authorization_code", "refresh_token"],
            **fields,
        }
        return url


@pytest_asyncio.fixture
async def host() -> AsyncIterator[DocumentHost]:
    documents = DocumentHost()
    port = free_port()
    documents.base = f"http://127.0.0.1:{port}"
    server, task = await serve_asgi(Starlette(routes=[Route("/{path:path}", documents.serve)]), port)
    yield documents
    await stop_asgi(server, task)


async def test_agent_known_by_its_metadata_document_is_authorized(
    start_gateway: StartGateway, host: DocumentHost
) -> None:
    gateway = await start_gateway(
        gateway={"test_auto_approve_subject": "cimd-owner"}, oauth={"metadata_document_private_addresses": True}
    )
    client_id = host.add("/clients/agent.json")
    agent = Agent(gateway, {"client_id": client_id, "token_endpoint_auth_method": "none"}, redirect_uri=CALLBACK)
    verifier, challenge = pkce()
    async with gateway.http() as http:
        answer = await http.get(agent.authorize_url(challenge))
    assert answer.status_code == 302, answer.text
    tokens = await agent.exchange(query_of(answer.headers["location"])["code"], verifier)
    assert tokens.status_code == 200
    assert host.fetches == 1  # cached for the token request
    name = await gateway.fetchval("SELECT name FROM gateway.access_grant WHERE client_id = $1", client_id)
    assert name == "Metadata agent"


async def test_metadata_document_agent_may_return_to_any_loopback_port(
    start_gateway: StartGateway, host: DocumentHost
) -> None:
    """RFC 8252 §7.3 for clients known by a document: only the port may differ."""
    gateway = await start_gateway(
        gateway={"test_auto_approve_subject": "cimd-owner"}, oauth={"metadata_document_private_addresses": True}
    )
    client_id = host.add("/clients/ports.json")
    async with gateway.http() as http:
        for refused in ("http://127.0.0.1:41000/elsewhere", "http://localhost:33420/callback"):
            _, challenge = pkce()
            agent = Agent(gateway, {"client_id": client_id}, redirect_uri=refused)
            answer = await http.get(agent.authorize_url(challenge))
            assert answer.status_code == 400 and "redirect_uri mismatch" in answer.text
        agent = Agent(gateway, {"client_id": client_id}, redirect_uri="http://127.0.0.1:41001/callback")
        verifier, challenge = pkce()
        answer = await http.get(agent.authorize_url(challenge))
    assert answer.status_code == 302, answer.text
    assert answer.headers["location"].startswith("http://127.0.0.1:41001/callback?")
    tokens = await agent.exchange(query_of(answer.headers["location"])["code"], verifier)
    assert tokens.status_code == 200, tokens.text


async def test_metadata_document_on_a_private_address_is_not_fetched_by_default(
    start_gateway: StartGateway, host: DocumentHost
) -> None:
    gateway = await start_gateway(gateway={"test_auto_approve_subject": "cimd-owner"})
    agent = Agent(gateway, {"client_id": host.add("/c.json")}, redirect_uri=CALLBACK)
    _, challenge = pkce()
    async with gateway.http() as http:
        answer = await http.get(agent.authorize_url(challenge))
    assert answer.status_code == 400 and "location" not in answer.headers
    assert host.fetches == 0


async def test_with_metadata_documents_off_apps_are_told_to_register_and_the_setting_is_named(
    start_gateway: StartGateway, host: DocumentHost
) -> None:
    gateway = await start_gateway(
        gateway={"test_auto_approve_subject": "cimd-owner"},
        oauth={"metadata_documents": False, "metadata_document_private_addresses": True},
    )
    async with gateway.http() as http:
        metadata = (await http.get("/.well-known/oauth-authorization-server")).json()
    assert metadata["client_id_metadata_document_supported"] is False
    assert metadata["registration_endpoint"] == f"{gateway.url}/register"  # what such apps fall back to
    _, challenge = pkce()
    for client_id in ("https://chatgpt.com/oauth/codex/client.json", host.add("/clients/agent.json")):
        agent = Agent(gateway, {"client_id": client_id}, redirect_uri=CALLBACK)
        async with gateway.http() as http:
            answer = await http.get(agent.authorize_url(challenge))
        assert answer.status_code == 400 and "location" not in answer.headers
        assert "MEMVAULT_OAUTH__METADATA_DOCUMENTS=false" in answer.text
        assert "register itself" in answer.text
    assert host.fetches == 0


async def test_an_unreachable_metadata_document_names_the_setting_for_gateways_without_internet(
    start_gateway: StartGateway,
) -> None:
    gateway = await start_gateway(
        gateway={"test_auto_approve_subject": "cimd-owner"}, oauth={"metadata_document_private_addresses": True}
    )
    nobody = f"http://127.0.0.1:{free_port()}/client.json"  # nothing listens there
    agent = Agent(gateway, {"client_id": nobody}, redirect_uri=CALLBACK)
    _, challenge = pkce()
    async with gateway.http() as http:
        answer = await http.get(agent.authorize_url(challenge))
    assert answer.status_code == 400 and "location" not in answer.headers
    assert "could not fetch the client metadata document (ConnectError)" in answer.text
    assert "MEMVAULT_OAUTH__METADATA_DOCUMENTS=false" in answer.text


@pytest.mark.parametrize(
    ("fault", "message"),
    [
        ("mismatch", "client_id is not the URL"),
        ("redirect", "redirect_uri mismatch"),
        ("large", "larger than 16 KiB"),
        ("redirected", "answered HTTP 302"),
        ("secret", "only public clients"),
        ("missing", "answered HTTP 404"),
    ],
)
async def test_bad_metadata_documents_are_refused(
    start_gateway: StartGateway, host: DocumentHost, fault: str, message: str
) -> None:
    gateway = await start_gateway(
        gateway={"test_auto_approve_subject": "cimd-owner"}, oauth={"metadata_document_private_addresses": True}
    )
    path = f"/bad/{fault}.json"
    url = host.add(path)
    redirect = CALLBACK
    if fault == "mismatch":
        host.documents[path]["client_id"] = f"{host.base}/someone-else.json"
    elif fault == "redirect":
        redirect = "http://127.0.0.1:1/elsewhere"
    elif fault == "large":
        host.documents[path]["client_name"] = "x" * 20000
    elif fault == "redirected":
        host.documents[path] = RedirectResponse(f"{host.base}/clients/agent.json", status_code=302)
    elif fault == "secret":
        host.documents[path]["token_endpoint_auth_method"] = "client_secret_basic"
    elif fault == "missing":
        del host.documents[path]
    agent = Agent(gateway, {"client_id": url}, redirect_uri=redirect)
    _, challenge = pkce()
    async with gateway.http() as http:
        answer = await http.get(agent.authorize_url(challenge))
    assert answer.status_code == 400
    assert "location" not in answer.headers
    assert message in answer.text
    stored = await gateway.fetchval("SELECT count(*) FROM gateway.oauth_client WHERE client_id = $1", url)
    assert stored == (1 if fault == "redirect" else 0)  # only a usable document is kept


async def test_a_failed_metadata_document_is_not_fetched_again_at_once(
    start_gateway: StartGateway, host: DocumentHost
) -> None:
    gateway = await start_gateway(
        gateway={"test_auto_approve_subject": "cimd-owner"}, oauth={"metadata_document_private_addresses": True}
    )
    agent = Agent(gateway, {"client_id": f"{host.base}/gone.json"}, redirect_uri=CALLBACK)
    _, challenge = pkce()
    async with gateway.http() as http:
        first = await http.get(agent.authorize_url(challenge))
        second = await http.get(agent.authorize_url(challenge))
    assert first.status_code == 400 and "answered HTTP 404" in first.text
    assert second.status_code == 400 and "a moment ago" in second.text
    assert host.fetches == 1


async def test_new_metadata_documents_are_fetched_at_most_so_often_per_address(
    start_gateway: StartGateway, host: DocumentHost, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(RULES, "metadata-document", parse("3/hour"))
    gateway = await start_gateway(
        gateway={"test_auto_approve_subject": "cimd-owner"}, oauth={"metadata_document_private_addresses": True}
    )
    _, challenge = pkce()
    agents = [Agent(gateway, {"client_id": host.add(f"/flood/{n}.json")}, redirect_uri=CALLBACK) for n in range(4)]
    async with gateway.http() as http:
        answers = [await http.get(agent.authorize_url(challenge)) for agent in agents]
        cached = await http.get(agents[0].authorize_url(challenge))
    assert [a.status_code for a in answers] == [302, 302, 302, 429]
    assert "too many requests" in answers[-1].json()["detail"]
    assert int(answers[-1].headers["retry-after"]) > 0
    assert host.fetches == 3
    assert cached.status_code == 302  # a document fetched within the hour costs nothing
    stored = await gateway.fetchval(
        "SELECT count(*) FROM gateway.oauth_client WHERE client_id LIKE $1", f"{host.base}/flood/%"
    )
    assert stored == 3


async def test_each_approval_of_an_app_known_by_its_document_is_a_connection_of_its_own(
    start_gateway: StartGateway, host: DocumentHost
) -> None:
    """Its client_id is shared by every install (the owner's laptop and desktop): approving again adds one."""
    gateway = await start_gateway(oauth={"metadata_document_private_addresses": True})
    username, password = await gateway.create_user()
    browser = Browser(gateway)
    assert (await browser.sign_in(username, password)).status_code == 303
    client_id = host.add("/clients/shared.json")
    agent = Agent(gateway, {"client_id": client_id, "token_endpoint_auth_method": "none"}, redirect_uri=CALLBACK)
    _, challenge = pkce()
    assert (await browser.consent(agent.authorize_url(challenge))).status_code == 303

    page = await browser.http.get(agent.authorize_url(challenge))
    assert "You have connected <strong>Metadata agent</strong> once already" in page.text
    assert "replaces" not in page.text
    assert (await browser.consent(agent.authorize_url(challenge))).status_code == 303
    live = await gateway.fetchval(
        "SELECT count(*) FROM gateway.access_grant WHERE client_id = $1 AND revoked_at IS NULL", client_id
    )
    assert live == 2
