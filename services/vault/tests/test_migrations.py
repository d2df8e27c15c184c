"""Upgrades: a database holding data at every earlier schema version migrates to the newest with the
data intact and usable; a vault on a database one migration behind refuses in one line; every
rollback file undoes its migration."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from psycopg import sql
from vault_helpers import SECRET

from memvault_core.identity import Identity
from memvault_devstack.migrations import apply_up_to, fresh_database, roll_back_one
from memvault_devstack.ports import free_port, port_accepts
from memvault_vault.audit.store import AuditStore
from memvault_vault.database import Database
from memvault_vault.domain.memory import Draft, MemoryType, Status, content_hash
from memvault_vault.guide.store import GuideStore
from memvault_vault.memories.store import MemoryStore
from memvault_vault.schema import SCHEMA, apply_migrations, missing_migrations
from memvault_vault.services import VaultServices

pytestmark = pytest.mark.integration

SUBJECT = "owner-from-the-past"
VAULT = "legacy"
OWNER = Identity(SUBJECT, "migration-test", frozenset({"admin"}))

OLD_STAGING = "The staging database lives on host orchid, port 6432."
NEW_STAGING = "The staging database moved to host juniper, port 6432."
IMPORTED = "Prefer tabs over spaces in Makefiles."
PROPOSED = "Release builds are cut on Thursdays after the planning call."
FORGOTTEN = "My locker combination is written on the whiteboard."
GUIDE_V1 = "Remember decisions with their reasons."
GUIDE_V2 = "Remember decisions with their reasons. Never store credentials."


def migration_order() -> list[str]:
    """The ids in the order `migrate` applies them to an empty database (dependencies first)."""
    return SCHEMA.order()


@pytest.fixture
def fresh_dsn(postgres_dsn: str) -> Iterator[str]:
    """An empty database of this test's own on the test server."""
    with fresh_database(postgres_dsn, "migrations") as dsn:
        yield dsn


def _columns(conn: psycopg.Connection[Any], table: str) -> set[str]:
    rows = conn.execute(
        "SELECT column_name FROM information_schema.columns WHERE table_schema = 'public' AND table_name = %s",
        (table,),
    ).fetchall()
    return {row[0] for row in rows}


def _tables(conn: psycopg.Connection[Any]) -> set[str]:
    rows = conn.execute("SELECT table_name FROM information_schema.tables WHERE table_schema = 'public'").fetchall()
    return {row[0] for row in rows}


def _insert(conn: psycopg.Connection[Any], table: str, values: dict[str, Any], returning: str = "") -> Any:
    """Insert the values whose columns exist in the schema as it is now; the rest came later."""
    present = _columns(conn, table)
    kept = {k: v for k, v in values.items() if k in present}
    statement = sql.SQL("INSERT INTO {} ({}) VALUES ({})").format(
        sql.Identifier(table),
        sql.SQL(", ").join(map(sql.Identifier, kept)),
        sql.SQL(", ").join(sql.Placeholder() * len(kept)),
    )
    if returning:
        statement += sql.SQL(" RETURNING {}").format(sql.SQL(returning))  # type: ignore[arg-type]
    cursor = conn.execute(statement, list(kept.values()))
    if not returning:
        return None
    row = cursor.fetchone()
    assert row is not None
    return row[0]


def _snapshot(conn: psycopg.Connection[Any], memory_id: str, change: str, actor: str, cause: str | None) -> None:
    """One more version in the memory's history, the way the vault writes it (the row as it is now)."""
    # memory_history.cause arrived with 0004_lifecycle.
    statement = _HISTORY_WITH_CAUSE if "cause" in _columns(conn, "memory_history") else _HISTORY_WITHOUT_CAUSE
    conn.execute(statement, {"change": change, "actor": actor, "cause": cause, "id": memory_id})


_HISTORY_WITHOUT_CAUSE = (
    "INSERT INTO memory_history (memory_id, vault_id, version, change, snapshot, actor)"
    " SELECT id, vault_id, version, %(change)s, to_jsonb(m) - 'search', %(actor)s FROM memory m WHERE id = %(id)s"
)
_HISTORY_WITH_CAUSE = (
    "INSERT INTO memory_history (memory_id, vault_id, version, change, snapshot, actor, cause)"
    " SELECT id, vault_id, version, %(change)s, to_jsonb(m) - 'search', %(actor)s, %(cause)s::uuid"
    " FROM memory m WHERE id = %(id)s"
)


