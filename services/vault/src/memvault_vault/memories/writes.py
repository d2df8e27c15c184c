"""How a write is decided and stored: every item checked (invalid, secret, excluded, duplicate,
similar, new) before one transaction writes them. Remember, import and supersede share it."""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
import weakref
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from typing import Any

from memvault_core import limits
from memvault_core.errors import InvalidArgument, Unavailable
from memvault_core.identity import Identity
from memvault_vault.audit.store import AuditStore
from memvault_vault.database import VaultAccess
from memvault_vault.domain import duplicates
from memvault_vault.domain.duplicates import Decision, DuplicateCheck
from memvault_vault.domain.inputs import SecretFound, check_draft_secrets
from memvault_vault.domain.memory import Draft, Outcome, Status, Trust, WriteResult, initial_status
from memvault_vault.index_client import IndexClient
from memvault_vault.index_feed.progress import IndexProgress
from memvault_vault.index_feed.store import IndexFeedStore
from memvault_vault.memories.records import BatchRecord, Candidate, WritePlan, WriteReport, WriteSummary
from memvault_vault.memories.store import MemoryStore

log = logging.getLogger(__name__)

PROTOBUF_ROOM = 64 * 1024
"""Bytes of a Similar call to the indexer kept for what is not text: ids, field tags and lengths."""

_EXACT_MESSAGE = "the same text (ignoring case and whitespace) is already stored"
_EXCLUDED_MESSAGE = "this text was forgotten earlier and will not be stored again"


