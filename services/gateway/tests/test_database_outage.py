"""The gateway when its database goes away: a 503 problem with Retry-After, never a 500; back once it returns."""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import AsyncIterator, Coroutine
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import pytest
import pytest_asyncio
from gateway_helpers import StartGateway, free_port

from memvault_core.settings import PostgresSettings
from memvault_gateway.app import RETRY_AFTER_SECONDS

pytestmark = pytest.mark.integration


class DatabaseLink:
    """A TCP relay between the gateway and Postgres that the test can cut (every open connection
    reset, new ones refused) and restore, as when the database server stops and comes back."""

    def __init__(self, target_host: str, target_port: int) -> None:
        self.target = (target_host, target_port)
        self.port = free_port()
        self.dsn = ""
        self._server: asyncio.Server | None = None
        self._pipes: set[asyncio.Task[None]] = set()
        # The relay runs on a loop of its own, so its sockets never keep the test's loop busy.
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._thread.start()

    async def _on_own_loop(self, work: Coroutine[Any, Any, None]) -> None:
        await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(work, self._loop))

    async def up(self) -> None:
        await self._on_own_loop(self._up())

    async def cut(self) -> None:
        await self._on_own_loop(self._cut())

    async def close(self) -> None:
        await self.cut()
        self._loop.call_soon_threadsafe(self._loop.stop)
        await asyncio.to_thread(self._thread.join, 10)
        self._loop.close()

    async def _up(self) -> None:
        if self._server is None:
            self._server = await asyncio.start_server(self._serve, "127.0.0.1", self.port, reuse_address=True)

    async def _cut(self) -> None:
        if self._server is None:
            return
        self._server.close()
        await self._server.wait_closed()
        self._server = None
        for pipe in list(self._pipes):
            pipe.cancel()
        await asyncio.gather(*self._pipes, return_exceptions=True)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._pipes.add(task)
        upstream_reader, upstream_writer = await asyncio.open_connection(*self.target)

        async def pump(source: asyncio.StreamReader, sink: asyncio.StreamWriter) -> None:
            while data := await source.read(65536):
                sink.write(data)
                await sink.drain()

        pumps = [
            asyncio.ensure_future(pump(reader, upstream_writer)),
            asyncio.ensure_future(pump(upstream_reader, writer)),
        ]
        try:
            # Either side closing ends both (Postgres closes after a Terminate; asyncpg waits for that).
            await asyncio.wait(pumps, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for running in pumps:
                running.cancel()
            for side in (writer, upstream_writer):
                with contextlib.suppress(Exception):
                    side.transport.abort()  # a reset, as a dying server leaves
            self._pipes.discard(task)


@pytest_asyncio.fixture
async def database_link(gateway_dsn: str) -> AsyncIterator[DatabaseLink]:
    """A link to the test database; set up before the gateway, so it closes after the gateway has stopped."""
    parts = urlsplit(gateway_dsn)
    link = DatabaseLink(parts.hostname or "127.0.0.1", parts.port or 5432)
    await link.up()
    user = parts.netloc.rsplit("@", 1)[0] + "@" if "@" in parts.netloc else ""
    link.dsn = urlunsplit(parts._replace(netloc=f"{user}127.0.0.1:{link.port}"))
    yield link
    await link.close()


async def test_a_lost_database_is_a_503_with_retry_after_until_it_is_back(
    database_link: DatabaseLink, start_gateway: StartGateway
) -> None:
    link = database_link
    gateway = await start_gateway(postgres=PostgresSettings(dsn=link.dsn, pool_max_size=2))
    registered = await gateway.register()  # the database answers: 201
    assert registered["client_id"]

    await link.cut()
    async with gateway.http() as http:
        # A write (client registration) and a read (an access token looked up), each on a pooled
        # connection that the database dropped, then on no connection at all.
        for attempt in range(2):
            register = await http.post(
                "/register",
                json={
                    "client_name": "Agent",
                    "redirect_uris": ["http://127.0.0.1:9/cb"],
                    "token_endpoint_auth_method": "none",
                },
            )
            api = await http.get("/api/v1/vaults", headers={"Authorization": "Bearer mvs_" + "x" * 43})
            for response in (register, api):
                assert response.status_code == 503, (attempt, response.status_code, response.text)
                assert response.headers["retry-after"] == str(RETRY_AFTER_SECONDS)
                assert response.headers["content-type"] == "application/problem+json"
                problem = response.json()
                assert problem["status"] == 503
                assert "database" in problem["detail"] and "try again" in problem["detail"]

    await link.up()
    assert (await gateway.register())["client_id"]  # back without a restart