def seed(dsn: str) -> dict[str, str]:
    """What an owner's vault held at this schema version: memories with history (one superseded by
    another), an import batch, a proposal, a forgotten text, two guide versions, audit entries,
    indexer state and a published event. Returns the ids the checks need."""
    with psycopg.connect(dsn, autocommit=False) as conn:
        tables = _tables(conn)
        account = _insert(conn, "account", {"subject": SUBJECT, "display_name": "Ada"}, "id")
        vault = _insert(conn, "vault", {"name": VAULT}, "id")
        _insert(conn, "membership", {"vault_id": vault, "account_id": account, "role": "owner"})
        _insert(conn, "vault_settings", {"vault_id": vault, "approval_mode": "auto", "rejected_retention_days": 45})

        old = str(uuid.uuid4())
        new = str(uuid.uuid4())
        proposed = str(uuid.uuid4())
        memory = {"vault_id": vault, "type": "fact", "trust": "stated", "client": "claude-code", "source": "chat"}
        _insert(
            conn,
            "memory",
            {
                **memory,
                "id": old,
                "content": OLD_STAGING,
                "content_hash": content_hash(OLD_STAGING),
                "key": "staging-db",
                "scope": "work",
                "tags": ["infra"],
                "status": "active",
                "confidence": 0.9,
            },
        )
        _snapshot(conn, old, "created", "claude-code", None)
        _insert(
            conn,
            "memory",
            {
                **memory,
                "id": new,
                "content": NEW_STAGING,
                "content_hash": content_hash(NEW_STAGING),
                "key": "staging-db",
                "scope": "work",
                "tags": ["infra"],
                "status": "active",
                "supersedes": old,
            },
        )
        _snapshot(conn, new, "created", "claude-code", None)
        conn.execute(
            "UPDATE memory SET status = 'superseded', superseded_by = %s, valid_to = now(), version = version + 1,"
            " updated_at = now() WHERE id = %s",
            (new, old),
        )
        _snapshot(conn, old, "superseded", "claude-code", new)

        batch = _insert(
            conn,
            "import_batch",
            {
                "vault_id": vault,
                "source": "notes.md",
                "actor": "codex",
                "item_count": 2,
                "stored_count": 1,
                "outcomes": json.dumps({"stored": 1, "duplicate": 1}),
            },
            "id",
        )
        imported = _insert(
            conn,
            "memory",
            {
                **memory,
                "content": IMPORTED,
                "content_hash": content_hash(IMPORTED),
                "type": "preference",
                "trust": "imported",
                "client": "codex",
                "status": "active",
                "batch_id": batch,
                "context": "",
            },
            "id::text",
        )
        _snapshot(conn, imported, "created", "codex", None)
        _insert(
            conn,
            "memory",
            {
                **memory,
                "id": proposed,
                "content": PROPOSED,
                "content_hash": content_hash(PROPOSED),
                "type": "decision",
                "trust": "inferred",
                "status": "proposed",
                "depends_on": [new],
            },
        )
        _snapshot(conn, proposed, "created", "claude-code", None)
        _insert(conn, "exclusion", {"vault_id": vault, "content_hash": content_hash(FORGOTTEN)})

        _insert(
            conn,
            "operating_guide",
            {
                "vault_id": vault,
                "text": GUIDE_V2,
                "version": 2,
                "default_revision": "0123456789ab",
                "updated_by": SUBJECT,
            },
        )
        for version, text in ((1, GUIDE_V1), (2, GUIDE_V2)):
            _insert(
                conn,
                "operating_guide_history",
                {"vault_id": vault, "version": version, "text": text, "updated_by": SUBJECT},
            )

        for action, target, details in (
            ("memory.remember", old, {"outcome": "stored"}),
            ("memory.supersede", new, {"replaces": old}),
            ("memory.import", str(batch), {"items": 2, "stored": 1}),
            ("guide.update", VAULT, {"version": 2, "chars": len(GUIDE_V2)}),
        ):
            _insert(
                conn,
                "audit_log",
                {
                    "vault_id": vault,
                    "actor": "claude-code",
                    "action": action,
                    "target": target,
                    "details": json.dumps(details),
                },
            )
        if "account_id" in _columns(conn, "audit_log"):
            _insert(
                conn,
                "audit_log",
                {
                    "account_id": account,
                    "actor": SUBJECT,
                    "action": "grant.create",
                    "target": "claude-code",
                    "details": json.dumps({"scopes": ["read", "write"]}),
                },
            )

        if "index_state" in tables:
            # What the indexer reported before the index text changed: the memory's content hash.
            _insert(
                conn,
                "index_state",
                {
                    "memory_id": old,
                    "vault_id": vault,
                    "content_hash": content_hash(OLD_STAGING),
                    "model": "bge-small-en-v1.5",
                    "state": "indexed",
                },
            )
        _insert(
            conn,
            "outbox",
            {
                "id": str(uuid.uuid4()),
                "subject": "memvault.events.v1.memory.created",
                "payload": b"\x0a\x24",
                "published_at": "2026-01-01T00:00:00Z",
                "attempts": 1,
            },
        )
        conn.commit()
    return {"old": old, "new": new, "imported": imported, "proposed": proposed, "batch": str(batch)}


