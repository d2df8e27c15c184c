"""`make eval`: the retrieval protocol of ../shared/eval/README.md through the running services.

Every memory is written through the vault's API (BulkRemember over gRPC, one call per session
of a conversation, sent as a sequence, with the session date as the memory's time) and every
question is a recall through the vault (top 50). BM25 and dense-cosine baselines are computed
in this process on the same memory texts, in the same run. Results: a table in
docs/benchmarks.md and the same figures as JSON in EVAL_OUT (default build/eval.json).

    python -m tests.eval.service [--data PATH] [--out PATH]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import secrets
import shutil
import sys
import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
from google.protobuf.timestamp_pb2 import Timestamp

from memvault.vault.v1 import archive_pb2 as apb
from memvault.vault.v1 import archive_pb2_grpc, vault_pb2_grpc
from memvault.vault.v1 import memory_pb2 as pb
from memvault.vault.v1 import vault_pb2 as vpb
from memvault_core.grpc import client_channel
from memvault_core.identity import GRPC_METADATA_KEY, SCOPES, Identity, IdentitySigner
from memvault_devstack.postgres import create_database, drop_database
from memvault_devstack.stack import Stack
from memvault_indexer.embedder import OnnxMiniLMEmbedder
from memvault_vault.accounts.store import AccountStore
from memvault_vault.database import Database
from tests.bench import report
from tests.eval import locomo
from tests.eval.archive import chatgpt_export
from tests.eval.experiment import embed_cached, paired_bootstrap, table
from tests.eval.keyword import Bm25
from tests.eval.metrics import FactCovers, Judged, mean, per_category, score_ranking, turn_covers

ROOT = Path(__file__).resolve().parents[2]
HEADLINE = frozenset({1, 2, 3, 4})
TOP = 50
OWNER = "owner"


class Vault:
    """The vault's gRPC API as the dev owner."""

    def __init__(self, stack: Stack) -> None:
        self._channel = client_channel(stack.vault_address)
        self.stub = vault_pb2_grpc.VaultServiceStub(self._channel)
        self.archive = archive_pb2_grpc.ArchiveServiceStub(self._channel)
        self._signer = IdentitySigner(stack.identity_secret)

    def metadata(self) -> tuple[tuple[str, str], ...]:
        token = self._signer.sign(Identity(subject=OWNER, scopes=frozenset(SCOPES)))
        return ((GRPC_METADATA_KEY, token),)

    async def close(self) -> None:
        await self._channel.close()

    async def write(self, vault: str, texts: Sequence[str], moment: datetime | None, *, sequence: bool) -> list[str]:
        """Store texts as one batch; the memory id each text ended up as (its own, or the one it duplicates)."""
        ids: list[str] = []
        for offset in range(0, len(texts), 500):
            chunk = texts[offset : offset + 500]
            drafts = []
            for text in chunk:
                draft = pb.MemoryDraft(content=text)
                if moment is not None:
                    stamp = Timestamp()
                    stamp.FromDatetime(moment.replace(tzinfo=UTC))
                    draft.valid_from.CopyFrom(stamp)
                drafts.append(draft)
            response = await self.stub.BulkRemember(
                vpb.BulkRememberRequest(vault=vault, items=drafts, source="locomo", sequence=sequence),
                metadata=self.metadata(),
                timeout=600,
            )
            ids += [r.memory_id for r in response.results]
        return ids

    async def indexed(self, vault: str) -> bool:
        stats = await self.stub.GetStats(vpb.GetStatsRequest(vault=vault), metadata=self.metadata())
        if stats.index_failed:
            raise RuntimeError(f"{stats.index_failed} memories of {vault} failed to index: {stats.recent_failures}")
        return stats.index_pending == 0

    async def recall(self, vault: str, query: str) -> list[str]:
        """Memory ids, best first, up to TOP (following cursors when a page ends early)."""
        ids: list[str] = []
        cursor = ""
        while len(ids) < TOP:
            response = await self.stub.Recall(
                vpb.RecallRequest(vault=vault, query=query, limit=TOP, cursor=cursor), metadata=self.metadata()
            )
            ids += [hit.memory.id for hit in response.hits]
            cursor = response.next_cursor
            if not cursor:
                break
        return ids[:TOP]


