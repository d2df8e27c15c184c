"""A local SMTP server for tests (aiosmtpd, from requirements-dev.txt) that keeps what it receives.

    with Mailbox() as mailbox:          # listens on 127.0.0.1:<free port>, in a thread of its own
        ...                             # point MEMVAULT_SMTP__HOST/PORT at mailbox.host/port
        mail = await mailbox.wait_for("owner@example.test")
        link = mailbox.link_in(mail, "/login/email/")

`credentials=("user", "secret")` makes it accept SMTP AUTH with them (over plain text: loopback only),
refuse other credentials, and record who signed in on each message (`authenticated_as`).
"""

from __future__ import annotations

import asyncio
import re
import socket
import threading
import time
from dataclasses import dataclass
from email import message_from_bytes, policy
from email.message import EmailMessage
from types import TracebackType
from typing import Any

_URL = re.compile(r"https?://\S+")


@dataclass(frozen=True)
class Received:
    sender: str
    recipients: tuple[str, ...]
    message: EmailMessage
    authenticated_as: str | None

    @property
    def text(self) -> str:
        body = self.message.get_body(preferencelist=("plain",))
        return str(body.get_content()) if body is not None else ""


class Mailbox:
    """An SMTP server on a free loopback port; `received` is every message, oldest first."""

    def __init__(self, credentials: tuple[str, str] | None = None) -> None:
        self.host = "127.0.0.1"
        self.port = _free_port()
        self.credentials = credentials
        self.received: list[Received] = []
        self._lock = threading.Lock()
        self._controller: Any = None

    def start(self) -> Mailbox:
        from aiosmtpd.controller import Controller
        from aiosmtpd.smtp import AuthResult, LoginPassword

        mailbox = self

        class Handler:
            async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:
                content = envelope.original_content or envelope.content
                parsed = message_from_bytes(content, policy=policy.default)
                assert isinstance(parsed, EmailMessage)
                login = session.auth_data.login.decode() if session.authenticated and session.auth_data else None
                with mailbox._lock:
                    mailbox.received.append(Received(envelope.mail_from, tuple(envelope.rcpt_tos), parsed, login))
                return "250 Message accepted for delivery"

        def authenticate(server: Any, session: Any, envelope: Any, mechanism: str, data: Any) -> AuthResult:
            ok = (
                isinstance(data, LoginPassword)
                and self.credentials is not None
                and (data.login.decode(), data.password.decode()) == self.credentials
            )
            return AuthResult(success=ok, handled=False, auth_data=data if ok else None)

        options: dict[str, Any] = {}
        if self.credentials is not None:
            # Not required (aiosmtpd warns against AUTH required without TLS): `authenticated_as` tells.
            options = {"authenticator": authenticate, "auth_require_tls": False}
        self._controller = Controller(Handler(), hostname=self.host, port=self.port, ready_timeout=30, **options)
        self._controller.start()
        return self

    def stop(self) -> None:
        if self._controller is not None:
            self._controller.stop()
            self._controller = None

    def __enter__(self) -> Mailbox:
        return self.start()

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        self.stop()

    def to(self, address: str) -> list[Received]:
        """Messages one of whose recipients is `address` (compared case-insensitively)."""
        with self._lock:
            return [r for r in self.received if address.lower() in (a.lower() for a in r.recipients)]

    async def wait_for(self, address: str, count: int = 1, within: float = 30.0) -> Received:
        """The `count`-th message to `address`, polling until it arrives or `within` seconds pass."""
        deadline = time.monotonic() + within
        while True:
            found = self.to(address)
            if len(found) >= count:
                return found[count - 1]
            if time.monotonic() > deadline:
                raise TimeoutError(f"no message #{count} to {address} within {within} s ({len(found)} arrived)")
            await asyncio.sleep(0.05)

    @staticmethod
    def link_in(received: Received, path: str) -> str:
        """The one URL in the message's text whose path starts with `path`."""
        links = [str(url) for url in _URL.findall(received.text) if path in url]
        assert len(links) == 1, f"expected one link to {path} in the message, found {len(links)}"
        return links[0]


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])
