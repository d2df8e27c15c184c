"""The archive's reads for agents: hybrid message search (vector and full-text candidates as a union,
ranked and fused like recall; later pages read a snapshot of the first page's ranking), the context
around a hit, several conversations at once within a byte budget, titles, and counts. Every cursor is
signed, bound to the caller and expires (domain/signed_cursor)."""

from __future__ import annotations

import hashlib
import logging
import uuid
from typing import Any

from memvault_core.errors import InvalidArgument, LimitExceeded, NotFound
from memvault_core.identity import Identity
from memvault_vault.accounts.service import AccountService
from memvault_vault.archive import ranking
from memvault_vault.archive.ranking import KEYWORD_ONLY
from memvault_vault.archive.reading_store import ArchiveReadStore
from memvault_vault.archive.records import (
    ArchiveStats,
    BatchPage,
    BatchResult,
    ConversationRecord,
    MessageHit,
    MessageRecord,
    Oversized,
    SearchPage,
)
from memvault_vault.archive.search_snapshots import SearchSnapshots, Snapshot
from memvault_vault.domain import archive as rules
from memvault_vault.domain import archive_reads as reads
from memvault_vault.domain import cursor as fingerprints
from memvault_vault.domain.signed_cursor import CursorSigner
from memvault_vault.index_client import IndexClient

log = logging.getLogger("memvault_vault.archive")


def _caller(identity: Identity) -> str:
    return CursorSigner.caller_of(identity.subject, identity.client)


def _caller_key(identity: Identity) -> str:
    """What a search snapshot keeps of its caller: a hash, not the account itself."""
    return hashlib.sha256(_caller(identity).encode()).hexdigest()


def _message_size(m: MessageRecord) -> int:
    return reads.size(reads.message_item(m.id, m.position, m.role, m.content_type, m.text, m.created_at)) + 1