async def import_export(vault: Vault, name: str, data: bytes) -> dict[str, str]:
    """Import a ChatGPT export through the vault's importer, wait until every message is in the vector
    index, and return each message id's node id (its dia_id)."""
    started = await vault.archive.StartImport(
        apb.StartImportRequest(vault=name, data=data, filename="conversations.json"), metadata=vault.metadata()
    )
    import_id = getattr(started, "import").id
    while True:
        status = getattr(
            await vault.archive.GetImport(
                apb.GetImportRequest(vault=name, import_id=import_id), metadata=vault.metadata()
            ),
            "import",
        )
        if status.state in ("done", "failed"):
            break
        await asyncio.sleep(0.5)
    if status.state != "done" or status.failed:
        raise RuntimeError(f"import into {name} ended {status.state} with {status.failed} failures: {status.error}")
    while True:
        stats = await vault.archive.GetArchiveStats(apb.GetArchiveStatsRequest(vault=name), metadata=vault.metadata())
        if stats.failed:
            raise RuntimeError(f"{stats.failed} messages of {name} failed to index: {list(stats.last_errors)}")
        if stats.indexed == stats.messages:
            break
        await asyncio.sleep(0.5)
    node_of: dict[str, str] = {}
    cursor = ""
    while True:
        listed = await vault.archive.ListConversations(
            apb.ListConversationsRequest(vault=name, limit=100, cursor=cursor), metadata=vault.metadata()
        )
        for conversation in listed.conversations:
            body = await vault.archive.GetConversation(
                apb.GetConversationRequest(vault=name, conversation_id=conversation.id, limit=200),
                metadata=vault.metadata(),
            )
            node_of.update({m.id: m.node_id for m in body.messages})
        cursor = listed.next_cursor
        if not cursor:
            return node_of


async def search_archive(vault: Vault, name: str, query: str) -> list[str]:
    """Message ids, best first, up to TOP, following the search's cursor."""
    ids: list[str] = []
    response = await vault.archive.SearchMessages(
        apb.SearchMessagesRequest(vault=name, query=query, limit=TOP, max_bytes=48 * 1024), metadata=vault.metadata()
    )
    ids += [h.message_id for h in response.hits]
    while response.next_cursor and len(ids) < TOP:
        response = await vault.archive.SearchMessages(
            apb.SearchMessagesRequest(vault=name, cursor=response.next_cursor, limit=TOP, max_bytes=48 * 1024),
            metadata=vault.metadata(),
        )
        ids += [h.message_id for h in response.hits]
    return ids[:TOP]


def judge_rankings(
    questions: Sequence[locomo.Question], rankings: Sequence[list[str]], covers: Callable[[str], frozenset[str]]
) -> list[Judged]:
    return [
        Judged(q.category, score_ranking(ranking, q.evidence, covers))
        for q, ranking in zip(questions, rankings, strict=True)
    ]


def unique_ranking(docs: Sequence[str], order: Sequence[int]) -> list[str]:
    seen: dict[str, None] = {}
    for index in order:
        seen.setdefault(docs[index], None)
    return list(seen)[:TOP]


async def run_track(
    stack: Stack, vault: Vault, track: str, conversations: list[locomo.Conversation], embedder: OnnxMiniLMEmbedder
) -> dict[str, list[Judged]]:
    judged: dict[str, list[Judged]] = {"bm25": [], "dense": [], "memvault": []}
    database = await Database.connect(stack.postgres_dsn, 1, 2)
    try:
        for number, conversation in enumerate(conversations):
            name = f"eval-{number}-{track}"
            if not await AccountStore(database).ensure_owner(OWNER, name):
                raise RuntimeError(f"vault {name} exists and belongs to someone else")
            if track == "archive":
                docs = [t.dia_id for t in conversation.turns]
                texts = [t.content for t in conversation.turns]
                covers: Callable[[str], frozenset[str]] = turn_covers
                node_of = await import_export(vault, name, chatgpt_export(conversation))
                rankings = [
                    [node_of[m] for m in await search_archive(vault, name, q.text) if m in node_of]
                    for q in conversation.questions
                ]
                judged["memvault"] += judge_rankings(conversation.questions, rankings, covers)
            elif track == "turns":
                docs = [t.dia_id for t in conversation.turns]
                texts = [t.content for t in conversation.turns]
                covers = turn_covers
                memory_of: dict[str, str] = {}
                sessions = sorted({t.session for t in conversation.turns})
                for session in sessions:
                    turns = [t for t in conversation.turns if t.session == session]
                    ids = await vault.write(name, [t.content for t in turns], turns[0].date, sequence=True)
                    memory_of.update({t.dia_id: i for t, i in zip(turns, ids, strict=True)})
            else:
                docs = [f.fact_id for f in conversation.facts]
                texts = [f.content for f in conversation.facts]
                covers = FactCovers({f.fact_id: f.dia_ids for f in conversation.facts})
                memory_of = {}
                for session in sorted({f.session for f in conversation.facts}):
                    facts = [f for f in conversation.facts if f.session == session]
                    ids = await vault.write(name, [f.content for f in facts], facts[0].date, sequence=False)
                    memory_of.update({f.fact_id: i for f, i in zip(facts, ids, strict=True)})
            questions = conversation.questions
            if track != "archive":
                docs_of_memory: dict[str, list[str]] = {}
                for doc, memory in memory_of.items():
                    docs_of_memory.setdefault(memory, []).append(doc)
                while not await vault.indexed(name):  # noqa: ASYNC110 - polling another process
                    await asyncio.sleep(0.5)
                rankings = []
                for question in questions:
                    memories = await vault.recall(name, question.text)
                    rankings.append([doc for memory in memories for doc in docs_of_memory.get(memory, [])][:TOP])
                judged["memvault"] += judge_rankings(questions, rankings, covers)

            bm25 = Bm25(texts)
            judged["bm25"] += judge_rankings(
                questions, [[docs[i] for i, _ in bm25.search(q.text, TOP)] for q in questions], covers
            )
            cosines = embed_cached(embedder, [q.text for q in questions]) @ embed_cached(embedder, texts).T
            judged["dense"] += judge_rankings(
                questions, [unique_ranking(docs, np.argsort(-row, kind="stable")) for row in cosines], covers
            )
            print(
                f"{track} {conversation.sample_id}: {len(texts)} memories, {len(questions)} questions", file=sys.stderr
            )
    finally:
        await database.close()
    return judged


