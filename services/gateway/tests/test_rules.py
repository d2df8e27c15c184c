"""Pure rules: settings validation, redirect URIs, scopes, PKCE, passwords, metadata document addresses."""

from __future__ import annotations

import base64
import hashlib
import json

import pytest
from pydantic import ValidationError

from memvault_core.fetch import is_public_address
from memvault_gateway.auth import credentials, scopes
from memvault_gateway.oauth.redirects import redirect_uri_matches, redirect_uri_problem
from memvault_gateway.settings import ForwardAuthGroup, GatewayGroup, OidcGroup
from memvault_gateway.web import tracing
from memvault_mcp.tools import build_tools

pytestmark = pytest.mark.unit


def test_auto_approve_is_refused_unless_the_gateway_listens_on_loopback() -> None:
    GatewayGroup(host="127.0.0.1", test_auto_approve_subject="owner")
    GatewayGroup(host="::1", test_auto_approve_subject="owner", public_url="http://[::1]:8080")
    with pytest.raises(ValidationError, match="MEMVAULT_GATEWAY__HOST is a loopback address"):
        GatewayGroup(host="0.0.0.0", test_auto_approve_subject="owner")


@pytest.mark.parametrize("url", ["https://memvault.example", "https://memvault.example:8443", "https://10.0.0.5"])
def test_auto_approve_is_refused_behind_a_proxy_with_a_public_url(url: str) -> None:
    """A gateway on 127.0.0.1 behind a local reverse proxy would approve every agent from the internet."""
    with pytest.raises(ValidationError, match="MEMVAULT_GATEWAY__PUBLIC_URL a loopback URL") as refused:
        GatewayGroup(host="127.0.0.1", public_url=url, test_auto_approve_subject="owner")
    assert "MEMVAULT_GATEWAY__TEST_AUTO_APPROVE_SUBJECT" in str(refused.value)
    assert GatewayGroup(host="127.0.0.1", public_url=url).public_url == url  # fine without auto-approval
    for loopback in ("http://127.0.0.1:8080", "http://localhost:8080", "http://[::1]:8080"):
        GatewayGroup(host="127.0.0.1", public_url=loopback, test_auto_approve_subject="owner")


@pytest.mark.parametrize("url", ["http://memvault.lan:8080", "ftp://x.example", "https://x.example/?a=1"])
def test_public_url_must_be_https_unless_loopback(url: str) -> None:
    with pytest.raises(ValidationError):
        GatewayGroup(public_url=url)


def test_public_url_loopback_http_and_https_are_fine() -> None:
    assert GatewayGroup(public_url="http://localhost:8080/").public_url == "http://localhost:8080"
    assert GatewayGroup(public_url="https://memvault.example/").public_url == "https://memvault.example"


def test_forward_auth_needs_trusted_proxies_and_checks_them() -> None:
    with pytest.raises(ValidationError, match="TRUSTED_PROXIES"):
        ForwardAuthGroup(header="Remote-User")
    group = ForwardAuthGroup(header="Remote-User", trusted_proxies=["10.0.0.0/8", "127.0.0.1"])
    assert group.trusts("10.1.2.3") and group.trusts("127.0.0.1")
    assert not group.trusts("192.168.1.1") and not group.trusts(None) and not group.trusts("nonsense")


def test_oidc_needs_a_client_id_and_an_https_issuer() -> None:
    with pytest.raises(ValidationError, match="CLIENT_ID"):
        OidcGroup(issuer="https://idp.example")
    with pytest.raises(ValidationError):
        OidcGroup(issuer="http://idp.example", client_id="x")
    assert OidcGroup(issuer="http://127.0.0.1:9000/", client_id="x").issuer == "http://127.0.0.1:9000"


@pytest.mark.parametrize(
    "uri",
    [
        "https://claude.ai/api/mcp/auth_callback",
        "http://127.0.0.1:6276/oauth/callback",
        "http://localhost/cb",
        "http://[::1]:3000/callback",
    ],
)
def test_redirect_uris_that_are_allowed(uri: str) -> None:
    assert redirect_uri_problem(uri) is None


@pytest.mark.parametrize(
    "uri",
    [
        "http://example.com/cb",
        "https://x.example/cb#f",
        "https://user:pw@x.example/cb",
        "cursor://a/b",
        "",
        "https://",
        "https://x.example/a b",
        "http://127.0.0.1.evil.example/cb",
    ],
)
def test_redirect_uris_that_are_refused(uri: str) -> None:
    assert redirect_uri_problem(uri) is not None


@pytest.mark.parametrize(
    ("requested", "registered", "matches"),
    [
        ("http://127.0.0.1:5000/cb", "http://127.0.0.1:33418/cb", True),
        ("http://127.0.0.1/cb", "http://127.0.0.1:33418/cb", True),
        ("http://[::1]:5000/cb?a=1", "http://[::1]/cb?a=1", True),
        ("http://LOCALHOST:5000/cb", "http://localhost:1/cb", True),
        ("http://127.0.0.1:5000/cb?a=2", "http://127.0.0.1:1/cb?a=1", False),
        ("http://127.0.0.1:5000/cb/", "http://127.0.0.1:1/cb", False),
        ("http://127.0.0.1:99999/cb", "http://127.0.0.1:1/cb", False),
        ("http://user@127.0.0.1:5000/cb", "http://127.0.0.1:1/cb", False),
        ("http://127.0.0.1:5000/cb#x", "http://127.0.0.1:1/cb", False),
        ("http://127.0.0.2:5000/cb", "http://127.0.0.2:1/cb", False),  # only the three named hosts
        ("http://localhost:5000/cb", "http://127.0.0.1:5000/cb", False),
        ("https://app.example:8443/cb", "https://app.example/cb", False),  # never for non-loopback
        ("cursor://x:5/cb", "cursor://x/cb", False),
    ],
)
def test_loopback_redirect_uris_match_on_any_port_only(requested: str, registered: str, matches: bool) -> None:
    assert redirect_uri_matches(requested, registered) is matches


