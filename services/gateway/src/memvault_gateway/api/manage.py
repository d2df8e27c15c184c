"""/api/v1 for the signed-in owner: who am I, grants, service tokens, vaults, members, audit, accounts.

Management calls need a browser session (and its CSRF token in `X-CSRF-Token` for anything that
changes state, see `access.owner_session`); tokens never manage other tokens.
"""

from __future__ import annotations

import json
import logging
import uuid
from datetime import UTC, datetime, timedelta
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Depends, Query
from fastapi.responses import JSONResponse
from pydantic import BaseModel, Field, StrictInt

from memvault_core import limits, wire
from memvault_core.errors import InvalidArgument, MemvaultError, NotFound, PermissionDenied
from memvault_core.identity import SCOPES
from memvault_core.validation import Between
from memvault_gateway.api.access import GatewayDep, SessionDep, principal
from memvault_gateway.auth import credentials, people
from memvault_gateway.auth.bearer import Principal
from memvault_gateway.context import Gateway
from memvault_gateway.store import Grant, Session

log = logging.getLogger("memvault_gateway")

router = APIRouter(prefix="/api/v1")

Scope = Literal["read", "write", "admin"]


def _time(value: datetime | None) -> str | None:
    return value.astimezone(UTC).isoformat() if value else None


def grant_json(grant: Grant) -> dict[str, Any]:
    return {
        "id": grant.id,
        "kind": grant.kind,
        "client_id": grant.client_id,
        "name": grant.name,
        "scopes": list(grant.scopes),
        "vaults": list(grant.vaults),
        "created_at": _time(grant.created_at),
        "last_used_at": _time(grant.last_used_at),
        "expires_at": _time(grant.expires_at),
        "revoked_at": _time(grant.revoked_at),
    }


async def _audit(gw: Gateway, subject: str, action: str, target: str, details: dict[str, str]) -> None:
    try:
        await gw.vault.audit(subject, action, target=target, details=details)
    except MemvaultError as error:
        log.error("audit entry not written", extra={"action": action, "error": error.kind})


@router.get("/me")
async def me(session: SessionDep, gw: GatewayDep) -> dict[str, Any]:
    """The signed-in person, and the CSRF token to send as X-CSRF-Token on changes."""
    user = session.user
    return {
        "subject": user.subject,
        "username": user.username,
        "email": await gw.store.email_of(user.id),
        "display_name": user.display_name,
        "is_admin": user.is_admin,
        "signed_in_with": session.method,
        "csrf_token": session.csrf_token,
    }


# --- grants and service tokens -------------------------------------------------------------------


@router.get("/grants")
async def list_grants(
    session: SessionDep, gw: GatewayDep, include_revoked: bool = False
) -> dict[str, list[dict[str, Any]]]:
    """Every app and service token given access: client, scopes, vaults, created and last used."""
    grants = await gw.store.grants_of(session.user.id, include_revoked=include_revoked)
    return {"grants": [grant_json(g) for g in grants]}


@router.delete("/grants/{grant_id}")
async def revoke_grant(grant_id: str, session: SessionDep, gw: GatewayDep) -> dict[str, Any]:
    """Revoke an app's or service token's access; its access and refresh tokens stop working at once."""
    try:
        uuid.UUID(grant_id)
    except ValueError:
        raise NotFound("no such grant; list them with GET /api/v1/grants") from None
    revoked = await gw.store.revoke_grant(grant_id, "revoked by the owner", user_id=session.user.id)
    if revoked is None:
        raise NotFound("no live grant with that id is yours; list them with GET /api/v1/grants")
    await _audit(gw, session.user.subject, "grant.revoke", revoked.id, {"client": revoked.name, "kind": revoked.kind})
    return {"revoked": grant_json(revoked)}


class ServiceTokenRequest(BaseModel):
    name: str = Field(min_length=1, max_length=100)
    scopes: list[Scope] = Field(min_length=1)
    vaults: list[str] = Field(min_length=1, max_length=100)
    expires_in_days: Annotated[StrictInt, Between(1, 3650)] | None = None


