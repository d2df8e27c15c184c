"""A stand-in for the memvault services, speaking the same runtime contract as the real ones.

    fake_service.py vault serve|migrate|create-owner ... | indexer | mcp | gateway [serve|migrate|setup-link]

Readiness: vault and indexer serve grpc.health.v1 on MEMVAULT_<NAME>__LISTEN; mcp serves
GET /healthz and gateway GET /readyz on their ports; both also answer GET /env with their
MEMVAULT_* and FAKE_* variables. Every start, stop and command is appended to $FAKE_EVENTS.
FAKE_FAIL=<name> makes that service exit with code 3; FAKE_NEVER_READY=<name> keeps it unready;
FAKE_FAIL_AGAIN=<name> lets it start once, then exit with code 3 every time it is started again.
FAKE_REAL_GATEWAY_COMMANDS=1 runs the real `memvault-gateway migrate|setup-link` for those commands.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from concurrent import futures
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc


def record(event: str) -> None:
    with open(os.environ["FAKE_EVENTS"], "a", encoding="utf-8") as events:
        events.write(event + "\n")


def started_before(name: str) -> bool:
    try:
        with open(os.environ["FAKE_EVENTS"], encoding="utf-8") as events:
            return f"start {name}" in events.read().splitlines()
    except FileNotFoundError:
        return False


def visible_env() -> dict[str, str]:
    return {key: value for key, value in os.environ.items() if key.startswith(("MEMVAULT_", "FAKE_", "OTEL_"))}


def serve_grpc(name: str, listen: str, stop: threading.Event) -> None:
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    servicer = health.HealthServicer()
    health_pb2_grpc.add_HealthServicer_to_server(servicer, server)
    server.add_insecure_port(listen)
    server.start()
    if os.environ.get("FAKE_NEVER_READY") != name:
        servicer.set("", health_pb2.HealthCheckResponse.SERVING)
    stop.wait()
    server.stop(1).wait()


def serve_http(name: str, port: int, ready_path: str, stop: threading.Event) -> None:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            if self.path == ready_path and os.environ.get("FAKE_NEVER_READY") != name:
                self._answer(200, {"status": "ok"})
            elif self.path == "/env":
                self._answer(200, visible_env())
            else:
                self._answer(404, {"status": "not found"})

        def _answer(self, status: int, body: object) -> None:
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, format: str, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    stop.wait()
    server.shutdown()


def main() -> int:
    name, *arguments = sys.argv[1:]
    if name in ("vault", "gateway") and arguments and arguments[0] != "serve":
        record(" ".join([name, *arguments]))
        if name == "gateway" and os.environ.get("FAKE_REAL_GATEWAY_COMMANDS"):
            return subprocess.run([sys.executable, "-m", "memvault_gateway", *arguments], check=False).returncode
        if arguments[0] == "setup-link":
            print("http://127.0.0.1/setup/fake-one-time-link", flush=True)
        else:
            print(f"fake {name}: {' '.join(arguments)} done", flush=True)
        return 0
    if os.environ.get("FAKE_FAIL") == name or (os.environ.get("FAKE_FAIL_AGAIN") == name and started_before(name)):
        print(f"fake {name}: cannot start, configured to fail", flush=True)
        return 3
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda signum, frame: stop.set())
    signal.signal(signal.SIGINT, lambda signum, frame: stop.set())
    record(f"start {name}")
    print(json.dumps({"level": "INFO", "message": f"{name} starting", "service": name}), flush=True)
    if name in ("vault", "indexer"):
        serve_grpc(name, os.environ[f"MEMVAULT_{name.upper()}__LISTEN"], stop)
    elif name == "mcp":
        serve_http(name, int(os.environ["MEMVAULT_MCP__PORT"]), "/healthz", stop)
    else:
        serve_http(name, int(os.environ["MEMVAULT_GATEWAY__PORT"]), "/readyz", stop)
    record(f"stop {name}")
    time.sleep(0.05)
    return 0


if __name__ == "__main__":
    sys.exit(main())
