"""memvault-indexer: embed memories into Qdrant and answer vector search; or run its maintenance commands."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import sys

import grpc

from memvault.index.v1 import index_pb2, index_pb2_grpc
from memvault_core.errors import Unavailable
from memvault_core.grpc import build_server, client_channel, error_from_rpc, serve_until_stopped
from memvault_core.identity import GRPC_METADATA_KEY, IdentitySigner
from memvault_core.logging import setup_logging
from memvault_core.metrics import serve_metrics
from memvault_core.settings import load_settings
from memvault_core.telemetry import setup_telemetry, shutdown_telemetry
from memvault_indexer.consumer import EventConsumer
from memvault_indexer.embedder import create_embedder
from memvault_indexer.feed import VaultFeed
from memvault_indexer.indexing import Indexer
from memvault_indexer.rpc import IndexServicer
from memvault_indexer.settings import Settings
from memvault_indexer.store import open_store

log = logging.getLogger("memvault_indexer")


class StartupError(Exception):
    """A reason not to start, told in one line."""


async def serve(settings: Settings) -> None:
    embedder = await asyncio.to_thread(create_embedder, settings.embedder)
    store = open_store(settings.qdrant, model=embedder.name, dimension=embedder.dimension)
    try:
        await store.ensure_collection()
    except Unavailable as error:
        raise StartupError(error.message) from None
    signer = IdentitySigner(settings.identity.secret.get_secret_value(), settings.identity.ttl_seconds)
    feed = VaultFeed(settings.indexer.vault_address, signer, settings.indexer.call_timeout_seconds)
    indexer = Indexer(embedder, store, feed)
    # An empty collection (a new model's, a lost store) is filled at start: searches wait for it from the first.
    indexer.filling = await store.count() == 0
    backend = "qdrant-server" if settings.qdrant.url else "qdrant-edge"
    server, health = build_server(settings.indexer.listen, service="indexer")
    metrics_server = serve_metrics("indexer", settings.metrics)
    servicer = IndexServicer(indexer, backend, signer)
    index_pb2_grpc.add_IndexServiceServicer_to_server(servicer, server)
    consumer = asyncio.create_task(
        EventConsumer(
            settings.nats,
            indexer,
            batch_size=settings.indexer.batch_size,
            max_attempts=settings.indexer.max_attempts,
            sample_seconds=settings.metrics.sample_seconds if metrics_server is not None else None,
        ).run()
    )
    rebuild = asyncio.create_task(_rebuild_if_empty(indexer))
    log.info("serving", extra={"listen": settings.indexer.listen, "model": embedder.name, "backend": backend})
    try:
        names = [index_pb2.DESCRIPTOR.services_by_name["IndexService"].full_name]
        await serve_until_stopped(server, health, names, settings.indexer.shutdown_grace_seconds)
    finally:
        for task in (rebuild, consumer):
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        await servicer.jobs.close()
        await feed.close()
        await store.close()
        if metrics_server is not None:
            metrics_server.stop()


async def _rebuild_if_empty(indexer: Indexer) -> None:
    try:
        await indexer.rebuild_if_empty()
    except Exception:  # the indexer serves on; reconcile can do it later
        log.exception("could not rebuild the empty vector store; run `memvault-indexer reconcile --repair`")


POLL_SECONDS = 1.0


def describe_job(job: index_pb2.IndexJob) -> str:
    """One line: `rebuild finished: 120 of 120 memories, 0 failed (model ..., 2026-... to 2026-...)`."""
    kind = index_pb2.IndexJobKind.Name(job.kind).removeprefix("INDEX_JOB_KIND_").lower()
    state = index_pb2.IndexJobState.Name(job.state).removeprefix("INDEX_JOB_STATE_").lower()
    started = job.started_at.ToDatetime().isoformat(timespec="seconds")
    finished = (
        f" to {job.finished_at.ToDatetime().isoformat(timespec='seconds')}" if job.HasField("finished_at") else ""
    )
    error = f": {job.error}" if job.error else ""
    return (
        f"{kind} {state}{error}: {job.done} of {job.total} memories, {job.failed} failed "
        f"(model {job.model}, from {started}{finished} UTC)"
    )


async def maintain(
    address: str, signer: IdentitySigner, command: str, repair: bool, *, wait: bool = True, name: str = ""
) -> str:
    """Ask the running indexer to do a maintenance command (it owns the vector store)."""
    channel = client_channel(address)
    stub = index_pb2_grpc.IndexServiceStub(channel)
    metadata = ((GRPC_METADATA_KEY, signer.sign_service("indexer")),)
    try:
        if command in ("reindex", "reembed"):
            kind = index_pb2.INDEX_JOB_KIND_REBUILD if command == "reindex" else index_pb2.INDEX_JOB_KIND_REEMBED
            job = (
                await stub.StartIndexJob(index_pb2.StartIndexJobRequest(kind=kind), timeout=60, metadata=metadata)
            ).job
            while wait and job.state == index_pb2.INDEX_JOB_STATE_RUNNING:
                await asyncio.sleep(POLL_SECONDS)
                job = (await stub.GetIndexJob(index_pb2.GetIndexJobRequest(), timeout=60, metadata=metadata)).job
            if job.state == index_pb2.INDEX_JOB_STATE_FAILED:
                raise SystemExit(f"memvault-indexer {command}: {describe_job(job)}")
            return describe_job(job)
        if command == "index-job":
            found = await stub.GetIndexJob(index_pb2.GetIndexJobRequest(), timeout=60, metadata=metadata)
            return describe_job(found.job) if found.HasField("job") else "no index job since the indexer started"
        if command == "collections":
            listed = await stub.ListCollections(index_pb2.ListCollectionsRequest(), timeout=60, metadata=metadata)
            return "\n".join(f"{c.name}{'  (active)' if c.active else ''}" for c in listed.collections)
        if command == "drop-collection":
            await stub.DropCollection(index_pb2.DropCollectionRequest(name=name), timeout=600, metadata=metadata)
            return f"dropped collection {name}"
        report = await stub.Reconcile(index_pb2.ReconcileRequest(repair=repair), timeout=3600, metadata=metadata)
        return (
            f"missing {report.missing}, stale {report.stale}, orphans {report.orphans}; "
            f"repaired {report.repaired}{'' if repair else ' (report only: pass --repair to fix)'}"
        )
    except grpc.aio.AioRpcError as error:
        raise SystemExit(f"memvault-indexer {command}: {error_from_rpc(error, 'indexer').message}") from None
    finally:
        await channel.close()


MAINTENANCE = ("reindex", "reembed", "index-job", "reconcile", "collections", "drop-collection")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="memvault-indexer", description=__doc__)
    commands = parser.add_subparsers(dest="command")
    commands.add_parser("serve", help="consume events, embed, and serve IndexService over gRPC (the default)")
    reindex = commands.add_parser(
        "reindex",
        help="drop the collection and embed every memory again, in the background of the running indexer "
        "(recall is keyword-only until it is full); waits and prints progress unless --no-wait",
    )
    reembed = commands.add_parser(
        "reembed", help="embed what is missing or made by another model, remove orphans (after a model change)"
    )
    for sub in (reindex, reembed):
        sub.add_argument("--no-wait", action="store_true", help="start the job and return (see `index-job`)")
    job = commands.add_parser("index-job", help="the running or last reindex / reembed job and its progress")
    reconcile = commands.add_parser("reconcile", help="find and repair missing, stale and orphan points")
    reconcile.add_argument("--repair", action="store_true", help="fix what is found (default: only report)")
    collections = commands.add_parser("collections", help="list the collections in the vector store")
    drop = commands.add_parser(
        "drop-collection", help="delete a collection another model left behind (the active one is refused)"
    )
    drop.add_argument("name", help="a name from `collections`, e.g. memvault_all-minilm-l6-v2_384")
    for sub in (reindex, reembed, job, reconcile, collections, drop):
        sub.add_argument(
            "--address", help="the running indexer (default: MEMVAULT_INDEXER__ADDRESS, else the listen address)"
        )
    args = parser.parse_args(argv)

    settings = load_settings(Settings)
    setup_logging("indexer", settings.log.level)
    if args.command in MAINTENANCE:
        address = args.address or settings.indexer.address or settings.indexer.listen.replace("0.0.0.0", "127.0.0.1")
        signer = IdentitySigner(settings.identity.secret.get_secret_value(), settings.identity.ttl_seconds)
        outcome = asyncio.run(
            maintain(
                address,
                signer,
                args.command,
                getattr(args, "repair", False),
                wait=not getattr(args, "no_wait", False),
                name=getattr(args, "name", ""),
            )
        )
        print(outcome)
        sys.stdout.flush()
        return
    setup_telemetry("indexer")
    try:
        asyncio.run(serve(settings))
    except StartupError as error:
        print(f"memvault-indexer: {error}", file=sys.stderr)
        raise SystemExit(1) from None
    finally:
        shutdown_telemetry()


if __name__ == "__main__":
    main()