@router.post("/service-tokens", status_code=201)
async def create_service_token(body: ServiceTokenRequest, session: SessionDep, gw: GatewayDep) -> JSONResponse:
    """A token for a script (backup, import), limited to the given scopes and vaults; shown once."""
    held = {v.name for v in await gw.vault.vaults(session.user.subject)}
    unknown = sorted(set(body.vaults) - held)
    if unknown:
        raise InvalidArgument(f"not your vault(s): {', '.join(unknown)}", field="vaults")
    expires = timedelta(days=body.expires_in_days) if body.expires_in_days else None
    chosen = tuple(s for s in SCOPES if s in body.scopes)
    grant = await gw.store.create_grant(
        session.user.id,
        kind="service",
        client_id=None,
        name=body.name.strip(),
        scopes=chosen,
        vaults=sorted(set(body.vaults)),
        expires_at=datetime.now(UTC) + expires if expires else None,
    )
    token = credentials.new_token(credentials.SERVICE_TOKEN)
    await gw.store.create_token(
        credentials.token_hash(token), grant.id, kind="service", resource=gw.issuer, scopes=chosen, valid_for=expires
    )
    await _audit(
        gw,
        session.user.subject,
        "service_token.create",
        grant.id,
        {"name": grant.name, "scopes": " ".join(chosen), "vaults": ",".join(grant.vaults)},
    )
    return JSONResponse({**grant_json(grant), "token": token}, status_code=201, headers={"Cache-Control": "no-store"})


# --- vaults and members ----------------------------------------------------------------------------


PrincipalDep = Annotated[Principal, Depends(principal)]


@router.get("/vaults")
async def list_vaults(caller: PrincipalDep, gw: GatewayDep) -> dict[str, Any]:
    """The vaults the caller can use: all of the owner's, or only those a token was given."""
    vaults = await gw.vault.vaults_as(caller.identity())
    return {"vaults": [{"name": v.name, "role": v.role, "approval_mode": v.approval_mode} for v in vaults]}


class VaultRequest(BaseModel):
    name: str = Field(min_length=1, max_length=63)


@router.post("/vaults", status_code=201)
async def create_vault(body: VaultRequest, session: SessionDep, gw: GatewayDep) -> dict[str, str]:
    name = await gw.vault.create_vault(session.user.subject, body.name)
    return {"name": name, "role": "owner"}


@router.get("/vaults/{vault}/members")
async def list_members(vault: str, session: SessionDep, gw: GatewayDep) -> dict[str, Any]:
    members = await gw.vault.members(session.user.subject, vault)
    return {
        "vault": vault,
        "members": [
            {"subject": m.subject, "display_name": m.display_name, "role": wire.ROLES.name_or(m.role, "")}
            for m in members
        ],
    }


class MemberRequest(BaseModel):
    role: Literal["owner", "editor", "viewer"]


@router.put("/vaults/{vault}/members/{subject}")
async def set_member(
    vault: str, subject: str, body: MemberRequest, session: SessionDep, gw: GatewayDep
) -> dict[str, str]:
    """Give someone (by subject, e.g. their user name) a role in a vault you own."""
    if await gw.store.user_by_subject(subject) is None:
        raise NotFound(f"no account {subject[:64]!r}; an administrator creates accounts with POST /api/v1/accounts")
    member = await gw.vault.set_membership(session.user.subject, vault, subject, body.role)
    return {"vault": vault, "subject": member.subject, "role": wire.ROLES.name_or(member.role, "")}


@router.delete("/vaults/{vault}/members/{subject}")
async def remove_member(vault: str, subject: str, session: SessionDep, gw: GatewayDep) -> dict[str, str]:
    await gw.vault.remove_membership(session.user.subject, vault, subject)
    return {"vault": vault, "removed": subject}


# --- audit -----------------------------------------------------------------------------------------


@router.get("/audit")
async def audit(
    session: SessionDep,
    gw: GatewayDep,
    limit: Annotated[int, Query(), Between(1, limits.MAX_AUDIT_RESULTS)] = 50,
    before: Annotated[int, Query(), Between(0, limits.MAX_INT64)] = 0,
) -> dict[str, Any]:
    """Sign-ins, grants, denials and revocations for your account, and activity in vaults you own."""
    entries = await gw.vault.audit_entries(session.user.subject, limit, before)
    return {
        "entries": [
            {
                "id": e.id,
                "vault": e.vault or None,
                "actor": e.actor,
                "action": e.action,
                "target": e.target,
                "details": json.loads(e.details_json or "{}"),
                "at": e.at.ToDatetime(tzinfo=UTC).isoformat(),
            }
            for e in entries
        ],
        "next_before": entries[-1].id if len(entries) == limit else None,
    }


