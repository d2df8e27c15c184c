"""memvault-indexer: embed memories into Qdrant and answer vector search; or run reindex / reconcile."""

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
    backend = "qdrant-server" if settings.qdrant.url else "qdrant-edge"
    server, health = build_server(settings.indexer.listen)
    index_pb2_grpc.add_IndexServiceServicer_to_server(IndexServicer(indexer, backend, signer), server)
    consumer = asyncio.create_task(
        EventConsumer(
            settings.nats,
            indexer,
            batch_size=settings.indexer.batch_size,
            max_attempts=settings.indexer.max_attempts,
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
        await feed.close()
        await store.close()


async def _rebuild_if_empty(indexer: Indexer) -> None:
    try:
        await indexer.rebuild_if_empty()
    except Exception:  # the indexer serves on; reconcile can do it later
        log.exception("could not rebuild the empty vector store; run `memvault-indexer reconcile --repair`")


async def maintain(address: str, signer: IdentitySigner, command: str, repair: bool) -> str:
    """Ask the running indexer to reindex or reconcile (it owns the vector store)."""
    channel = client_channel(address)
    stub = index_pb2_grpc.IndexServiceStub(channel)
    metadata = ((GRPC_METADATA_KEY, signer.sign_service("indexer")),)
    try:
        if command == "reindex":
            reindexed = await stub.Reindex(index_pb2.ReindexRequest(), timeout=3600, metadata=metadata)
            return f"reindexed {reindexed.indexed} memories"
        report = await stub.Reconcile(index_pb2.ReconcileRequest(repair=repair), timeout=3600, metadata=metadata)
        return (
            f"missing {report.missing}, stale {report.stale}, orphans {report.orphans}; "
            f"repaired {report.repaired}{'' if repair else ' (report only: pass --repair to fix)'}"
        )
    except grpc.aio.AioRpcError as error:
        raise SystemExit(f"memvault-indexer {command}: {error_from_rpc(error, 'indexer').message}") from None
    finally:
        await channel.close()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="memvault-indexer", description=__doc__)
    commands = parser.add_subparsers(dest="command")
    commands.add_parser("serve", help="consume events, embed, and serve IndexService over gRPC (the default)")
    reindex = commands.add_parser(
        "reindex", help="rebuild the whole collection from the vault (asks the running indexer)"
    )
    reconcile = commands.add_parser("reconcile", help="find and repair missing, stale and orphan points")
    reconcile.add_argument("--repair", action="store_true", help="fix what is found (default: only report)")
    for sub in (reindex, reconcile):
        sub.add_argument(
            "--address", help="the running indexer (default: MEMVAULT_INDEXER__ADDRESS, else the listen address)"
        )
    args = parser.parse_args(argv)

    settings = load_settings(Settings)
    setup_logging("indexer", settings.log.level)
    if args.command in ("reindex", "reconcile"):
        address = args.address or settings.indexer.address or settings.indexer.listen.replace("0.0.0.0", "127.0.0.1")
        signer = IdentitySigner(settings.identity.secret.get_secret_value(), settings.identity.ttl_seconds)
        print(asyncio.run(maintain(address, signer, args.command, getattr(args, "repair", False))))
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
