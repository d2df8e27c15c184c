"""Reading a tracked source's bytes, inside the fences the operator set (`MEMVAULT_SOURCES__*`).

Files: only under a configured root, after resolving symlinks (a link pointing out of the root is
refused like a path that is outside), regular files only, at most 5 MiB. No root configured, no file.
URLs: http(s) only, only hosts on the allow-list, and (`memvault_core.fetch`) never a private,
loopback or link-local address unless its network is configured, with size, time and redirect limits,
every redirect target checked again.
"""

from __future__ import annotations

import asyncio
import ipaddress
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from memvault_core import fetch, limits
from memvault_core.errors import InvalidArgument
from memvault_vault.domain.sources import SourceError, SourceKind
from memvault_vault.settings import SourcesGroup


@dataclass(frozen=True)
class SourceRules:
    file_roots: tuple[Path, ...]
    url_hosts: tuple[str, ...]
    private_networks: tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, ...]
    allow_any_private: bool
    timeout_seconds: float
    max_redirects: int
    max_bytes: int = limits.MAX_SOURCE_BYTES
    claim_seconds: float = 120.0

    @classmethod
    def from_settings(cls, group: SourcesGroup) -> SourceRules:
        networks = tuple(ipaddress.ip_network(n, strict=False) for n in group.private_networks if n.strip() != "*")
        return cls(
            file_roots=tuple(Path(r).resolve() for r in group.file_roots if r.strip()),
            url_hosts=tuple(h.strip().lower() for h in group.url_hosts if h.strip()),
            private_networks=networks,
            allow_any_private=any(n.strip() == "*" for n in group.private_networks),
            timeout_seconds=group.fetch_timeout_seconds,
            max_redirects=group.max_redirects,
            claim_seconds=group.claim_seconds,
        )

    @classmethod
    def none(cls) -> SourceRules:
        """Nothing may be read: no roots, no hosts."""
        return cls((), (), (), False, 10.0, 0)


def _host_allowed(host: str, allowed: Sequence[str]) -> bool:
    host = host.lower().rstrip(".")
    for entry in allowed:
        if entry.startswith("*.") and host.endswith(entry[1:]):
            return True
        if host == entry:
            return True
    return False


class SourceReader:
    def __init__(self, rules: SourceRules) -> None:
        self.rules = rules

    def check_location(self, kind: SourceKind, location: str) -> str:
        """The location as it will be read, or InvalidArgument saying which rule refuses it (at track time)."""
        try:
            if kind.is_url:
                self._check_url(location)
                return location
            return str(self._resolve_file(location))
        except (SourceError, fetch.FetchError) as error:
            raise InvalidArgument(str(error), field="location") from None

    async def read(self, kind: SourceKind, location: str) -> bytes:
        """The source's bytes; SourceError (the memory stays as it is) when it cannot be read."""
        if kind.is_url:
            return await self._read_url(location)
        path = self._resolve_file(location)
        return await asyncio.to_thread(self._read_file, path)

    def _resolve_file(self, location: str) -> Path:
        if not self.rules.file_roots:
            raise SourceError(
                "no file roots are configured (MEMVAULT_SOURCES__FILE_ROOTS), so the vault reads no files"
            )
        path = Path(location)
        if not path.is_absolute():
            raise SourceError("a file source must be an absolute path")
        try:
            resolved = path.resolve(strict=True)
        except FileNotFoundError:
            raise SourceError(f"{location} does not exist") from None
        except (OSError, RuntimeError) as error:
            raise SourceError(f"{location} cannot be read ({type(error).__name__})") from None
        if not any(resolved.is_relative_to(root) for root in self.rules.file_roots):
            raise SourceError(f"{location} is outside the configured file roots")
        if not resolved.is_file():
            raise SourceError(f"{location} is not a regular file")
        return resolved

    def _read_file(self, path: Path) -> bytes:
        try:
            # O_NOFOLLOW: the path was resolved, so a symlink swapped in since then is refused.
            fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
        except FileNotFoundError:
            raise SourceError(f"{path} does not exist") from None
        except OSError as error:
            raise SourceError(f"{path} cannot be read ({error.strerror})") from None
        with os.fdopen(fd, "rb") as handle:
            body = handle.read(self.rules.max_bytes + 1)
        if len(body) > self.rules.max_bytes:
            raise SourceError(f"{path} is larger than {self.rules.max_bytes // (1024 * 1024)} MiB")
        return body

    def _check_url(self, url: str) -> None:
        if len(url) > limits.MAX_SOURCE_LOCATION_CHARS:
            raise fetch.FetchError("the URL is too long")
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https"):
            raise fetch.FetchError("a URL source must use http or https")
        host = parts.hostname or ""
        if not host or parts.username or parts.password:
            raise fetch.FetchError("a URL source needs a host and no credentials")
        if not self.rules.url_hosts:
            raise fetch.FetchError(
                "no URL hosts are allowed (MEMVAULT_SOURCES__URL_HOSTS), so the vault fetches no URLs"
            )
        if not _host_allowed(host, self.rules.url_hosts):
            raise fetch.FetchError(f"host {host!r} is not on the allowed list (MEMVAULT_SOURCES__URL_HOSTS)")

    def _address_allowed(self, address: str) -> bool:
        ip = ipaddress.ip_address(address)
        return any(ip in network for network in self.rules.private_networks)

    async def _read_url(self, url: str) -> bytes:
        try:
            fetched = await fetch.fetch(
                url,
                check=self._check_url,
                allow_private=self.rules.allow_any_private,
                allow_address=self._address_allowed,
                max_bytes=self.rules.max_bytes,
                timeout_seconds=self.rules.timeout_seconds,
                max_redirects=self.rules.max_redirects,
                what="the source",
            )
        except fetch.FetchError as error:
            raise SourceError(str(error)) from None
        return fetched.body
