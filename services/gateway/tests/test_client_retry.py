"""`memvault import` keeps going while the server is away (a restart): a part, the finish and the progress
look are sent again on 502, 503, 504 or no answer, and given up on after RETRY_SECONDS."""

from __future__ import annotations

import httpx
import pytest

from memvault_gateway import client

pytestmark = pytest.mark.unit


def _client(answers: list[httpx.Response | Exception]) -> tuple[httpx.Client, list[str]]:
    seen: list[str] = []

    def handle(request: httpx.Request) -> httpx.Response:
        seen.append(f"{request.method} {request.url.path}")
        answer = answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer

    return httpx.Client(base_url="http://memvault.test", transport=httpx.MockTransport(handle)), seen


def test_a_request_is_sent_again_while_the_server_is_away(monkeypatch: pytest.MonkeyPatch) -> None:
    waits: list[float] = []
    monkeypatch.setattr(client.time, "sleep", waits.append)
    http, seen = _client(
        [
            httpx.ConnectError("connection refused"),
            httpx.Response(503, headers={"Retry-After": "3"}, json={"detail": "the vault is unavailable"}),
            httpx.Response(502),
            httpx.Response(200, json={"state": "running"}),
        ]
    )
    answer = client._again(http, "GET", "/api/v1/vaults/v/archive/imports/1")
    assert answer.json() == {"state": "running"}
    assert seen == ["GET /api/v1/vaults/v/archive/imports/1"] * 4
    assert waits == [1.0, 3.0, 1.0]


def test_other_answers_come_back_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(client.time, "sleep", lambda _: pytest.fail("no wait expected"))
    http, seen = _client([httpx.Response(409, json={"detail": "import is done, not uploading"})])
    assert client._again(http, "PUT", "/parts/0", content=b"x").status_code == 409
    assert len(seen) == 1


def test_it_gives_up_after_retry_seconds(monkeypatch: pytest.MonkeyPatch) -> None:
    clock = [0.0]
    monkeypatch.setattr(client.time, "monotonic", lambda: clock[0])
    monkeypatch.setattr(client.time, "sleep", lambda seconds: clock.__setitem__(0, clock[0] + seconds))
    http, _ = _client([httpx.Response(503, headers={"Retry-After": "10"}) for _ in range(100)])
    assert client._again(http, "POST", "/finish").status_code == 503
    assert clock[0] <= client.RETRY_SECONDS
    http, _ = _client([httpx.ConnectError("refused") for _ in range(1000)])
    with pytest.raises(httpx.ConnectError):
        client._again(http, "GET", "/status")
