"""Upgrades of the gateway's schema: people, sessions, clients, grants and tokens written at every
earlier version are intact and usable after migrating to the newest; every rollback file undoes
its migration."""

from __future__ import annotations

import asyncio
import hashlib
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import httpx
import psycopg
import pytest
from gateway_helpers import SECRET, free_port

from memvault_devstack.migrations import apply_up_to, fresh_database, roll_back_one
from memvault_gateway.store import MIGRATIONS, Store

pytestmark = pytest.mark.integration


def digest(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


@pytest.fixture
def fresh_dsn(postgres_dsn: str) -> Iterator[str]:
    with fresh_database(postgres_dsn, "gateway_migrations") as dsn:
        yield dsn


def seed(dsn: str) -> dict[str, str]:
    """An owner with a password, an admin signed in elsewhere, a live session, an unused setup link,
    an agent's registered client with an approved grant and its access and refresh tokens, a
    script's service token, a revoked grant; from 0002 on, a sign-in address and a mailed link."""
    with psycopg.connect(dsn) as conn:
        email = bool(
            conn.execute(
                "SELECT 1 FROM information_schema.columns WHERE table_schema = 'gateway'"
                " AND table_name = 'user_account' AND column_name = 'email'"
            ).fetchone()
        )
        owner = conn.execute(
            "INSERT INTO gateway.user_account (subject, username, password_hash, display_name, is_admin)"
            " VALUES ('owner-1', 'ada', '$argon2id$v=19$m=65536,t=3,p=4$c2FsdA$aGFzaA', 'Ada', true) RETURNING id::text"
        ).fetchone()
        other = conn.execute(
            "INSERT INTO gateway.user_account (subject, display_name) VALUES ('oidc-7', 'Grace') RETURNING id::text"
        ).fetchone()
        assert owner is not None and other is not None
        conn.execute(
            "INSERT INTO gateway.external_identity (provider, external_subject, user_id)"
            " VALUES ('https://id.example.org', 'grace@example.org', %s)",
            (other[0],),
        )
        conn.execute(
            "INSERT INTO gateway.setup_link (token_hash, user_id, expires_at) VALUES (%s, %s, now() + interval '1 day')",
            (digest("setup-live"), other[0]),
        )
        conn.execute(
            "INSERT INTO gateway.setup_link (token_hash, user_id, expires_at, used_at)"
            " VALUES (%s, %s, now() + interval '1 day', now())",
            (digest("setup-used"), owner[0]),
        )
        conn.execute(
            "INSERT INTO gateway.session (id_hash, user_id, csrf_token, method, expires_at)"
            " VALUES (%s, %s, 'csrf-abc', 'password', now() + interval '7 days')",
            (digest("session-1"), owner[0]),
        )
        conn.execute(
            "INSERT INTO gateway.oauth_client (client_id, kind, client_name, redirect_uris, token_endpoint_auth_method,"
            " metadata) VALUES ('client-claude', 'registered', 'Claude Code', ARRAY['http://127.0.0.1:33418/callback'],"
            " 'none', '{\"client_name\": \"Claude Code\"}')"
        )
        grant = conn.execute(
            "INSERT INTO gateway.access_grant (user_id, kind, client_id, name, scopes, vaults)"
            " VALUES (%s, 'oauth', 'client-claude', 'Claude Code', ARRAY['read', 'write'], ARRAY['default'])"
            " RETURNING id::text",
            (owner[0],),
        ).fetchone()
        service = conn.execute(
            "INSERT INTO gateway.access_grant (user_id, kind, name, scopes, vaults)"
            " VALUES (%s, 'service', 'backup script', ARRAY['read'], ARRAY['default']) RETURNING id::text",
            (owner[0],),
        ).fetchone()
        revoked = conn.execute(
            "INSERT INTO gateway.access_grant (user_id, kind, name, scopes, vaults, revoked_at, revoked_reason)"
            " VALUES (%s, 'service', 'old laptop', ARRAY['read'], '{}', now(), 'lost') RETURNING id::text",
            (owner[0],),
        ).fetchone()
        assert grant is not None and service is not None and revoked is not None
        resource = "https://memvault.example.org/mcp"
        for token, grant_id, kind, expires in (
            ("access-1", grant[0], "access", "now() + interval '1 hour'"),
            ("refresh-1", grant[0], "refresh", "now() + interval '30 days'"),
            ("service-1", service[0], "service", "NULL"),
            ("service-old", revoked[0], "service", "NULL"),
        ):
            conn.execute(
                "INSERT INTO gateway.token (token_hash, grant_id, kind, resource, scopes, expires_at)"  # noqa: S608 (fixed values)
                f" VALUES (%s, %s, %s, %s, ARRAY['read'], {expires})",
                (digest(token), grant_id, kind, resource),
            )
        if email:
            conn.execute("UPDATE gateway.user_account SET email = 'ada@example.org' WHERE id = %s", (owner[0],))
            conn.execute(
                "INSERT INTO gateway.email_link (token_hash, user_id, purpose, next_path, expires_at)"
                " VALUES (%s, %s, 'sign_in', '/grants', now() + interval '15 minutes')",
                (digest("mailed-1"), owner[0]),
            )
    return {"owner": owner[0], "other": other[0], "grant": grant[0], "service": service[0]}


async def check_usable(dsn: str, ids: dict[str, str], seeded_at: list[str]) -> None:
    store = await Store.connect(dsn, 1, 2)
    try:
        assert await store.migrated()
        owner = await store.user_by_username("ada")
        assert owner is not None and owner.id == ids["owner"] and owner.is_admin and owner.password_hash
        elsewhere = await store.user_by_external("https://id.example.org", "grace@example.org")
        assert elsewhere is not None and elsewhere.subject == "oidc-7"

        session = await store.session(digest("session-1"))
        assert session is not None and (session.user.username, session.csrf_token) == ("ada", "csrf-abc")
        assert await store.setup_link_state(digest("setup-live")) == "usable"
        assert await store.setup_link_state(digest("setup-used")) == "used"
        # Today's code replaces the live link with a newer one and says so about the old one.
        await store.create_setup_link(ids["other"], digest("setup-newer"), timedelta(days=1))
        assert await store.setup_link_state(digest("setup-live")) == "replaced"
        assert await store.setup_link_user(digest("setup-newer")) is not None

        client = await store.client("client-claude")
        assert client is not None and client.redirect_uris == ("http://127.0.0.1:33418/callback",)
        grants = await store.grants_of(ids["owner"])
        assert {g.name for g in grants} == {"Claude Code", "backup script"}
        assert len(await store.grants_of(ids["owner"], include_revoked=True)) == 3
        access = await store.token(digest("access-1"))
        assert access is not None and access.usable and access.subject == "owner-1"
        assert access.grant.scopes == ("read", "write")
        service = await store.token(digest("service-1"))
        assert service is not None and service.usable and service.kind == "service"
        old = await store.token(digest("service-old"))
        assert old is not None and not old.usable
        assert await store.use_refresh_token(digest("refresh-1"))
        assert not await store.use_refresh_token(digest("refresh-1"))

        if "0002_email_sign_in" in seeded_at:
            assert await store.email_of(ids["owner"]) == "ada@example.org"
            used = await store.use_email_link(digest("mailed-1"))
            assert used is not None and used[1] == "/grants"
        # Email sign-in works for a person from before it existed.
        assert await store.set_email(ids["other"], "grace@example.org")
        assert (await store.user_by_email("grace@example.org")) is not None

        revoked = await store.revoke_grant(ids["grant"], "owner revoked it", ids["owner"])
        assert revoked is not None
        after = await store.token(digest("access-1"))
        assert after is not None and not after.usable
    finally:
        await store.close()


@pytest.mark.parametrize("version", MIGRATIONS.order()[:-1])
async def test_gateway_data_written_at_every_earlier_version_survives_the_upgrade(fresh_dsn: str, version: str) -> None:
    seeded_at = apply_up_to(MIGRATIONS, fresh_dsn, version)
    ids = seed(fresh_dsn)
    applied = MIGRATIONS.apply(fresh_dsn)
    assert seeded_at + applied == MIGRATIONS.order()
    await check_usable(fresh_dsn, ids, seeded_at)


def serve_until_healthy(dsn: str) -> None:
    """Start `memvault-gateway serve` on `dsn`, wait for /healthz to answer, stop it."""
    port = free_port()
    env = {
        **os.environ,
        "MEMVAULT_IDENTITY__SECRET": SECRET,
        "MEMVAULT_POSTGRES__DSN": dsn,
        "MEMVAULT_GATEWAY__PORT": str(port),
    }
    with (
        tempfile.TemporaryFile("w+") as log,
        subprocess.Popen(
            [sys.executable, "-m", "memvault_gateway", "serve"],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=log,
            text=True,
        ) as served,
    ):
        try:
            deadline = time.monotonic() + 60
            while True:
                try:
                    if httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=1).status_code == 200:
                        break
                except httpx.TransportError:
                    pass
                if served.poll() is not None:
                    pytest.fail(f"the gateway exited instead of serving: {_read(log)}")
                assert time.monotonic() < deadline, "the gateway did not answer /healthz within 60 s"
                time.sleep(0.1)
        finally:
            served.terminate()
            served.wait(timeout=30)


