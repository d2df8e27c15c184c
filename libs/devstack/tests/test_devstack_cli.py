import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from memvault_devstack.ports import port_accepts

FAKE_SERVICE = Path(__file__).with_name("fake_service.py")

# memvault-dev itself, with the fake services in place of the real ones.
RUN_WITH_FAKES = f"""
import sys
import memvault_devstack.stack as stack
stack.DEFAULT_COMMANDS = {{name: (sys.executable, {str(FAKE_SERVICE)!r}, name) for name in stack.SERVICES}}
from memvault_devstack.__main__ import main
sys.exit(main(sys.argv[1:]))
"""


@pytest.mark.unit
def test_help_names_every_option() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "memvault_devstack", "run", "--help"], capture_output=True, text=True, check=True
    )

    for option in ("--data-dir", "--gateway-port", "--postgres-dsn", "--nats-url", "--services", "--quiet"):
        assert option in result.stdout
    assert "Ctrl-C" in result.stdout


def wait_for_text(path: Path, text: str, process: subprocess.Popen[bytes], timeout: float = 60.0) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        content = path.read_text()
        if text in content:
            return content
        assert process.poll() is None, f"memvault-dev exited early:\n{content}"
        time.sleep(0.1)
    raise AssertionError(f"{text!r} did not appear within {timeout}s:\n{path.read_text()}")


@pytest.mark.integration
@pytest.mark.parametrize("stop_signal", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_run_prints_how_to_connect_and_stops_cleanly(
    tmp_path: Path, postgres_dsn: str, nats_url: str, stop_signal: signal.Signals
) -> None:
    output, events = tmp_path / "output.txt", tmp_path / "events.log"
    command = [
        sys.executable, "-c", RUN_WITH_FAKES, "run", "--data-dir", str(tmp_path / "data"),
        "--gateway-port", "0", "--postgres-dsn", postgres_dsn, "--nats-url", nats_url,
    ]  # fmt: skip
    with output.open("wb") as stream:
        process = subprocess.Popen(
            command, stdout=stream, stderr=subprocess.STDOUT, env={**os.environ, "FAKE_EVENTS": str(events)}
        )
    try:
        shown = wait_for_text(output, "Press Ctrl-C to stop.", process)
        url = next(line.split()[-1] for line in shown.splitlines() if "MCP endpoint" in line)
        assert url.startswith("http://127.0.0.1:") and url.endswith("/mcp")
        assert f"claude mcp add --transport http memvault {url}" in shown
        assert f'url = "{url}"' in shown
        assert f'{{"mcpServers": {{"memvault": {{"url": "{url}"}}}}}}' in shown
        assert "gateway | INFO    gateway starting" in shown
        assert "http://127.0.0.1/setup/fake-one-time-link" in shown  # the owner's first sign-in
        gateway = url.removesuffix("/mcp")
        assert httpx.get(f"{gateway}/readyz", trust_env=False).status_code == 200

        process.send_signal(stop_signal)

        assert process.wait(timeout=60) == 0
    finally:
        if process.poll() is None:
            process.kill()
    stops = [line for line in events.read_text().splitlines() if line.startswith("stop ")]
    assert stops == ["stop gateway", "stop mcp", "stop indexer", "stop vault"]
    assert not port_accepts(int(gateway.rsplit(":", 1)[1]))
    assert "memvault-dev: stopped" in output.read_text()
