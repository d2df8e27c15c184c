"""Index maintenance on a running stack: failed index jobs listed and retried through /api/v1, a
rebuild started as a background job with its progress, and a switch of the embedding model end
to end (recall keyword-only until the new collection is full, then hybrid; the old collection
dropped with one command, the active one refused)."""

from __future__ import annotations

import asyncio
import hashlib
import os
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
import uvicorn
from e2e_helpers import PASSWORD, call, csrf_of, eventually, mcp_session, service_identity, vault_stats
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from memvault.vault.v1 import index_feed_pb2, index_feed_pb2_grpc
from memvault_core.grpc import client_channel
from memvault_devstack.fixtures import StackStarter
from memvault_devstack.stack import Stack

pytestmark = pytest.mark.e2e

FACTS = [
    "Sam's partner is allergic to peanuts.",
    "The homelab NAS is a Synology DS920+ with four drives.",
    "Deployments run on a k3s cluster of three Intel NUCs.",
    "Prefers dark roast coffee in the morning.",
    "The office printer is a Brother HL-L2350DW.",
]


class TrigramModel:
    """Another embedding model, offline: an OpenAI-compatible `/v1/embeddings` server whose vectors
    are hashed character trigrams. Requests after the first (the indexer's dimension probe) wait
    while `gate` is closed, so a test can watch the indexer fill a collection."""

    def __init__(self, dimension: int = 32) -> None:
        self.dimension = dimension
        self.gate = threading.Event()
        self.gate.set()
        self.requests = 0
        self._socket = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._socket.bind(("127.0.0.1", 0))
        self.port = int(self._socket.getsockname()[1])
        app = Starlette(routes=[Route("/v1/embeddings", self._embeddings, methods=["POST"])])
        self._server = uvicorn.Server(uvicorn.Config(app, lifespan="off", log_level="warning", access_log=False))
        self._thread = threading.Thread(target=self._server.run, kwargs={"sockets": [self._socket]}, daemon=True)

    def vector(self, text: str) -> list[float]:
        vector = [0.0] * self.dimension
        padded = f"  {text.lower()}  "
        for i in range(len(padded) - 2):
            digest = hashlib.blake2b(padded[i : i + 3].encode(), digest_size=4).digest()
            vector[int.from_bytes(digest, "big") % self.dimension] += 1.0
        return vector

    async def _embeddings(self, request: Request) -> JSONResponse:
        body = await request.json()
        self.requests += 1
        if self.requests > 1:
            await asyncio.to_thread(self.gate.wait, 60)
        texts = body["input"] if isinstance(body["input"], list) else [body["input"]]
        return JSONResponse(
            {"data": [{"index": i, "embedding": self.vector(t)} for i, t in enumerate(texts)], "model": body["model"]}
        )

    def __enter__(self) -> TrigramModel:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.gate.set()
        self._server.should_exit = True
        self._thread.join(10)


@pytest.fixture
def trigram_model() -> Iterator[TrigramModel]:
    with TrigramModel() as model:
        yield model


async def signed_in_admin(stack: Stack) -> tuple[httpx.AsyncClient, str]:
    """The first local account (the administrator, subject `owner` as the dev owner's), signed in; and its CSRF token."""
    link = subprocess.run(  # noqa: ASYNC221 (a one-off CLI call before any client runs)
        [sys.executable, "-m", "memvault_gateway", "setup-link", "--username", "owner"],
        env={**os.environ, **stack.env_for("gateway")},
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    ).stdout.strip()
    http = httpx.AsyncClient(base_url=stack.gateway_url, follow_redirects=False, timeout=30)
    path = link.removeprefix(stack.gateway_url)
    page = await http.get(path)
    done = await http.post(
        path, data={"password": PASSWORD, "password_again": PASSWORD, "csrf_token": csrf_of(page.text)}
    )
    assert done.status_code == 303, done.text
    me = (await http.get("/api/v1/me")).json()
    return http, me["csrf_token"]


def indexer_command(stack: Stack, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "memvault_indexer", *args, "--address", stack.indexer_address],
        env=stack.env_for("indexer"),
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


async def fail_index(stack: Stack, memory_ids: list[str], error: str) -> None:
    """What the indexer reports when an event keeps failing (dead-lettered): a failed index job."""
    channel = client_channel(stack.vault_address)
    try:
        await index_feed_pb2_grpc.IndexFeedServiceStub(channel).ReportIndexed(
            index_feed_pb2.ReportIndexedRequest(
                reports=[
                    index_feed_pb2.IndexReport(
                        memory_id=i, model="x", state=index_feed_pb2.INDEX_STATE_FAILED, error=error
                    )
                    for i in memory_ids
                ]
            ),
            metadata=service_identity(stack, "indexer"),
        )
    finally:
        await channel.close()


