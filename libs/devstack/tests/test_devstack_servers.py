"""Which test servers a session uses: MEMVAULT_TEST_*, then containers where Docker answers, then
embedded ones; and how the Docker engine is detected."""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from memvault_devstack.ports import free_port
from memvault_devstack.servers import ENVIRONMENT_VARIABLES, Choice, Server, Source, choose, docker_engine_answers

pytestmark = pytest.mark.unit

SERVERS: tuple[Server, ...] = ("postgres", "nats", "qdrant")


class Probe:
    """A Docker probe that records whether it was asked."""

    def __init__(self, answer: bool) -> None:
        self.answer = answer
        self.asked = 0

    def __call__(self) -> bool:
        self.asked += 1
        return self.answer


@pytest.mark.parametrize("server", SERVERS)
def test_a_named_server_wins_and_docker_is_not_asked(server: Server) -> None:
    probe = Probe(answer=True)
    url = {"postgres": "postgresql://u:pw@db/x", "nats": "nats://n:4222", "qdrant": "http://q:6333"}[server]

    choice = choose(server, {ENVIRONMENT_VARIABLES[server]: url}, probe)

    assert choice == Choice(server, Source.ENVIRONMENT, url)
    assert probe.asked == 0
    assert "pw" not in choice.describe() and ENVIRONMENT_VARIABLES[server] in choice.describe()


@pytest.mark.parametrize("server", SERVERS)
def test_without_a_named_server_a_container_where_docker_answers(server: Server) -> None:
    probe = Probe(answer=True)

    choice = choose(server, {}, probe)

    assert choice == Choice(server, Source.CONTAINER)
    assert probe.asked == 1
    assert choice.describe().startswith(f"{server}: container ")


@pytest.mark.parametrize("server", SERVERS)
def test_without_a_named_server_or_docker_the_embedded_one(server: Server) -> None:
    choice = choose(server, {}, Probe(answer=False))

    assert choice == Choice(server, Source.EMBEDDED)
    expected = "qdrant-client local mode" if server == "qdrant" else "embedded"
    assert choice.describe() == f"{server}: {expected}"


def test_a_blank_variable_names_no_server() -> None:
    assert choose("nats", {"MEMVAULT_TEST_NATS_URL": "  "}, Probe(answer=False)).source is Source.EMBEDDED


def test_each_server_reads_only_its_own_variable() -> None:
    environ = {"MEMVAULT_TEST_POSTGRES_DSN": "postgresql://postgres@127.0.0.1/postgres"}

    assert choose("postgres", environ, Probe(answer=False)).source is Source.ENVIRONMENT
    assert choose("nats", environ, Probe(answer=False)).source is Source.EMBEDDED
    assert choose("qdrant", environ, Probe(answer=True)).source is Source.CONTAINER


@pytest.mark.parametrize("off", ["0", "false", "No", "off"])
def test_containers_can_be_switched_off_and_docker_is_then_not_asked(off: str) -> None:
    probe = Probe(answer=True)

    assert choose("postgres", {"MEMVAULT_TEST_CONTAINERS": off}, probe).source is Source.EMBEDDED
    assert probe.asked == 0
    assert choose("postgres", {"MEMVAULT_TEST_CONTAINERS": "1"}, probe).source is Source.CONTAINER


class FakeEngine(BaseHTTPRequestHandler):
    """The two Docker Engine API calls a ping makes: the version, then /_ping."""

    healthy = True

    def do_GET(self) -> None:
        if not self.healthy:
            self.send_error(500, "engine is starting")
            return
        if self.path.endswith("/version"):
            body = json.dumps({"ApiVersion": "1.44", "Version": "27.0.0"}).encode()
            content_type = "application/json"
        elif self.path.endswith("/_ping"):
            body, content_type = b"OK", "text/plain"
        else:
            self.send_error(404)
            return
        self.send_response(200)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:  # keep test output quiet
        pass


@contextmanager
def engine(healthy: bool) -> Iterator[str]:
    handler = type("Engine", (FakeEngine,), {"healthy": healthy})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"tcp://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def test_an_engine_that_answers_its_ping_is_found() -> None:
    with engine(healthy=True) as host:
        assert docker_engine_answers({"DOCKER_HOST": host})


def test_an_engine_that_fails_its_ping_is_not() -> None:
    with engine(healthy=False) as host:
        assert not docker_engine_answers({"DOCKER_HOST": host})


def test_nothing_listening_means_no_engine(tmp_path: Path) -> None:
    assert not docker_engine_answers({"DOCKER_HOST": f"tcp://127.0.0.1:{free_port()}"})
    assert not docker_engine_answers({"DOCKER_HOST": f"unix://{tmp_path / 'docker.sock'}"})


def test_a_unix_socket_that_is_not_docker_is_no_engine(tmp_path: Path) -> None:
    path = tmp_path / "docker.sock"
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as listener:
        listener.bind(str(path))
        listener.listen()
        threading.Thread(target=lambda: listener.accept()[0].close(), daemon=True).start()
        assert not docker_engine_answers({"DOCKER_HOST": f"unix://{path}"}, timeout=0.5)