def _lexeme_counts_are_exact(dsn: str) -> None:
    """Keyword ranking's per-vault counts match the memories (kept by triggers, backfilled by 0010)."""
    with psycopg.connect(dsn) as conn:
        drift = conn.execute(
            """
            WITH truth AS (SELECT vault_id, lexeme, count(*)::int AS ndoc
                           FROM memory, unnest(tsvector_to_array(search)) AS lexeme GROUP BY vault_id, lexeme)
            SELECT count(*) FROM truth FULL JOIN (SELECT * FROM vault_lexeme_stats WHERE ndoc <> 0) s
                USING (vault_id, lexeme)
            WHERE truth.ndoc IS DISTINCT FROM s.ndoc
            """
        ).fetchone()
        assert drift is not None and drift[0] == 0
        documents = conn.execute(
            "SELECT (SELECT ndoc FROM vault_text_stats), (SELECT count(*) FROM memory)::int"
        ).fetchone()
        assert documents is not None and documents[0] == documents[1]


async def _check_usable(dsn: str, ids: dict[str, str], seeded_at: list[str]) -> None:
    database = await Database.connect(dsn, 1, 2)
    try:
        assert await missing_migrations(database.pool) == []
        services = VaultServices.build(database)
        memories, guide, audit_log = MemoryStore(database), GuideStore(database), AuditStore(database)
        vault = await services.accounts.access(OWNER, VAULT, write=True)
        assert (vault.role, vault.approval_mode) == ("owner", "auto")
        assert (await guide.settings(vault))["rejected_retention_days"] == 45

        old = await memories.get_memory(vault, ids["old"])
        assert old is not None
        assert (old.content, old.status, old.superseded_by, old.version) == (
            OLD_STAGING,
            Status.SUPERSEDED,
            ids["new"],
            2,
        )
        history = await memories.history(vault, ids["old"], 10)
        assert [(h.version, h.change) for h in history] == [(1, "created"), (2, "superseded")]
        assert [h.snapshot["status"] for h in history] == ["active", "superseded"]
        assert history[0].snapshot["content"] == OLD_STAGING
        assert history[1].cause == (ids["new"] if "0004_lifecycle" in seeded_at else "")

        _, page = await services.recall.recall(OWNER, VAULT, "where is the staging database host")
        assert page.mode.startswith("keyword")
        assert [hit.memory.id for hit in page.hits][:1] == [ids["new"]]
        _, page = await services.recall.recall(OWNER, VAULT, "tabs in Makefiles")
        assert ids["imported"] in [hit.memory.id for hit in page.hits]
        _, page = await services.recall.recall(OWNER, VAULT, "staging orchid", statuses=[Status.SUPERSEDED])
        assert [hit.memory.id for hit in page.hits] == [ids["old"]]

        guide_record = await guide.guide_record(vault)
        assert (guide_record.text, guide_record.version) == (GUIDE_V2, 2)
        assert [v[0] for v in await guide.guide_versions(vault, 10, 0)] == [2, 1]

        audit = await audit_log.vault_audit(
            vault, actor="", action="memory.", target="", since=None, until=None, limit=10, before_id=0
        )
        assert [a.action for a in audit] == ["memory.import", "memory.supersede", "memory.remember"]
        account_actions = [a.action for a in await audit_log.account_audit(SUBJECT, 20, 0)]
        assert "guide.update" in account_actions
        assert ("grant.create" in account_actions) == ("0002_account_audit" in seeded_at)

        # Written through today's code on the migrated schema: a new memory, a duplicate, a forgotten text,
        # approving the old proposal, and undoing the old import.
        _, summary = await services.memories.remember(
            OWNER, VAULT, Draft("Deploys need two approvals.", MemoryType.CONSTRAINT), propose=False
        )
        assert summary.results[0].outcome.value == "stored"
        _, summary = await services.memories.remember(OWNER, VAULT, Draft(NEW_STAGING.upper()), propose=False)
        assert summary.results[0].outcome.value == "duplicate"
        _, summary = await services.memories.remember(OWNER, VAULT, Draft(FORGOTTEN), propose=False)
        assert summary.results[0].outcome.value == "excluded"
        await services.review.approve(OWNER, VAULT, ids["proposed"])
        approved = await memories.get_memory(vault, ids["proposed"])
        assert approved is not None and approved.status is Status.ACTIVE and approved.depends_on == (ids["new"],)

        _, batches, _ = await services.imports.batches(OWNER, VAULT)
        assert [(b.id, b.item_count, b.stored_count) for b in batches] == [(ids["batch"], 2, 1)]
        _, undo = await services.imports.undo_batch(OWNER, VAULT, ids["batch"])
        assert undo.removed == 1
        assert await memories.get_memory(vault, ids["imported"]) is None

        # Memories the indexer saw under the old index text are queued again for the new one.
        pending = {row["memory_id"] for row in await database.pool.fetch("SELECT memory_id::text FROM index_pending")}
        assert {ids["old"], ids["new"]} <= pending
    finally:
        await database.close()


