"""Schema fuzzing of /api/v1: schemathesis generates requests from the gateway's own OpenAPI document
(`/api/v1/openapi.json`) and sends them to a running stack, once as the signed-in owner (session
cookie and CSRF token) and once with a service token. Every answer must be documented for its
operation (status code) and none may be a server error.

The run is bounded (`FUZZ_EXAMPLES` per operation, a time budget per run) and seeded, so CI sees
the same requests each time; `MEMVAULT_FUZZ_SEED` and `MEMVAULT_FUZZ_EXAMPLES` change them for a
longer hunt. A failure prints schemathesis's report with a curl line that reproduces each case.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path

import asyncpg
import httpx
import pytest
from e2e_helpers import PASSWORD, csrf_of

from memvault_devstack.fixtures import StackStarter
from memvault_devstack.stack import Stack

pytestmark = pytest.mark.e2e

FUZZ_SEED = int(os.environ.get("MEMVAULT_FUZZ_SEED", "19"))
FUZZ_EXAMPLES = int(os.environ.get("MEMVAULT_FUZZ_EXAMPLES", "12"))
FUZZ_SECONDS = int(os.environ.get("MEMVAULT_FUZZ_SECONDS", "100"))
CHECKS = "not_a_server_error,status_code_conformance"
FUZZ_DIR = Path(__file__).parent / "fuzz"


def signed_in_owner(stack: Stack) -> httpx.Client:
    """The owner, signed up through a setup link, in a client that keeps the session cookie."""
    link = subprocess.run(
        [sys.executable, "-m", "memvault_gateway", "setup-link", "--username", "owner"],
        env={**os.environ, **stack.env_for("gateway")},
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    ).stdout.strip()
    http = httpx.Client(base_url=stack.gateway_url, follow_redirects=False, timeout=30)
    path = link.removeprefix(stack.gateway_url)
    page = http.get(path)
    done = http.post(path, data={"password": PASSWORD, "password_again": PASSWORD, "csrf_token": csrf_of(page.text)})
    assert done.status_code == 303, done.text
    return http


def schemathesis(stack: Stack, headers: dict[str, str], report: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    command = [
        str(Path(sys.executable).with_name("schemathesis")),
        "--config-file",
        str(FUZZ_DIR / "schemathesis.toml"),
        "run",
        f"{stack.gateway_url}/api/v1/openapi.json",
        "--url",
        stack.gateway_url,
        "--checks",
        CHECKS,
        "--max-examples",
        str(FUZZ_EXAMPLES),
        "--seed",
        str(FUZZ_SEED),
        "--workers",
        "1",
        "--phases",
        "examples,coverage,fuzzing",
        "--max-time",
        str(FUZZ_SECONDS),
        "--request-timeout",
        "30",
        "--suppress-health-check",
        "all",
        "--no-shrink",
        "--report",
        "junit",
        "--report-dir",
        str(report),
        *extra,
    ]
    for name, value in headers.items():
        command += ["--header", f"{name}: {value}"]
    # Its cache (.schemathesis/) goes to the test's folder; the hooks module is found on PYTHONPATH.
    env = {**os.environ, "PYTHONPATH": str(FUZZ_DIR)}
    return subprocess.run(
        command, capture_output=True, text=True, timeout=FUZZ_SECONDS + 120, check=False, cwd=report.parent, env=env
    )


@pytest.fixture
def fuzz_stack(fresh_stack: StackStarter) -> Stack:
    # Dev mode off: an unauthenticated request is refused (401), as deployed.
    return fresh_stack(service_env={"gateway": {"MEMVAULT_GATEWAY__DEV_MODE": "false"}})


def test_api_v1_fuzzed_with_a_session_and_a_service_token(fuzz_stack: Stack, tmp_path: Path) -> None:
    owner = signed_in_owner(fuzz_stack)
    me = owner.get("/api/v1/me").json()
    csrf = me["csrf_token"]
    created = owner.post(
        "/api/v1/service-tokens",
        json={"name": "fuzz", "scopes": ["read", "write", "admin"], "vaults": ["default"]},
        headers={"X-CSRF-Token": csrf},
    )
    assert created.status_code == 201, created.text
    token = created.json()["token"]
    cookie = "; ".join(f"{name}={value}" for name, value in owner.cookies.items())

    # The token first: the session's run may revoke it (DELETE /grants/{id} is among the operations).
    failures = []
    for who, headers in (
        ("service token", {"Authorization": f"Bearer {token}"}),
        ("session", {"Cookie": cookie, "X-CSRF-Token": csrf}),
    ):
        run = schemathesis(fuzz_stack, headers, tmp_path / who.replace(" ", "-"))
        if run.returncode != 0:
            failures.append(
                f"--- schemathesis as {who} (exit {run.returncode}) ---\n{run.stdout[-12000:]}{run.stderr[-3000:]}"
            )
    assert not failures, "\n".join(failures)
    # The session still works: nothing the fuzzer sent signed the owner out or broke the account.
    assert owner.get("/api/v1/me").status_code == 200
    # The requests reached the vault's own checks and storage, not only "no such vault" (fuzz/schemathesis.toml).
    # Read from the database: the owner's own audit view is not enough, because the fuzzer may share
    # `default` with another account as owner and then remove the owner from it, a legitimate move that
    # hides the vault's entries from them.
    audited = asyncio.run(audited_actions(fuzz_stack.postgres_dsn))
    assert any(action.startswith("memory.") for action in audited), audited


async def audited_actions(dsn: str) -> dict[str, int]:
    """How often each action is in the audit log."""
    connection = await asyncpg.connect(dsn)
    try:
        rows = await connection.fetch("SELECT action, count(*) AS n FROM audit_log GROUP BY action ORDER BY action")
    finally:
        await connection.close()
    return {str(row["action"]): int(row["n"]) for row in rows}
