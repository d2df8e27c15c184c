"""The gateway's stored records, and how a database row becomes one."""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Literal

import asyncpg

SetupLinkState = Literal["usable", "used", "replaced", "expired", "unknown"]


class EmailTaken(Exception):
    """Another account already has this sign-in address."""


@dataclass(frozen=True)
class User:
    id: str
    subject: str
    username: str | None
    display_name: str
    is_admin: bool
    password_hash: str | None
    disabled: bool


@dataclass(frozen=True)
class Session:
    user: User
    csrf_token: str
    method: str
    expires_at: datetime


@dataclass(frozen=True)
class Client:
    client_id: str
    kind: str
    client_name: str
    redirect_uris: tuple[str, ...]
    token_endpoint_auth_method: str
    secret_hash: str | None
    metadata: dict[str, Any]
    created_at: datetime
    refreshed_at: datetime


@dataclass(frozen=True)
class ClientUse:
    """A registered client as one account sees it: how many live grants it holds for it, and how
    many other accounts hold one (then only an administrator may delete the client)."""

    client: Client
    my_live_grants: int
    other_accounts: int


@dataclass(frozen=True)
class Grant:
    id: str
    user_id: str
    kind: str
    client_id: str | None
    name: str
    scopes: tuple[str, ...]
    vaults: tuple[str, ...]
    created_at: datetime
    last_used_at: datetime | None
    expires_at: datetime | None
    revoked_at: datetime | None


@dataclass(frozen=True)
class AuthorizationCode:
    grant: Grant
    client_id: str
    redirect_uri: str
    code_challenge: str
    resource: str
    scopes: tuple[str, ...]
    expired: bool
    used: bool


@dataclass(frozen=True)
class NewToken:
    token_hash: str
    kind: str
    resource: str
    scopes: tuple[str, ...]
    valid_for: timedelta | None


@dataclass(frozen=True)
class TokenRecord:
    """A token together with what it grants and to whom; `usable` folds in expiry and revocation."""

    kind: str
    resource: str
    scopes: tuple[str, ...]
    grant: Grant
    subject: str
    usable: bool
    used: bool


def user_of_row(row: asyncpg.Record) -> User:
    return User(
        id=str(row["id"]),
        subject=row["subject"],
        username=row["username"],
        display_name=row["display_name"],
        is_admin=row["is_admin"],
        password_hash=row["password_hash"],
        disabled=row["disabled_at"] is not None,
    )


def client_of_row(row: asyncpg.Record) -> Client:
    return Client(
        client_id=row["client_id"],
        kind=row["kind"],
        client_name=row["client_name"],
        redirect_uris=tuple(row["redirect_uris"]),
        token_endpoint_auth_method=row["token_endpoint_auth_method"],
        secret_hash=row["secret_hash"],
        metadata=json.loads(row["metadata"]),
        created_at=row["created_at"],
        refreshed_at=row["refreshed_at"],
    )


def grant_of_row(row: asyncpg.Record) -> Grant:
    client_id = row["client_id"]
    return Grant(
        id=str(row["id"]),
        user_id=str(row["user_id"]),
        kind=row["kind"],
        client_id=client_id,
        name=row["name"],
        scopes=tuple(row["scopes"]),
        vaults=tuple(row["vaults"]),
        created_at=row["created_at"],
        last_used_at=row["last_used_at"],
        expires_at=row["expires_at"],
        revoked_at=row["revoked_at"],
    )


def grant_of_json(text: str) -> Grant:
    """A grant from `row_to_json(g)`, for queries that join it to other tables."""
    data = json.loads(text)

    def when(key: str) -> datetime | None:
        return datetime.fromisoformat(data[key]) if data.get(key) else None

    created_at = when("created_at")
    assert created_at is not None
    return Grant(
        id=str(data["id"]),
        user_id=str(data["user_id"]),
        kind=data["kind"],
        client_id=data["client_id"],
        name=data["name"],
        scopes=tuple(data["scopes"]),
        vaults=tuple(data["vaults"]),
        created_at=created_at,
        last_used_at=when("last_used_at"),
        expires_at=when("expires_at"),
        revoked_at=when("revoked_at"),
    )
