"""What the vault does, between the wire (rpc/) and the database (store.py)."""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from memvault_core import limits
from memvault_core.errors import Conflict, InvalidArgument, LimitExceeded, NotFound, PermissionDenied, Unavailable
from memvault_core.identity import Identity
from memvault_vault.domain import cursor, duplicates, fusion, lifecycle
from memvault_vault.domain import guide as guide_rules
from memvault_vault.domain.duplicates import Decision, DuplicateCheck
from memvault_vault.domain.imports import split_text
from memvault_vault.domain.memory import (
    AS_OF_STATUSES,
    RECALLABLE_BY_DEFAULT,
    ApprovalMode,
    Draft,
    Memory,
    MemoryType,
    MemoryWarning,
    Outcome,
    RecallHit,
    RecallPage,
    SecretFound,
    Status,
    Trust,
    WriteResult,
    check_draft_secrets,
    check_reason,
    check_secret,
    initial_status,
    parse_approval_mode,
    parse_memory_id,
    review_after,
    validate_draft,
    validate_items,
    validate_page_size,
    validate_query,
)
from memvault_vault.index_client import IndexClient
from memvault_vault.index_progress import IndexProgress
from memvault_vault.store import (
    AuditRecord,
    BatchInfo,
    BatchRecord,
    Candidate,
    Store,
    UndoReport,
    VaultAccess,
    WriteReport,
)

log = logging.getLogger(__name__)

HYBRID = "hybrid"
KEYWORD_ONLY = "keyword-only"
PROTOBUF_ROOM = 64 * 1024
"""Bytes of a Similar call to the indexer kept for what is not text: ids, field tags and lengths."""

_EXACT_MESSAGE = "the same text (ignoring case and whitespace) is already stored"
_EXCLUDED_MESSAGE = "this text was forgotten earlier and will not be stored again"


@dataclass(frozen=True)
class WriteSummary:
    """What a remember or import did: one result per item, in order."""

    results: list[WriteResult]
    batch_id: str | None
    check: DuplicateCheck
    notices: list[str]


@dataclass(frozen=True)
class WritePlan:
    decisions: dict[int, Decision]
    """Item index -> what to do with it, for items that reached the duplicate check."""
    fresh: list[int]
    """Item indexes of the texts compared for similarity, in order (decisions name them by position)."""
    statuses: dict[str, Status]
    check: DuplicateCheck
    notices: list[str]


@dataclass(frozen=True)
class SupersedeOutcome:
    result: WriteResult
    applied: bool
    flagged: list[str]
    check: DuplicateCheck
    notices: list[str]


@dataclass(frozen=True)
class HistoryStep:
    version: int
    change: str
    actor: str
    at: datetime
    cause: str
    changed_fields: list[str]
    status: Status
    content: str
    """The text at this version, when it changed (or on creation); empty otherwise."""


@dataclass(frozen=True)
class Explanation:
    memory: Memory
    history: list[HistoryStep]
    related: list[tuple[str, Memory]]
    notes: list[str]
    missing: list[str]


@dataclass(frozen=True)
class Finding:
    memory: Memory
    kinds: list[str]
    related: list[str]
    message: str


@dataclass(frozen=True)
class GuideView:
    vault: str
    text: str
    version: int
    newer_default_available: bool
    default_revision: str
    default_text: str
    updated_at: datetime | None
    updated_by: str