@pytest.mark.parametrize("version", migration_order()[:-1])
async def test_data_written_at_every_earlier_version_survives_the_upgrade(fresh_dsn: str, version: str) -> None:
    seeded_at = apply_up_to(SCHEMA, fresh_dsn, version)
    ids = seed(fresh_dsn)
    applied = apply_migrations(fresh_dsn)
    assert seeded_at + applied == migration_order()
    _lexeme_counts_are_exact(fresh_dsn)
    await _check_usable(fresh_dsn, ids, seeded_at)
    _lexeme_counts_are_exact(fresh_dsn)


def run_vault(env: dict[str, str], *arguments: str, timeout: float = 60.0) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "memvault_vault", *arguments],
        env={**os.environ, "MEMVAULT_IDENTITY__SECRET": SECRET, "MEMVAULT_VAULT__RELAY": "false", **env},
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def test_a_vault_on_a_database_one_migration_behind_refuses_until_migrate_runs(fresh_dsn: str) -> None:
    order = migration_order()
    apply_up_to(SCHEMA, fresh_dsn, order[-2])
    env = {"MEMVAULT_POSTGRES__DSN": fresh_dsn, "MEMVAULT_VAULT__LISTEN": f"127.0.0.1:{free_port()}"}
    serve = run_vault(env, "serve")
    assert serve.returncode == 1
    assert serve.stderr.strip().splitlines()[-1] == (
        f"memvault-vault: this database lacks migrations this memvault needs: {order[-1]}; "
        "run `memvault-vault migrate` first"
    )
    assert "Traceback" not in serve.stderr

    migrate = run_vault(env, "migrate")
    assert migrate.returncode == 0, migrate.stderr
    port = int(env["MEMVAULT_VAULT__LISTEN"].rsplit(":", 1)[1])
    with (
        tempfile.TemporaryFile("w+") as log,
        subprocess.Popen(
            [sys.executable, "-m", "memvault_vault", "serve"],
            env={**os.environ, "MEMVAULT_IDENTITY__SECRET": SECRET, "MEMVAULT_VAULT__RELAY": "false", **env},
            stdout=subprocess.DEVNULL,
            stderr=log,
            text=True,
        ) as served,
    ):
        try:
            deadline = time.monotonic() + 60
            while not port_accepts(port, "127.0.0.1", timeout=0.5):
                if served.poll() is not None:
                    pytest.fail(f"the migrated vault exited instead of serving: {_read(log)}")
                assert time.monotonic() < deadline, "the migrated vault did not listen within 60 s"
                time.sleep(0.1)
        finally:
            served.terminate()
            served.wait(timeout=30)


