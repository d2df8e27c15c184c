"""Fixtures of the indexer tests: the session's Qdrant server, if any, and a small real
OpenAI-compatible embeddings server.

The server is Starlette under uvicorn on a free loopback port.

It embeds deterministically: each text becomes a bag of hashed character trigrams in
`dimension` buckets, not normalised, so texts that share words get similar vectors.
It can be told to fail the next N requests with 503 and to require an API key.
"""

from __future__ import annotations

import hashlib
import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from memvault_devstack import servers


@pytest.fixture(scope="session")
def qdrant_url() -> Iterator[str | None]:
    """URL of a Qdrant server for this session: `MEMVAULT_TEST_QDRANT_URL`, else a container where a
    Docker engine answers, else None, and the qdrant-client tests run the same store class in
    qdrant-client's local mode."""
    with servers.qdrant_server() as url:
        yield url


def trigram_vector(text: str, dimension: int) -> list[float]:
    vector = [0.0] * dimension
    padded = f"  {text.lower()}  "
    for i in range(len(padded) - 2):
        digest = hashlib.blake2b(padded[i : i + 3].encode(), digest_size=4).digest()
        vector[int.from_bytes(digest, "big") % dimension] += 1.0
    return vector


@dataclass
class ServerState:
    dimension: int = 16
    api_key: str | None = None
    fail_next: int = 0
    batch_sizes: list[int] = field(default_factory=list)
    requests: int = 0


class EmbeddingServer:
    """Runs the app on a free loopback port in a background thread."""

    def __init__(self, state: ServerState) -> None:
        self.state = state
        self._socket = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._socket.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._socket.bind(("127.0.0.1", 0))
        self.port = int(self._socket.getsockname()[1])
        app = Starlette(routes=[Route("/v1/embeddings", self._embeddings, methods=["POST"])])
        config = uvicorn.Config(app, lifespan="off", ws="none", log_level="warning", access_log=False)
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(target=self._server.run, kwargs={"sockets": [self._socket]}, daemon=True)

    def expected(self, text: str) -> list[float]:
        """The raw (unnormalised) vector the server returns for `text`."""
        return trigram_vector(text, self.state.dimension)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    async def _embeddings(self, request: Request) -> JSONResponse:
        state = self.state
        state.requests += 1
        if state.api_key is not None and request.headers.get("authorization") != f"Bearer {state.api_key}":
            quoted = (await request.json())["input"]  # as some servers do: the input, quoted in the error
            error = {"message": f"invalid api key for input {quoted}", "type": "auth", "code": "invalid_api_key"}
            return JSONResponse({"error": error}, status_code=401)
        if state.fail_next > 0:
            state.fail_next -= 1
            return JSONResponse({"error": {"message": "overloaded"}}, status_code=503)
        body: dict[str, Any] = await request.json()
        texts = body["input"] if isinstance(body["input"], list) else [body["input"]]
        state.batch_sizes.append(len(texts))
        data = [
            {"object": "embedding", "index": i, "embedding": trigram_vector(text, state.dimension)}
            for i, text in enumerate(texts)
        ]
        # Real servers may answer out of order; the client must sort by index.
        data.reverse()
        return JSONResponse({"object": "list", "model": body["model"], "data": data})

    def start(self) -> None:
        self._thread.start()
        deadline = time.monotonic() + 10
        while not self._server.started:
            if time.monotonic() > deadline:
                raise RuntimeError("embedding test server did not start within 10 s")
            time.sleep(0.01)

    def stop(self) -> None:
        self._server.should_exit = True
        self._thread.join(timeout=10)
        self._socket.close()


@pytest.fixture
def embedding_server() -> Iterator[EmbeddingServer]:
    """A running embeddings server with 16-d vectors; its `state` steers and records it."""
    running = EmbeddingServer(ServerState(dimension=16))
    running.start()
    yield running
    running.stop()
