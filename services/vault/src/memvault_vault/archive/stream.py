"""An uploaded export's conversations, parsed as a stream (ijson), so an import holds one stored part
and one conversation in memory however large the file.

`conversations.json` is read straight from its stored parts; an export's zip is first copied from
its parts into a temporary file (a zip is read from its end, so it needs a seekable file), and its
`conversations.json` member is then decompressed as it is read. The top level is a list of
conversations, or an object whose `conversations` member is that list.
"""

from __future__ import annotations

import asyncio
import tempfile
import zipfile
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from typing import IO, Any

import ijson  # type: ignore[import-untyped]

from memvault_vault.archive.chatgpt import ZIP_MAGIC, ExportError

Fetch = Callable[[int], Awaitable[bytes | None]]
"""The stored part with this number, or None past the last one."""

_VALUE_STARTS = frozenset({"start_map", "start_array", "string", "number", "boolean", "null"})


class _Parts:
    """The stored parts as an asynchronous file (what ijson reads): one part held at a time."""

    def __init__(self, fetch: Fetch) -> None:
        self._fetch = fetch
        self._next = 0
        self._part = b""
        self._offset = 0
        self._done = False

    async def read(self, size: int = -1) -> bytes:
        while self._offset >= len(self._part):  # (a stored part is never empty; if one were, skip it)
            if self._done:
                return b""
            data = await self._fetch(self._next)
            if data is None:
                self._done, self._part = True, b""
                return b""
            self._next += 1
            self._part, self._offset = data, 0
        end = len(self._part) if size < 0 else self._offset + size
        out = self._part[self._offset : end]
        self._offset += len(out)
        return out


def _member(archive: zipfile.ZipFile) -> str:
    names = [n for n in archive.namelist() if n.rsplit("/", 1)[-1] == "conversations.json"]
    if not names:
        raise ExportError("the zip holds no conversations.json; upload the export's zip or its conversations.json")
    return sorted(names, key=len)[0]


def _prefix(head: bytes) -> str:
    text = head.lstrip(b"\xef\xbb\xbf \t\r\n")
    start = text[:1]
    if start == b"[":
        return "item"
    if start == b"{":
        return "conversations.item"
    if (start and start in b'"-0123456789') or text.startswith((b"true", b"false", b"null")):
        raise ExportError("conversations.json must hold a list of conversations")
    raise ExportError("conversations.json is not valid JSON: it must start with [ (a list of conversations)")


class ExportStream:
    """The conversations of one import, in file order; `take` continues where the last call stopped."""

    def __init__(self, import_id: str, fetch: Fetch) -> None:
        self.import_id = import_id
        self._fetch = fetch
        self._spool: IO[bytes] | None = None
        self._items: AsyncIterator[tuple[int, Any]] | None = None
        self._position = 0

    async def _is_zip(self) -> bool:
        first = await self._fetch(0)
        return bool(first and first.startswith(ZIP_MAGIC))

    async def _zip(self) -> zipfile.ZipFile:
        if self._spool is None:
            spool = tempfile.TemporaryFile()  # noqa: SIM115 (closed in close())
            part = 0
            while (data := await self._fetch(part)) is not None:
                await asyncio.to_thread(spool.write, data)
                part += 1
            self._spool = spool
        try:
            return zipfile.ZipFile(self._spool)
        except zipfile.BadZipFile as error:
            raise ExportError(f"the zip cannot be read: {error}") from None

    async def _events(self) -> AsyncIterator[tuple[str, str]]:
        """(prefix, event) of the whole file, for counting."""
        if await self._is_zip():
            archive = await self._zip()
            with archive.open(_member(archive)) as member:
                prefix = _prefix(member.read(64))
            with archive.open(_member(archive)) as member:
                for path, event, _ in _sync(lambda: ijson.parse(member)):
                    yield prefix, path if event in _VALUE_STARTS else ""
            return
        prefix = _prefix((await self._fetch(0)) or b"")
        async for path, event, _ in ijson.parse_async(_Parts(self._fetch)):
            yield prefix, path if event in _VALUE_STARTS else ""

    async def count(self) -> int:
        """How many conversations the file holds (one pass over it, building nothing)."""
        total = 0
        try:
            async for prefix, path in self._events():
                total += path == prefix
        except ijson.JSONError as error:
            raise ExportError(f"conversations.json is not valid JSON: {str(error)[:200]}") from None
        return total

    async def _open(self) -> AsyncIterator[tuple[int, Any]]:
        if await self._is_zip():
            archive = await self._zip()
            with archive.open(_member(archive)) as member:
                prefix = _prefix(member.read(64))
            with archive.open(_member(archive)) as member:
                for index, item in enumerate(_sync(lambda: ijson.items(member, prefix, use_float=True))):
                    yield index, item
            return
        prefix = _prefix((await self._fetch(0)) or b"")
        index = 0
        async for item in ijson.items_async(_Parts(self._fetch), prefix, use_float=True):
            yield index, item
            index += 1

    async def take(self, start: int, count: int) -> list[tuple[int, Any]]:
        """Conversations `start` to `start + count` (fewer at the end), as (position, raw object)."""
        if self._items is None or self._position != start:
            self._items, self._position = self._open(), 0
        taken: list[tuple[int, Any]] = []
        try:
            async for index, item in self._items:
                self._position = index + 1
                if index >= start:
                    taken.append((index, item))
                    if len(taken) >= count:
                        break
        except ijson.JSONError as error:
            self._items = None
            raise ExportError(
                f"conversations.json is not valid JSON after conversation {self._position}: {str(error)[:200]}"
            ) from None
        return taken

    def close(self) -> None:
        if self._spool is not None:
            self._spool.close()
            self._spool = None
        self._items = None


def _sync(make: Callable[[], Iterator[Any]]) -> Iterator[Any]:
    """A synchronous ijson iterator, its parse errors as they are."""
    yield from make()
