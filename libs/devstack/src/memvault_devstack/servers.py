"""The servers tests run against, chosen in this order for each of Postgres, NATS and Qdrant:

1. the server named by its `MEMVAULT_TEST_*` variable (`MEMVAULT_TEST_POSTGRES_DSN`,
   `MEMVAULT_TEST_NATS_URL`, `MEMVAULT_TEST_QDRANT_URL`), used as it is;
2. a throwaway container (testcontainers) when a Docker engine answers, with the image versions of
   docker-compose.yml; `MEMVAULT_TEST_CONTAINERS=0` skips this step;
3. an embedded server: Postgres and nats-server as child processes in a temporary directory, and
   for Qdrant the qdrant-client's local mode (no server at all: `qdrant_server` yields None).

`choose` makes the decision and nothing else, so every branch is unit-tested; the context managers
below start what it chose. testcontainers and the Docker SDK are imported only on the container
path.
"""

from __future__ import annotations

import enum
import logging
import os
import secrets
import shutil
import socket
import tempfile
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Literal
from urllib.parse import urlsplit

from memvault_devstack.errors import DevstackError
from memvault_devstack.nats import EmbeddedNats
from memvault_devstack.ports import port_accepts
from memvault_devstack.postgres import EmbeddedPostgres, create_database, drop_database

Server = Literal["postgres", "nats", "qdrant"]

ENVIRONMENT_VARIABLES: dict[Server, str] = {
    "postgres": "MEMVAULT_TEST_POSTGRES_DSN",
    "nats": "MEMVAULT_TEST_NATS_URL",
    "qdrant": "MEMVAULT_TEST_QDRANT_URL",
}
CONTAINERS_VARIABLE = "MEMVAULT_TEST_CONTAINERS"
# The versions docker-compose.yml runs, so a container test sees what a deployment sees.
IMAGES: dict[Server, str] = {
    "postgres": "postgres:17.6",
    "nats": "nats:2.11.6-alpine",
    "qdrant": "qdrant/qdrant:v1.15.4",
}
log = logging.getLogger(__name__)

# A test database is thrown away afterwards: durability only costs time.
FAST_POSTGRES_SETTINGS = {"fsync": "off", "synchronous_commit": "off", "full_page_writes": "off"}


class Source(enum.Enum):
    ENVIRONMENT = "environment"
    CONTAINER = "container"
    EMBEDDED = "embedded"


@dataclass(frozen=True)
class Choice:
    server: Server
    source: Source
    url: str | None = None
    """The URL from the environment (ENVIRONMENT only)."""

    def describe(self) -> str:
        """What a test run reports, never a password."""
        if self.source is Source.ENVIRONMENT:
            return f"{self.server}: {ENVIRONMENT_VARIABLES[self.server]}"
        if self.source is Source.CONTAINER:
            return f"{self.server}: container {IMAGES[self.server]}"
        return f"{self.server}: " + ("qdrant-client local mode" if self.server == "qdrant" else "embedded")


def choose(server: Server, environ: Mapping[str, str], docker_answers: Callable[[], bool]) -> Choice:
    """Where this test session's `server` comes from. `docker_answers` is asked only when no
    variable names a server and containers are not switched off."""
    url = environ.get(ENVIRONMENT_VARIABLES[server], "").strip()
    if url:
        return Choice(server, Source.ENVIRONMENT, url)
    if environ.get(CONTAINERS_VARIABLE, "").strip().lower() not in {"0", "false", "no", "off"} and docker_answers():
        return Choice(server, Source.CONTAINER)
    return Choice(server, Source.EMBEDDED)


def docker_engine_answers(environ: Mapping[str, str] | None = None, timeout: float = 2.0) -> bool:
    """Whether the Docker engine testcontainers would use (`DOCKER_HOST`, else the local socket)
    answers a ping. Where nothing listens it says so at once, without the Docker SDK (which leaves
    its socket open when it cannot connect)."""
    environment = dict(os.environ if environ is None else environ)
    host = environment.get("DOCKER_HOST") or "unix:///var/run/docker.sock"
    if not _listening(host, timeout):
        return False
    try:
        import docker  # installed with testcontainers
        from docker.errors import DockerException
    except ImportError:
        return False
    try:
        client = docker.from_env(environment=environment, timeout=timeout)
    except DockerException:
        return False
    try:
        return bool(client.ping())
    except (DockerException, OSError):
        return False
    finally:
        client.close()