async def test_rolling_back_for_an_older_release_then_upgrading_again_keeps_the_data(fresh_dsn: str) -> None:
    """`helm rollback` to a release before 0010: `rollback --to` its newest migration with today's
    image, then the older release would run; upgrading again migrates the same data forward."""
    order = migration_order()
    assert apply_migrations(fresh_dsn) == order
    ids = seed(fresh_dsn)
    env = {"MEMVAULT_POSTGRES__DSN": fresh_dsn, "MEMVAULT_VAULT__LISTEN": f"127.0.0.1:{free_port()}"}

    unknown = run_vault(env, "rollback", "--to", "0099_no_such_migration")
    assert unknown.returncode == 1
    assert unknown.stderr.strip() == (
        f"memvault-vault: no migration '0099_no_such_migration' in this memvault; its migrations: {', '.join(order)}"
    )

    back = run_vault(env, "rollback", "--to", "0004_lifecycle")
    assert back.returncode == 0, back.stderr
    later = order[order.index("0004_lifecycle") + 1 :]
    assert back.stdout.strip() == f"rolled back: {', '.join(reversed(later))}"
    with psycopg.connect(fresh_dsn) as conn:
        assert "context" not in _columns(conn, "memory")
        assert "index_pending" not in _tables(conn)
        assert conn.execute("SELECT count(*) FROM memory").fetchone() == (4,)
    again = run_vault(env, "rollback", "--to", "0004_lifecycle")
    assert again.stdout.strip() == "rolled back: nothing (none applied after 0004_lifecycle)"

    serve = run_vault(env, "serve")
    assert serve.returncode == 1
    assert serve.stderr.strip().splitlines()[-1] == (
        f"memvault-vault: this database lacks migrations this memvault needs: {', '.join(later)}; "
        "run `memvault-vault migrate` first"
    )
    migrate = run_vault(env, "migrate")
    assert migrate.returncode == 0, migrate.stderr
    _lexeme_counts_are_exact(fresh_dsn)
    await _check_usable(fresh_dsn, ids, order)


def _read(log: Any) -> str:
    log.seek(0)
    return str(log.read())


def _schema(dsn: str) -> list[tuple[Any, ...]]:
    """Tables, columns, indexes, functions and triggers of the public schema."""
    with psycopg.connect(dsn) as conn:
        columns = conn.execute(
            "SELECT table_name, column_name, data_type, is_nullable, column_default, generation_expression"
            " FROM information_schema.columns WHERE table_schema = 'public' AND table_name NOT LIKE '%yoyo%'"
            " ORDER BY 1, 2"
        ).fetchall()
        indexes = conn.execute(
            "SELECT indexname, indexdef FROM pg_indexes WHERE schemaname = 'public' AND tablename NOT LIKE '%yoyo%'"
            " ORDER BY 1"
        ).fetchall()
        options = conn.execute(
            "SELECT c.relname, c.reloptions FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace"
            " WHERE n.nspname = 'public' AND c.reloptions IS NOT NULL ORDER BY 1"
        ).fetchall()
        functions = conn.execute(
            "SELECT p.proname FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace"
            " WHERE n.nspname = 'public' ORDER BY 1"
        ).fetchall()
        triggers = conn.execute(
            "SELECT tgname FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid"
            " JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = 'public' AND NOT t.tgisinternal"
            " ORDER BY 1"
        ).fetchall()
    return [*columns, *indexes, *options, *functions, *triggers]


def test_every_rollback_undoes_its_migration(fresh_dsn: str) -> None:
    """Roll back one migration at a time from the newest: each leaves the schema exactly as it was
    before that migration; then everything applies again."""
    order = migration_order()
    before: dict[str, list[tuple[Any, ...]]] = {}
    empty = _schema(fresh_dsn)
    for migration_id in order:
        before[migration_id] = _schema(fresh_dsn)
        apply_up_to(SCHEMA, fresh_dsn, migration_id)
    newest = _schema(fresh_dsn)
    ids = seed(fresh_dsn)
    assert ids

    for migration_id in reversed(order):
        roll_back_one(SCHEMA, fresh_dsn, migration_id)
        assert _schema(fresh_dsn) == before[migration_id], f"rolling back {migration_id} left the schema changed"
    assert _schema(fresh_dsn) == empty

    assert apply_migrations(fresh_dsn) == order
    assert _schema(fresh_dsn) == newest
