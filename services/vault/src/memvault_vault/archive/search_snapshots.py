"""The SQL of archive search snapshots (migration 0027): the ranked hit list of a search's first page,
kept while its cursor lasts, so later pages read the same list instead of searching again. A row is
bound to the vault and to a keyed hash of the caller; expired rows go as new ones are written."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass

from memvault_vault.archive.records import MessageHit
from memvault_vault.database import Database, VaultAccess

CLEANUP_BATCH = 200
"""Expired snapshots deleted with each new one (bounded work per search; they expire faster than
searches come only if nobody searches, and then they cost nothing)."""


@dataclass(frozen=True)
class HitRef:
    """A ranked hit as the snapshot keeps it (the text, title and role are read again: messages are
    immutable, and a conversation deleted meanwhile drops its hits)."""

    message_id: str
    conversation_id: str
    revision: int
    position: int
    score: float


@dataclass(frozen=True)
class Snapshot:
    id: str
    query: str
    tags_all: list[str]
    tags_any: list[str]
    mode: str
    hits: list[HitRef]


class SearchSnapshots:
    def __init__(self, database: Database) -> None:
        self._pool = database.pool

    async def save(
        self,
        vault: VaultAccess,
        caller: str,
        query: str,
        tags_all: list[str],
        tags_any: list[str],
        mode: str,
        hits: Sequence[MessageHit],
        ttl_seconds: int,
    ) -> str:
        """Keep a ranked hit list for `ttl_seconds`; returns its id. Deletes some expired ones."""
        refs = [[h.message_id, h.conversation_id, h.revision, h.position, h.score] for h in hits]
        return str(
            await self._pool.fetchval(
                "WITH gone AS (DELETE FROM archive_search_snapshot WHERE id IN (SELECT id FROM"
                " archive_search_snapshot WHERE expires_at < now() ORDER BY expires_at LIMIT $8))"
                " INSERT INTO archive_search_snapshot (vault_id, caller, query, tags_all, tags_any, mode, hits,"
                " expires_at) VALUES ($1, $2, $3, $4, $5, $6, $7::jsonb, now() + make_interval(secs => $9))"
                " RETURNING id::text",
                vault.id,
                caller,
                query,
                tags_all,
                tags_any,
                mode,
                json.dumps(refs, separators=(",", ":")),
                CLEANUP_BATCH,
                ttl_seconds,
            )
        )

    async def load(self, vault: VaultAccess, caller: str, snapshot_id: str, ttl_seconds: int) -> Snapshot | None:
        """The snapshot, its life extended by `ttl_seconds` (as the next cursor's); None once it expired
        (or for another vault's or caller's id)."""
        row = await self._pool.fetchrow(
            "UPDATE archive_search_snapshot SET expires_at = now() + make_interval(secs => $4)"
            " WHERE id = $1 AND vault_id = $2 AND caller = $3 AND expires_at >= now()"
            " RETURNING query, tags_all, tags_any, mode, hits::text AS hits",
            snapshot_id,
            vault.id,
            caller,
            ttl_seconds,
        )
        if row is None:
            return None
        return Snapshot(
            snapshot_id,
            row["query"],
            list(row["tags_all"]),
            list(row["tags_any"]),
            row["mode"],
            [HitRef(str(m), str(c), int(r), int(p), float(s)) for m, c, r, p, s in json.loads(row["hits"])],
        )

    async def resolve(self, vault: VaultAccess, refs: Sequence[HitRef]) -> list[MessageHit | None]:
        """The hits of `refs` in their order, with text, role and title; None for a message deleted since."""
        rows = await self._pool.fetch(
            # Driven from the ids (a generic plan must not start from the vault's conversations).
            "SELECT m.id::text AS id, m.text, m.role, c.title FROM unnest($2::uuid[]) AS wanted (id)"
            " JOIN archive_message m ON m.id = wanted.id AND m.vault_id = $1"
            " CROSS JOIN LATERAL (SELECT c.title FROM archive_conversation c"
            " WHERE c.id = m.conversation_id AND c.vault_id = $1) AS c",
            vault.id,
            [r.message_id for r in refs],
        )
        found = {r["id"]: r for r in rows}
        out: list[MessageHit | None] = []
        for ref in refs:
            row = found.get(ref.message_id)
            out.append(
                None
                if row is None
                else MessageHit(
                    ref.conversation_id,
                    ref.revision,
                    ref.message_id,
                    row["title"],
                    row["role"],
                    row["text"],
                    ref.score,
                    ref.position,
                )
            )
        return out
