"""memvault-vault: serve the vault over gRPC, or run a maintenance command."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import hashlib
import logging
import signal
import sys
from datetime import UTC, datetime

from memvault.vault.v1 import (
    accounts_pb2_grpc,
    archive_pb2,
    archive_pb2_grpc,
    backup_pb2,
    backup_pb2_grpc,
    index_admin_pb2,
    index_admin_pb2_grpc,
    index_feed_pb2,
    index_feed_pb2_grpc,
    retention_pb2,
    retention_pb2_grpc,
    sources_pb2,
    sources_pb2_grpc,
    vault_pb2,
    vault_pb2_grpc,
)
from memvault_core.grpc import build_server, serve_until_stopped
from memvault_core.identity import IdentitySigner
from memvault_core.logging import setup_logging
from memvault_core.metrics import serve_metrics
from memvault_core.postgres import address, database_error, is_connection_failure, report_readiness
from memvault_core.settings import load_settings
from memvault_core.telemetry import setup_telemetry, shutdown_telemetry
from memvault_vault.accounts.store import AccountStore
from memvault_vault.allocator import fix_mmap_threshold
from memvault_vault.archive import commands as archive_commands
from memvault_vault.backup import commands as backup_commands
from memvault_vault.database import Database
from memvault_vault.index_client import IndexClient
from memvault_vault.metrics import VaultMetrics
from memvault_vault.outbox.relay import OutboxRelay
from memvault_vault.retention.records import RetentionPlan
from memvault_vault.retention.service import run_periodically
from memvault_vault.retention.store import RetentionStore
from memvault_vault.rpc.accounts import AccountServicer
from memvault_vault.rpc.archive import ArchiveServicer
from memvault_vault.rpc.backup import BackupServicer
from memvault_vault.rpc.index_admin import IndexAdminServicer
from memvault_vault.rpc.index_feed import IndexFeedServicer
from memvault_vault.rpc.retention import RetentionServicer
from memvault_vault.rpc.servicer import VaultServicer
from memvault_vault.rpc.sources import SourcesServicer
from memvault_vault.schema import (
    SCHEMA,
    NewerDatabaseError,
    OlderDatabaseError,
    UnknownMigrationError,
    apply_migrations,
    rollback_migrations,
)
from memvault_vault.services import VaultServices
from memvault_vault.settings import MigrateSettings, Settings, SourcesSettings
from memvault_vault.sources import runner
from memvault_vault.sources.reader import SourceRules

log = logging.getLogger("memvault_vault")


class StartupError(Exception):
    """A reason not to start, told in one line."""


def cannot_reach(dsn: str, error: BaseException) -> StartupError:
    reason = (str(error) or type(error).__name__).splitlines()[0]
    return StartupError(f"cannot reach Postgres at {address(dsn)} (MEMVAULT_POSTGRES__DSN): {reason}")


def _cursor_secret(settings: Settings) -> bytes:
    """The key archive cursors are signed with: its own setting, or one derived from the identity key."""
    if settings.vault.cursor_secret is not None:
        return settings.vault.cursor_secret.get_secret_value().encode()
    return hashlib.sha256(
        b"memvault archive cursors\x00" + settings.identity.secret.get_secret_value().encode()
    ).digest()


async def serve(settings: Settings) -> None:
    fix_mmap_threshold()
    dsn = settings.postgres.dsn
    try:
        database = await Database.connect(dsn, settings.postgres.pool_min_size, settings.postgres.pool_max_size)
    except Exception as error:
        if is_connection_failure(error):
            raise cannot_reach(dsn, error) from None
        raise
    try:
        # Every query is written for the newest schema: on an older one requests would fail one by one
        # with database errors far from the cause, so refuse at start (docs/operations.md, Upgrade).
        try:
            await SCHEMA.check(database.pool)
        except (NewerDatabaseError, OlderDatabaseError) as error:
            raise StartupError(str(error)) from None
        signer = IdentitySigner(settings.identity.secret.get_secret_value(), settings.identity.ttl_seconds)
        index = (
            IndexClient(settings.vault.indexer_address, settings.vault.index_timeout_seconds, signer)
            if settings.vault.indexer_address
            else None
        )
        server, health = build_server(settings.vault.listen, translate_error=database_error(dsn), service="vault")
        services = VaultServices.build(
            database,
            index,
            source_rules=SourceRules.from_settings(settings.sources),
            retention_plan=RetentionPlan(settings.vault.retention_interval_seconds, settings.vault.retention_schedule),
            cursor_secret=_cursor_secret(settings),
        )
        vault_pb2_grpc.add_VaultServiceServicer_to_server(VaultServicer(services, signer), server)
        index_feed_pb2_grpc.add_IndexFeedServiceServicer_to_server(
            IndexFeedServicer(services.index_feed, signer), server
        )
        accounts_pb2_grpc.add_AccountServiceServicer_to_server(
            AccountServicer(services.accounts, services.audit, signer), server
        )
        sources_pb2_grpc.add_SourcesServiceServicer_to_server(SourcesServicer(services, signer), server)
        backup_pb2_grpc.add_BackupServiceServicer_to_server(BackupServicer(services.backup, signer), server)
        retention_pb2_grpc.add_RetentionServiceServicer_to_server(RetentionServicer(services.retention, signer), server)
        index_admin_pb2_grpc.add_IndexAdminServiceServicer_to_server(
            IndexAdminServicer(services.index_admin, signer), server
        )
        archive_pb2_grpc.add_ArchiveServiceServicer_to_server(ArchiveServicer(services.archive, signer), server)
        background = [asyncio.create_task(services.archive.run_imports())]
        metrics_server = serve_metrics("vault", settings.metrics)
        if metrics_server is not None:
            background.append(asyncio.create_task(VaultMetrics(database).run(settings.metrics.sample_seconds)))
        if settings.vault.relay:
            background.append(
                asyncio.create_task(
                    OutboxRelay(dsn, settings.nats, keep_published_seconds=settings.vault.outbox_keep_seconds).run()
                )
            )
        if settings.vault.retention_interval_seconds > 0:
            background.append(
                asyncio.create_task(
                    run_periodically(RetentionStore(database), settings.vault.retention_interval_seconds)
                )
            )
        if settings.sources.check_interval_seconds > 0:
            background.append(
                asyncio.create_task(runner.run_periodically(services.sources, settings.sources.check_interval_seconds))
            )
        if index is None:
            log.warning(
                "no indexer configured (MEMVAULT_VAULT__INDEXER_ADDRESS): recall is keyword-only and the "
                "duplicate check exact-only"
            )
        log.info(
            "serving",
            extra={"listen": settings.vault.listen, "indexer": settings.vault.indexer_address or None},
        )
        names = [
            vault_pb2.DESCRIPTOR.services_by_name["VaultService"].full_name,
            index_feed_pb2.DESCRIPTOR.services_by_name["IndexFeedService"].full_name,
            archive_pb2.DESCRIPTOR.services_by_name["ArchiveService"].full_name,
            sources_pb2.DESCRIPTOR.services_by_name["SourcesService"].full_name,
            backup_pb2.DESCRIPTOR.services_by_name["BackupService"].full_name,
            retention_pb2.DESCRIPTOR.services_by_name["RetentionService"].full_name,
            index_admin_pb2.DESCRIPTOR.services_by_name["IndexAdminService"].full_name,
        ]
        background.append(asyncio.create_task(report_readiness(database.ping, health, names, dsn)))
        await serve_until_stopped(server, health, names, settings.vault.shutdown_grace_seconds)
        for task in background:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        if metrics_server is not None:
            metrics_server.stop()
        if index is not None:
            await index.close()
    finally:
        await database.close()


async def purge(settings: MigrateSettings, *, dry_run: bool) -> int:
    database = await Database.connect(settings.postgres.dsn, 1, 2)
    try:
        store = RetentionStore(database)
        report = await store.purge(dry_run=dry_run, runner="command")
        deleted = await store.delete_due_vaults(datetime.now(UTC), dry_run=dry_run)
    finally:
        await database.close()
    if report is None:
        print("memvault-vault: another retention run holds the lock; try again later", file=sys.stderr)
        return 1
    verb = "would delete" if dry_run else "deleted"
    for name in deleted:
        print(f"{name}: {verb} the vault (its deletion grace period is over)")
    if not report and not deleted:
        print("nothing to delete: no vault has memories or audit entries past its retention period")
    for p in report:
        print(
            f"{p.vault}: {verb} {p.rejected} rejected, {p.superseded} superseded and {p.invalidated} invalidated "
            f"memories, {p.audit_entries} audit entries"
        )
    return 0


async def create_owner(settings: MigrateSettings, subject: str, vault: str) -> bool:
    database = await Database.connect(settings.postgres.dsn, 1, 2)
    try:
        return await AccountStore(database).ensure_owner(subject, vault)
    finally:
        await database.close()


async def sources_command(settings: SourcesSettings, command: str, poll: float) -> int:
    """`memvault-vault sources ...`: checks run as each source's tracker, with the deployment's indexer
    for the duplicate check when one is configured."""
    database = await Database.connect(settings.postgres.dsn, 1, 2)
    index = None
    try:
        await SCHEMA.check(database.pool)
        if settings.vault.indexer_address and settings.identity is not None:
            signer = IdentitySigner(settings.identity.secret.get_secret_value(), settings.identity.ttl_seconds)
            index = IndexClient(settings.vault.indexer_address, settings.vault.index_timeout_seconds, signer)
        services = VaultServices.build(
            database,
            index,
            source_rules=SourceRules.from_settings(settings.sources),
            retention_plan=RetentionPlan(settings.vault.retention_interval_seconds, settings.vault.retention_schedule),
        )

        def say(line: str) -> None:
            print(line, flush=True)

        if command == "sync":
            return 1 if await runner.sync_once(services.sources, say) else 0
        if command == "status":
            await runner.print_status(services.sources, say)
        elif command == "changes":
            await runner.print_changes(services.sources, say)
        else:
            # SIGTERM (a Deployment or systemd stopping the watcher) ends it like Ctrl-C: between rounds or
            # in the middle of one (a check cut short is checked again by the next sync).
            watching = asyncio.current_task()
            assert watching is not None
            asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, watching.cancel)
            try:
                await runner.watch(services.sources, poll, say)
            except asyncio.CancelledError:
                return 0
        return 0
    finally:
        if index is not None:
            await index.close()
        await database.close()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="memvault-vault", description=__doc__)
    commands = parser.add_subparsers(dest="command")
    commands.add_parser("serve", help="serve VaultService over gRPC (the default)")
    commands.add_parser("migrate", help="apply pending database migrations, then exit")
    rollback = commands.add_parser(
        "rollback",
        help="undo the migrations applied after one, newest first, so an older memvault can run again "
        "(drops what they added; back up first); then exit",
    )
    rollback.add_argument(
        "--to", required=True, metavar="MIGRATION", help="the older release's newest migration, e.g. 0011_index_pending"
    )
    owner = commands.add_parser("create-owner", help="create an account and a vault it owns (idempotent)")
    owner.add_argument("--subject", required=True, help="the account's subject, as the gateway names it")
    owner.add_argument("--vault", required=True, help="vault name: lower-case letters, digits and dashes")
    purge_parser = commands.add_parser(
        "retention",
        help="delete rejected, superseded and invalidated memories and audit entries past each vault's retention "
        "period, and the vaults whose 7-day deletion grace period is over (the vault service also does this every "
        "MEMVAULT_VAULT__RETENTION_INTERVAL_SECONDS)",
    )
    purge_parser.add_argument("--dry-run", action="store_true", help="count what would be deleted; delete nothing")
    sources = commands.add_parser(
        "sources",
        help="tracked sources: sync checks what is due once (exit 1 if a check failed), status shows each "
        "source's health, changes lists pending changes, watch syncs every --poll seconds; quiet when nothing "
        "changed, one line per change or error",
    )
    sources.add_argument("action", choices=("sync", "status", "changes", "watch"))
    sources.add_argument("--poll", type=float, default=30.0, help="watch: seconds between rounds (default 30)")
    backup_commands.add_parsers(commands)
    archive_commands.add_parsers(commands)
    args = parser.parse_args(argv)
    if args.command in backup_commands.COMMANDS:
        raise SystemExit(backup_commands.run(args))
    if args.command in archive_commands.COMMANDS:
        raise SystemExit(archive_commands.run(args))

    if args.command == "sources":
        sources_settings = load_settings(SourcesSettings)
        setup_logging("vault", sources_settings.log.level)
        if args.poll <= 0:
            parser.error("--poll must be positive")
        try:
            raise SystemExit(asyncio.run(sources_command(sources_settings, args.action, args.poll)))
        except (NewerDatabaseError, OlderDatabaseError) as error:
            print(f"memvault-vault: {error}", file=sys.stderr)
            raise SystemExit(1) from None
        except KeyboardInterrupt:
            raise SystemExit(0) from None

    if args.command in ("migrate", "rollback", "create-owner", "retention"):
        migrate_settings = load_settings(MigrateSettings)
        setup_logging("vault", migrate_settings.log.level)
        if args.command in ("migrate", "rollback"):
            import psycopg

            try:
                if args.command == "rollback":
                    undone = rollback_migrations(migrate_settings.postgres.dsn, args.to)
                    log.info("migrations rolled back", extra={"rolled_back": undone})
                    print(f"rolled back: {', '.join(undone) or 'nothing (none applied after ' + args.to + ')'}")
                    return
                applied = apply_migrations(migrate_settings.postgres.dsn)
            except (NewerDatabaseError, UnknownMigrationError) as error:
                print(f"memvault-vault: {error}", file=sys.stderr)
                raise SystemExit(1) from None
            except psycopg.OperationalError as error:
                print(f"memvault-vault: {cannot_reach(migrate_settings.postgres.dsn, error)}", file=sys.stderr)
                raise SystemExit(1) from None
            log.info("migrations applied", extra={"applied": applied})
            return
        if args.command == "retention":
            raise SystemExit(asyncio.run(purge(migrate_settings, dry_run=args.dry_run)))
        if not asyncio.run(create_owner(migrate_settings, args.subject, args.vault)):
            print(f"memvault-vault: vault '{args.vault}' belongs to another account", file=sys.stderr)
            raise SystemExit(1)
        log.info("owner ready", extra={"vault": args.vault})
        return

    settings = load_settings(Settings)
    setup_logging("vault", settings.log.level)
    setup_telemetry("vault")
    try:
        asyncio.run(serve(settings))
    except StartupError as error:
        print(f"memvault-vault: {error}", file=sys.stderr)
        raise SystemExit(1) from None
    finally:
        shutdown_telemetry()


if __name__ == "__main__":
    main()