class ArchiveReads:
    def __init__(
        self,
        store: ArchiveReadStore,
        accounts: AccountService,
        index: IndexClient | None,
        cursors: CursorSigner,
        snapshots: SearchSnapshots,
    ) -> None:
        self._store = store
        self._snapshots = snapshots
        self._accounts = accounts
        self._index = index
        self._cursors = cursors

    # --- search ------------------------------------------------------------------------------------

    async def search(
        self,
        identity: Identity,
        vault_name: str,
        query: str,
        *,
        tags_all: list[str],
        tags_any: list[str],
        limit: int,
        max_bytes: int,
        page: str,
        continued: bool = True,
    ) -> SearchPage:
        """A page of hits over head revisions, best first, within `max_bytes`. The first page ranks and,
        when more follow, keeps the ranked list as a snapshot: the cursor names it, so later pages read
        the same list (a message written meanwhile neither shifts, repeats nor skips a hit). Without
        `continued` (a caller that reads one page only) nothing is kept and no cursor is returned."""
        if limit < 0:
            raise InvalidArgument("limit must not be negative", field="limit")
        if limit > rules.MAX_SEARCH_RESULTS:
            raise LimitExceeded(f"limit is at most {rules.MAX_SEARCH_RESULTS}", field="limit")
        limit = limit or rules.DEFAULT_SEARCH_RESULTS
        budget = reads.budget(max_bytes)
        vault = await self._accounts.access(identity, vault_name)
        caller = _caller_key(identity)
        offset = 0
        snapshot: Snapshot | None = None
        ranked: list[MessageHit] = []
        window: list[MessageHit | None]
        if page:
            snapshot, offset = await self._continued(identity, vault, page, caller)
            if query.strip() and query.strip() != snapshot.query:
                raise InvalidArgument(
                    "cursor continues another query; send the cursor alone, or the new query alone", field="cursor"
                )
            if (tags_all or tags_any) and (rules.normalize_tags(tags_all), rules.normalize_tags(tags_any)) != (
                snapshot.tags_all,
                snapshot.tags_any,
            ):
                raise InvalidArgument("cursor continues other tag filters; send the cursor alone", field="cursor")
            query, tags_all, tags_any, mode = snapshot.query, snapshot.tags_all, snapshot.tags_any, snapshot.mode
            total = len(snapshot.hits)
            window = await self._snapshots.resolve(vault, snapshot.hits[offset : offset + limit])
        else:
            query = query.strip()
            if not query:
                raise InvalidArgument("query is empty", field="query")
            if len(query) > rules.MAX_QUERY_CHARS:
                raise LimitExceeded(f"query is longer than {rules.MAX_QUERY_CHARS} characters", field="query")
            tags_all, tags_any = rules.normalize_tags(tags_all), rules.normalize_tags(tags_any)
            ranked, mode = await ranking.rank(self._store, self._index, vault, query, tags_all, tags_any)
            total = len(ranked)
            window = list(ranked[:limit])
        warnings = (
            ["semantic search is unavailable right now; only messages sharing words with the query were searched"]
            if mode == KEYWORD_ONLY
            else []
        )
        cursor_reserve = 600 + len(query.encode()) * 2 + sum(len(t) for t in tags_all + tags_any) * 2
        used = reads.ENVELOPE_BYTES + reads.size(warnings) + cursor_reserve
        hits: list[MessageHit] = []
        consumed = 0
        for hit in window:
            if hit is None:  # deleted since the snapshot: passed over
                consumed += 1
                continue
            cost = reads.size(
                reads.hit_item(
                    hit.conversation_id,
                    hit.title,
                    hit.revision,
                    hit.message_id,
                    hit.position,
                    hit.role,
                    rules.snippet(hit.text, query),
                    hit.score,
                )
            )
            if used + cost + 1 > budget and hits:
                break
            hits.append(hit)
            consumed += 1
            used += cost + 1
        next_cursor = ""
        if continued and offset + consumed < total:
            if snapshot is None:
                snapshot_id = await self._snapshots.save(
                    vault, caller, query, tags_all, tags_any, mode, ranked, self._cursors.ttl_seconds
                )
            else:
                snapshot_id = snapshot.id
            next_cursor = self._cursors.seal(
                "archive-search",
                _caller(identity),
                fingerprints.fingerprint(vault.id),
                {"s": snapshot_id, "o": offset + consumed},
            )
        return SearchPage(query, hits, next_cursor, mode, warnings, used - cursor_reserve + len(next_cursor), budget)

    async def _continued(self, identity: Identity, vault: Any, page: str, caller: str) -> tuple[Snapshot, int]:
        """The snapshot a search cursor names and the offset it continues at."""
        position = self._cursors.open(page, "archive-search", _caller(identity), fingerprints.fingerprint(vault.id))
        assert position is not None
        snapshot_id, offset = position.get("s"), position.get("o")
        if not isinstance(snapshot_id, str) or not isinstance(offset, int) or offset < 0:
            raise InvalidArgument("cursor is not one this server issued; omit it to start again", field="cursor")
        try:
            snapshot_id = str(uuid.UUID(snapshot_id))
        except ValueError:
            raise InvalidArgument(
                "cursor is not one this server issued; omit it to start again", field="cursor"
            ) from None
        snapshot = await self._snapshots.load(vault, caller, snapshot_id, self._cursors.ttl_seconds)
        if snapshot is None:
            raise InvalidArgument(
                "cursor expired (the results it continues are no longer kept); repeat the search without it",
                field="cursor",
            )
        return snapshot, offset

    # --- context, batches, titles, counts ----------------------------------------------------------

    async def context(
        self,
        identity: Identity,
        vault_name: str,
        message_id: str,
        *,
        conversation_id: str,
        revision: int,
        before: int,
        after: int,
    ) -> tuple[ConversationRecord, int, int, list[MessageRecord]]:
        """(conversation, revision, position of the message, messages around it on the active timeline)."""
        message_id = rules.parse_conversation_id(message_id, "message_id")
        for name, value in (("before", before), ("after", after)):
            if value < 0 or value > reads.MAX_CONTEXT_MESSAGES:
                raise InvalidArgument(f"{name} must be 0 to {reads.MAX_CONTEXT_MESSAGES}", field=name)
        if revision < 0:
            raise InvalidArgument("revision must be 0 (the head) or a revision number", field="revision")
        vault = await self._accounts.access(identity, vault_name)
        owner = await self._store.locate(vault, message_id)
        if conversation_id and rules.parse_conversation_id(conversation_id) != owner:
            raise NotFound(f"conversation {conversation_id} has no message {message_id}", field="message_id")
        record, pinned = await self._store.pinned(vault, owner, revision)
        found = await self._store.around(vault, owner, pinned, message_id, before, after)
        if found is None:
            raise NotFound(
                f"revision {pinned} of conversation {owner} does not hold message {message_id}; read the revision"
                " the search hit names",
                field="message_id",
            )
        position, messages = found
        return record, pinned, position, messages

    async def messages(
        self,
        identity: Identity,
        vault_name: str,
        conversation_id: str,
        revision: int,
        node_ids: list[str],
        keys: list[str],
        message_ids: list[str],
    ) -> tuple[ConversationRecord, int, list[MessageRecord], list[str], list[str], list[str], list[str]]:
        """(conversation, revision read, the messages asked for by node id, key or message id in position
        order while they fit one answer, the node ids, keys and message ids that revision does not hold,
        the ids of the messages held but past what one answer carries)."""
        vault = await self._accounts.access(identity, vault_name)  # first: another's vault is not found
        conversation_id = rules.parse_conversation_id(conversation_id)
        node_ids, keys, message_ids = reads.lookups(node_ids, keys, message_ids)
        if revision < 0:
            raise InvalidArgument("revision must be 0 (the head) or a revision number", field="revision")
        record, pinned = await self._store.pinned(vault, conversation_id, revision)
        found = await self._store.by_ids(vault, conversation_id, pinned, node_ids, keys, message_ids)
        held_nodes, held_keys, held_ids = {m.node_id for m in found}, {m.key for m in found}, {m.id for m in found}
        missing = (
            [n for n in node_ids if n not in held_nodes],
            [k for k in keys if k not in held_keys],
            [i for i in message_ids if i not in held_ids],
        )
        kept = reads.answer_share(
            [reads.message_bytes(m.text, m.content, m.node_id, m.parent_node_id, m.key) for m in found]
        )
        return record, pinned, found[:kept], *missing, [m.id for m in found[kept:]]

    async def batch(
        self,
        identity: Identity,
        vault_name: str,
        requests: list[tuple[str, int, bool]],
        *,
        max_bytes: int,
        page: str,
    ) -> BatchPage:
        """Whole messages of 1-20 conversations, one of each in turn, within `max_bytes`; the cursor keeps
        every revision pinned. A message larger than any page is named (id, position, bytes), never cut."""
        budget = reads.budget(max_bytes)
        if page and requests:
            raise InvalidArgument("send either requests (a first call) or the cursor (a continuation), not both")
        if not page and not requests:
            raise InvalidArgument("send 1-20 requests, or the cursor of the previous page", field="requests")
        if len(requests) > reads.MAX_BATCH_CONVERSATIONS:
            raise LimitExceeded(f"at most {reads.MAX_BATCH_CONVERSATIONS} conversations per read", field="requests")
        vault = await self._accounts.access(identity, vault_name)
        results: dict[int, BatchResult] = {}
        # state per request: [index, conversation id, revision, graph, after position, total]
        state: list[list[Any]] = []
        if page:
            position = self._cursors.open(page, "archive-batch", _caller(identity), fingerprints.fingerprint(vault.id))
            assert position is not None
            raw = position.get("s")
            if not isinstance(raw, list) or not all(isinstance(s, list) and len(s) == 6 for s in raw):
                raise InvalidArgument("cursor is not one this server issued; omit it to start again", field="cursor")
            state = raw
        else:
            for index, (conversation_id, revision, graph) in enumerate(requests):
                try:
                    conversation_id = rules.parse_conversation_id(conversation_id)
                    if revision < 0:
                        raise InvalidArgument("revision must be 0 (the head) or a revision number", field="revision")
                    record, pinned = await self._store.pinned(vault, conversation_id, revision)
                except (InvalidArgument, NotFound) as error:
                    results[index] = BatchResult(index, conversation_id, error=error.message, complete=True)
                    continue
                total = await self._store.count_messages(vault, conversation_id, pinned, graph)
                state.append([index, conversation_id, pinned, graph, -1, total])
                results[index] = BatchResult(index, conversation_id, pinned, record.title, message_count=total)

        cursor_reserve = 200 + 130 * len(state)
        used = reads.ENVELOPE_BYTES + cursor_reserve + sum(reads.size(_result_header(r)) for r in results.values())
        queues: dict[int, list[MessageRecord]] = {}
        admitted: dict[int, list[MessageRecord]] = {}
        oversized: dict[int, list[Oversized]] = {}
        open_states = [s for s in state if s[4] != _DONE]
        full = False
        while open_states and not full:
            for s in list(open_states):
                index = s[0]
                if index not in results:
                    # A continuation touching this request: its title now, or that it was deleted meanwhile.
                    try:
                        record, _ = await self._store.pinned(vault, s[1], s[2])
                    except NotFound as error:
                        results[index] = BatchResult(index, s[1], s[2], error=error.message, complete=True)
                        used += reads.size(_result_header(results[index]))
                        s[4] = _DONE
                        open_states.remove(s)
                        continue
                    results[index] = BatchResult(index, s[1], s[2], record.title, message_count=s[5])
                    used += reads.size(_result_header(results[index]))
                queue = queues.setdefault(index, [])
                if not queue:
                    queue.extend(
                        await self._store.page(vault, s[1], s[2], graph=s[3], after=s[4], limit=reads.BATCH_FETCH)
                    )
                    if not queue:
                        s[4] = _DONE
                        open_states.remove(s)
                        continue
                message = queue[0]
                cost = _message_size(message)
                if cost > budget - reads.ENVELOPE_BYTES - 400:
                    # Larger than any page could hold: named, never cut, and passed over.
                    note = Oversized(message.id, message.position, len(message.text.encode()))
                    note_cost = reads.size(
                        {"message_id": note.message_id, "position": note.position, "bytes": note.bytes}
                    )
                    if used + note_cost > budget:
                        full = True
                        break
                    oversized.setdefault(index, []).append(note)
                    used += note_cost + 1
                elif used + cost > budget:
                    full = True
                    break
                else:
                    admitted.setdefault(index, []).append(message)
                    used += cost
                queue.pop(0)
                s[4] = message.position
        # A conversation is complete once nothing follows its last read message.
        for s in state:
            if (
                s[4] != _DONE
                and not queues.get(s[0])
                and not await self._store.page(vault, s[1], s[2], graph=s[3], after=s[4], limit=1)
            ):
                s[4] = _DONE
        out: list[BatchResult] = []
        for index in sorted(results):
            base = results[index]
            pinned_state = next((x for x in state if x[0] == index), None)
            out.append(
                BatchResult(
                    index,
                    base.conversation_id,
                    base.revision,
                    base.title,
                    admitted.get(index, []),
                    oversized.get(index, []),
                    complete=pinned_state is None or pinned_state[4] == _DONE,
                    error=base.error,
                    message_count=base.message_count,
                )
            )
        remaining = [s for s in state if s[4] != _DONE]
        next_cursor = (
            self._cursors.seal("archive-batch", _caller(identity), fingerprints.fingerprint(vault.id), {"s": remaining})
            if remaining
            else ""
        )
        completed = sum(1 for r in out if r.complete)
        return BatchPage(out, next_cursor, used - cursor_reserve + len(next_cursor), budget, completed, len(remaining))

    async def resolve(
        self, identity: Identity, vault_name: str, titles: list[str]
    ) -> dict[str, list[ConversationRecord]]:
        if not titles:
            raise InvalidArgument("titles: give 1-20 exact titles", field="titles")
        if len(titles) > reads.MAX_RESOLVE_TITLES:
            raise LimitExceeded(f"at most {reads.MAX_RESOLVE_TITLES} titles", field="titles")
        for title in titles:
            if not title or len(title) > rules.MAX_TITLE_CHARS:
                raise InvalidArgument(f"each title must be 1-{rules.MAX_TITLE_CHARS} characters", field="titles")
        vault = await self._accounts.access(identity, vault_name)
        found = await self._store.by_titles(vault, list(dict.fromkeys(titles)), reads.RESOLVE_PER_TITLE)
        by_title: dict[str, list[ConversationRecord]] = {t: [] for t in titles}
        for record in found:
            if record.title is not None:
                by_title[record.title].append(record)
        return by_title

    async def stats(self, identity: Identity, vault_name: str) -> ArchiveStats:
        vault = await self._accounts.access(identity, vault_name)
        return await self._store.stats(vault)


_DONE = 2**31 - 1
"""The after-position of a request that has nothing more to read."""


def _result_header(result: BatchResult) -> dict[str, Any]:
    return {
        "request_index": result.request_index,
        "conversation_id": result.conversation_id,
        "revision": result.revision,
        "title": result.title,
        "message_count": result.message_count,
        "complete": False,
        "error": result.error or None,
        "messages": [],
        "oversized": [],
    }