class MemoryService:
    def __init__(
        self,
        store: Store,
        index: IndexClient | None = None,
        *,
        index_catch_up_seconds: float = duplicates.INDEX_CATCH_UP_SECONDS,
        index_progress: IndexProgress | None = None,
    ) -> None:
        self.store = store
        self.index = index
        self.index_catch_up_seconds = index_catch_up_seconds
        self.index_progress = index_progress or IndexProgress()

    async def vaults(self, identity: Identity) -> list[VaultAccess]:
        identity.require("read")
        return [v for v in await self.store.vaults_of(identity.subject) if identity.allows_vault(v.name)]

    async def access(self, identity: Identity, name: str, *, write: bool = False) -> VaultAccess:
        """The vault `name` as this identity may use it; unknown and forbidden vaults look the same."""
        identity.require("write" if write else "read")
        name = name.strip()
        if not name:
            usable = await self.vaults(identity)
            by_name = {v.name: v for v in usable}
            if "default" in by_name:
                vault: VaultAccess | None = by_name["default"]
            elif len(usable) == 1:
                vault = usable[0]
            else:
                raise InvalidArgument(
                    "vault is required here; choose one of: " + (", ".join(by_name) or "(none)"),
                    field="vault",
                )
        else:
            vault = await self.store.vault_of(identity.subject, name) if identity.allows_vault(name) else None
        if vault is None:
            names = ", ".join(v.name for v in await self.vaults(identity)) or "(none)"
            raise NotFound(f"no vault named {name[:64]!r} is open to you; your vaults: {names}", field="vault")
        if write and not vault.writable:
            raise PermissionDenied(f"you can read vault '{vault.name}' but not write to it (role: {vault.role})")
        return vault

    async def remember(
        self, identity: Identity, vault_name: str, draft: Draft, *, propose: bool
    ) -> tuple[VaultAccess, WriteSummary]:
        draft = validate_draft(draft)
        vault = await self.access(identity, vault_name, write=True)
        await self._refuse_secret(identity, vault, draft)
        summary = await self._write(
            identity, vault, [draft], propose=propose, default_trust=Trust.INFERRED, batch_source=None
        )
        invalid = summary.results[0]
        if invalid.outcome is Outcome.INVALID:  # a dependency that is not in the vault
            raise NotFound(invalid.message.removeprefix("items[0]."), field="depends_on")
        return vault, summary

    async def bulk_remember(
        self,
        identity: Identity,
        vault_name: str,
        drafts: Sequence[Draft],
        source: str,
        *,
        text: str = "",
        text_type: MemoryType = MemoryType.FACT,
        sequence: bool = False,
    ) -> tuple[VaultAccess, WriteSummary]:
        """Import items (or text split into items) as one undoable batch, with an outcome per item."""
        source = source.strip()
        if len(source) > limits.MAX_SOURCE_CHARS:
            raise LimitExceeded(
                f"source is {len(source)} characters; the limit is {limits.MAX_SOURCE_CHARS} (max_source_chars). "
                "Name the app and the date, e.g. 'ChatGPT memories, 2026-11-30'",
                field="source",
                limit=limits.MAX_SOURCE_CHARS,
            )
        if text.strip() and drafts:
            raise InvalidArgument("send either items or text, not both", field="text")
        if text.strip():
            drafts = [Draft(content=item, type=text_type) for item in split_text(text)]
        checked = validate_items(list(drafts))
        vault = await self.access(identity, vault_name, write=True)
        if source:
            check_secret(source, field_name="source")
        items: list[Draft | InvalidArgument] = [
            d if isinstance(d, InvalidArgument) or d.source else Draft(**{**d.__dict__, "source": source})
            for d in checked
        ]
        if sequence:
            items = with_context(items)
        summary = await self._write(
            identity, vault, items, propose=False, default_trust=Trust.IMPORTED, batch_source=source
        )
        return vault, summary

    async def _refuse_secret(self, identity: Identity, vault: VaultAccess, draft: Draft) -> None:
        try:
            check_draft_secrets(draft)
        except SecretFound as error:
            await self.store.audit_event(
                vault, identity.actor, "memory.secret_rejected", "", {"kind": error.finding.kind, "field": error.field}
            )
            raise

    async def _write(
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
        plan = await self._plan(vault, drafts, results, wait_for_index=batch_source is not None)
        status = initial_status(vault.approval_mode, propose)
        new_ids: dict[int, str] = {
            index: str(uuid.uuid4()) for index, d in plan.decisions.items() if d.kind != "duplicate"
        }
        candidates: list[Candidate] = []
        for index, decision in plan.decisions.items():
            if decision.kind == "duplicate":
                continue
            draft = self._annotated(drafts[index], identity)
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
        report = await self.store.write(
            vault, candidates, actor=identity.actor, client=identity.client, batch=batch, audit=(action, details)
        )
        for index, decision in plan.decisions.items():
            results[index] = self._result(index, decision, plan, new_ids, by_id, report, vault)
        return WriteSummary([results[i] for i in range(len(items))], report.batch_id, plan.check, plan.notices)

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

    def _annotated(self, draft: Draft, identity: Identity) -> Draft:
        source = draft.source
        if identity.client:
            source = f"{source} (via {identity.client})" if source else f"via {identity.client}"
        return Draft(**{**draft.__dict__, "source": source[: limits.MAX_SOURCE_CHARS + 64]})

    async def _plan(
        self, vault: VaultAccess, drafts: dict[int, Draft], results: dict[int, WriteResult], *, wait_for_index: bool
    ) -> WritePlan:
        """Exact duplicates, exclusions and missing dependencies first; then similarity for what is left."""
        existing, excluded = await self.store.lookup_texts(vault, [d.hash for d in drafts.values()])
        wanted = {i for d in drafts.values() for i in d.depends_on}
        found = await self.store.existing_ids(vault, list(wanted)) if wanted else set()
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
        if texts and self.index is None:
            check = DuplicateCheck.EXACT_ONLY
            notices.append("no indexer is configured, so only exact duplicates were caught")
        elif texts and self.index is not None:
            try:
                similar, behind = await self._similar(vault, texts, wait_for_index=wait_for_index)
                near = await self.store.memories(vault, [m for found_ids, _ in similar for m in found_ids])
                statuses = {m.id: m.status for m in near.values()}
                for position, (found_ids, before) in enumerate(similar):
                    matches[position] = [
                        duplicates.Match(m, cosine, near[m].content, near[m].status)
                        for m, cosine in found_ids.items()
                        if m in near
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
        assert self.index is not None
        # The pending texts share the call's message with the texts themselves.
        room = limits.MAX_REQUEST_BYTES - sum(len(text.encode()) for text in texts) - PROTOBUF_ROOM
        budget = max(0, min(duplicates.PENDING_TEXT_BYTES, room))
        for attempt in range(2):
            try:
                pending, behind = await self._pending_for_compare(vault, wait=wait_for_index, budget=budget)
                similar = await self.index.similar(
                    vault.id,
                    texts,
                    limit=duplicates.SIMILAR_PER_TEXT,
                    min_cosine=duplicates.lowest_cosine(),
                    pending=pending,
                )
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

        The wait is explicit: it happens only when memories would go uncompared, it first asks the indexer
        whether it answers at all (a stopped indexer will not catch up), and it then wakes on each
        progress report of the indexer (`IndexProgress`)."""
        assert self.index is not None
        pending, total = await self._unindexed(vault, budget)
        if wait and total > len(pending):
            await self.index.similar(vault.id, ["memvault"], limit=1, min_cosine=1.0)
            deadline = time.monotonic() + self.index_catch_up_seconds
            while total > len(pending) and (left := deadline - time.monotonic()) > 0:
                await self.index_progress.wait(left)
                pending, total = await self._unindexed(vault, budget)
        return pending, max(total - len(pending), 0)

    async def _unindexed(self, vault: VaultAccess, budget: int) -> tuple[list[tuple[str, str]], int]:
        pending, total = await self.store.unindexed_for_compare(vault, duplicates.PENDING_TO_COMPARE)
        return duplicates.sendable(pending, budget), total

    async def recall(
        self,
        identity: Identity,
        vault_name: str,
        query: str,
        *,
        limit: int = 0,
        page_cursor: str = "",
        types: Sequence[MemoryType] = (),
        tags: Sequence[str] = (),
        statuses: Sequence[Status] = (),
        as_of: datetime | None = None,
        include_expired: bool = False,
    ) -> tuple[VaultAccess, RecallPage]:
        query = validate_query(query)
        limit = validate_page_size(limit, limits.DEFAULT_RECALL_RESULTS, limits.MAX_RECALL_RESULTS)
        now = datetime.now(UTC)
        if as_of is not None and as_of > now:
            raise InvalidArgument("as_of is in the future; leave it out to recall what is valid now", field="as_of")
        vault = await self.access(identity, vault_name)
        statuses = tuple(statuses) or (AS_OF_STATUSES if as_of else RECALLABLE_BY_DEFAULT)
        tags = sorted({t.strip().lower() for t in tags})
        request = cursor.fingerprint(
            "recall",
            vault.id,
            query,
            sorted(types),
            tags,
            sorted(statuses),
            as_of.isoformat() if as_of else "",
            include_expired,
        )
        position = cursor.decode(page_cursor, "recall", request)
        offset = cursor.offset_of(position)
        ranked, mode = await self._rank(
            vault, query, statuses=statuses, types=types, tags=tags, include_expired=include_expired, as_of=as_of
        )
        window = ranked[offset : offset + limit + 1]
        rows = await self.store.recall_page(vault, [found.id for found, _ in window])
        hits, cut = _fit([(rows[f.id].memory, score) for f, score in window if f.id in rows], limit)
        more = cut or len(ranked) > offset + limit
        warnings: list[str] = []
        if mode == KEYWORD_ONLY and self.index is not None:
            warnings.append(
                "semantic search is unavailable right now; only memories sharing words with the query were searched"
            )
        elif self.index is None:
            warnings.append("no indexer is configured: only memories sharing words with the query were searched")
        if not ranked and offset == 0 and not await self.store.has_search_terms(query) and mode == KEYWORD_ONLY:
            warnings.append("the query has only common words (like 'what' or 'the'); add the specific terms you want")
        next_cursor = cursor.encode("recall", request, {"offset": offset + len(hits)}) if more else ""
        page_hits: list[RecallHit] = []
        memory_warnings: list[MemoryWarning] = []
        for memory, score in hits:
            row = rows[memory.id]
            live = memory.status is Status.ACTIVE
            hit = RecallHit(memory, score, row.similar if live else (), row.same_key if live else ())
            page_hits.append(hit)
            memory_warnings.extend(lifecycle.warnings_for(hit, now, as_of))
        page = RecallPage(
            hits=page_hits,
            mode=mode,
            warnings=warnings,
            next_cursor=next_cursor,
            memory_warnings=memory_warnings,
        )
        return vault, page

    async def _rank(
        self,
        vault: VaultAccess,
        query: str,
        *,
        statuses: Sequence[Status],
        types: Sequence[MemoryType],
        tags: Sequence[str],
        include_expired: bool = False,
        as_of: datetime | None = None,
    ) -> tuple[list[tuple[fusion.Found, float]], str]:
        """Every memory keyword or vector search found, fused, best first; and which search answered."""
        filters: dict[str, Any] = {
            "statuses": statuses,
            "types": types,
            "tags": tags,
            "include_expired": include_expired,
            "as_of": as_of,
        }
        if self.index is None:
            keyword = await self.store.keyword_search(
                vault, query, limit=fusion.KEYWORD_CANDIDATES, offset=0, **filters
            )
            return fusion.fuse(keyword, {}, cosine_weight=0.0), KEYWORD_ONLY
        index = self.index
        # Full-text search runs beside the lookup of recent writes the index does not hold yet; then one
        # indexer call embeds the query, finds the nearest memories and scores the keyword hits.
        keyword, pending = await asyncio.gather(
            self.store.keyword_search(vault, query, limit=fusion.KEYWORD_CANDIDATES, offset=0, **filters),
            self.store.unindexed_recent(vault, fusion.PENDING_TO_SCORE),
        )
        try:
            cosines = await index.search(
                vault.id,
                query,
                limit=fusion.DENSE_CANDIDATES,
                score_ids=[found.id for found in keyword],
                pending=pending,
            )
        except Unavailable as error:
            log.warning("recall fell back to keyword-only", extra={"reason": error.message})
            return fusion.fuse(keyword, {}, cosine_weight=0.0), KEYWORD_ONLY
        known = {found.id for found in keyword}
        dense_only = [i for i in cosines if i not in known]
        extra = await self.store.memories_by_ids(vault, dense_only, query, **filters)
        return fusion.fuse([*keyword, *extra], cosines), HYBRID

    async def stats(self, identity: Identity, vault_name: str) -> tuple[VaultAccess, dict[str, Any]]:
        vault = await self.access(identity, vault_name)
        return vault, await self.store.stats(vault)

    async def list_memories(
        self,
        identity: Identity,
        vault_name: str,
        *,
        statuses: Sequence[Status] = (),
        types: Sequence[MemoryType] = (),
        tags: Sequence[str] = (),
        limit: int = 0,
        page_cursor: str = "",
    ) -> tuple[VaultAccess, list[Memory], str]:
        limit = validate_page_size(limit, limits.DEFAULT_LIST_RESULTS, limits.MAX_LIST_RESULTS)
        vault = await self.access(identity, vault_name)
        tags = sorted({t.strip().lower() for t in tags})
        request = cursor.fingerprint("list", vault.id, sorted(statuses), sorted(types), tags)
        position = cursor.decode(page_cursor, "list", request)
        after = cursor.keyset_of(position)
        found = await self.store.list_memories(
            vault, statuses=statuses, types=types, tags=tags, limit=limit + 1, after=after
        )
        memories, more = _fit([(m, 0.0) for m in found], limit)
        page = [m for m, _ in memories]
        next_cursor = ""
        if more and page:
            last = page[-1]
            assert last.created_at is not None
            next_cursor = cursor.encode("list", request, {"created_at": last.created_at.isoformat(), "id": last.id})
        return vault, page, next_cursor

    async def forget(self, identity: Identity, vault_name: str, memory_id: str) -> tuple[VaultAccess, str]:
        memory_id = parse_memory_id(memory_id)
        vault = await self.access(identity, vault_name, write=True)
        if not await self.store.forget(vault, memory_id, identity.actor):
            raise NotFound(
                f"no memory {memory_id} in vault '{vault.name}' (if you forgot it already, it is gone); "
                "find ids with recall or list_memories",
                field="memory_id",
            )
        return vault, memory_id

    # --- lifecycle ---------------------------------------------------------------------------------

    async def _reviewer(self, identity: Identity, vault_name: str) -> VaultAccess:
        """Reviewing (approve, reject, confirm, undo an import) is for the vault's owners and editors, with the
        admin scope: agents propose, people decide."""
        vault = await self.access(identity, vault_name, write=True)
        identity.require("admin")
        return vault

    async def _owner(self, identity: Identity, vault_name: str, *, write: bool) -> VaultAccess:
        vault = await self.access(identity, vault_name, write=write)
        identity.require("admin")
        if vault.role != "owner":
            raise PermissionDenied(f"only an owner of vault '{vault.name}' can do this (your role: {vault.role})")
        return vault

    def _applies_now(self, identity: Identity, vault: VaultAccess) -> bool:
        """An agent's change to existing memories waits for review unless the vault is in auto mode; a person
        acting with the admin scope (the owner in the dashboard or API) decides at once."""
        return vault.approval_mode == ApprovalMode.AUTO or (not identity.client and "admin" in identity.scopes)

    async def supersede(
        self, identity: Identity, vault_name: str, memory_id: str, replacement: Draft, *, expected_version: int = 0
    ) -> tuple[VaultAccess, SupersedeOutcome]:
        memory_id = parse_memory_id(memory_id)
        replacement = validate_draft(replacement)
        vault = await self.access(identity, vault_name, write=True)
        await self._refuse_secret(identity, vault, replacement)
        similar_to, plan = await self._check_replacement(vault, memory_id, replacement)
        apply = self._applies_now(identity, vault)
        draft = self._annotated(replacement, identity)
        candidate = Candidate(
            id=str(uuid.uuid4()),
            content=draft.content,
            content_hash=draft.hash,
            draft=draft,
            status=Status.ACTIVE if apply else Status.PROPOSED,
            trust=draft.trust or Trust.INFERRED,
            outcome=Outcome.SIMILAR.value if similar_to else Outcome.STORED.value,
            similar_to=similar_to,
            supersedes=memory_id,
        )
        report, flagged = await self.store.supersede(
            vault,
            memory_id,
            candidate,
            apply=apply,
            expected_version=expected_version,
            actor=identity.actor,
            client=identity.client,
        )
        conflicts = tuple(c for c in report.conflicts.get(candidate.id, ()) if c != memory_id)
        message = (
            f"memory {memory_id} is superseded by {candidate.id}"
            if apply
            else f"the replacement {candidate.id} waits for the owner's review; {memory_id} stays active until it is approved"
        )
        if flagged:
            message += f"; {len(flagged)} memories that depend on it were flagged for review"
        if similar_to:
            message += (
                f"; the replacement is also similar to {', '.join(similar_to)}: check that it does not contradict "
                "them (recall shows may_conflict_with while both are active)"
            )
        outcome = Outcome.SIMILAR if similar_to else Outcome.STORED
        result = WriteResult(
            outcome, candidate.id, candidate.status, message, 0, similar_to=similar_to, conflicts_with=conflicts
        )
        return vault, SupersedeOutcome(result, apply, flagged, plan.check, plan.notices)

    async def _check_replacement(
        self, vault: VaultAccess, memory_id: str, replacement: Draft
    ) -> tuple[tuple[str, ...], WritePlan]:
        """A replacement gets the same duplicate rules as any write. Repeating the memory it replaces, or
        another memory, is refused (nothing would change; if another memory already says it, the old one is
        simply no longer true). Memories similar to it, other than the one it replaces, are linked."""
        refused: dict[int, WriteResult] = {}
        plan = await self._plan(vault, {0: replacement}, refused, wait_for_index=False)
        if 0 in refused:
            found = refused[0]
            if found.outcome is Outcome.INVALID:  # a dependency that is not in the vault, as in remember
                raise NotFound(found.message.removeprefix("items[0]."), field="depends_on")
            if found.outcome is Outcome.DUPLICATE and found.memory_id == memory_id:
                raise Conflict(
                    f"the replacement text is the text of memory {memory_id}; supersede it with the new text",
                    field="content",
                )
            if found.outcome is Outcome.DUPLICATE:
                raise Conflict(
                    f"the replacement text is already stored as memory {found.memory_id} ({found.status.value}); "
                    f"if {memory_id} is simply no longer true, invalidate it",
                    field="content",
                )
            raise Conflict(f"the replacement cannot be stored: {found.message}", field="content")
        decision = plan.decisions[0]
        if decision.kind == "duplicate" and decision.duplicate_of == memory_id:
            raise Conflict(
                f"the replacement says the same as memory {memory_id} (cosine {decision.cosine:.2f}, same numbers, "
                "dates, names and negations): nothing would change. Supersede only when a fact changed, and say what "
                "it is now",
                field="content",
            )
        if decision.kind == "duplicate":
            raise Conflict(
                f"memory {decision.duplicate_of} already says this (cosine {decision.cosine:.2f}, same numbers, "
                f"dates, names and negations); if {memory_id} is simply no longer true, invalidate it",
                field="content",
            )
        return tuple(m for m in decision.similar_to if m != memory_id), plan

    async def invalidate(
        self, identity: Identity, vault_name: str, memory_id: str, reason: str, *, expected_version: int = 0
    ) -> tuple[VaultAccess, Memory, bool, list[str]]:
        memory_id = parse_memory_id(memory_id)
        reason = check_reason(reason)
        vault = await self.access(identity, vault_name, write=True)
        apply = self._applies_now(identity, vault)
        memory, flagged = await self.store.invalidate(
            vault, memory_id, reason, apply=apply, expected_version=expected_version, actor=identity.actor
        )
        return vault, memory, apply, flagged

    async def approve(
        self,
        identity: Identity,
        vault_name: str,
        memory_id: str,
        *,
        replace_similar: bool = False,
        replace_ids: Sequence[str] = (),
        expected_version: int = 0,
    ) -> tuple[VaultAccess, Memory, list[str], list[str]]:
        memory_id = parse_memory_id(memory_id)
        replace = [parse_memory_id(v, f"replace_ids[{i}]") for i, v in enumerate(replace_ids)]
        vault = await self._reviewer(identity, vault_name)
        memory, superseded, flagged = await self.store.approve(
            vault,
            memory_id,
            replace_similar=replace_similar,
            replace_ids=replace,
            expected_version=expected_version,
            actor=identity.actor,
        )
        return vault, memory, superseded, flagged

    async def reject(
        self, identity: Identity, vault_name: str, memory_id: str, reason: str, *, expected_version: int = 0
    ) -> tuple[VaultAccess, Memory]:
        memory_id = parse_memory_id(memory_id)
        reason = check_reason(reason)
        vault = await self._reviewer(identity, vault_name)
        return vault, await self.store.reject(
            vault, memory_id, reason, expected_version=expected_version, actor=identity.actor
        )

    async def mark_reviewed(
        self, identity: Identity, vault_name: str, memory_id: str, *, expected_version: int = 0
    ) -> tuple[VaultAccess, Memory]:
        memory_id = parse_memory_id(memory_id)
        vault = await self._reviewer(identity, vault_name)
        current = await self._memory(vault, memory_id)
        next_review = review_after(current.type, datetime.now(UTC))
        return vault, await self.store.mark_reviewed(
            vault, memory_id, next_review, expected_version=expected_version, actor=identity.actor
        )

    async def _memory(self, vault: VaultAccess, memory_id: str) -> Memory:
        memory = await self.store.get_memory(vault, memory_id)
        if memory is None:
            raise NotFound(
                f"no memory {memory_id} in vault '{vault.name}'; find ids with recall or list_memories",
                field="memory_id",
            )
        return memory

    async def explain(self, identity: Identity, vault_name: str, memory_id: str) -> tuple[VaultAccess, Explanation]:
        memory_id = parse_memory_id(memory_id)
        vault = await self.access(identity, vault_name)
        memory = await self._memory(vault, memory_id)
        records = await self.store.history(vault, memory_id, limits.MAX_HISTORY_ENTRIES)
        history: list[HistoryStep] = []
        previous: dict[str, Any] | None = None
        for record in records:
            fields = lifecycle.changed_fields(previous, record.snapshot)
            content_changed = previous is None or "content" in fields
            history.append(
                HistoryStep(
                    record.version,
                    record.change,
                    record.actor,
                    record.at,
                    record.cause,
                    fields,
                    Status(record.snapshot.get("status", memory.status.value)),
                    str(record.snapshot.get("content", "")) if content_changed else "",
                )
            )
            previous = record.snapshot
        related = await self.store.related(vault, memory, limits.MAX_LIST_RESULTS)
        referenced = {
            *memory.depends_on,
            *memory.similar_to,
            *(i for i in (memory.supersedes, memory.superseded_by) if i),
        }
        present = {m.id for _, m in related}
        missing = sorted(referenced - present)
        now = datetime.now(UTC)
        return vault, Explanation(memory, history, related, lifecycle.notes(memory, now), missing)

    async def audit_memories(
        self, identity: Identity, vault_name: str, kinds: Sequence[str], *, limit: int = 0, page_cursor: str = ""
    ) -> tuple[VaultAccess, list[Finding], dict[str, int], str]:
        unknown = [k for k in kinds if k not in lifecycle.AUDIT_KINDS]
        if unknown:
            raise InvalidArgument(
                f"kinds has {', '.join(repr(k) for k in unknown)}; choose from: {', '.join(lifecycle.AUDIT_KINDS)}",
                field="kinds",
            )
        limit = validate_page_size(limit, limits.DEFAULT_LIST_RESULTS, limits.MAX_AUDIT_RESULTS)
        vault = await self.access(identity, vault_name)
        chosen = sorted(set(kinds)) or list(lifecycle.AUDIT_KINDS)
        request = cursor.fingerprint("audit", vault.id, chosen)
        position = cursor.decode(page_cursor, "audit", request)
        found, counts = await self.store.audit_findings(vault, chosen, limit + 1, cursor.id_of(position))
        now = datetime.now(UTC)
        page = [
            Finding(memory, kinds_found, related, lifecycle.finding_message(memory, kinds_found, related, now))
            for memory, kinds_found, related in found[:limit]
        ]
        next_cursor = cursor.encode("audit", request, {"id": page[-1].memory.id}) if len(found) > limit else ""
        return vault, page, counts, next_cursor

    async def review_queue(
        self, identity: Identity, vault_name: str, *, limit: int = 0, page_cursor: str = ""
    ) -> tuple[VaultAccess, list[tuple[Memory, list[tuple[str, Memory]]]], int, str]:
        limit = validate_page_size(limit, limits.DEFAULT_LIST_RESULTS, limits.MAX_LIST_RESULTS)
        vault = await self.access(identity, vault_name)
        request = cursor.fingerprint("review", vault.id)
        position = cursor.decode(page_cursor, "review", request)
        after = cursor.keyset_of(position)
        memories, total = await self.store.review_queue(vault, limit + 1, after)
        items = []
        for memory in memories[:limit]:
            related = [
                (relation, other)
                for relation, other in await self.store.related(vault, memory, limits.MAX_LIST_RESULTS)
                if relation in ("similar", "similar_from", "supersedes", "same_key", "depends_on")
            ]
            items.append((memory, related))
        next_cursor = ""
        if len(memories) > limit and items:
            last = items[-1][0]
            assert last.created_at is not None
            next_cursor = cursor.encode("review", request, {"created_at": last.created_at.isoformat(), "id": last.id})
        return vault, items, total, next_cursor

    async def batches(
        self, identity: Identity, vault_name: str, *, limit: int = 0, page_cursor: str = ""
    ) -> tuple[VaultAccess, list[BatchInfo], str]:
        limit = validate_page_size(limit, limits.DEFAULT_LIST_RESULTS, limits.MAX_LIST_RESULTS)
        vault = await self.access(identity, vault_name)
        request = cursor.fingerprint("batches", vault.id)
        position = cursor.decode(page_cursor, "batches", request)
        before = cursor.keyset_of(position)
        found = await self.store.batches(vault, limit + 1, before)
        page = found[:limit]
        next_cursor = (
            cursor.encode("batches", request, {"created_at": page[-1].created_at.isoformat(), "id": page[-1].id})
            if len(found) > limit
            else ""
        )
        return vault, page, next_cursor

    async def undo_batch(self, identity: Identity, vault_name: str, batch_id: str) -> tuple[VaultAccess, UndoReport]:
        try:
            batch_id = str(uuid.UUID(batch_id.strip()))
        except ValueError:
            raise InvalidArgument(
                f"batch_id {batch_id[:60]!r} is not an import id; list imports to find it", field="batch_id"
            ) from None
        vault = await self._reviewer(identity, vault_name)
        report = await self.store.undo_batch(vault, batch_id, identity.actor)
        if report is None:
            raise NotFound(f"no import {batch_id} in vault '{vault.name}'; list imports to find it", field="batch_id")
        return vault, report

    async def settings(self, identity: Identity, vault_name: str) -> tuple[VaultAccess, dict[str, Any]]:
        vault = await self.access(identity, vault_name)
        return vault, await self.store.settings(vault)

    async def update_settings(
        self, identity: Identity, vault_name: str, changes: dict[str, object]
    ) -> tuple[VaultAccess, dict[str, Any]]:
        tidy: dict[str, Any] = {}
        if changes.get("approval_mode"):
            tidy["approval_mode"] = parse_approval_mode(str(changes["approval_mode"])).value
        for name in ("superseded_retention_days", "rejected_retention_days", "audit_retention_days"):
            value = changes.get(name)
            if value is None:
                continue
            if not isinstance(value, int) or not 0 <= value <= limits.MAX_RETENTION_DAYS:
                raise InvalidArgument(
                    f"{name} must be a whole number of days from 0 (keep forever) to {limits.MAX_RETENTION_DAYS}",
                    field=name,
                )
            tidy[name] = value
        vault = await self._owner(identity, vault_name, write=True)
        return vault, await self.store.update_settings(vault, tidy, identity.actor)

    async def guide_view(self, identity: Identity, vault_name: str, *, include_default: bool = False) -> GuideView:
        vault = await self.access(identity, vault_name)
        record = await self.store.guide_record(vault)
        current_default = guide_rules.default_revision()
        return GuideView(
            vault=vault.name,
            text=record.text,
            version=record.version,
            newer_default_available=record.default_revision != current_default,
            default_revision=current_default,
            default_text=guide_rules.default_text(await self.store.owner_name(vault)) if include_default else "",
            updated_at=record.updated_at,
            updated_by=record.updated_by,
        )

    async def update_guide(
        self, identity: Identity, vault_name: str, text: str, *, expected_version: int = 0, adopt_default: bool = False
    ) -> tuple[VaultAccess, int]:
        vault = await self._owner(identity, vault_name, write=True)
        if adopt_default:
            if text.strip():
                raise InvalidArgument("text must be empty when adopting the default guide", field="text")
            text = guide_rules.default_text(await self.store.owner_name(vault))
        text = guide_rules.validate_text(text)
        version = await self.store.update_guide(
            vault, text, expected_version=expected_version, adopted_default=adopt_default, actor=identity.actor
        )
        return vault, version

    async def guide_versions(
        self, identity: Identity, vault_name: str, *, limit: int = 0, before_version: int = 0
    ) -> tuple[VaultAccess, list[tuple[int, str, datetime, str]]]:
        limit = validate_page_size(limit, limits.DEFAULT_LIST_RESULTS, limits.MAX_LIST_RESULTS)
        vault = await self.access(identity, vault_name)
        return vault, await self.store.guide_versions(vault, limit, max(before_version, 0))

    async def vault_audit(
        self,
        identity: Identity,
        vault_name: str,
        *,
        actor: str = "",
        action: str = "",
        target: str = "",
        since: datetime | None = None,
        until: datetime | None = None,
        limit: int = 0,
        before_id: int = 0,
    ) -> tuple[VaultAccess, list[AuditRecord], int]:
        for name, value in (("actor", actor), ("action", action), ("target", target)):
            if len(value) > limits.MAX_KEY_CHARS:
                raise LimitExceeded(
                    f"{name} is {len(value)} characters; the limit is {limits.MAX_KEY_CHARS}",
                    field=name,
                    limit=limits.MAX_KEY_CHARS,
                )
        if since and until and until <= since:
            raise InvalidArgument("until must be after since", field="until")
        limit = validate_page_size(limit, 50, limits.MAX_AUDIT_RESULTS)
        vault = await self._owner(identity, vault_name, write=False)
        entries = await self.store.vault_audit(
            vault,
            actor=actor.strip(),
            action=action.strip(),
            target=target.strip(),
            since=since,
            until=until,
            limit=limit,
            before_id=max(before_id, 0),
        )
        return vault, entries, entries[-1].id if len(entries) == limit else 0


def with_context(items: list[Draft | InvalidArgument]) -> list[Draft | InvalidArgument]:
    """Each valid item of a sequence import with the text of the item before it as its context."""
    out: list[Draft | InvalidArgument] = []
    previous = ""
    for item in items:
        if isinstance(item, InvalidArgument):
            out.append(item)
            continue
        out.append(Draft(**{**item.__dict__, "context": previous}))
        previous = item.content
    return out


def _fit(found: Sequence[tuple[Memory, float]], limit: int) -> tuple[list[tuple[Memory, float]], bool]:
    """The first `limit` results within the result byte budget, and whether more remain."""
    page: list[tuple[Memory, float]] = []
    size = 0
    for memory, score in found[:limit]:
        size += len(memory.content.encode())
        if page and size > limits.MAX_RESULT_BYTES:
            return page, True
        page.append((memory, score))
    return page, len(found) > limit