def _listening(host: str, timeout: float) -> bool:
    """Whether something accepts connections at a DOCKER_HOST address (unix:// or tcp://; any other
    scheme, such as ssh://, is left to the Docker SDK)."""
    parts = urlsplit(host)
    try:
        if parts.scheme == "unix":
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as connection:
                connection.settimeout(timeout)
                connection.connect(parts.path)
            return True
        if parts.scheme in {"tcp", "http", "https"}:
            with socket.create_connection((parts.hostname or "127.0.0.1", parts.port or 2375), timeout=timeout):
                return True
    except OSError:
        return False
    return True


def _choose(server: Server) -> Choice:
    choice = choose(server, os.environ, docker_engine_answers)
    log.info(f"test server {choice.describe()}")
    return choice


@contextmanager
def postgres_database() -> Iterator[str]:
    """DSN of an empty database for this test session, on the chosen Postgres server (a fresh
    `memvault_test_<random>` database on a named server, dropped at the end)."""
    choice = _choose("postgres")
    if choice.source is Source.ENVIRONMENT:
        assert choice.url is not None
        name = f"memvault_test_{secrets.token_hex(4)}"
        dsn = create_database(choice.url, name, exist_ok=False)
        try:
            yield dsn
        finally:
            drop_database(choice.url, name)
    elif choice.source is Source.CONTAINER:
        from testcontainers.community.postgres import PostgresContainer

        container = PostgresContainer(IMAGES["postgres"], username="postgres", dbname="postgres", driver=None)
        container.with_command("postgres " + " ".join(f"-c {k}={v}" for k, v in FAST_POSTGRES_SETTINGS.items()))
        with container:
            yield container.get_connection_url()
    else:
        # Not pytest's tmp_path: its 0700 parent would have to be opened up for the Postgres OS user.
        directory = Path(tempfile.mkdtemp(prefix="memvault-test-postgres-"))
        embedded = EmbeddedPostgres(
            directory / "data", settings=FAST_POSTGRES_SETTINGS, log_path=directory / "postgres.log"
        )
        try:
            yield embedded.start()
        finally:
            embedded.stop()
            shutil.rmtree(directory, ignore_errors=True)


@contextmanager
def nats_server() -> Iterator[str]:
    """URL of a NATS server with JetStream for this test session."""
    choice = _choose("nats")
    if choice.source is Source.ENVIRONMENT:
        assert choice.url is not None
        parts = urlsplit(choice.url)
        if not port_accepts(parts.port or 4222, parts.hostname or "127.0.0.1", timeout=2.0):
            raise DevstackError(
                f"{ENVIRONMENT_VARIABLES['nats']}={choice.url} does not accept connections;"
                " start NATS or unset the variable"
            )
        yield choice.url
    elif choice.source is Source.CONTAINER:
        # A plain container: testcontainers' NatsContainer still waits through a deprecated decorator.
        from testcontainers.core.container import DockerContainer
        from testcontainers.core.wait_strategies import LogMessageWaitStrategy

        container = (
            DockerContainer(IMAGES["nats"])
            .with_command("-js")
            .with_exposed_ports(4222)
            .waiting_for(LogMessageWaitStrategy("Server is ready"))
        )
        with container:
            yield f"nats://{container.get_container_host_ip()}:{container.get_exposed_port(4222)}"
    else:
        directory = Path(tempfile.mkdtemp(prefix="memvault-test-nats-"))
        embedded = EmbeddedNats(directory / "store", log_path=directory / "nats.log")
        try:
            yield embedded.start()
        finally:
            embedded.stop()
            shutil.rmtree(directory, ignore_errors=True)


@contextmanager
def qdrant_server() -> Iterator[str | None]:
    """URL of a Qdrant server (http://host:6333) for this test session, or None where neither a
    variable nor Docker gives one: the caller then runs the same qdrant-client code in local mode."""
    choice = _choose("qdrant")
    if choice.source is Source.ENVIRONMENT:
        yield choice.url
    elif choice.source is Source.CONTAINER:
        from testcontainers.community.qdrant import QdrantContainer

        with QdrantContainer(IMAGES["qdrant"]) as container:
            yield f"http://{container.rest_host_address}"
    else:
        yield None