async def test_a_gateway_on_a_database_one_migration_behind_migrates_it_and_serves(fresh_dsn: str) -> None:
    """The gateway's `serve` applies its own pending migrations (idempotent, under yoyo's lock), so
    a replica of the new release that starts before the migration Job finishes serves anyway."""
    order = MIGRATIONS.order()
    seeded_at = apply_up_to(MIGRATIONS, fresh_dsn, order[-2])
    ids = seed(fresh_dsn)
    await asyncio.to_thread(serve_until_healthy, fresh_dsn)
    assert MIGRATIONS.apply(fresh_dsn) == [], "serve left a migration unapplied"
    await check_usable(fresh_dsn, ids, seeded_at)


def run_gateway(dsn: str, *arguments: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "MEMVAULT_IDENTITY__SECRET": SECRET, "MEMVAULT_POSTGRES__DSN": dsn}
    return subprocess.run(
        [sys.executable, "-m", "memvault_gateway", *arguments],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


async def test_rolling_the_gateway_back_for_an_older_release_then_upgrading_again(fresh_dsn: str) -> None:
    order = MIGRATIONS.order()
    assert MIGRATIONS.apply(fresh_dsn) == order
    ids = seed(fresh_dsn)

    unknown = run_gateway(fresh_dsn, "rollback", "--to", "0099_nope")
    assert unknown.returncode == 1
    assert unknown.stderr.strip() == (
        f"memvault-gateway: no gateway migration '0099_nope' in this memvault; its migrations: {', '.join(order)}"
    )
    back = run_gateway(fresh_dsn, "rollback", "--to", order[0])
    assert back.returncode == 0, back.stderr
    assert back.stdout.strip() == f"rolled back: {', '.join(reversed(order[1:]))}"
    with psycopg.connect(fresh_dsn) as conn:
        assert conn.execute("SELECT to_regclass('gateway.email_link')").fetchone() == (None,)
        assert conn.execute("SELECT count(*) FROM gateway.token").fetchone() == (4,)
    assert run_gateway(fresh_dsn, "rollback", "--to", order[0]).stdout.strip() == "rolled back: nothing"

    migrate = run_gateway(fresh_dsn, "migrate")
    assert migrate.returncode == 0, migrate.stderr
    # The sign-in address went with 0002's rollback; everything 0001 held is still there.
    await check_usable(fresh_dsn, ids, order[:1])


def _read(log: Any) -> str:
    log.seek(0)
    return str(log.read())


def _schema(dsn: str) -> list[tuple[Any, ...]]:
    with psycopg.connect(dsn) as conn:
        columns = conn.execute(
            "SELECT table_name, column_name, data_type, is_nullable, column_default"
            " FROM information_schema.columns WHERE table_schema = 'gateway' AND table_name NOT LIKE '%yoyo%'"
            " ORDER BY 1, 2"
        ).fetchall()
        indexes = conn.execute(
            "SELECT indexname, indexdef FROM pg_indexes WHERE schemaname = 'gateway' AND tablename NOT LIKE '%yoyo%'"
            " ORDER BY 1"
        ).fetchall()
        constraints = conn.execute(
            "SELECT conname, pg_get_constraintdef(c.oid) FROM pg_constraint c JOIN pg_namespace n"
            " ON n.oid = c.connamespace WHERE n.nspname = 'gateway' AND c.conrelid::regclass::text NOT LIKE '%yoyo%'"
            " ORDER BY 1"
        ).fetchall()
    return [*columns, *indexes, *constraints]


def test_every_gateway_rollback_undoes_its_migration(fresh_dsn: str) -> None:
    """From the newest, with data in it, each rollback restores the schema as it was before its
    migration; then everything applies again."""
    order = MIGRATIONS.order()
    before: dict[str, list[tuple[Any, ...]]] = {}
    for migration_id in order:
        before[migration_id] = _schema(fresh_dsn)
        apply_up_to(MIGRATIONS, fresh_dsn, migration_id)
    newest = _schema(fresh_dsn)
    seed(fresh_dsn)
    with psycopg.connect(fresh_dsn) as conn:
        # A link replaced under 0003, which a rollback must not leave behind as live.
        conn.execute("UPDATE gateway.setup_link SET replaced_at = now() WHERE token_hash = %s", (digest("setup-live"),))

    for migration_id in reversed(order):
        roll_back_one(MIGRATIONS, fresh_dsn, migration_id)
        assert _schema(fresh_dsn) == before[migration_id], f"rolling back {migration_id} left the schema changed"
        if migration_id == "0003_setup_link_replaced":
            with psycopg.connect(fresh_dsn) as conn:
                live = conn.execute(
                    "SELECT count(*) FROM gateway.setup_link WHERE used_at IS NULL AND user_id IN"
                    " (SELECT id FROM gateway.user_account WHERE subject = 'oidc-7')"
                ).fetchone()
            assert live == (0,)

    assert MIGRATIONS.apply(fresh_dsn) == order
    assert _schema(fresh_dsn) == newest
