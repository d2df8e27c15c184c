"""A local HTTP server the source tests start: each path answers what the test set (body, status,
redirect, delay), and can be changed between checks; `hits` lists the paths asked for, in order (a
request is listed as it arrives, before its delay)."""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


@dataclass
class Route:
    body: bytes = b""
    status: int = 200
    content_type: str = "application/json"
    location: str = ""
    delay: float = 0.0


class SourceServer:
    def __init__(self) -> None:
        self.routes: dict[str, Route] = {}
        self.hits: list[str] = []
        self.port = 0

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def set(self, path: str, body: bytes | str = b"", **fields: object) -> str:
        data = body.encode() if isinstance(body, str) else body
        self.routes[path] = Route(data, **fields)  # type: ignore[arg-type]
        return self.url(path)


@contextmanager
def source_server() -> Iterator[SourceServer]:
    state = SourceServer()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            state.hits.append(self.path)
            route = state.routes.get(self.path)
            if route is None:
                self.send_response(404)
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            if route.delay:
                time.sleep(route.delay)
            self.send_response(route.status)
            if route.location:
                self.send_header("Location", route.location)
            self.send_header("Content-Type", route.content_type)
            self.send_header("Content-Length", str(len(route.body)))
            self.end_headers()
            with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                self.wfile.write(route.body)

        def log_message(self, format: str, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    state.port = server.server_address[1]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield state
    finally:
        server.shutdown()
        server.server_close()