def fully_indexed(stack: Stack, expected: int) -> Any:
    async def check() -> bool:
        stats = await vault_stats(stack)
        return bool(stats.indexed == expected and stats.index_pending == 0 and stats.index_failed == 0)

    return check


async def test_failed_index_jobs_retry_rebuild_progress_and_a_model_switch(
    fresh_stack: StackStarter, trigram_model: TrigramModel
) -> None:
    stack: Stack = await asyncio.to_thread(fresh_stack)
    http, csrf = await signed_in_admin(stack)
    async with mcp_session(stack.mcp_url) as client:
        ids = [(await call(client, "remember", content=fact))["id"] for fact in FACTS]
        await eventually(fully_indexed(stack, len(FACTS)))
        index = "/api/v1/vaults/default/index"
        assert (await http.get(index)).json() == {"failed_total": 0, "failures": []}

        # Failed index jobs: listed with their error, retried one, then all.
        await fail_index(stack, ids[:3], "EmbeddingError")
        listed = (await http.get(index)).json()
        assert listed["failed_total"] == 3
        assert {f["memory_id"] for f in listed["failures"]} == set(ids[:3])
        assert all(f["error"] == "EmbeddingError" and f["attempts"] == 1 for f in listed["failures"])
        refused = await http.post(f"{index}/retry", json={"memory_ids": [ids[0]]})  # no CSRF token
        assert refused.status_code == 403
        headers = {"X-CSRF-Token": csrf}
        retried = await http.post(f"{index}/retry", json={"memory_ids": [ids[0]]}, headers=headers)
        assert retried.status_code == 200 and retried.json() == {"retried": 1}
        bad = await http.post(f"{index}/retry", json={"memory_ids": ["not-an-id"]}, headers=headers)
        assert bad.status_code == 400
        assert (await http.post(f"{index}/retry", json={}, headers=headers)).json() == {"retried": 2}
        await eventually(fully_indexed(stack, len(FACTS)))  # the indexer took them again
        assert (await http.get(index)).json()["failed_total"] == 0

        # A rebuild as a background job, one at a time, with its progress.
        started = await http.post(f"{index}/job", json={"kind": "rebuild"}, headers=headers)
        assert started.status_code == 202, started.text
        assert started.json()["job"]["kind"] == "rebuild"
        assert (await http.post(f"{index}/job", json={"kind": "nonsense"}, headers=headers)).status_code == 422

        async def job_done() -> Any:
            job = (await http.get(f"{index}/job")).json()["job"]
            return job if job["state"] != "running" else None

        job = await eventually(job_done)
        assert job["state"] == "finished" and job["done"] == job["total"] == len(FACTS) and job["failed"] == 0
        assert job["started_at"] <= job["finished_at"]
        assert (await call(client, "recall", query="food allergy"))["mode"] == "hybrid"

        # Switch the embedding model: the new collection fills while recall answers keyword-only.
        old = (await call(client, "recall", query="Which NAS is in the homelab?"))["results"][0]["id"]
        await asyncio.to_thread(stack.stop_service, "indexer")
        trigram_model.gate.clear()
        stack.service_env["indexer"] = {
            "MEMVAULT_EMBEDDER__KIND": "openai",
            "MEMVAULT_EMBEDDER__MODEL": "trigram-32",
            "MEMVAULT_EMBEDDER__BASE_URL": f"http://127.0.0.1:{trigram_model.port}/v1",
        }
        await asyncio.to_thread(stack.start_services)
        filling = await call(client, "recall", query="Which NAS is in the homelab?")
        assert filling["mode"] == "keyword-only"
        assert filling["results"][0]["id"] == old
        trigram_model.gate.set()

        async def hybrid() -> bool:
            found: dict[str, Any] = await call(client, "recall", query="Which NAS is in the homelab?")
            return bool(found["mode"] == "hybrid")

        assert await eventually(hybrid, deadline=60)
        await eventually(fully_indexed(stack, len(FACTS)))

        listing = indexer_command(stack, "collections")
        assert listing.returncode == 0, listing.stderr
        assert listing.stdout.split("\n")[:2] == [
            "memvault_all-minilm-l6-v2_384",
            "memvault_trigram-32_32  (active)",
        ]
        active = indexer_command(stack, "drop-collection", "memvault_trigram-32_32")
        assert active.returncode != 0 and "active collection" in active.stderr
        dropped = indexer_command(stack, "drop-collection", "memvault_all-minilm-l6-v2_384")
        assert dropped.returncode == 0, dropped.stderr
        assert indexer_command(stack, "collections").stdout.strip() == "memvault_trigram-32_32  (active)"
        assert not (stack.data_dir / "qdrant" / "memvault_all-minilm-l6-v2_384").exists()
        assert (await call(client, "recall", query="food allergy"))["mode"] == "hybrid"
    await http.aclose()
