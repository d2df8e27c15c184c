"""How the vault's relay and the indexer's consumer live through a NATS outage: one warning line per
distinct problem per minute (never a traceback or a password), and retries backing off from 0.5 s
to a ceiling. Time is a clock the test advances, so nothing here sleeps."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time

import nats
import pytest

from memvault_core.nats_callbacks import NatsCallbacks, server_of
from memvault_core.supervise import run_forever
from memvault_devstack.ports import free_port

URL = "nats://relay:s3cret@127.0.0.1:4999"


class Clock:
    """A monotonic clock that moves only when told."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _lines(caplog: pytest.LogCaptureFixture, text: str) -> list[logging.LogRecord]:
    return [record for record in caplog.records if text in record.getMessage()]


@pytest.mark.unit
def test_server_of_drops_user_and_password_from_every_url() -> None:
    assert server_of("nats://a:pw@n1:4223, tls://n2") == "nats://n1:4223,tls://n2:4222"


@pytest.mark.unit
async def test_one_warning_per_problem_per_minute_naming_the_server_and_what_waits(
    caplog: pytest.LogCaptureFixture,
) -> None:
    clock = Clock()
    callbacks = NatsCallbacks(URL, "events wait in the outbox until it is back", clock=clock)
    caplog.set_level(logging.INFO)
    refused = ConnectionRefusedError(111, "Connect call failed ('127.0.0.1', 4999)")

    for _ in range(3):  # nats-py retries every 2 s: the same problem, not logged again
        await callbacks.error(refused)
        clock.now += 2
    (warning,) = _lines(caplog, "cannot reach NATS")
    assert warning.levelno == logging.WARNING
    assert warning.getMessage() == "cannot reach NATS; events wait in the outbox until it is back"
    assert warning.__dict__["nats"] == "nats://127.0.0.1:4999"
    assert warning.__dict__["error"] == "ConnectionRefusedError"

    await callbacks.error(TimeoutError("connect timed out"))  # another problem is news
    assert len(_lines(caplog, "cannot reach NATS")) == 2

    clock.now += 60 - 6 - 0.01  # just under a minute after the first line
    await callbacks.error(refused)
    assert len(_lines(caplog, "cannot reach NATS")) == 2
    clock.now += 0.02
    await callbacks.error(refused)  # a minute on: said once more, so a long outage stays visible
    assert len(_lines(caplog, "cannot reach NATS")) == 3

    assert not any(record.exc_info for record in caplog.records)
    assert "s3cret" not in caplog.text and "relay" not in caplog.text


@pytest.mark.unit
async def test_reconnecting_ends_the_outage_so_the_next_one_is_reported_at_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    clock = Clock()
    callbacks = NatsCallbacks(URL, "new memories are indexed once it is back", clock=clock)
    caplog.set_level(logging.INFO)

    await callbacks.disconnected()
    await callbacks.disconnected()
    await callbacks.error(ConnectionResetError("reset by peer"))
    await callbacks.reconnected()
    clock.now += 1  # the next outage, a second later
    await callbacks.disconnected()
    await callbacks.error(ConnectionResetError("reset by peer"))

    disconnected = _lines(caplog, "disconnected from NATS")
    assert [record.levelno for record in disconnected] == [logging.INFO, logging.INFO]  # not a warning
    assert len(_lines(caplog, "reconnected to NATS")) == 1
    assert len(_lines(caplog, "cannot reach NATS")) == 2


@pytest.mark.integration
async def test_nats_py_retrying_a_closed_port_logs_one_line(caplog: pytest.LogCaptureFixture) -> None:
    """The callbacks as nats-py calls them: it retries the first connection for ever (every
    `reconnect_time_wait`, 2 s in the services, a hundredth here) and reports each refusal."""
    clock = Clock()
    callbacks = NatsCallbacks(f"nats://relay:s3cret@127.0.0.1:{free_port()}", "events wait", clock=clock)
    caplog.set_level(logging.DEBUG)
    seen: list[Exception] = []
    options = callbacks.options()

    async def error(problem: Exception) -> None:
        seen.append(problem)
        await callbacks.error(problem)

    options["error_cb"] = error
    connecting = asyncio.create_task(
        nats.connect(
            f"nats://relay:s3cret@{callbacks.server.split('://')[1]}",
            connect_timeout=2,
            max_reconnect_attempts=0,
            reconnect_time_wait=0.01,
            **options,
        )
    )
    try:
        deadline = time.monotonic() + 20
        while len(seen) < 5:  # polling what nats-py reports, with a deadline
            assert time.monotonic() < deadline, f"nats-py reported {len(seen)} refusals"
            await asyncio.sleep(0.01)
    finally:
        connecting.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await connecting

    assert {type(problem) for problem in seen} == {ConnectionRefusedError}
    assert len(_lines(caplog, "cannot reach NATS")) == 1
    assert not any(record.exc_info for record in caplog.records)
    assert "s3cret" not in caplog.text


@pytest.mark.unit
async def test_run_forever_backs_off_doubling_to_the_ceiling_and_starts_over_after_a_success(
    caplog: pytest.LogCaptureFixture,
) -> None:
    outcomes = ["fail"] * 6 + ["ok"] + ["fail"] * 2 + ["stop"]
    waited: list[float] = []

    async def step() -> None:
        outcome = outcomes.pop(0)
        if outcome == "fail":
            raise ConnectionRefusedError("no NATS")
        if outcome == "stop":
            raise asyncio.CancelledError

    async def sleep(seconds: float) -> None:
        waited.append(seconds)

    with pytest.raises(asyncio.CancelledError):
        await run_forever(step, "outbox relay", max_delay=5.0, sleep=sleep)

    assert waited == [0.5, 1.0, 2.0, 4.0, 5.0, 5.0, 0.5, 1.0]
    paused = _lines(caplog, "outbox relay paused")
    assert [record.__dict__["retry_in"] for record in paused] == waited
    assert {record.__dict__["error"] for record in paused} == {"ConnectionRefusedError"}
    assert outcomes == []