def test_private_use_schemes_only_when_listed() -> None:
    assert redirect_uri_problem("cursor://anysphere.cursor-mcp/oauth/callback", ["cursor"]) is None


def test_every_tool_that_changes_memories_needs_write() -> None:
    for tool in build_tools():
        read_only = bool(tool.annotations and tool.annotations.read_only_hint)
        assert (tool.name in scopes.WRITE_TOOLS) == (not read_only), tool.name


def test_write_calls_are_found_in_a_request_body() -> None:
    call = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "forget", "arguments": {}}}
    assert scopes.write_call_in(json.dumps(call).encode()) == ("forget", 1)
    assert scopes.write_call_in(json.dumps([call]).encode()) == ("forget", 1)
    assert scopes.write_call_in(b'{"method": "tools/list"}') is None
    assert scopes.write_call_in(b"not json") is None
    assert scopes.satisfies(["admin"], "write") and not scopes.satisfies(["read"], "write")
    assert scopes.parse("write offline_access read bogus") == ("read", "write")


def test_pkce_s256_is_unpadded_base64url_of_sha256() -> None:
    verifier = "dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gYWFo2gWM"
    challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).rstrip(b"=").decode()
    assert credentials.pkce_matches(verifier, challenge)
    assert not credentials.pkce_matches(verifier, challenge[:-1] + ("A" if challenge[-1] != "A" else "B"))
    assert not credentials.pkce_matches("too-short", challenge)


def test_passwords_are_argon2id_and_checked() -> None:
    stored = credentials.hash_password("correct horse battery staple")
    assert stored.startswith("$argon2id$")
    assert credentials.check_password("correct horse battery staple", stored)
    assert not credentials.check_password("wrong", stored)
    assert not credentials.check_password("anything", None)
    assert credentials.password_problem("short") is not None


@pytest.mark.parametrize(
    "address",
    [
        "127.0.0.1",
        "10.1.2.3",
        "169.254.169.254",
        "::1",
        "fd00::1",
        "::ffff:127.0.0.1",  # IPv4-mapped
        "::ffff:10.0.0.1",
        "64:ff9b::7f00:1",  # NAT64 well-known prefix: 127.0.0.1
        "64:ff9b::a9fe:a9fe",  # NAT64: 169.254.169.254
        "64:ff9b:1::a00:1",  # local-use NAT64
        "2002:7f00:1::1",  # 6to4 around 127.0.0.1
        "2002:a00:1::1",  # 6to4 around 10.0.0.1
        "2001:0:4136:e378:8000:63bf:3fff:fdd2",  # Teredo
        "2001:0:a00:1:8000:63bf:3fff:fdd2",  # Teredo with a private server address
    ],
)
def test_metadata_documents_are_not_fetched_from_private_or_translated_addresses(address: str) -> None:
    assert not is_public_address(address)


@pytest.mark.parametrize("address", ["93.184.215.14", "2606:2800:21f:cb07:6820:80da:af6b:8b2c"])
def test_metadata_documents_may_be_fetched_from_public_addresses(address: str) -> None:
    assert is_public_address(address)


def test_traced_urls_lose_credentials() -> None:
    assert tracing.redact("/setup/mvsetup_abc123") == "/setup/REDACTED"
    assert tracing.redact("http://h/login/email/mvmail_abc123") == "http://h/login/email/REDACTED"
    assert tracing.redact("/account/email/mvmail_abc123?x=1") == "/account/email/REDACTED?x=REDACTED"
    assert tracing.redact("/account/email") == "/account/email"
    assert tracing.redact("http://h/mcp?access_token=mva_x&x=1") == "http://h/mcp?access_token=REDACTED&x=REDACTED"
    assert tracing.redact_query("code=abc&state=s1&iss=http://h") == "code=REDACTED&state=REDACTED&iss=http://h"
    assert tracing.redact("/authorize?client_id=c&scope=read&code_challenge=x") == (
        "/authorize?client_id=c&scope=read&code_challenge=REDACTED"
    )
    assert tracing.redact("/api/v1/grants") == "/api/v1/grants"


def test_traced_urls_lose_memory_text_and_any_parameter_not_known_to_be_harmless() -> None:
    recall = "/api/v1/vaults/home/recall?q=where+is+the+spare+key&limit=5&cursor=c1&tag=house&status=active"
    assert tracing.redact(recall) == (
        "/api/v1/vaults/home/recall?q=REDACTED&limit=5&cursor=REDACTED&tag=REDACTED&status=active"
    )
    assert tracing.redact_query("query=text&Limit=5&next=/authorize%3Fstate%3Ds") == (
        "query=REDACTED&Limit=REDACTED&next=REDACTED"
    )

    class Span:
        def __init__(self) -> None:
            self.attributes = {"http.target": "/login/oidc/callback?code=secret&state=s", "http.method": "GET"}
            self.written: dict[str, str] = {}

        def is_recording(self) -> bool:
            return True

        def set_attribute(self, name: str, value: str) -> None:
            self.written[name] = value

    span = Span()
    tracing.server_request_hook(span, {})
    assert span.written == {"http.target": "/login/oidc/callback?code=REDACTED&state=REDACTED"}
