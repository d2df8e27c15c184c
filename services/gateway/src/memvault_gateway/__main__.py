"""memvault-gateway: the only public service. Commands: serve (default), migrate, setup-link, set-email."""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys
from collections.abc import Coroutine
from typing import Any, NoReturn, TypeVar
from urllib.parse import urlsplit

import asyncpg
import psycopg
import uvicorn

from memvault_core.identity import IdentitySigner
from memvault_core.logging import setup_logging
from memvault_core.metrics import serve_metrics
from memvault_core.postgres import address
from memvault_core.settings import load_settings
from memvault_core.telemetry import setup_telemetry, shutdown_telemetry
from memvault_gateway.app import create_app
from memvault_gateway.auth import credentials
from memvault_gateway.auth.people import EMAIL_PROBLEM, USERNAME, normalized_email
from memvault_gateway.settings import MigrateSettings, Settings
from memvault_gateway.store import MIGRATIONS, EmailTaken, NewerDatabaseError, Store, UnknownMigrationError

log = logging.getLogger("memvault_gateway")

T = TypeVar("T")


def _unreachable(dsn: str, error: BaseException) -> str:
    reason = (str(error) or type(error).__name__).splitlines()[0]
    return f"cannot reach Postgres at {address(dsn)} (MEMVAULT_POSTGRES__DSN): {reason}"


def migrate(dsn: str) -> list[str]:
    """MIGRATIONS.apply, exiting with one line when the database is unreachable or newer than this code."""
    try:
        return MIGRATIONS.apply(dsn)
    except NewerDatabaseError as error:
        print(f"memvault-gateway: {error}", file=sys.stderr)
    except psycopg.OperationalError as error:
        print(f"memvault-gateway: {_unreachable(dsn, error)}", file=sys.stderr)
    raise SystemExit(1)


def rollback(dsn: str, to: str) -> list[str]:
    """MIGRATIONS.rollback, exiting with one line when the database is unreachable, newer or `to` unknown."""
    try:
        undone = MIGRATIONS.rollback(dsn, to)
    except (NewerDatabaseError, UnknownMigrationError) as error:
        _fail(str(error))
    except psycopg.OperationalError as error:
        _fail(_unreachable(dsn, error))
    log.info("gateway migrations rolled back", extra={"rolled_back": undone})
    return undone


async def serve(settings: Settings) -> None:
    # Idempotent and locked, so replicas starting together are fine. Here rather than in the app's
    # start-up, which could only fail with a traceback; logged like `memvault-gateway migrate`.
    applied = await asyncio.to_thread(migrate, settings.postgres.dsn)
    if applied:
        log.info("gateway migrations applied", extra={"applied": applied})
    signer = IdentitySigner(settings.identity.secret.get_secret_value(), settings.identity.ttl_seconds)
    config = uvicorn.Config(
        create_app(settings, signer),
        host=settings.gateway.host,
        port=settings.gateway.port,
        log_config=None,
        access_log=False,
        proxy_headers=False,
        timeout_graceful_shutdown=10,
    )
    log.info("serving", extra={"public_url": settings.gateway.public_url, "dev_mode": settings.gateway.dev_mode})
    metrics_server = serve_metrics("gateway", settings.metrics)
    try:
        await uvicorn.Server(config).serve()
    finally:
        if metrics_server is not None:
            metrics_server.stop()


class NotMigratedError(Exception):
    """The database has no gateway schema: not the gateway's database, or never migrated."""


def _on_database(settings: MigrateSettings, work: Coroutine[Any, Any, T]) -> T:
    """Run a command's database work; one line on stderr (and exit 1) when the database is not the
    gateway's or cannot be reached, never a traceback."""
    parts = urlsplit(settings.postgres.dsn)
    where = f"{parts.hostname}:{parts.port or 5432}{parts.path}"
    try:
        return asyncio.run(work)
    except NotMigratedError:
        _fail(
            f"the database at {where} has no gateway tables: MEMVAULT_POSTGRES__DSN names a database "
            "that is not the gateway's, or run `memvault-gateway migrate` first"
        )
    except (OSError, TimeoutError, asyncpg.PostgresError, asyncpg.InterfaceError) as error:
        _fail(_unreachable(settings.postgres.dsn, error))


def print_setup_link(settings: MigrateSettings, username: str, force: bool, email: str | None) -> None:
    """`setup-link`: the link on stdout, or one line on stderr saying what to change."""
    try:
        url = _on_database(settings, setup_link(settings, username, force, email))
    except EmailTaken:
        _fail("another account already has that address")
    if url is None:
        only_email = f", or set-email --username {username} --email ... for the address only" if email else ""
        _fail(f"'{username}' already has a password; pass --force for a reset link{only_email}")
    # The link is a credential: printed for the operator, never logged.
    print(url)


def _fail(line: str, code: int = 1) -> NoReturn:
    print(f"memvault-gateway: {line}", file=sys.stderr)
    raise SystemExit(code)