# --- accounts (administrators) ---------------------------------------------------------------------


def _require_admin(session: Session) -> None:
    if not session.user.is_admin:
        raise PermissionDenied("only an administrator can manage accounts")


class AccountRequest(BaseModel):
    username: str = Field(min_length=1, max_length=63)
    display_name: str = Field(default="", max_length=200)
    admin: bool = False
    email: str = Field(default="", max_length=people.MAX_EMAIL_CHARS)
    """Where their email sign-in links go (when the gateway has MEMVAULT_SMTP__HOST); whoever reads it can sign in."""


@router.get("/accounts")
async def list_accounts(session: SessionDep, gw: GatewayDep) -> dict[str, Any]:
    _require_admin(session)
    return {
        "accounts": [
            {
                "subject": u.subject,
                "username": u.username,
                "display_name": u.display_name,
                "is_admin": u.is_admin,
                "has_password": u.password_hash is not None,
                "disabled": u.disabled,
            }
            for u in await gw.store.list_users()
        ]
    }


@router.post("/accounts", status_code=201)
async def create_account(body: AccountRequest, session: SessionDep, gw: GatewayDep) -> JSONResponse:
    """A local account for someone else; send them the one-time setup link."""
    _require_admin(session)
    username = body.username.strip().lower()
    problem = people.username_problem(username)
    if problem:
        raise InvalidArgument(problem, field="username")
    email = people.normalized_email(body.email) if body.email.strip() else None
    if body.email.strip() and email is None:
        raise InvalidArgument(f"email is {people.EMAIL_PROBLEM}", field="email")
    if email is not None and await gw.store.user_by_email(email) is not None:
        raise InvalidArgument("another account already has that email address", field="email")
    user = await people.create_local_user(gw, username, display_name=body.display_name.strip(), is_admin=body.admin)
    if user is None:
        raise InvalidArgument(f"the user name {username!r} is taken", field="username")
    if email is not None and not await gw.store.set_email(user.id, email):
        raise InvalidArgument("another account already has that email address", field="email")
    link = await people.new_setup_link(gw, user)
    await _audit(gw, session.user.subject, "account.create", user.subject, {"admin": str(body.admin).lower()})
    return JSONResponse(
        {"subject": user.subject, "username": user.username, "setup_url": link},
        status_code=201,
        headers={"Cache-Control": "no-store"},
    )


@router.post("/accounts/{username}/setup-link")
async def new_setup_link(username: str, session: SessionDep, gw: GatewayDep) -> JSONResponse:
    """A fresh one-time link for someone who forgot their password (the old password keeps working until used)."""
    _require_admin(session)
    user = await gw.store.user_by_username(username.strip().lower())
    if user is None:
        raise NotFound(f"no local account {username[:64]!r}")
    link = await people.new_setup_link(gw, user)
    await _audit(gw, session.user.subject, "account.setup_link", user.subject, {})
    return JSONResponse({"username": user.username, "setup_url": link}, headers={"Cache-Control": "no-store"})


class EmailRequest(BaseModel):
    email: str = Field(max_length=people.MAX_EMAIL_CHARS)
    """The address; empty removes it (no email sign-in for that account)."""


@router.put("/accounts/{username}/email")
async def set_account_email(username: str, body: EmailRequest, session: SessionDep, gw: GatewayDep) -> dict[str, Any]:
    """Set where a local account's email sign-in links go; whoever reads that mailbox can sign in as them."""
    _require_admin(session)
    user = await gw.store.user_by_username(username.strip().lower())
    if user is None:
        raise NotFound(f"no local account {username[:64]!r}")
    email = people.normalized_email(body.email) if body.email.strip() else None
    if body.email.strip() and email is None:
        raise InvalidArgument(f"email is {people.EMAIL_PROBLEM}", field="email")
    if not await gw.store.set_email(user.id, email):
        raise InvalidArgument("another account already has that email address", field="email")
    await _audit(gw, session.user.subject, "account.email", user.subject, {"set": str(email is not None).lower()})
    return {"username": user.username, "email": email}