def significance(judged: dict[str, list[Judged]]) -> list[str]:
    lines = ["| versus | R@10 difference [95% interval] | MRR difference [95% interval] | resamples ≤ 0 (R@10, MRR) |"]
    lines.append("|---|---|---|---|")
    ours = [j for j in judged["memvault"] if j.category in HEADLINE]
    for baseline in ("bm25", "dense"):
        theirs = [j for j in judged[baseline] if j.category in HEADLINE]
        cells, shares = [], []
        for metric in ("recall_any@10", "mrr"):
            diff, low, high, share = paired_bootstrap(
                [j.scores[metric] for j in ours], [j.scores[metric] for j in theirs]
            )
            cells.append(f"{diff:+.3f} [{low:+.3f}, {high:+.3f}]")
            shares.append(f"{share:.4f}")
        lines.append(f"| {baseline} | {cells[0]} | {cells[1]} | {', '.join(shares)} |")
    return lines


async def main_async(args: argparse.Namespace) -> None:
    conversations = locomo.load(args.data)
    data_dir = ROOT / "build" / "eval-stack" / secrets.token_hex(3)
    server = os.environ.get("MEMVAULT_TEST_POSTGRES_DSN")
    database = f"memvault_eval_{secrets.token_hex(3)}"
    dsn = create_database(server, database, exist_ok=False) if server else None
    stack = Stack(data_dir, postgres_dsn=dsn, nats_url=os.environ.get("MEMVAULT_TEST_NATS_URL"), log_level="WARNING")
    embedder = OnnxMiniLMEmbedder(threads=1)
    started = time.perf_counter()
    results: dict[str, dict[str, list[Judged]]] = {}
    try:
        await asyncio.to_thread(stack.start)
        vault = Vault(stack)
        try:
            for track in ("turns", "facts", "archive"):
                results[track] = await run_track(stack, vault, track, conversations, embedder)
        finally:
            await vault.close()
    finally:
        await asyncio.to_thread(stack.stop)
        if server:
            drop_database(server, database)
        shutil.rmtree(data_dir, ignore_errors=True)
    elapsed = time.perf_counter() - started

    summary = {
        track: {method: mean(judged, HEADLINE) for method, judged in methods.items()}
        for track, methods in results.items()
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(summary, indent=1))
    lines = [
        f"The protocol of `../shared/eval/README.md` on `{args.data.name}` ({len(conversations)} conversations), "
        f"through the running services: memories written with the vault's BulkRemember (turns: one call per "
        f"session, as a sequence; facts: one call each), questions asked with Recall (top {TOP}); "
        f"archive: each conversation's sessions as a ChatGPT export (one conversation per session, one message per "
        f"turn with the turn track's text), imported with the vault's importer and indexed, questions asked with "
        f"the archive's SearchMessages (top {TOP}, message level); "
        f"baselines in the same run on the same texts. {elapsed:.0f} s in all.",
    ]
    for track, methods in results.items():
        lines += ["", f"**{track}, categories 1–4**", "", table(summary[track]), ""]
        lines += [f"{track}, paired bootstrap over questions (memvault − baseline, categories 1–4):", ""]
        lines += significance(methods)
        lines += ["", f"{track}, per category (recall_any@10 / MRR):", ""]
        categories = sorted({j.category for j in methods["memvault"]})
        lines.append("| method | " + " | ".join(f"cat {c}" for c in categories) + " |")
        lines.append("|---|" + "---|" * len(categories))
        for method, judged in methods.items():
            cells = per_category(judged)
            lines.append(
                f"| {method} | "
                + " | ".join(f"{cells[c]['recall_any@10']:.3f} / {cells[c]['mrr']:.3f}" for c in categories)
                + " |"
            )
    body = "\n".join(lines)
    print(body)
    report.write_section("eval", body, "make eval" if args.default else f"make eval EVAL_DATA={args.data}")
    print(f"\nwritten to {report.BENCHMARKS.relative_to(ROOT)} and {args.out}", file=sys.stderr)


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m tests.eval.service", description=__doc__)
    parser.add_argument("--data", type=Path, default=locomo.DEFAULT_PATH, help="a LoCoMo-format file")
    parser.add_argument("--out", type=Path, default=ROOT / "build" / "eval.json", help="where the JSON goes")
    args = parser.parse_args()
    args.default = args.data.resolve() == locomo.DEFAULT_PATH.resolve()
    asyncio.run(main_async(args))


if __name__ == "__main__":
    main()