async def setup_link(settings: MigrateSettings, username: str, force: bool, email: str | None = None) -> str | None:
    """A one-time link to set `username`'s password, creating the account (the first is an administrator).

    `email` (normalized) becomes the account's address for email sign-in links; EmailTaken if another has it."""
    from datetime import timedelta

    store = await Store.connect(settings.postgres.dsn, 1, 2)
    try:
        if not await store.migrated():
            raise NotMigratedError
        first = not await store.has_admin()
        user = await store.user_by_username(username)
        if user is None:
            user = await store.create_user(username, username=username, display_name=username, is_admin=first)
            if user is None:
                return None
        elif user.password_hash is not None and not force:
            return None
        if email is not None and not await store.set_email(user.id, email):
            raise EmailTaken(email)
        token = credentials.new_token(credentials.SETUP_LINK)
        await store.create_setup_link(
            user.id, credentials.token_hash(token), timedelta(hours=settings.login.setup_link_hours)
        )
        return f"{settings.gateway.public_url}/setup/{token}"
    finally:
        await store.close()


async def set_email(settings: MigrateSettings, username: str, email: str | None) -> str | None:
    """Set (None: clear) the address a local account's email sign-in links go to; the problem, or None."""
    store = await Store.connect(settings.postgres.dsn, 1, 2)
    try:
        if not await store.migrated():
            raise NotMigratedError
        user = await store.user_by_username(username)
        if user is None:
            return f"no local account {username!r}"
        if not await store.set_email(user.id, email):
            return "another account already has that address"
        return None
    finally:
        await store.close()


def _email_argument(value: str) -> str:
    email = normalized_email(value)
    if email is None:
        raise argparse.ArgumentTypeError(f"{value!r} is {EMAIL_PROBLEM}")
    return email


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="memvault-gateway", description=__doc__)
    commands = parser.add_subparsers(dest="command")
    commands.add_parser("serve", help="serve HTTP (the default)")
    commands.add_parser("migrate", help="apply the gateway's pending database migrations (schema `gateway`), then exit")
    rollback_parser = commands.add_parser(
        "rollback",
        help="undo the gateway migrations applied after one, newest first, so an older memvault can run again "
        "(drops what they added; back up first); then exit",
    )
    rollback_parser.add_argument(
        "--to",
        required=True,
        metavar="MIGRATION",
        help="the older release's newest gateway migration, e.g. 0002_email_sign_in",
    )
    link = commands.add_parser(
        "setup-link",
        help="print a one-time link to set a local account's password; the first account made is the administrator",
        description=(
            "Print a one-time link to set a local account's password (creating the account if needed; the first"
            " account made is the administrator). Needs MEMVAULT_POSTGRES__DSN (the gateway's database). A new"
            " link replaces the account's older unused one, which then says it was replaced."
        ),
    )
    link.add_argument("--username", default="owner", help="local user name (default: owner)")
    link.add_argument(
        "--force", action="store_true", help="also for an account that already has a password (a reset link)"
    )
    link.add_argument(
        "--email",
        type=_email_argument,
        help="also make this the account's address for email sign-in links (when MEMVAULT_SMTP__HOST is set)",
    )
    email = commands.add_parser(
        "set-email",
        help="set the address a local account's email sign-in links go to (whoever reads it can sign in)",
    )
    email.add_argument("--username", default="owner", help="local user name (default: owner)")
    addresses = email.add_mutually_exclusive_group(required=True)
    addresses.add_argument("--email", type=_email_argument, help="the address")
    addresses.add_argument("--clear", action="store_true", help="remove the address: no email sign-in for this account")
    args = parser.parse_args(argv)

    if args.command in ("migrate", "rollback", "setup-link", "set-email"):
        migrate_settings = load_settings(MigrateSettings)
        setup_logging("gateway", migrate_settings.log.level)
        if not migrate_settings.database_given:
            hint = "; under `make run`, `memvault-dev setup-link` finds it" if args.command == "setup-link" else ""
            _fail(
                "MEMVAULT_POSTGRES__DSN is not set: set it to the gateway's database "
                f"(postgresql://user@host:5432/memvault){hint}",
                2,
            )
        if args.command == "rollback":
            print(f"rolled back: {', '.join(rollback(migrate_settings.postgres.dsn, args.to)) or 'nothing'}")
            return
        if args.command == "migrate":
            applied = migrate(migrate_settings.postgres.dsn)
            log.info("migrations applied", extra={"applied": applied})
            return
        if not USERNAME.match(args.username):
            _fail("user names are lower-case letters, digits, dots, dashes, underscores", 2)
        if args.command == "set-email":
            problem = _on_database(
                migrate_settings, set_email(migrate_settings, args.username, None if args.clear else args.email)
            )
            if problem:
                _fail(problem)
            print(f"{args.username}: email sign-in address {'removed' if args.clear else 'set'}")
            return
        print_setup_link(migrate_settings, args.username, args.force, args.email)
        return

    settings = load_settings(Settings)
    setup_logging("gateway", settings.log.level)
    setup_telemetry("gateway", edge=True)
    try:
        asyncio.run(serve(settings))
    finally:
        shutdown_telemetry()


if __name__ == "__main__":
    main()