class Writer:
    def __init__(
        self,
        store: MemoryStore,
        feed: IndexFeedStore,
        audit: AuditStore,
        index: IndexClient | None = None,
        *,
        index_catch_up_seconds: float = duplicates.INDEX_CATCH_UP_SECONDS,
        index_progress: IndexProgress | None = None,
    ) -> None:
        self._store = store
        self._feed = feed
        self._audit = audit
        self._index = index
        self._index_catch_up_seconds = index_catch_up_seconds
        self._index_progress = index_progress or IndexProgress()
        self._import_turns: weakref.WeakValueDictionary[str, asyncio.Lock] = weakref.WeakValueDictionary()
        self._turn_embedded: dict[str, asyncio.Event] = {}
        """Per vault, set once the import holding the turn has its texts embedded, or embedding them ahead
        failed, or it waits for the index; at the latest when it leaves the turn."""
        self._warming: dict[str, set[asyncio.Task[None]]] = {}
        """Per vault, the imports' texts being embedded ahead (or waiting to be): the next one waits for all of
        them, so one whose caller went away does not let the next one start beside the one before it."""

    async def refuse_secret(self, identity: Identity, vault: VaultAccess, draft: Draft) -> None:
        try:
            check_draft_secrets(draft)
        except SecretFound as error:
            await self._audit.audit_event(
                vault, identity.actor, "memory.secret_rejected", "", {"kind": error.finding.kind, "field": error.field}
            )
            raise

    async def write(
        self,
        identity: Identity,
        vault: VaultAccess,
        items: Sequence[Draft | InvalidArgument],
        *,
        propose: bool,
        default_trust: Trust,
        batch_source: str | None,
    ) -> WriteSummary:
        """Decide every item (invalid, secret, excluded, duplicate, similar, new), then write in one transaction."""
        results: dict[int, WriteResult] = {}
        drafts: dict[int, Draft] = {}
        for index, item in enumerate(items):
            if isinstance(item, SecretFound):
                results[index] = WriteResult(Outcome.SECRET, "", Status.REJECTED, item.message, index)
            elif isinstance(item, InvalidArgument):
                results[index] = WriteResult(Outcome.INVALID, "", Status.REJECTED, item.message, index)
            else:
                drafts[index] = item
        async with self._import_turn(vault, drafts, batch_source is not None):
            return await self._decide_and_write(
                identity, vault, items, results, drafts, propose, default_trust, batch_source
            )

    async def _decide_and_write(
        self,
        identity: Identity,
        vault: VaultAccess,
        items: Sequence[Draft | InvalidArgument],
        results: dict[int, WriteResult],
        drafts: dict[int, Draft],
        propose: bool,
        default_trust: Trust,
        batch_source: str | None,
    ) -> WriteSummary:
        plan = await self.plan(vault, drafts, results, wait_for_index=batch_source is not None)
        status = initial_status(vault.approval_mode, propose)
        new_ids: dict[int, str] = {
            index: str(uuid.uuid4()) for index, d in plan.decisions.items() if d.kind != "duplicate"
        }
        candidates: list[Candidate] = []
        for index, decision in plan.decisions.items():
            if decision.kind == "duplicate":
                continue
            draft = self.annotated(drafts[index], identity)
            linked = decision.similar_to + tuple(new_ids[plan.fresh[i]] for i in decision.similar_items)
            candidates.append(
                Candidate(
                    id=new_ids[index],
                    content=draft.content,
                    content_hash=draft.hash,
                    draft=draft,
                    status=status,
                    trust=draft.trust or default_trust,
                    outcome=Outcome.SIMILAR.value if linked else Outcome.STORED.value,
                    similar_to=linked,
                )
            )
        by_id = {c.id: c for c in candidates}
        planned = {i: o.outcome.value for i, o in results.items()}
        for index in plan.decisions:
            planned[index] = by_id[new_ids[index]].outcome if index in new_ids else Outcome.DUPLICATE.value
        counts = {o.value: list(planned.values()).count(o.value) for o in Outcome}
        batch = (
            BatchRecord(batch_source, len(items), {k: v for k, v in counts.items() if v})
            if batch_source is not None
            else None
        )
        details: dict[str, Any] = {k: v for k, v in counts.items() if v}
        if plan.check is DuplicateCheck.EXACT_ONLY:
            details["duplicate_check"] = "exact-only"
        action = "memory.bulk_remember" if batch is not None else "memory.remember"
        report = await self._store.write(
            vault, candidates, actor=identity.actor, client=identity.client, batch=batch, audit=(action, details)
        )
        for index, decision in plan.decisions.items():
            results[index] = self._result(index, decision, plan, new_ids, by_id, report, vault)
        return WriteSummary([results[i] for i in range(len(items))], report.batch_id, plan.check, plan.notices)

    @asynccontextmanager
    async def _import_turn(self, vault: VaultAccess, drafts: dict[int, Draft], is_import: bool) -> AsyncIterator[None]:
        """Imports into one vault decide and write one after another (in this process), so each one's
        duplicate check sees the memories the one before wrote. A client may still keep two imports in
        flight: while one is decided and written, the next one's texts are embedded already (the
        indexer keeps them, and its Similar call under the turn then finds them embedded or awaits the
        embedding under way), so the indexer's cores do not idle while the vault writes. The next one's texts go
        to the indexer once the current one's are embedded: sent at once, both would be embedded side by
        side, and the current one would wait for both before it could be written (and its client send more).
        An import whose texts were embedded ahead lets the next one embed as soon as that is done, so the
        model keeps running while this one's duplicate check searches the index (about 0.2 s for 500 texts,
        in which Qdrant Edge holds the indexer's GIL) and its memories are written. With more than two in
        flight, the waiting ones embed one after another in the order they came, for the same reason."""
        if not is_import or self._index is None:
            yield
            return
        turn = self._import_turns.get(vault.id)
        if turn is None:
            turn = self._import_turns[vault.id] = asyncio.Lock()
        warming: asyncio.Task[None] | None = None
        if turn.locked() and drafts:
            earlier = self._warming.setdefault(vault.id, set())
            warming = asyncio.create_task(
                self._embed_ahead(
                    vault,
                    list(dict.fromkeys(d.content for d in drafts.values())),
                    self._turn_embedded.get(vault.id),
                    set(earlier),
                )
            )
            earlier.add(warming)
            warming.add_done_callback(lambda task: self._warmed(vault.id, task))
        try:
            await turn.acquire()
        except BaseException:  # the caller went away while it waited: nobody needs its texts embedded
            if warming is not None:
                warming.cancel()
            raise
        embedded = self._turn_embedded[vault.id] = asyncio.Event()
        if warming is not None:
            # The turn before has ended, so `warming` is sending or has sent (or still waits for the import
            # that came before this one to embed ahead): once it is done (the texts embedded, or failed and
            # left to the duplicate check), the next import may embed.
            warming.add_done_callback(lambda _: embedded.set())
        try:
            yield
        finally:
            if warming is not None:
                warming.cancel()  # done by now, or no longer of use (the duplicate check embedded the texts)
            embedded.set()
            if self._turn_embedded.get(vault.id) is embedded:
                del self._turn_embedded[vault.id]
            turn.release()

    def _warmed(self, vault_id: str, task: asyncio.Task[None]) -> None:
        warming = self._warming.get(vault_id)
        if warming is not None:
            warming.discard(task)
            if not warming:
                del self._warming[vault_id]

    def _turn_texts_embedded(self, vault: VaultAccess) -> None:
        """The import holding the vault's turn no longer needs the indexer's cores: the next may embed ahead."""
        embedded = self._turn_embedded.get(vault.id)
        if embedded is not None:
            embedded.set()

    async def _embed_ahead(
        self,
        vault: VaultAccess,
        texts: list[str],
        after: asyncio.Event | None,
        before: set[asyncio.Task[None]],
    ) -> None:
        """Have the indexer embed texts (a Similar call that only embeds: nothing is searched), once the import
        holding the turn has its own embedded (`after`; it is set when that import leaves the turn at the latest)
        and the texts of every import that came before this one have been embedded ahead (`before`)."""
        assert self._index is not None
        if after is not None:
            await after.wait()
        if before:
            await asyncio.wait(before)  # they never raise (below); a cancelled one is done too
        try:
            await self._index.embed_ahead(vault.id, texts)
        except Unavailable as error:
            log.info("embedding ahead failed; the duplicate check embeds the texts", extra={"reason": error.message})
        except Exception as error:  # nobody awaits this task: an error here must not go unseen, nor stop the import
            log.warning(
                "embedding ahead failed; the duplicate check embeds the texts", extra={"error": type(error).__name__}
            )

    def _result(
        self,
        index: int,
        decision: Decision,
        plan: WritePlan,
        new_ids: dict[int, str],
        by_id: dict[str, Candidate],
        report: WriteReport,
        vault: VaultAccess,
    ) -> WriteResult:
        if decision.kind == "duplicate":
            target = decision.duplicate_of
            if decision.duplicate_of_item is not None:
                target = new_ids.get(plan.fresh[decision.duplicate_of_item], "")
                candidate = by_id.get(target)
                status = candidate.status if candidate else Status.PROPOSED
                raced = report.raced.get(target)
                if raced is not None:
                    target, status = raced.id, raced.status
            else:
                status = plan.statuses.get(target, Status.ACTIVE)
            exact = decision.cosine == 0.0
            message = (
                "the same text (ignoring case and whitespace) appears earlier in this import"
                if exact
                else f"a near-duplicate of memory {target} (cosine {decision.cosine:.2f}, same numbers, dates, "
                "names and negations) is already stored; not stored again"
            )
            return WriteResult(
                Outcome.DUPLICATE,
                target,
                status,
                message,
                index,
                match="exact" if exact else "near",
                cosine=decision.cosine,
            )
        memory_id = new_ids[index]
        candidate = by_id[memory_id]
        raced = report.raced.get(memory_id)
        if raced is not None:
            if not raced.id:
                return WriteResult(Outcome.EXCLUDED, "", candidate.status, _EXCLUDED_MESSAGE, index)
            return WriteResult(Outcome.DUPLICATE, raced.id, raced.status, _EXACT_MESSAGE, index, match="exact")
        conflicts = report.conflicts.get(memory_id, ())
        notes: list[str] = []
        if candidate.similar_to:
            linked = ", ".join(candidate.similar_to)
            if candidate.status is Status.PROPOSED:
                notes.append(
                    f"linked to similar memories {linked}: it may update or contradict them, so it waits for the "
                    "owner, who can approve it, approve it and replace them, or reject it"
                )
            else:
                notes.append(
                    f"linked to similar memories {linked}: it may update or contradict them; recall shows "
                    "may_conflict_with while both are active. If it replaces one, call supersede"
                )
        if conflicts:
            when = "" if candidate.status is Status.ACTIVE else "once approved, "
            notes.append(
                f"{when}it shares its key and scope with active memories {', '.join(conflicts)}: a conflict until "
                "one is superseded or invalidated"
            )
        outcome = Outcome.SIMILAR if candidate.similar_to else Outcome.STORED
        return WriteResult(
            outcome,
            memory_id,
            candidate.status,
            "; ".join(notes),
            index,
            similar_to=candidate.similar_to,
            conflicts_with=conflicts,
            cosine=decision.cosine,
        )

    def annotated(self, draft: Draft, identity: Identity) -> Draft:
        source = draft.source
        if identity.client:
            source = f"{source} (via {identity.client})" if source else f"via {identity.client}"
        return Draft(**{**draft.__dict__, "source": source[: limits.MAX_SOURCE_CHARS + 64]})

    async def plan(
        self, vault: VaultAccess, drafts: dict[int, Draft], results: dict[int, WriteResult], *, wait_for_index: bool
    ) -> WritePlan:
        """Exact duplicates, exclusions and missing dependencies first; then similarity for what is left."""
        existing, excluded = await self._store.lookup_texts(vault, [d.hash for d in drafts.values()])
        wanted = {i for d in drafts.values() for i in d.depends_on}
        found = await self._store.existing_ids(vault, list(wanted)) if wanted else set()
        first_of: dict[str, int] = {}
        fresh: list[int] = []
        same_as: dict[int, int] = {}
        for index, draft in drafts.items():
            h = draft.hash
            missing = [i for i in draft.depends_on if i not in found]
            if missing:
                results[index] = WriteResult(
                    Outcome.INVALID,
                    "",
                    Status.REJECTED,
                    f"items[{index}].depends_on names {', '.join(missing)}, which is not a memory in vault "
                    f"'{vault.name}'; find ids with recall or list_memories",
                    index,
                )
            elif h in excluded:
                results[index] = WriteResult(Outcome.EXCLUDED, "", Status.REJECTED, _EXCLUDED_MESSAGE, index)
            elif h in existing and existing[h].status is Status.REJECTED:
                results[index] = WriteResult(
                    Outcome.EXCLUDED,
                    existing[h].id,
                    Status.REJECTED,
                    "the owner rejected this text earlier; it is not stored again",
                    index,
                )
            elif h in existing:
                results[index] = WriteResult(
                    Outcome.DUPLICATE, existing[h].id, existing[h].status, _EXACT_MESSAGE, index, match="exact"
                )
            elif h in first_of:
                same_as[index] = first_of[h]
            else:
                first_of[h] = index
                fresh.append(index)
        texts = [drafts[i].content for i in fresh]
        check, notices = DuplicateCheck.SEMANTIC, []
        matches: list[list[duplicates.Match]] = [[] for _ in texts]
        earlier: list[dict[int, float]] = [{} for _ in texts]
        statuses: dict[str, Status] = {}
        if texts and self._index is None:
            check = DuplicateCheck.EXACT_ONLY
            notices.append("no indexer is configured, so only exact duplicates were caught")
        elif texts and self._index is not None:
            try:
                similar, behind = await self._similar(vault, texts, wait_for_index=wait_for_index)
                near = await self._store.texts_and_statuses(vault, [m for found_ids, _ in similar for m in found_ids])
                statuses = {m: status for m, (_, status) in near.items()}
                for position, (found_ids, before) in enumerate(similar):
                    matches[position] = [
                        duplicates.Match(m, cosine, *near[m]) for m, cosine in found_ids.items() if m in near
                    ]
                    earlier[position] = before
                if behind:
                    notices.append(
                        f"{behind} recent memories were not in the search index yet and were compared for exact "
                        "duplicates only"
                    )
            except Unavailable as error:
                log.warning("duplicate check fell back to exact-only", extra={"reason": error.message})
                check = DuplicateCheck.EXACT_ONLY
                notices.append(
                    "the indexer is unavailable, so only exact duplicates were caught; near-duplicates and similar "
                    "memories were not looked for"
                )
        decisions = duplicates.decide(texts, matches, earlier)
        by_index = {fresh[p]: d for p, d in enumerate(decisions)}
        positions = {index: p for p, index in enumerate(fresh)}
        for index, first in same_as.items():
            earlier_decision = by_index[first]
            by_index[index] = (
                earlier_decision
                if earlier_decision.kind == "duplicate"
                else duplicates.Decision("duplicate", duplicate_of_item=positions[first])
            )
        return WritePlan(dict(sorted(by_index.items())), fresh, statuses, check, notices)

    async def _similar(
        self, vault: VaultAccess, texts: list[str], *, wait_for_index: bool
    ) -> tuple[list[tuple[dict[str, float], dict[int, float]]], int]:
        """The indexer's Similar answer for these texts, and how many recent memories it could not compare.

        A channel still backing off from an earlier failure, or an indexer busy for a moment, fails at
        once; one more try a moment later tells that from a stopped indexer (Unavailable)."""
        assert self._index is not None
        # The pending texts share the call's message with the texts themselves.
        room = limits.MAX_REQUEST_BYTES - sum(len(text.encode()) for text in texts) - PROTOBUF_ROOM
        budget = max(0, min(duplicates.PENDING_TEXT_BYTES, room))
        for attempt in range(2):
            try:
                pending, behind = await self._pending_for_compare(vault, wait=wait_for_index, budget=budget)
                similar = await self._index.similar(
                    vault.id,
                    texts,
                    limit=duplicates.SIMILAR_PER_TEXT,
                    min_cosine=duplicates.lowest_cosine(),
                    pending=pending,
                )
                if wait_for_index:  # an import, holding its vault's turn
                    self._turn_texts_embedded(vault)
                return similar, behind
            except Unavailable as error:
                if attempt:
                    raise
                log.info("indexer did not answer; trying once more", extra={"reason": error.message})
                await asyncio.sleep(duplicates.INDEX_RETRY_SECONDS)
        raise AssertionError("unreachable")

    async def _pending_for_compare(
        self, vault: VaultAccess, *, wait: bool, budget: int
    ) -> tuple[list[tuple[str, str]], int]:
        """The newest memories the index does not hold yet (compared from their text), and how many more
        there are. When more are waiting than can be sent as text, an import first waits
        (briefly) for the index to catch up, so that every memory is compared; otherwise it goes on at once,
        and the indexer indexes the last import while this one is checked.

        The wait is explicit: it happens only when memories would go uncompared; it first asks the indexer
        whether it answers at all (a stopped indexer will not catch up), then wakes on each progress report
        of the indexer (`IndexProgress`) rather than on a timer."""
        assert self._index is not None
        pending, total = await self._unindexed(vault, budget)
        if wait and total > len(pending):
            self._turn_texts_embedded(vault)  # the next import may use the cores meanwhile
            await self._index.embed_ahead(vault.id, ["memvault"])
            deadline = time.monotonic() + self._index_catch_up_seconds
            while total > len(pending) and (left := deadline - time.monotonic()) > 0:
                await self._index_progress.wait(left)
                pending, total = await self._unindexed(vault, budget)
        return pending, max(total - len(pending), 0)

    async def _unindexed(self, vault: VaultAccess, budget: int) -> tuple[list[tuple[str, str]], int]:
        pending, total = await self._feed.unindexed_for_compare(vault, duplicates.PENDING_TO_COMPARE)
        return duplicates.sendable(pending, budget), total
