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
from urllib.parse import urlsplit

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
from memvault_gateway.store import ClientInUse, ClientUse, Grant, Session

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


class MeUpdate(BaseModel):
    display_name: str = Field(max_length=1000, description="1 to 100 characters, no control characters")


@router.patch("/me")
async def update_me(body: MeUpdate, session: SessionDep, gw: GatewayDep) -> dict[str, Any]:
    """Change your display name (shown on your pages and in the members lists of shared vaults); audited."""
    name = await people.rename(gw, session.user, body.display_name)
    return {"subject": session.user.subject, "display_name": name}


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


# --- registered OAuth clients ---------------------------------------------------------------------
# Clients (dynamic registration, metadata documents) belong to the installation, not to an account.
# An account may delete one it has a grant for only while no other account holds a live grant for it;
# an administrator may delete any. Deleting removes the client with every grant, code and token
# under it: its tokens stop working at once, and the app must register (or be approved) again.


def client_json(use: ClientUse, *, admin: bool) -> dict[str, Any]:
    client = use.client
    return {
        "client_id": client.client_id,
        "kind": client.kind,
        "client_name": client.client_name,
        "redirect_hosts": sorted({urlsplit(uri).hostname or uri for uri in client.redirect_uris}),
        "created_at": _time(client.created_at),
        "my_live_grants": use.my_live_grants,
        "other_accounts": use.other_accounts,
        "deletable": admin or use.other_accounts == 0,
    }


@router.get("/clients")
async def list_clients(session: SessionDep, gw: GatewayDep) -> dict[str, list[dict[str, Any]]]:
    """Registered OAuth clients you have (or had) a grant for; an administrator sees every client.
    `deletable` is false while another account holds a live grant for it (then only an administrator may)."""
    uses = await gw.store.clients_of(session.user.id, every=session.user.is_admin)
    return {"clients": [client_json(u, admin=session.user.is_admin) for u in uses]}


@router.delete("/clients")
async def delete_client(
    session: SessionDep,
    gw: GatewayDep,
    client_id: Annotated[str, Query(min_length=1, max_length=2000, description="The client's id (may be a URL).")],
) -> dict[str, Any]:
    """Delete a registered client with every grant and token under it (they stop working at once).
    Refused unless you are an administrator while another account holds a live grant for it."""
    try:
        deleted = await gw.store.delete_client(client_id, session.user.id, admin=session.user.is_admin)
    except ClientInUse as refused:
        raise PermissionDenied(
            f"{refused.use.other_accounts} other account(s) use {refused.use.client.client_name!r}: only an "
            "administrator can delete it; revoke your own grant instead (DELETE /api/v1/grants/{id})"
        ) from None
    if deleted is None:
        raise NotFound("no registered client with that id is yours to delete; list them with GET /api/v1/clients")
    await _audit(
        gw,
        session.user.subject,
        "client.delete",
        deleted.client.client_id[:200],
        {"client": deleted.client.client_name[:100], "other_accounts": str(deleted.other_accounts)},
    )
    return {"deleted": client_json(deleted, admin=session.user.is_admin)}


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
    return {
        "vaults": [
            {
                "name": v.name,
                "role": v.role,
                "approval_mode": v.approval_mode,
                "delete_after": _time(wire.from_timestamp(v, "delete_after")),
            }
            for v in vaults
        ]
    }


class VaultRequest(BaseModel):
    name: str = Field(min_length=1, max_length=63)


@router.post("/vaults", status_code=201)
async def create_vault(body: VaultRequest, session: SessionDep, gw: GatewayDep) -> dict[str, str]:
    name = await gw.vault.create_vault(session.user.subject, body.name)
    return {"name": name, "role": "owner"}


class DeletionRequest(BaseModel):
    confirm: str = Field(max_length=63, description="the vault's name again, exactly")


@router.post("/vaults/{vault}/deletion", status_code=202)
async def schedule_deletion(vault: str, body: DeletionRequest, session: SessionDep, gw: GatewayDep) -> dict[str, Any]:
    """Delete a vault you own after a 7-day grace period: from now on it is read-only for every client and
    agent (reads still work); the retention runner deletes it once `delete_after` has passed, unless the
    deletion is cancelled first (`DELETE .../deletion`). Asking again leaves the date as it is."""
    reply = await gw.vault.schedule_deletion(session.user.subject, vault, body.confirm)
    return {
        "vault": reply.vault,
        "delete_after": _time(wire.from_timestamp(reply, "delete_after")),
        "scheduled": reply.scheduled,
    }


@router.delete("/vaults/{vault}/deletion")
async def cancel_deletion(vault: str, session: SessionDep, gw: GatewayDep) -> dict[str, Any]:
    """Cancel a vault's pending deletion: it is writable again. `cancelled` is false when none was pending."""
    reply = await gw.vault.cancel_deletion(session.user.subject, vault)
    return {"vault": reply.vault, "cancelled": reply.cancelled}


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
